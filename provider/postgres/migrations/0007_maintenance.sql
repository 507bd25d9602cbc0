-- 0005: named leases (provider.Leaser: one process at a time runs a
-- periodic job, such as the runtime's retention sweep) and the records of
-- bulk actions (provider.BulkJobStore). The store does not read a job's
-- spec: its runner encodes and decodes it.
CREATE TABLE leases (
    name       TEXT   PRIMARY KEY,
    owner      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE bulk_jobs (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      TEXT   NOT NULL UNIQUE,
    spec        TEXT   NOT NULL,
    state       TEXT   NOT NULL,
    cursor      TEXT   NOT NULL DEFAULT '',
    total       BIGINT NOT NULL DEFAULT 0,
    processed   BIGINT NOT NULL DEFAULT 0,
    succeeded   BIGINT NOT NULL DEFAULT 0,
    skipped     BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    error       TEXT   NOT NULL DEFAULT '',
    owner       TEXT   NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
-- Unfinished jobs, for runners looking for work.
CREATE INDEX bulk_jobs_unfinished ON bulk_jobs (state) WHERE state IN ('Pending', 'Running');
-- Pruning ContinueAsNew chains: instances past their first execution.
CREATE INDEX instances_continued ON instances (current_execution_id) WHERE current_execution_id > 1;
