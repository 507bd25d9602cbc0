-- 0017: orchestrator_ready kept exact with fewer row-by-row steps.
--
-- 0002's delete trigger recomputed the instance's scheduling row for every
-- deleted message: a turn that consumed a hundred activity results (a
-- fan-in) recomputed it a hundred times, most of the cost of its ack.
-- Messages tagged with the token of the instance lock that is still held
-- are deleted only by the holder of that lock, which releases it in the
-- same transaction (a turn ack, a purge) or fixes the row itself
-- (dead-lettering untags the message first); so the trigger now skips
-- them, and releasing the lock recomputes the whole row once: removed
-- when no message is left, else its ready time and its oldest message.
DROP TRIGGER orchestrator_ready_on_delete;
CREATE TRIGGER orchestrator_ready_on_delete AFTER DELETE ON orchestrator_queue
WHEN OLD.lock_token IS NULL
  OR NOT EXISTS (SELECT 1 FROM instance_locks WHERE instance_id = OLD.instance_id AND lock_token = OLD.lock_token)
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

DROP TRIGGER orchestrator_ready_on_unlock;
CREATE TRIGGER orchestrator_ready_on_unlock AFTER DELETE ON instance_locks
BEGIN
    DELETE FROM orchestrator_ready
    WHERE instance_id = OLD.instance_id
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue WHERE instance_id = OLD.instance_id);
    UPDATE orchestrator_ready
    SET ready_at = (SELECT min(visible_at) FROM orchestrator_queue WHERE instance_id = OLD.instance_id),
        first_id = (SELECT min(id) FROM orchestrator_queue WHERE instance_id = OLD.instance_id)
    WHERE instance_id = OLD.instance_id;
END;

-- A new message changes the scheduling row only when it makes the instance
-- ready sooner (0016's trigger, which updates nothing otherwise). The
-- results of a fan-out mostly arrive for an instance already ready no
-- later than them: the WHEN clause, one lookup of that row, now skips them
-- before the lock and the instance are read.
DROP TRIGGER orchestrator_ready_on_insert;
CREATE TRIGGER orchestrator_ready_on_insert AFTER INSERT ON orchestrator_queue
WHEN NOT EXISTS (SELECT 1 FROM orchestrator_ready WHERE instance_id = NEW.instance_id AND ready_at <= NEW.visible_at)
BEGIN
    INSERT INTO orchestrator_ready (instance_id, ready_at, first_id, orchestration_name, orchestration_version)
    SELECT NEW.instance_id,
           max(NEW.visible_at, coalesce((SELECT locked_until FROM instance_locks WHERE instance_id = NEW.instance_id), 0)),
           NEW.id, coalesce(i.orchestration_name, ''), coalesce(i.orchestration_version, '')
    FROM (SELECT 1) LEFT JOIN instances AS i ON i.instance_id = NEW.instance_id
    WHERE true
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at
    WHERE excluded.ready_at < orchestrator_ready.ready_at;
END;
