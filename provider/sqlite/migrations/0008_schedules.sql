-- 0008: schedules (provider.ScheduleStore).
--
-- One row per schedule. spec is the runtime's JSON definition, kept as
-- given; next_fire_at (NULL: never again) is what runtimes race for: a fire
-- is recorded by an update conditioned on it, so one runtime wins each fire.
-- revision counts the row's changes, for updates that must not overwrite a
-- change they did not see.
CREATE TABLE schedules (
    schedule_id      TEXT    PRIMARY KEY,
    spec             TEXT    NOT NULL,
    paused           INTEGER NOT NULL DEFAULT 0,
    next_fire_at     INTEGER,
    last_fire_at     INTEGER,
    last_instance_id TEXT    NOT NULL DEFAULT '',
    last_outcome     TEXT    NOT NULL DEFAULT '',
    revision         INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
