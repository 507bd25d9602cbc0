-- 0016: new messages that would not change their instance's scheduling row
-- leave it unlocked.
--
-- 0014's insert trigger merged every inserted message into its instance's
-- orchestrator_ready row with INSERT ... ON CONFLICT DO UPDATE ... WHERE,
-- which locks the conflicting row even when its WHERE finds nothing to
-- change, until the transaction ends. Two transactions that hold an
-- instance's advisory lock shared (enqueuers, and the groups of activity
-- acks that hold the instances only their acks complete shared) then
-- waited for each other's commit on that row, although neither changed
-- it: the completions of a fan-out's activities, arriving for an instance
-- already ready no later than them, queued behind one another's commits.
--
-- Now an instance whose row exists and is already no later than the new
-- messages on all three counts (ready_at, first_id, first_visible) is left
-- out of the upsert, read without a lock. This is safe because of the
-- instance advisory locks: every transaction that deletes an instance's
-- messages or moves their visibility, and so may move its row later or
-- delete it, holds the instance's lock exclusively (a turn ack, an
-- abandon, a purge) or got it by trying (a fetch), and every transaction
-- that inserts messages holds it shared or exclusively; so while a
-- message is inserted, the row can only move earlier (other enqueuers'
-- merges) or follow a lock change, which reads first_visible, and a row
-- no later than the message stays so. The one insert made without the
-- instance's lock, a queued start handed a freed execution lock key
-- (sqlXLockPromote), enqueues the start of an instance that has not
-- started: no turn of it can be running to delete its row.
CREATE OR REPLACE FUNCTION orchestrator_ready_on_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO orchestrator_ready AS r (instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version)
    SELECT n.instance_id, n.ready_at, n.first_id, n.first_visible, n.orchestration_name, n.orchestration_version
    FROM (SELECT n.instance_id, greatest(min(n.visible_at), coalesce(max(l.locked_until), 0)) AS ready_at,
                 min(n.id) AS first_id, min(n.visible_at) AS first_visible,
                 coalesce(max(i.orchestration_name), '') AS orchestration_name,
                 coalesce(max(i.orchestration_version), '') AS orchestration_version
          FROM new_rows AS n
          LEFT JOIN instance_locks AS l ON l.instance_id = n.instance_id
          LEFT JOIN instances AS i ON i.instance_id = n.instance_id
          GROUP BY n.instance_id) AS n
    WHERE NOT EXISTS (SELECT 1 FROM orchestrator_ready AS o
                      WHERE o.instance_id = n.instance_id AND o.ready_at <= n.ready_at
                        AND o.first_id <= n.first_id AND o.first_visible <= n.first_visible)
    ORDER BY n.instance_id
    ON CONFLICT (instance_id) DO UPDATE
    SET ready_at = least(r.ready_at, excluded.ready_at), first_id = least(r.first_id, excluded.first_id),
        first_visible = least(r.first_visible, excluded.first_visible)
    WHERE excluded.ready_at < r.ready_at OR excluded.first_id < r.first_id OR excluded.first_visible < r.first_visible;
    RETURN NULL;
END $$;
