-- 0001: the initial schema of the SQLite store.
--
-- All times are INTEGER epoch milliseconds taken from the provider's clock.
-- JSON documents (work items, events, payloads, error details) are TEXT.
-- There are no foreign keys: the provider keeps the tables consistent inside
-- its transactions (purge deletes every table's rows explicitly).

-- One row per instance. seq is a stable, never reused key for keyset
-- pagination (newest first); instance_id is the user-facing identity.
CREATE TABLE instances (
    seq                   INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id           TEXT    NOT NULL UNIQUE,
    orchestration_name    TEXT    NOT NULL DEFAULT '',
    orchestration_version TEXT    NOT NULL DEFAULT '',
    status                TEXT    NOT NULL,
    current_execution_id  INTEGER NOT NULL DEFAULT 0,
    input                 TEXT,
    output                TEXT,
    error                 TEXT,
    custom_status         TEXT,
    custom_status_version INTEGER NOT NULL DEFAULT 0,
    parent_instance_id    TEXT,
    parent_execution_id   INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX instances_parent ON instances (parent_instance_id) WHERE parent_instance_id IS NOT NULL;
CREATE INDEX instances_status ON instances (status);
CREATE INDEX instances_orchestration ON instances (orchestration_name);

-- One row per execution (ContinueAsNew starts a new one).
CREATE TABLE executions (
    instance_id  TEXT    NOT NULL,
    execution_id INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    input        TEXT,
    output       TEXT,
    error        TEXT,
    started_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (instance_id, execution_id)
) WITHOUT ROWID;

-- Append-only history, clustered by (instance, execution, event) so a turn's
-- history load is one range read. The primary key rejects duplicate events.
CREATE TABLE history (
    instance_id  TEXT    NOT NULL,
    execution_id INTEGER NOT NULL,
    event_id     INTEGER NOT NULL,
    event_type   TEXT    NOT NULL,
    event_data   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (instance_id, execution_id, event_id)
) WITHOUT ROWID;

-- Orchestrator queue (timers are messages with a future visible_at). A fetch
-- tags the visible messages of the instance it locks with its lock token;
-- the ack deletes exactly those. Lock tokens name their instance, so rows are
-- found by instance and no index on lock_token is needed: tagging a message
-- rewrites only its table row.
CREATE TABLE orchestrator_queue (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id   TEXT    NOT NULL,
    work_item     TEXT    NOT NULL,
    visible_at    INTEGER NOT NULL,
    lock_token    TEXT,
    locked_until  INTEGER,
    attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    created_at    INTEGER NOT NULL
);
-- Fetch candidates: the visible range, covering instance_id and id.
CREATE INDEX orchestrator_queue_visible ON orchestrator_queue (visible_at, instance_id);
-- Tagging an instance's visible messages, acking its turn; purge by instance.
CREATE INDEX orchestrator_queue_instance ON orchestrator_queue (instance_id, visible_at);

-- Worker queue, one lock per row. visible_at is the time the row can next be
-- fetched: a fetch moves it to locked_until, so one range predicate
-- (visible_at <= now) covers "visible, and unlocked or lock expired". Lock
-- tokens name their row id, and no index holds a column a fetch changes, so
-- locking a row rewrites only the row.
CREATE TABLE worker_queue (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id   TEXT    NOT NULL,
    execution_id  INTEGER NOT NULL,
    activity_id   INTEGER NOT NULL,
    session_id    TEXT,
    work_item     TEXT    NOT NULL,
    visible_at    INTEGER NOT NULL,
    lock_token    TEXT,
    locked_until  INTEGER,
    attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    created_at    INTEGER NOT NULL
);
-- Fetch without sessions (rows with session_id IS NULL, in id order);
-- sessions still referenced.
CREATE INDEX worker_queue_session ON worker_queue (session_id);
-- Cancellation by activity identity; purge by instance.
CREATE INDEX worker_queue_activity ON worker_queue (instance_id, execution_id, activity_id);

-- Instance locks: at most one holder per instance; an expired row may be
-- stolen. Tokens name their instance, so the primary key finds them.
CREATE TABLE instance_locks (
    instance_id  TEXT    PRIMARY KEY,
    lock_token   TEXT    NOT NULL,
    locked_until INTEGER NOT NULL,
    locked_at    INTEGER NOT NULL
) WITHOUT ROWID;

-- Session affinity leases (a flow table: routing only, no state).
CREATE TABLE sessions (
    session_id       TEXT    PRIMARY KEY,
    owner_id         TEXT    NOT NULL,
    locked_until     INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_owner ON sessions (owner_id);

-- Messages that could not be decoded, moved out of the queues.
CREATE TABLE dead_letters (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    queue       TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    error       TEXT    NOT NULL,
    dead_at     INTEGER NOT NULL
);
