-- 0006: an instance's values (OrchestrationContext.SetValue), materialised
-- by the turn ack that records them, so clients read them without
-- replaying history. values_version counts the acks that changed them
-- (a client waiting for a change compares it). A purge deletes the values
-- with their instance (ON DELETE CASCADE).
CREATE TABLE instance_values (
    instance_id TEXT   NOT NULL REFERENCES instances (instance_id) ON DELETE CASCADE,
    value_key   TEXT   NOT NULL,
    value       TEXT   NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (instance_id, value_key)
);
ALTER TABLE instances ADD COLUMN values_version BIGINT NOT NULL DEFAULT 0;
