-- 0005: execution locks, their queues of waiting starts, and idempotency
-- keys (see provider.LockStore).
--
-- execution_locks has one row per held lock key. It is written with its
-- holder's instance row and deleted by the ack that makes the holder
-- terminal; each other ack of the holder moves expires_at to now + ttl_ms,
-- found through execution_locks_instance.
CREATE TABLE execution_locks (
    lock_key    TEXT    PRIMARY KEY,
    instance_id TEXT    NOT NULL,
    locked_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    ttl_ms      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX execution_locks_instance ON execution_locks (instance_id);
CREATE INDEX execution_locks_expires ON execution_locks (expires_at);

-- Starts waiting for a held key (LockRequest.Queue), in arrival order (id).
-- Each row holds the start message its instance gets when the key is handed
-- to it, with the visibility the start asked for.
CREATE TABLE lock_queue (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    lock_key    TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    work_item   TEXT    NOT NULL,
    visible_at  INTEGER NOT NULL,
    ttl_ms      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX lock_queue_key ON lock_queue (lock_key, id);
CREATE INDEX lock_queue_instance ON lock_queue (instance_id);

-- Idempotency keys: the instance a key first started, until expires_at.
CREATE TABLE idempotency_keys (
    idem_key    TEXT    PRIMARY KEY,
    instance_id TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_instance ON idempotency_keys (instance_id);
