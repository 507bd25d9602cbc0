-- 0001: the initial schema of the PostgreSQL store.
--
-- Every table lives in the store's schema (Options.Schema); the connection's
-- search_path points there, so no statement names it. All times are BIGINT
-- epoch milliseconds taken from the provider's clock, never from the
-- server's. JSON documents (work items, events, payloads, error details) are
-- TEXT holding the exact bytes the runtime encoded. There are no foreign
-- keys: the provider keeps the tables consistent inside its transactions
-- (a purge deletes every table's rows explicitly).

-- One row per instance. seq is a stable, never reused key for keyset
-- pagination (newest first); instance_id is the user-facing identity.
CREATE TABLE instances (
    seq                   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instance_id           TEXT    NOT NULL UNIQUE,
    orchestration_name    TEXT    NOT NULL DEFAULT '',
    orchestration_version TEXT    NOT NULL DEFAULT '',
    status                TEXT    NOT NULL,
    current_execution_id  BIGINT  NOT NULL DEFAULT 0,
    input                 TEXT,
    output                TEXT,
    error                 TEXT,
    custom_status         TEXT,
    custom_status_version BIGINT  NOT NULL DEFAULT 0,
    parent_instance_id    TEXT,
    parent_execution_id   BIGINT  NOT NULL DEFAULT 0,
    created_at            BIGINT  NOT NULL,
    updated_at            BIGINT  NOT NULL,
    last_error            TEXT
);
CREATE INDEX instances_parent ON instances (parent_instance_id) WHERE parent_instance_id IS NOT NULL;
CREATE INDEX instances_status ON instances (status, seq);
CREATE INDEX instances_orchestration ON instances (orchestration_name, seq);

-- One row per execution (ContinueAsNew starts a new one).
CREATE TABLE executions (
    instance_id  TEXT   NOT NULL,
    execution_id BIGINT NOT NULL,
    status       TEXT   NOT NULL,
    input        TEXT,
    output       TEXT,
    error        TEXT,
    started_at   BIGINT NOT NULL,
    completed_at BIGINT,
    PRIMARY KEY (instance_id, execution_id)
);

-- Append-only history. The primary key rejects duplicate events and makes
-- a turn's history load (from the event the caller holds on) one range read.
CREATE TABLE history (
    instance_id  TEXT   NOT NULL,
    execution_id BIGINT NOT NULL,
    event_id     BIGINT NOT NULL,
    event_type   TEXT   NOT NULL,
    event_data   TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (instance_id, execution_id, event_id)
);

-- Orchestrator queue (timers are messages with a future visible_at). A
-- fetch tags the visible messages of the instance it locks with its lock
-- token; the ack deletes exactly those.
CREATE TABLE orchestrator_queue (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instance_id   TEXT    NOT NULL,
    work_item     TEXT    NOT NULL,
    visible_at    BIGINT  NOT NULL,
    lock_token    TEXT,
    locked_until  BIGINT,
    attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    created_at    BIGINT  NOT NULL
);
-- Fetch candidates and NextVisible: the visible range.
CREATE INDEX orchestrator_queue_visible ON orchestrator_queue (visible_at, instance_id, id);
-- Tagging an instance's visible messages, acking its turn; purge by instance.
CREATE INDEX orchestrator_queue_instance ON orchestrator_queue (instance_id, visible_at);

-- Worker queue, one lock per row. visible_at is the time the row can next
-- be fetched: a fetch moves it to locked_until, so one range predicate
-- (visible_at <= now) covers "visible, and unlocked or lock expired".
-- Lock tokens name their row id.
CREATE TABLE worker_queue (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instance_id   TEXT    NOT NULL,
    execution_id  BIGINT  NOT NULL,
    activity_id   BIGINT  NOT NULL,
    session_id    TEXT,
    work_item     TEXT    NOT NULL,
    visible_at    BIGINT  NOT NULL,
    lock_token    TEXT,
    locked_until  BIGINT,
    attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    created_at    BIGINT  NOT NULL
);
CREATE INDEX worker_queue_visible ON worker_queue (visible_at, id);
CREATE INDEX worker_queue_session ON worker_queue (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX worker_queue_activity ON worker_queue (instance_id, execution_id, activity_id);

-- Instance locks: at most one holder per instance; an expired row may be
-- stolen. Tokens name their instance, so the primary key finds them.
CREATE TABLE instance_locks (
    instance_id  TEXT   PRIMARY KEY,
    lock_token   TEXT   NOT NULL,
    locked_until BIGINT NOT NULL,
    locked_at    BIGINT NOT NULL
);

-- Session affinity leases (routing only, no state).
CREATE TABLE sessions (
    session_id       TEXT   PRIMARY KEY,
    owner_id         TEXT   NOT NULL,
    locked_until     BIGINT NOT NULL,
    last_activity_at BIGINT NOT NULL
);
CREATE INDEX sessions_owner ON sessions (owner_id);

-- Messages that could not be decoded, moved out of the queues.
CREATE TABLE dead_letters (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       TEXT   NOT NULL,
    instance_id TEXT   NOT NULL,
    payload     BYTEA  NOT NULL,
    error       TEXT   NOT NULL,
    dead_at     BIGINT NOT NULL
);

-- Execution locks: one row per held lock key, written with its holder's
-- instance row and deleted by the ack that makes the holder terminal.
CREATE TABLE execution_locks (
    lock_key    TEXT   PRIMARY KEY,
    instance_id TEXT   NOT NULL,
    locked_at   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    ttl_ms      BIGINT NOT NULL
);
CREATE INDEX execution_locks_instance ON execution_locks (instance_id);
CREATE INDEX execution_locks_expires ON execution_locks (expires_at);

-- Starts waiting for a held key (LockRequest.Queue), in arrival order (id),
-- each with the start message its instance gets when the key is handed over.
CREATE TABLE lock_queue (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lock_key    TEXT   NOT NULL,
    instance_id TEXT   NOT NULL,
    work_item   TEXT   NOT NULL,
    visible_at  BIGINT NOT NULL,
    ttl_ms      BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX lock_queue_key ON lock_queue (lock_key, id);
CREATE INDEX lock_queue_instance ON lock_queue (instance_id);

-- Idempotency keys: the instance a key first started, until expires_at,
-- kept when the instance is purged (purged_at, NULL while it is not).
CREATE TABLE idempotency_keys (
    idem_key    TEXT   PRIMARY KEY,
    instance_id TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    purged_at   BIGINT
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_instance ON idempotency_keys (instance_id);
