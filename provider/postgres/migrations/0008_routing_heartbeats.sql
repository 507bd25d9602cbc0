-- 0006: routing and heartbeats.
--
-- worker_queue gains the activity name and queue of each row, so a fetch
-- takes only the work the fetching runtime registers and serves
-- (provider.WorkFetchOptions.Activities and Queues). Both are copied from
-- the work item by the statements that insert rows (duroxide_json_field
-- reads a field of JSON text, NULL when the text is not JSON); rows
-- queued before this migration are filled in here. A row whose work item
-- cannot be read keeps a NULL name, which every fetch takes (to
-- dead-letter it).
--
-- heartbeat_at and heartbeat_details are an attempt's latest heartbeat
-- (provider.Heartbeater): kept on the row, so they survive a crash of its
-- worker and reach the next delivery.
CREATE FUNCTION duroxide_json_field(doc text, field text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN doc::jsonb ->> field;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

ALTER TABLE worker_queue ADD COLUMN activity_name TEXT;
ALTER TABLE worker_queue ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE worker_queue ADD COLUMN heartbeat_at BIGINT;
ALTER TABLE worker_queue ADD COLUMN heartbeat_details TEXT;
UPDATE worker_queue
SET activity_name = duroxide_json_field(work_item, 'name'),
    queue = coalesce(duroxide_json_field(work_item, 'queue'), '');

-- What each live runtime serves (provider.Router): a row per runtime,
-- announced on start and renewed.
CREATE TABLE worker_routes (
    worker_id  TEXT     PRIMARY KEY,
    activities TEXT[]   NOT NULL,
    queues     TEXT[]   NOT NULL,
    seen_until BIGINT   NOT NULL
);
