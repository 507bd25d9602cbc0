-- 0019: the scheduling triggers recompute an instance's orchestrator_ready
-- row by its keys, never by a scan of orchestrator_ready.
--
-- orchestrator_ready_on_delete (a turn ack consuming its messages, a
-- purge) and orchestrator_ready_refresh (a message whose visibility
-- moved) recomputed the rows of the instances concerned in one statement
-- joining their queue aggregate to orchestrator_ready and instance_locks.
-- Its plan is made once per session, usually while those tables are small
-- and have no statistics (autovacuum off, a new store), and it joined them
-- by hashing: for an instance that keeps messages after the deletion (a
-- turn acked while results of its other activities arrived) it read every
-- row of orchestrator_ready and of instance_locks, dead versions included,
-- at every call. They are recreated as a loop over the instances
-- concerned, in instance order (the order the other triggers lock their
-- rows in), each one read and written by its primary key: the instance's
-- first message and visibility from orchestrator_queue_instance, its lock
-- from instance_locks_pkey, its row deleted when no message is left or
-- updated (only if it changes) otherwise, as before. The GROUP BY keeps
-- the planner from answering min(id) by a walk of the queue's primary
-- key.
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
$sql$, '@s', s);
END
$migration$;
