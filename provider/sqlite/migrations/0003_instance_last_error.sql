-- 0003: why a live instance is not progressing.
--
-- last_error is the ErrorDetails (JSON) recorded by the last orchestration
-- abandon that gave one (a replay mismatch parks the instance, its
-- orchestration is not registered...). The next committed turn of the
-- instance sets it back to NULL. Not indexed: it is only read with the row.
ALTER TABLE instances ADD COLUMN last_error TEXT;
