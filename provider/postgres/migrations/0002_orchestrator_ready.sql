-- 0002: one scheduling row per instance with queued orchestrator messages,
-- so a fetch reads the instances it can take, in order, instead of grouping
-- the visible queue (whose cost grew with the backlog, late arrivals for
-- instances whose turn is in progress included).
--
-- ready_at is the earliest time a fetch may take the instance: the earliest
-- visibility of its messages, or the expiry of its instance lock if that is
-- later. An instance whose turn is in progress is out of the ready range
-- until its lock expires. first_id (its oldest message) orders instances
-- that became ready at the same time.
--
-- Triggers keep the table exact on every path that changes the queue or a
-- lock. They recompute an instance's row from its messages and lock, which
-- is exact because the transactions that delete an instance's messages or
-- change its lock hold the instance's advisory lock exclusively while the
-- ones that add messages hold it shared; an insert only merges its
-- messages in (an instance can only become ready sooner), so concurrent
-- enqueuers never undo each other.
CREATE TABLE orchestrator_ready (
    instance_id TEXT   PRIMARY KEY,
    ready_at    BIGINT NOT NULL,
    first_id    BIGINT NOT NULL
);
CREATE INDEX orchestrator_ready_order ON orchestrator_ready (ready_at, first_id);

INSERT INTO orchestrator_ready (instance_id, ready_at, first_id)
SELECT q.instance_id,
       greatest(min(q.visible_at), coalesce((SELECT l.locked_until FROM instance_locks AS l WHERE l.instance_id = q.instance_id), 0)),
       min(q.id)
FROM orchestrator_queue AS q
GROUP BY q.instance_id;

-- Recompute the rows of the instances ids from their messages and locks.
CREATE FUNCTION orchestrator_ready_refresh(ids TEXT[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM orchestrator_ready AS r
    WHERE r.instance_id = ANY (ids)
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id)
    SELECT m.instance_id, greatest(m.first_vis, coalesce(l.locked_until, 0)), m.first_id
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM orchestrator_queue AS q WHERE q.instance_id = ANY (ids) GROUP BY q.instance_id) AS m
    LEFT JOIN instance_locks AS l ON l.instance_id = m.instance_id
    ORDER BY m.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at, first_id = excluded.first_id;
END $$;

-- New messages can only make their instances ready sooner: merge them in.
CREATE FUNCTION orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id)
    SELECT n.instance_id, greatest(min(n.visible_at), coalesce(max(l.locked_until), 0)), min(n.id)
    FROM new_rows AS n LEFT JOIN instance_locks AS l ON l.instance_id = n.instance_id
    GROUP BY n.instance_id
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id);
    RETURN NULL;
END $$;
CREATE TRIGGER orchestrator_ready_insert AFTER INSERT ON orchestrator_queue
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION orchestrator_ready_on_insert();

CREATE FUNCTION orchestrator_ready_on_delete() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM orchestrator_ready_refresh(ARRAY(SELECT DISTINCT o.instance_id FROM old_rows AS o));
    RETURN NULL;
END $$;
CREATE TRIGGER orchestrator_ready_delete AFTER DELETE ON orchestrator_queue
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION orchestrator_ready_on_delete();

-- A message's visibility moved, or an instance lock was taken, stolen,
-- renewed or released.
CREATE FUNCTION orchestrator_ready_on_row_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM orchestrator_ready_refresh(ARRAY[OLD.instance_id]);
    ELSE
        PERFORM orchestrator_ready_refresh(ARRAY[NEW.instance_id]);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER orchestrator_ready_visibility AFTER UPDATE OF visible_at ON orchestrator_queue
FOR EACH ROW WHEN (OLD.visible_at IS DISTINCT FROM NEW.visible_at)
EXECUTE FUNCTION orchestrator_ready_on_row_change();
CREATE TRIGGER orchestrator_ready_lock_insert AFTER INSERT OR DELETE ON instance_locks
FOR EACH ROW EXECUTE FUNCTION orchestrator_ready_on_row_change();
CREATE TRIGGER orchestrator_ready_lock_update AFTER UPDATE OF locked_until ON instance_locks
FOR EACH ROW WHEN (OLD.locked_until IS DISTINCT FROM NEW.locked_until)
EXECUTE FUNCTION orchestrator_ready_on_row_change();
