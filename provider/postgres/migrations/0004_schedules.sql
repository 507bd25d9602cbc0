-- 0004: schedules (provider.ScheduleStore).
--
-- One row per schedule. spec is the runtime's JSON definition, kept as
-- given; next_fire_at (NULL: never again) is what runtimes race for: a fire
-- is recorded by an update conditioned on it, so one runtime wins each fire.
-- revision counts the row's changes, for updates that must not overwrite a
-- change they did not see.
CREATE TABLE schedules (
    schedule_id      TEXT    PRIMARY KEY,
    spec             TEXT    NOT NULL,
    paused           BOOLEAN NOT NULL DEFAULT false,
    next_fire_at     BIGINT,
    last_fire_at     BIGINT,
    last_instance_id TEXT    NOT NULL DEFAULT '',
    last_outcome     TEXT    NOT NULL DEFAULT '',
    revision         BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
