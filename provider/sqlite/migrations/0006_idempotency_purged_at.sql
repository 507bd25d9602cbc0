-- 0006: idempotency keys outlive the purge of their instance. A purge no
-- longer deletes the keys naming a purged instance: it stamps purged_at
-- (Unix ms) on them, and a repeat start within the key's retention is still
-- a duplicate, reporting when the instance it started was purged. NULL: the
-- instance was not purged.
ALTER TABLE idempotency_keys ADD COLUMN purged_at INTEGER;
