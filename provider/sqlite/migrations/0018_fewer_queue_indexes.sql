-- 0018: fewer index entries written per message and per activity.
--
-- orchestrator_queue_visible (0001) served fetch candidates before
-- orchestrator_ready (0002) took them over; only the queue-depth counts of
-- Stats still read it, and those count the whole queue anyway (the count
-- of held messages scans it). Every message paid an entry in it when
-- enqueued and again when consumed.
DROP INDEX orchestrator_queue_visible;

-- worker_queue_session held every worker row, the many without a session
-- under NULL, for the fetch without sessions to walk them in id order. A
-- walk of the table itself by id (the rowid, from the fetch's cursor on)
-- reads those rows without the index entry and the table lookup of each,
-- so only rows with a session need an entry: for the session cleanup's
-- lookup of a session's rows.
DROP INDEX worker_queue_session;
CREATE INDEX worker_queue_session ON worker_queue (session_id) WHERE session_id IS NOT NULL;
