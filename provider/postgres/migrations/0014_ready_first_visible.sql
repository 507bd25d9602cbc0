-- 0014: orchestrator_ready kept exact with less work per turn.
--
-- Every change of an instance lock recomputed the instance's scheduling row
-- from its messages (0002's orchestrator_ready_refresh), so a turn read the
-- instance's messages three times besides its own statements: when its
-- fetch took the lock, when its ack deleted the messages it consumed, and
-- again when the ack released the lock.
--
-- The row now also keeps first_visible, the earliest visibility of the
-- instance's messages, so that ready_at (the later of first_visible and
-- the lock's expiry) follows a lock change from the lock row alone: taking,
-- stealing, renewing or re-dating a lock sets it to
-- greatest(first_visible, locked_until), releasing it to first_visible.
-- Only the paths that change the messages (insert, delete, a visibility
-- moved) read the queue, as before. The two kinds of trigger may fire in
-- either order within one statement and still agree: the queue triggers
-- read the lock row as the statement left it, the lock trigger reads the
-- first_visible the queue triggers keep.
--
-- An update that would change nothing writes nothing (it would leave a dead
-- row and index entries behind for every result that arrives for an
-- instance already ready no later than it).
ALTER TABLE orchestrator_ready ADD COLUMN first_visible BIGINT;
UPDATE orchestrator_ready AS r
SET first_visible = (SELECT min(q.visible_at) FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
-- A row without messages cannot exist (0002's triggers delete it with the
-- last one); 0 keeps the column NOT NULL if one ever did.
UPDATE orchestrator_ready SET first_visible = 0 WHERE first_visible IS NULL;
ALTER TABLE orchestrator_ready ALTER COLUMN first_visible SET NOT NULL;

-- Recompute the rows of the instances ids from their messages and locks.
CREATE OR REPLACE FUNCTION orchestrator_ready_refresh(ids TEXT[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM orchestrator_ready AS r
    WHERE r.instance_id = ANY (ids)
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT m.instance_id, greatest(m.first_vis, coalesce(l.locked_until, 0)), m.first_id, m.first_vis,
           coalesce(i.orchestration_name, ''), coalesce(i.orchestration_version, '')
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM orchestrator_queue AS q WHERE q.instance_id = ANY (ids) GROUP BY q.instance_id) AS m
    LEFT JOIN instance_locks AS l ON l.instance_id = m.instance_id
    LEFT JOIN instances AS i ON i.instance_id = m.instance_id
    ORDER BY m.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at, first_id = excluded.first_id, first_visible = excluded.first_visible
    WHERE r.ready_at <> excluded.ready_at OR r.first_id <> excluded.first_id OR r.first_visible <> excluded.first_visible;
END $$;

-- New messages can only make their instances ready sooner: merge them in.
CREATE OR REPLACE FUNCTION orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT n.instance_id, greatest(min(n.visible_at), coalesce(max(l.locked_until), 0)), min(n.id), min(n.visible_at),
           coalesce(max(i.orchestration_name), ''), coalesce(max(i.orchestration_version), '')
    FROM new_rows AS n
    LEFT JOIN instance_locks AS l ON l.instance_id = n.instance_id
    LEFT JOIN instances AS i ON i.instance_id = n.instance_id
    GROUP BY n.instance_id
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id),
        first_visible = least(r.first_visible, excluded.first_visible)
    WHERE excluded.ready_at < r.ready_at OR excluded.first_id < r.first_id OR excluded.first_visible < r.first_visible;
    RETURN NULL;
END $$;

-- Messages were deleted: their instances' rows are removed with their last
-- message or recomputed from the messages left, in two statements over the
-- deleted rows, without a nested call. An instance with messages left has
-- a row (the insert trigger made it), so updating the rows that exist is
-- enough.
CREATE OR REPLACE FUNCTION orchestrator_ready_on_delete() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM orchestrator_ready AS r
    USING (SELECT DISTINCT o.instance_id FROM old_rows AS o) AS d
    WHERE r.instance_id = d.instance_id
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
    UPDATE orchestrator_ready AS r
    SET ready_at = greatest(m.first_vis, coalesce(l.locked_until, 0)), first_id = m.first_id, first_visible = m.first_vis
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM orchestrator_queue AS q WHERE q.instance_id IN (SELECT o.instance_id FROM old_rows AS o) GROUP BY q.instance_id) AS m
    LEFT JOIN instance_locks AS l ON l.instance_id = m.instance_id
    WHERE r.instance_id = m.instance_id
      AND (r.ready_at <> greatest(m.first_vis, coalesce(l.locked_until, 0)) OR r.first_id <> m.first_id OR r.first_visible <> m.first_vis);
    RETURN NULL;
END $$;

-- A lock was taken, stolen, renewed, re-dated or released: the ready time
-- follows from the lock row and first_visible, without reading the queue.
CREATE FUNCTION orchestrator_ready_on_lock() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE orchestrator_ready SET ready_at = first_visible
        WHERE instance_id = OLD.instance_id AND ready_at <> first_visible;
    ELSE
        UPDATE orchestrator_ready SET ready_at = greatest(first_visible, NEW.locked_until)
        WHERE instance_id = NEW.instance_id AND ready_at <> greatest(first_visible, NEW.locked_until);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER orchestrator_ready_lock_insert ON instance_locks;
DROP TRIGGER orchestrator_ready_lock_update ON instance_locks;
CREATE TRIGGER orchestrator_ready_lock_insert AFTER INSERT OR DELETE ON instance_locks
FOR EACH ROW EXECUTE FUNCTION orchestrator_ready_on_lock();
CREATE TRIGGER orchestrator_ready_lock_update AFTER UPDATE OF locked_until ON instance_locks
FOR EACH ROW WHEN (OLD.locked_until IS DISTINCT FROM NEW.locked_until)
EXECUTE FUNCTION orchestrator_ready_on_lock();
