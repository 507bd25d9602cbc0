-- 0004: the earliest time the worker queue can next yield a row
-- (provider.Waker), as one index lookup: min(visible_at). A fetch moves
-- visible_at to locked_until, so this covers both delayed rows and the
-- expiry of locks held on rows.
--
-- This gives up what 0001 kept for the worker queue (no index holds a
-- column a fetch changes): locking, renewing or abandoning a row now also
-- moves one entry of this index. In exchange an idle dispatcher sleeps until
-- the next row is due instead of polling.
CREATE INDEX worker_queue_visible ON worker_queue (visible_at);
