-- 0013: each ready instance's orchestration on its orchestrator_ready row.
--
-- A fetch of turns skips the ready instances of orchestrations (and
-- versions) it does not register (provider.FetchOptions.Orchestrations).
-- It used to look each one's instance row up; the name and version are
-- now copied onto the scheduling row, which the scan reads anyway. ''
-- (both) is an instance without a row, which every fetch takes.
--
-- The copy is kept exact as ready_at is: the functions of 0002 that write
-- scheduling rows read them from the instance row, and creating, renaming
-- (the first turn pins the version, a ContinueAsNew may change it) or
-- deleting an instance row updates its scheduling row. The transactions
-- that change an instance row's name or version hold the instance's
-- advisory lock exclusively (an ack) or create it together with its
-- messages, so a scheduling row is never written from a stale copy.
ALTER TABLE orchestrator_ready
    ADD COLUMN orchestration_name TEXT NOT NULL DEFAULT '',
    ADD COLUMN orchestration_version TEXT NOT NULL DEFAULT '';
UPDATE orchestrator_ready AS r
SET orchestration_name = i.orchestration_name, orchestration_version = i.orchestration_version
FROM instances AS i WHERE i.instance_id = r.instance_id;

CREATE OR REPLACE FUNCTION orchestrator_ready_refresh(ids TEXT[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM orchestrator_ready AS r
    WHERE r.instance_id = ANY (ids)
      AND NOT EXISTS (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id, orchestration_name, orchestration_version)
    SELECT m.instance_id, greatest(m.first_vis, coalesce(l.locked_until, 0)), m.first_id,
           coalesce(i.orchestration_name, ''), coalesce(i.orchestration_version, '')
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM orchestrator_queue AS q WHERE q.instance_id = ANY (ids) GROUP BY q.instance_id) AS m
    LEFT JOIN instance_locks AS l ON l.instance_id = m.instance_id
    LEFT JOIN instances AS i ON i.instance_id = m.instance_id
    ORDER BY m.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at, first_id = excluded.first_id;
END $$;

CREATE OR REPLACE FUNCTION orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id, orchestration_name, orchestration_version)
    SELECT n.instance_id, greatest(min(n.visible_at), coalesce(max(l.locked_until), 0)), min(n.id),
           coalesce(max(i.orchestration_name), ''), coalesce(max(i.orchestration_version), '')
    FROM new_rows AS n
    LEFT JOIN instance_locks AS l ON l.instance_id = n.instance_id
    LEFT JOIN instances AS i ON i.instance_id = n.instance_id
    GROUP BY n.instance_id
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id);
    RETURN NULL;
END $$;

CREATE FUNCTION orchestrator_ready_on_instance() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE orchestrator_ready SET orchestration_name = '', orchestration_version = ''
        WHERE instance_id = OLD.instance_id;
    ELSE
        UPDATE orchestrator_ready
        SET orchestration_name = NEW.orchestration_name, orchestration_version = NEW.orchestration_version
        WHERE instance_id = NEW.instance_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER orchestrator_ready_instance_insert AFTER INSERT OR DELETE ON instances
FOR EACH ROW EXECUTE FUNCTION orchestrator_ready_on_instance();
CREATE TRIGGER orchestrator_ready_instance_update AFTER UPDATE OF orchestration_name, orchestration_version ON instances
FOR EACH ROW WHEN (OLD.orchestration_name IS DISTINCT FROM NEW.orchestration_name
                   OR OLD.orchestration_version IS DISTINCT FROM NEW.orchestration_version)
EXECUTE FUNCTION orchestrator_ready_on_instance();
