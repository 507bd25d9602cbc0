-- 0011: duroxide_check fails the statement that calls it, with the given
-- SQLSTATE and message, unless ok is true. An ack sends its lock check and
-- its writes in one pipelined batch: a check that fails aborts the batch
-- before any write of it runs (or, past a savepoint, lets the ack roll
-- back to it), so the ack costs one round trip and still writes nothing
-- when its lock was lost.
CREATE FUNCTION duroxide_check(ok boolean, code text, msg text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = msg;
    END IF;
    RETURN true;
END
$$;
