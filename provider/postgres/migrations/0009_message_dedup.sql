-- 0009: deduplication keys of orchestrator messages
-- (provider.OrchestratorMessage.DedupKey): a message whose key the instance
-- already saw is not enqueued again. Kept until the instance is purged.
CREATE TABLE message_dedup (
    instance_id TEXT   NOT NULL,
    dedup_key   TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (instance_id, dedup_key)
);
