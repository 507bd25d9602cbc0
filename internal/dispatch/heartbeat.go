package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

// ErrNotSupported is returned by a heartbeat on a store that keeps none
// (no provider.Heartbeater). The root package exports it as
// duroxide.ErrNotSupported.
var ErrNotSupported = errors.New("not supported by this release")

// errHeartbeatMissed is the cause given to an attempt that did not
// heartbeat within its heartbeat timeout.
var errHeartbeatMissed = errors.New("activity missed its heartbeat")

// heartbeats is the heartbeat state of one running attempt.
type heartbeats struct {
	r       *Runtime
	lease   *provider.WorkItemLease
	timeout time.Duration // 0: no heartbeat timeout
	cancel  context.CancelCauseFunc

	mu       sync.Mutex
	details  json.RawMessage // the latest known details
	own      bool            // details are this attempt's own
	loaded   bool            // the row's stored details were read
	watchdog clockwork.Timer
	finished bool // the function returned
	missed   bool // the watchdog fired first
}

// startHeartbeats prepares the heartbeat state of an attempt and, when
// its work item has a heartbeat timeout, starts the watchdog that fails
// the attempt when no heartbeat comes in time.
func (r *Runtime) startHeartbeats(l *provider.WorkItemLease, cancel context.CancelCauseFunc) *heartbeats {
	hb := &heartbeats{r: r, lease: l, cancel: cancel, details: l.Item.Data,
		timeout: time.Duration(l.Item.HeartbeatTimeoutMs) * time.Millisecond}
	if hb.timeout > 0 {
		hb.mu.Lock()
		hb.watchdog = r.clock.AfterFunc(hb.timeout, hb.expire)
		hb.mu.Unlock()
	}
	return hb
}

// beat records a heartbeat: in the store (renewing the lock), then
// restarts the watchdog.
func (hb *heartbeats) beat(ctx context.Context, details json.RawMessage) error {
	store, ok := hb.r.p.(provider.Heartbeater)
	if !ok {
		return fmt.Errorf("%w: the store keeps no activity heartbeats", ErrNotSupported)
	}
	if err := store.HeartbeatWorkItem(ctx, hb.lease.LockToken, hb.r.o.WorkerLockTimeout, details); err != nil {
		if errors.Is(err, provider.ErrLockLost) {
			hb.cancel(errActivityCanceled)
		}
		return fmt.Errorf("recording heartbeat: %w", err)
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if details != nil {
		hb.details, hb.own = details, true
	}
	if hb.watchdog != nil && !hb.missed && !hb.finished {
		hb.watchdog.Reset(hb.timeout)
	}
	return nil
}

// latest returns the latest details: this attempt's own, else those
// recorded on the row by an earlier delivery (read once from the store),
// else those the previous attempt of the call handed over.
func (hb *heartbeats) latest(ctx context.Context) (json.RawMessage, error) {
	hb.mu.Lock()
	if hb.own || hb.loaded {
		d := hb.details
		hb.mu.Unlock()
		return d, nil
	}
	hb.mu.Unlock()
	var stored json.RawMessage
	if store, ok := hb.r.p.(provider.Heartbeater); ok {
		h, err := store.WorkItemHeartbeat(ctx, hb.lease.LockToken)
		if err != nil {
			return nil, fmt.Errorf("reading heartbeat details: %w", err)
		}
		stored = h.Details
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if !hb.own {
		hb.loaded = true
		if stored != nil {
			hb.details = stored
		}
	}
	return hb.details, nil
}

// known returns the latest details without reading the store.
func (hb *heartbeats) known() json.RawMessage {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.details
}

// finish marks the function returned and stops the watchdog. It reports
// whether the watchdog fired first: the attempt then failed already.
func (hb *heartbeats) finish() (missed bool) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.finished = true
	if hb.watchdog != nil {
		hb.watchdog.Stop()
	}
	return hb.missed
}

// expire fails the attempt when no heartbeat came within the timeout: it
// cancels the function's context and commits the failure at once (kind
// "timeout", with the latest details for the next attempt), whether or
// not the function returns.
func (hb *heartbeats) expire() {
	r := hb.r
	hb.mu.Lock()
	if hb.finished || hb.missed {
		hb.mu.Unlock()
		return
	}
	hb.missed = true
	// The attempt's goroutine still counts in r.work (it has not
	// finished), so Shutdown waits for this ack too.
	r.work.Add(1)
	details := hb.details
	hb.mu.Unlock()
	defer r.work.Done()
	hb.cancel(errHeartbeatMissed)
	l := hb.lease
	r.log.Warn("activity missed its heartbeat; failing the attempt", logkey.Instance, l.InstanceID,
		logkey.ActivityID, l.ActivityID, logkey.Activity, l.Item.Name)
	fail := &history.ErrorDetails{Kind: history.ErrorTimeout,
		Message: fmt.Sprintf("activity %s sent no heartbeat for %s (heartbeat timeout)", l.Item.Name, hb.timeout)}
	r.ackActivity(l, activityCompletion(l, nil, fail, details))
}

// activityCompletion is the orchestrator message that reports an
// attempt's result (fail nil) or failure, with its latest heartbeat
// details on a failure.
func activityCompletion(l *provider.WorkItemLease, out json.RawMessage, fail *history.ErrorDetails, details json.RawMessage) *provider.OrchestratorMessage {
	w := history.WorkItem{InstanceID: l.InstanceID, ExecutionID: l.ExecutionID, ID: l.ActivityID}
	if fail != nil {
		w.Kind, w.Error, w.Data = history.WorkActivityFailed, fail, details
	} else {
		w.Kind, w.Output = history.WorkActivityCompleted, out
	}
	return &provider.OrchestratorMessage{InstanceID: l.InstanceID, Item: w}
}
