-- 0018: less work in each firing of the scheduling triggers, and instance
-- rows that update in place.
--
-- The trigger functions that keep orchestrator_ready exact (0002, 0013,
-- 0014, 0016) were declared SET search_path FROM CURRENT, so that their
-- statements find the store's tables whatever the caller's search_path.
-- A function with a SET clause cannot be called directly: each call
-- opens a configuration nesting level, sets search_path, recomputes the
-- namespace search list and, on return, restores and recomputes it
-- again. Every start, turn fetch and turn ack fires two or three of them.
-- They are recreated here without the clause, with the store's tables
-- named by their schema instead (the schema this migration runs in, as
-- FROM CURRENT took it), so they still never depend on the caller's
-- search_path. Their logic is unchanged but for orchestrator_ready_on_delete,
-- which removes and recomputes the rows of the instances whose messages
-- were deleted in one statement instead of two (the rows it deletes, of
-- instances with no message left, and those it updates, of instances with
-- messages left, are disjoint).
--
-- instances and orchestrator_queue get a fillfactor of 80. Each turn of a
-- running execution updates its instance's row (updated_at, the custom
-- status) without changing an indexed column, and each turn fetch tags
-- its messages (lock_token, locked_until) likewise: PostgreSQL makes such
-- an update in place (a HOT update: no new entry in the row's indexes,
-- five for an instance, two for a message) only when the row's page has
-- room for the new version. Rows were packed full as they were inserted,
-- so about one such update in ten wrote its new version on another page
-- and an entry in each index. The setting applies to pages filled from
-- now on.
ALTER TABLE instances SET (fillfactor = 80);
ALTER TABLE orchestrator_queue SET (fillfactor = 80);

DO $migration$
DECLARE
    s TEXT := quote_ident(current_schema());
BEGIN
    EXECUTE replace($sql$
CREATE OR REPLACE FUNCTION @s.orchestrator_ready_refresh(ids TEXT[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM @s.orchestrator_ready AS r
    WHERE r.instance_id = ANY (ids)
      AND NOT EXISTS (SELECT 1 FROM @s.orchestrator_queue AS q WHERE q.instance_id = r.instance_id);
    INSERT INTO @s.orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT m.instance_id, greatest(m.first_vis, coalesce(l.locked_until, 0)), m.first_id, m.first_vis,
           coalesce(i.orchestration_name, ''), coalesce(i.orchestration_version, '')
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM @s.orchestrator_queue AS q WHERE q.instance_id = ANY (ids) GROUP BY q.instance_id) AS m
    LEFT JOIN @s.instance_locks AS l ON l.instance_id = m.instance_id
    LEFT JOIN @s.instances AS i ON i.instance_id = m.instance_id
    ORDER BY m.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = excluded.ready_at, first_id = excluded.first_id, first_visible = excluded.first_visible
    WHERE r.ready_at <> excluded.ready_at OR r.first_id <> excluded.first_id OR r.first_visible <> excluded.first_visible;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO @s.orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT n.instance_id, n.ready_at, n.first_id, n.first_visible, n.orchestration_name, n.orchestration_version
    FROM (SELECT n.instance_id, greatest(min(n.visible_at), coalesce(max(l.locked_until), 0)) AS ready_at,
                 min(n.id) AS first_id, min(n.visible_at) AS first_visible,
                 coalesce(max(i.orchestration_name), '') AS orchestration_name,
                 coalesce(max(i.orchestration_version), '') AS orchestration_version
          FROM new_rows AS n
          LEFT JOIN @s.instance_locks AS l ON l.instance_id = n.instance_id
          LEFT JOIN @s.instances AS i ON i.instance_id = n.instance_id
          GROUP BY n.instance_id) AS n
    WHERE NOT EXISTS (SELECT 1 FROM @s.orchestrator_ready AS o
                      WHERE o.instance_id = n.instance_id AND o.ready_at <= n.ready_at
                        AND o.first_id <= n.first_id AND o.first_visible <= n.first_visible)
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id),
        first_visible = least(r.first_visible, excluded.first_visible)
    WHERE excluded.ready_at < r.ready_at OR excluded.first_id < r.first_id OR excluded.first_visible < r.first_visible;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH d AS (
        DELETE FROM @s.orchestrator_ready AS r
        USING (SELECT DISTINCT o.instance_id FROM old_rows AS o) AS d
        WHERE r.instance_id = d.instance_id
          AND NOT EXISTS (SELECT 1 FROM @s.orchestrator_queue AS q WHERE q.instance_id = r.instance_id)
    )
    UPDATE @s.orchestrator_ready AS r
    SET ready_at = greatest(m.first_vis, coalesce(l.locked_until, 0)), first_id = m.first_id, first_visible = m.first_vis
    FROM (SELECT q.instance_id, min(q.visible_at) AS first_vis, min(q.id) AS first_id
          FROM @s.orchestrator_queue AS q WHERE q.instance_id IN (SELECT o.instance_id FROM old_rows AS o) GROUP BY q.instance_id) AS m
    LEFT JOIN @s.instance_locks AS l ON l.instance_id = m.instance_id
    WHERE r.instance_id = m.instance_id
      AND (r.ready_at <> greatest(m.first_vis, coalesce(l.locked_until, 0)) OR r.first_id <> m.first_id OR r.first_visible <> m.first_vis);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_row_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM @s.orchestrator_ready_refresh(ARRAY[OLD.instance_id]);
    ELSE
        PERFORM @s.orchestrator_ready_refresh(ARRAY[NEW.instance_id]);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE @s.orchestrator_ready SET ready_at = first_visible
        WHERE instance_id = OLD.instance_id AND ready_at <> first_visible;
    ELSE
        UPDATE @s.orchestrator_ready SET ready_at = greatest(first_visible, NEW.locked_until)
        WHERE instance_id = NEW.instance_id AND ready_at <> greatest(first_visible, NEW.locked_until);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_instance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE @s.orchestrator_ready SET orchestration_name = '', orchestration_version = ''
        WHERE instance_id = OLD.instance_id;
    ELSE
        UPDATE @s.orchestrator_ready
        SET orchestration_name = NEW.orchestration_name, orchestration_version = NEW.orchestration_version
        WHERE instance_id = NEW.instance_id;
    END IF;
    RETURN NULL;
END $$;
$sql$, '@s', s);
END
$migration$;
