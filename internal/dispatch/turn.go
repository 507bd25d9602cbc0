package dispatch

import (
	"errors"
	"log/slog"
	"time"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/internal/turn"
	"github.com/duroxide/duroxide-go/provider"
)

// fetchTurns locks up to max instances and starts a turn for each. The
// fetch tells the store what the cache holds, so it loads only newer
// history, which orchestrations this runtime registers, so it locks no
// instance of another, and whether it is prompt (see fetchLoop).
func (r *Runtime) fetchTurns(max int, prompt bool) (int, error) {
	start := time.Now() // real time, even under a fake clock: metrics measure work
	opts := *r.orchestrationFetch(max)
	opts.Prompt = prompt
	if prompt && r.holding.Load() < int64(cap(r.orchSlots)/4) {
		opts.Ahead = fetchAhead
	}
	if r.cache != nil {
		opts.Cached = r.cache.position
	}
	items, err := r.p.FetchOrchestrationItems(r.io, opts)
	if err != nil {
		return 0, err
	}
	for _, it := range items {
		r.startTurn(it, start)
	}
	return len(items), nil
}

// startTurn runs the turn of it on a goroutine of its own (from r.pool),
// holding one orchestration slot (taken by the caller). start is when its
// fetch began.
func (r *Runtime) startTurn(it *provider.OrchestrationItem, start time.Time) {
	r.work.Add(1)
	r.pool.run(func() {
		held := true
		defer func() {
			if held {
				<-r.orchSlots
			}
			r.work.Done()
		}()
		res, leased := r.runTurn(it)
		r.metrics.observeTurn(res, time.Since(start))
		// Free the slot before the activities start: when one ends, its
		// ack may want a slot for the turn it causes.
		held = false
		<-r.orchSlots
		r.startActivities(leased)
	})
}

// runTurn runs a turn and commits or abandons it, and returns the
// activities its ack leased to this runtime, for the caller to start. The
// store notifies the dispatchers and waiters of what the commit changed.
func (r *Runtime) runTurn(it *provider.OrchestrationItem) (TurnResult, []*provider.WorkItemLease) {
	return r.runTurnWith(it, "")
}

// runTurnWith is runTurn with turn.Policy.Unserved set to unserved.
func (r *Runtime) runTurnWith(it *provider.OrchestrationItem, unserved string) (TurnResult, []*provider.WorkItemLease) {
	rn := r.startRenewer(r.o.OrchestratorLockTimeout, func() error {
		return r.p.RenewOrchestrationItemLock(r.io, it.LockToken, r.o.OrchestratorLockTimeout)
	}, func(error) {})
	if !r.holdUntilDue(it) {
		rn.stop()
		// Stopping: give it back, visible again when it comes due.
		delay := max(it.DueAt.Sub(r.clock.Now()), 0)
		if err := r.p.AbandonOrchestrationItem(r.io, it.LockToken, provider.AbandonOptions{Delay: delay, IgnoreAttempt: true}); err != nil && !errors.Is(err, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", logkey.Instance, it.InstanceID, logkey.Error, err)
		}
		return TurnAbandoned, nil
	}
	cached, err := r.withHistory(it)
	if err != nil {
		rn.stop()
		r.log.Warn("reading history failed; the turn will be retried", logkey.Instance, it.InstanceID, logkey.Error, err)
		if aerr := r.p.AbandonOrchestrationItem(r.io, it.LockToken, provider.AbandonOptions{Delay: 50 * time.Millisecond, IgnoreAttempt: true}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", logkey.Instance, it.InstanceID, logkey.Error, aerr)
		}
		return TurnAbandoned, nil
	}
	root, tp, endSpan := r.traceTurn(it)
	defer endSpan(nil)
	r.mu.Lock()
	parks := r.parked[it.InstanceID]
	r.mu.Unlock()
	d := turn.Decide(turn.Input{
		Item: it, Cached: cached, Registry: r.reg, Now: r.clock.Now(),
		Policy: turn.Policy{MaxAttempts: r.o.MaxAttempts, FailOnNondeterminism: r.o.FailOnNondeterminism,
			Backoff: r.backoff, Parks: parks, Logger: r.log, Limits: r.o.Limits, CancelGrace: r.o.CancelGrace, Unserved: unserved},
	})
	rn.stop()
	if l := d.Log; l != nil {
		r.log.LogAttrs(r.io, l.Level, l.Msg, append([]slog.Attr{slog.String(logkey.Instance, it.InstanceID)}, l.Attrs...)...)
	}
	if d.Abandon != nil {
		if d.Parked {
			r.mu.Lock()
			r.parked[it.InstanceID]++
			r.mu.Unlock()
		}
		if err := r.p.AbandonOrchestrationItem(r.io, it.LockToken, *d.Abandon); err != nil && !errors.Is(err, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", logkey.Instance, it.InstanceID, logkey.Error, err)
		}
		return TurnAbandoned, nil
	}
	stampTrace(d.Ack, root, tp)
	reserved := r.reserveLeases(d.Ack)
	h := r.cache.hold(d.Exec)
	res, err := r.ackTurn(d.Ack)
	if err != nil {
		r.releaseSlots(reserved)
		r.cache.settle(h, d.Exec, false)
		if errors.Is(err, provider.ErrLockLost) {
			r.log.Info("turn lost its lock; another node will redo it", logkey.Instance, it.InstanceID)
			return TurnLockLost, nil
		}
		r.log.Error("committing turn failed; it will be retried", logkey.Instance, it.InstanceID, logkey.Error, err)
		if aerr := r.p.AbandonOrchestrationItem(r.io, it.LockToken, provider.AbandonOptions{Delay: 50 * time.Millisecond}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", logkey.Instance, it.InstanceID, logkey.Error, aerr)
		}
		return TurnCommitFailed, nil
	}
	r.cache.settle(h, d.Exec, true)
	r.mu.Lock()
	delete(r.parked, it.InstanceID)
	r.mu.Unlock()
	r.metrics.observeFinished(d.Ack.Metadata.Status, orchestrationOf(it, d.Ack))
	// What the ack leased to this runtime runs at once, sparing a fetch.
	r.releaseSlots(reserved - len(res.Leased))
	for _, a := range d.CancelLocal {
		r.cancelLocal(activityKey{a.InstanceID, a.ExecutionID, a.ActivityID})
	}
	return TurnCommitted, res.Leased
}

// holdUntilDue waits until the clock reads it.DueAt, for an item fetched
// before its messages came due (see fetchAhead): the turn is never
// decided before then. It reports false if the runtime stops first.
func (r *Runtime) holdUntilDue(it *provider.OrchestrationItem) bool {
	if it.DueAt.IsZero() {
		return true
	}
	r.holding.Add(1)
	defer r.holding.Add(-1)
	return r.sleepUntil(it.DueAt, nil, nil)
}

// withHistory completes it.History when the fetch left out what the cache
// holds, and returns the cached execution of the instance's current
// execution, taken out of the cache (nil: none, and the turn replays).
// When the cache no longer holds what the fetch assumed (evicted since, or
// another node ran turns of the instance meanwhile), the whole history is
// read again; the instance lock keeps it stable.
func (r *Runtime) withHistory(it *provider.OrchestrationItem) (*replay.Execution, error) {
	if it.Instance == nil || it.Instance.CurrentExecutionID == 0 {
		return nil, nil
	}
	x := r.cache.take(it.InstanceID, it.Instance.CurrentExecutionID, true)
	if it.HistoryAfter == 0 {
		return x, nil // the engine checks x against the history (replay.ErrStale)
	}
	if x != nil && x.LastEventID() == it.HistoryAfter && len(it.History) == 0 {
		it.History, it.HistoryAfter = x.History(), 0
		return x, nil
	}
	if x != nil {
		x.Close()
	}
	h, err := r.p.ReadHistory(r.io, it.InstanceID, it.Instance.CurrentExecutionID)
	switch {
	case errors.Is(err, provider.ErrCorruptData):
		it.History, it.HistoryAfter, it.HistoryError = nil, 0, err
		return nil, nil
	case err != nil:
		return nil, err
	}
	it.History, it.HistoryAfter = h, 0
	return nil, nil
}

// ackTurn commits a turn, retrying transient failures.
func (r *Runtime) ackTurn(ack *provider.TurnAck) (res provider.TurnResult, err error) {
	err = r.retry(func() error {
		res, err = r.p.AckOrchestrationItem(r.io, ack)
		return err
	})
	return res, err
}

// orchestrationOf is the name of the orchestration a committed turn ran:
// the ack's when it sets it (a start), else the instance row's.
func orchestrationOf(it *provider.OrchestrationItem, ack *provider.TurnAck) string {
	if ack.Metadata.OrchestrationName != "" {
		return ack.Metadata.OrchestrationName
	}
	if it.Instance != nil {
		return it.Instance.OrchestrationName
	}
	return ""
}
