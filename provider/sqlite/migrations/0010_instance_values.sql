-- 0010: an instance's values (OrchestrationContext.SetValue), materialised
-- by the turn ack that records them, so clients read them without
-- replaying history. values_version counts the acks that changed them
-- (a client waiting for a change compares it). A purge deletes the values
-- with their instance.
CREATE TABLE instance_values (
    instance_id TEXT    NOT NULL,
    value_key   TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (instance_id, value_key)
) WITHOUT ROWID;
ALTER TABLE instances ADD COLUMN values_version INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER instances_delete_values AFTER DELETE ON instances
BEGIN
    DELETE FROM instance_values WHERE instance_id = OLD.instance_id;
END;
