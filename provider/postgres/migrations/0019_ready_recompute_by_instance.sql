-- 0019: the scheduling triggers read and write the rows of the instances
-- concerned by key, never by a scan of orchestrator_ready, instance_locks
-- or instances.
--
-- Each trigger function's statement is planned once per session, usually
-- while those tables are small and have no statistics (autovacuum off, a
-- new store), and the plans joined them to the trigger's rows by hashing:
-- orchestrator_ready_on_insert (every start, enqueue and completion)
-- read instance_locks, instances and orchestrator_ready whole, dead row
-- versions included, at every call; orchestrator_ready_on_delete (a turn
-- ack consuming its messages, a purge) and orchestrator_ready_refresh (a
-- message whose visibility moved) did so for orchestrator_ready and
-- instance_locks whenever the instance kept messages (a turn acked while
-- results of its other activities arrived). So each call's cost grew with
-- the store's instances, locks and the dead rows they leave.
--
-- orchestrator_ready_on_insert keeps its one statement, but reads the lock,
-- the instance's name and version and its orchestrator_ready row through
-- scalar subqueries, which the planner cannot turn into joins: one probe of
-- each primary key per instance. The two others become a loop over the
-- instances concerned, in instance order (the order the insert trigger
-- writes in), each one read and written by its keys: its first message and
-- visibility from orchestrator_queue_instance (the GROUP BY keeps the
-- planner from answering min(id) by a walk of the queue's primary key), its
-- lock from instance_locks_pkey; its row is deleted when no message is
-- left, updated (only if it changes) otherwise, as before.
DO $migration$
DECLARE
    s TEXT := quote_ident(current_schema());
BEGIN
    EXECUTE replace($sql$
CREATE OR REPLACE FUNCTION @s.orchestrator_ready_refresh(ids TEXT[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    iid TEXT;
    fv BIGINT;
    fid BIGINT;
BEGIN
    FOR iid IN SELECT DISTINCT u.id FROM unnest(ids) AS u(id) ORDER BY u.id LOOP
        fid := NULL;
        SELECT min(q.visible_at), min(q.id) INTO fv, fid
        FROM @s.orchestrator_queue AS q WHERE q.instance_id = iid GROUP BY q.instance_id;
        IF fid IS NULL THEN
            DELETE FROM @s.orchestrator_ready WHERE instance_id = iid;
        ELSE
            INSERT INTO @s.orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
            SELECT iid, greatest(fv, coalesce((SELECT l.locked_until FROM @s.instance_locks AS l WHERE l.instance_id = iid), 0)), fid, fv,
                   coalesce((SELECT i.orchestration_name FROM @s.instances AS i WHERE i.instance_id = iid), ''),
                   coalesce((SELECT i.orchestration_version FROM @s.instances AS i WHERE i.instance_id = iid), '')
            ON CONFLICT (instance_id) DO UPDATE
            SET ready_at = excluded.ready_at, first_id = excluded.first_id, first_visible = excluded.first_visible
            WHERE r.ready_at <> excluded.ready_at OR r.first_id <> excluded.first_id OR r.first_visible <> excluded.first_visible;
        END IF;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    iid TEXT;
    fv BIGINT;
    fid BIGINT;
    ready BIGINT;
BEGIN
    FOR iid IN SELECT DISTINCT o.instance_id FROM old_rows AS o ORDER BY o.instance_id LOOP
        fid := NULL;
        SELECT min(q.visible_at), min(q.id) INTO fv, fid
        FROM @s.orchestrator_queue AS q WHERE q.instance_id = iid GROUP BY q.instance_id;
        IF fid IS NULL THEN
            DELETE FROM @s.orchestrator_ready WHERE instance_id = iid;
        ELSE
            ready := greatest(fv, coalesce((SELECT l.locked_until FROM @s.instance_locks AS l WHERE l.instance_id = iid), 0));
            UPDATE @s.orchestrator_ready
            SET ready_at = ready, first_id = fid, first_visible = fv
            WHERE instance_id = iid AND (ready_at <> ready OR first_id <> fid OR first_visible <> fv);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION @s.orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO @s.orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT n.instance_id, n.ready_at, n.first_id, n.first_visible,
           coalesce((SELECT i.orchestration_name FROM @s.instances AS i WHERE i.instance_id = n.instance_id), ''),
           coalesce((SELECT i.orchestration_version FROM @s.instances AS i WHERE i.instance_id = n.instance_id), '')
    FROM (SELECT m.instance_id, m.first_id, m.first_visible,
                 greatest(m.first_visible, coalesce((SELECT l.locked_until FROM @s.instance_locks AS l WHERE l.instance_id = m.instance_id), 0)) AS ready_at
          FROM (SELECT o.instance_id, min(o.id) AS first_id, min(o.visible_at) AS first_visible
                FROM new_rows AS o GROUP BY o.instance_id) AS m
          OFFSET 0) AS n
    WHERE NOT coalesce((SELECT o.ready_at <= n.ready_at AND o.first_id <= n.first_id AND o.first_visible <= n.first_visible
                        FROM @s.orchestrator_ready AS o WHERE o.instance_id = n.instance_id), false)
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id),
        first_visible = least(r.first_visible, excluded.first_visible)
    WHERE excluded.ready_at < r.ready_at OR excluded.first_id < r.first_id OR excluded.first_visible < r.first_visible;
    RETURN NULL;
END $$;
$sql$, '@s', s);
END
$migration$;
