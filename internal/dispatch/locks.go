package dispatch

import "github.com/duroxide/duroxide-go/internal/logkey"

// maintainLocks periodically frees expired and stale execution locks,
// handing each to its oldest queued start, and drops idempotency keys past
// their retention (provider.LockStore.CleanupExecutionLocks). Every runtime
// on a store runs it; the store serializes the sweeps.
func (r *Runtime) maintainLocks() {
	defer r.loops.Done()
	for r.sleep(r.o.LockCleanupInterval, nil) {
		res, err := r.p.CleanupExecutionLocks(r.io)
		if err != nil {
			r.log.Warn("cleaning up execution locks failed", logkey.Error, err)
			continue
		}
		if res.Locks > 0 || res.IdempotencyKeys > 0 {
			r.log.Info("cleaned up execution locks", logkey.Locks, res.Locks, logkey.Promoted, res.Promoted,
				logkey.IdempotencyKeys, res.IdempotencyKeys)
		}
	}
}
