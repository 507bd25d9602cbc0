-- 0003: why an instance waits and which instances are stalled
-- (provider.Admin.InstanceQueue and StalledInstances), and ID-prefix
-- listing (ListInstancesOptions.IDPrefix).
--
-- last_error_at is when a run of abandons that record an error began: the
-- first such abandon sets it, later ones keep it, and whatever clears the
-- error clears it (a committed turn for the instance, an abandon without an
-- error for a worker row). worker_queue gains the error itself, recorded by
-- AbandonWorkItem (an activity no runtime has registered).
ALTER TABLE instances ADD COLUMN last_error_at BIGINT;
ALTER TABLE worker_queue ADD COLUMN last_error TEXT;
ALTER TABLE worker_queue ADD COLUMN last_error_at BIGINT;
UPDATE instances SET last_error_at = updated_at WHERE last_error IS NOT NULL;

-- The stall rules read index ranges of rows that are rare in a healthy
-- store: instances and worker rows with a recorded error, and worker rows
-- delivered more than once. Partial indexes keep the common rows out of
-- them, so a first delivery (attempt_count 0 -> 1) writes no index entry.
CREATE INDEX instances_last_error_at ON instances (last_error_at) WHERE last_error_at IS NOT NULL;
CREATE INDEX worker_queue_last_error_at ON worker_queue (last_error_at) WHERE last_error_at IS NOT NULL;
CREATE INDEX worker_queue_redelivered ON worker_queue (attempt_count) WHERE attempt_count > 1;

-- An ID prefix is a range of instance IDs in byte order: the "C"
-- collation compares UTF-8 text by bytes, whatever the database's
-- collation, so the range [prefix, successor) holds exactly the IDs that
-- start with the prefix.
CREATE INDEX instances_id_bytes ON instances ((instance_id COLLATE "C"));
