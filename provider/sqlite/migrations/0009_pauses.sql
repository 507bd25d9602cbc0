-- 0009: paused instances (provider.Pauser).
--
-- A pause is the instance's lock row with a lock that never expires (the
-- token names the pause), so every path that takes a turn skips the
-- instance and orchestrator_ready keeps it out of the ready range. Who
-- paused it and why are kept on that row; locked_at is when.
ALTER TABLE instance_locks ADD COLUMN pause_reason TEXT;
ALTER TABLE instance_locks ADD COLUMN paused_by TEXT;
