-- 0010: routing turns by orchestration name.
--
-- A runtime fetches only the turns of the orchestrations it registers
-- (provider.FetchOptions.Orchestrations) and announces their names with
-- its routes. NULL (routes of a runtime that announces no orchestration
-- list, or of an earlier release) serves every orchestration.
ALTER TABLE worker_routes ADD COLUMN orchestrations TEXT[];
