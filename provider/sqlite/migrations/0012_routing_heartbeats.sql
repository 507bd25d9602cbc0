-- 0010: routing and heartbeats.
--
-- worker_queue gains the activity name and queue of each row, so a fetch
-- takes only the work the fetching runtime registers and serves
-- (provider.WorkFetchOptions.Activities and Queues). Both are copied from
-- the work item by the statements that insert rows; rows queued before
-- this migration are filled in here. A row whose work item cannot be
-- read keeps a NULL name, which every fetch takes (to dead-letter it).
--
-- heartbeat_at and heartbeat_details are an attempt's latest heartbeat
-- (provider.Heartbeater): kept on the row, so they survive a crash of its
-- worker and reach the next delivery.
ALTER TABLE worker_queue ADD COLUMN activity_name TEXT;
ALTER TABLE worker_queue ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE worker_queue ADD COLUMN heartbeat_at INTEGER;
ALTER TABLE worker_queue ADD COLUMN heartbeat_details TEXT;
UPDATE worker_queue
SET activity_name = json_extract(work_item, '$.name'),
    queue = coalesce(json_extract(work_item, '$.queue'), '')
WHERE json_valid(work_item);

-- What each live runtime serves (provider.Router): a row per runtime,
-- announced on start and renewed; activities and queues are JSON arrays.
CREATE TABLE worker_routes (
    worker_id  TEXT    PRIMARY KEY,
    activities TEXT    NOT NULL,
    queues     TEXT    NOT NULL,
    seen_until INTEGER NOT NULL
) WITHOUT ROWID;
