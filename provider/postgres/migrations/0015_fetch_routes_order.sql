-- 0015: fetches read their rows in order, per route.
--
-- A worker fetch takes the visible rows of the activity names and queues
-- it serves, oldest first (by id), up to its limit. It used to read every
-- visible row (a range of worker_queue_visible) and sort them by id before
-- its limit: each fetch cost as much as the backlog, whatever its limit.
-- It now reads, for each queue and activity name it serves, the rows of
-- this index in id order, stopping at the limit; visible_at, the last
-- column, is checked in the index, so the rows ahead that are not
-- visible (leased, or delayed) are stepped over without reading them.
-- Rows of other names and queues are never read: a node that serves only
-- some names finds its rows at once behind any backlog of others.
CREATE INDEX worker_queue_route ON worker_queue (queue, activity_name, id, visible_at);
-- Rows without an activity name (their work item names none), which every
-- fetch serves, in id order per queue (IS NULL is not an equality the
-- planner orders by in worker_queue_route). Empty in practice.
CREATE INDEX worker_queue_route_unnamed ON worker_queue (queue, id, visible_at) WHERE activity_name IS NULL;

-- A fetch of turns that runs only some orchestrations reads, for each,
-- the ready instances of its name in the order they became ready (an
-- orchestration pinned to versions filters its name's range by version),
-- instead of every ready instance, filtered. Instances without a name are
-- the range of ''.
CREATE INDEX orchestrator_ready_name ON orchestrator_ready (orchestration_name, ready_at, first_id);
