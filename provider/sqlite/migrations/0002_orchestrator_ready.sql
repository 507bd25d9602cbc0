-- 0002: one scheduling row per instance with queued orchestrator messages,
-- so a fetch reads the instances it can take, in order, instead of grouping
-- every queued message (which made each fetch cost O(backlog)).
--
-- ready_at is the earliest time a fetch may take the instance: the earliest
-- visibility of its messages, or the expiry of its instance lock if that is
-- later. An instance whose turn is in progress is therefore out of the
-- ready range until its lock expires (crash recovery needs nothing more),
-- and late arrivals for it cost fetches nothing. first_id (its oldest
-- message) orders instances that became ready at the same time.
--
-- Triggers keep the table exact on every path that changes the queue or a
-- lock (enqueue, ack, abandon, dead-lettering, purge, lock, renew, release).
CREATE TABLE orchestrator_ready (
    instance_id TEXT    PRIMARY KEY,
    ready_at    INTEGER NOT NULL,
    first_id    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX orchestrator_ready_order ON orchestrator_ready (ready_at, first_id);

INSERT INTO orchestrator_ready (instance_id, ready_at, first_id)
SELECT q.instance_id,
       max(min(q.visible_at), coalesce((SELECT l.locked_until FROM instance_locks AS l WHERE l.instance_id = q.instance_id), 0)),
       min(q.id)
FROM orchestrator_queue AS q
GROUP BY q.instance_id;

-- A new message can only make its instance ready sooner, never while locked.
CREATE TRIGGER orchestrator_ready_on_insert AFTER INSERT ON orchestrator_queue
BEGIN
    INSERT INTO orchestrator_ready (instance_id, ready_at, first_id)
    VALUES (NEW.instance_id,
            max(NEW.visible_at, coalesce((SELECT locked_until FROM instance_locks WHERE instance_id = NEW.instance_id), 0)),
            NEW.id)
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at
    WHERE excluded.ready_at < orchestrator_ready.ready_at;
END;

-- Removing a message or moving its visibility recomputes the instance's row.
CREATE TRIGGER orchestrator_ready_on_delete AFTER DELETE ON orchestrator_queue
BEGIN
    DELETE FROM orchestrator_ready
    WHERE instance_id = OLD.instance_id
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue WHERE instance_id = OLD.instance_id);
    UPDATE orchestrator_ready
    SET ready_at = max((SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = OLD.instance_id),
                       coalesce((SELECT locked_until FROM instance_locks WHERE instance_id = OLD.instance_id), 0)),
        first_id = (SELECT min(id) FROM orchestrator_queue WHERE instance_id = OLD.instance_id)
    WHERE instance_id = OLD.instance_id;
END;

CREATE TRIGGER orchestrator_ready_on_visibility AFTER UPDATE OF visible_at ON orchestrator_queue
BEGIN
    UPDATE orchestrator_ready
    SET ready_at = max((SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = NEW.instance_id),
                       coalesce((SELECT locked_until FROM instance_locks WHERE instance_id = NEW.instance_id), 0))
    WHERE instance_id = NEW.instance_id;
END;

-- Taking, stealing, renewing or releasing a lock moves the instance out of
-- or back into the ready range.
CREATE TRIGGER orchestrator_ready_on_lock AFTER INSERT ON instance_locks
BEGIN
    UPDATE orchestrator_ready
    SET ready_at = max((SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = NEW.instance_id), NEW.locked_until)
    WHERE instance_id = NEW.instance_id;
END;

CREATE TRIGGER orchestrator_ready_on_lock_update AFTER UPDATE OF locked_until ON instance_locks
BEGIN
    UPDATE orchestrator_ready
    SET ready_at = max((SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = NEW.instance_id), NEW.locked_until)
    WHERE instance_id = NEW.instance_id;
END;

CREATE TRIGGER orchestrator_ready_on_unlock AFTER DELETE ON instance_locks
BEGIN
    UPDATE orchestrator_ready
    SET ready_at = (SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = OLD.instance_id)
    WHERE instance_id = OLD.instance_id;
END;
