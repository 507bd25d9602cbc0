-- 0016: each ready instance's orchestration on its orchestrator_ready row.
--
-- A fetch of turns skips the ready instances of orchestrations (and
-- versions) it does not register (provider.FetchOptions.Orchestrations).
-- It used to look each one's instance row up (two B-tree searches per
-- skipped instance); the name and version are now copied onto the
-- scheduling row and into its order index, so the scan filters on the
-- index alone. '' (both) is an instance without a row, which every fetch
-- takes.
--
-- The copy is kept exact by triggers: a new scheduling row reads them from
-- the instance row, and creating, renaming (the first turn pins the
-- version, a ContinueAsNew may change it) or deleting an instance row
-- updates its scheduling row, whichever of the instance and its first
-- message is written first.
ALTER TABLE orchestrator_ready ADD COLUMN orchestration_name TEXT NOT NULL DEFAULT '';
ALTER TABLE orchestrator_ready ADD COLUMN orchestration_version TEXT NOT NULL DEFAULT '';
UPDATE orchestrator_ready
SET (orchestration_name, orchestration_version) =
    (SELECT i.orchestration_name, i.orchestration_version FROM instances AS i WHERE i.instance_id = orchestrator_ready.instance_id)
WHERE EXISTS (SELECT 1 FROM instances AS i WHERE i.instance_id = orchestrator_ready.instance_id);

DROP INDEX orchestrator_ready_order;
CREATE INDEX orchestrator_ready_order ON orchestrator_ready (ready_at, first_id, orchestration_name, orchestration_version);

-- 0002's trigger, with the instance's orchestration on a new row.
DROP TRIGGER orchestrator_ready_on_insert;
CREATE TRIGGER orchestrator_ready_on_insert AFTER INSERT ON orchestrator_queue
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

CREATE TRIGGER orchestrator_ready_on_instance_insert AFTER INSERT ON instances
BEGIN
    UPDATE orchestrator_ready
    SET orchestration_name = NEW.orchestration_name, orchestration_version = NEW.orchestration_version
    WHERE instance_id = NEW.instance_id;
END;

CREATE TRIGGER orchestrator_ready_on_instance_update AFTER UPDATE OF orchestration_name, orchestration_version ON instances
WHEN OLD.orchestration_name IS NOT NEW.orchestration_name OR OLD.orchestration_version IS NOT NEW.orchestration_version
BEGIN
    UPDATE orchestrator_ready
    SET orchestration_name = NEW.orchestration_name, orchestration_version = NEW.orchestration_version
    WHERE instance_id = NEW.instance_id;
END;

CREATE TRIGGER orchestrator_ready_on_instance_delete AFTER DELETE ON instances
BEGIN
    UPDATE orchestrator_ready SET orchestration_name = '', orchestration_version = ''
    WHERE instance_id = OLD.instance_id;
END;
