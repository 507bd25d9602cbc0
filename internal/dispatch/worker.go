package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// ActivityInfo describes the activity call a context belongs to.
type ActivityInfo struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
	Name        string
	SessionID   string
	// Attempt counts deliveries of this activity, from 1.
	Attempt int
	// WorkerID is the runtime's worker (session owner) ID.
	WorkerID string
}

type activityInfoKey struct{}

// ActivityInfoFrom returns the ActivityInfo of an activity's context, or nil.
func ActivityInfoFrom(ctx context.Context) *ActivityInfo {
	info, _ := ctx.Value(activityInfoKey{}).(*ActivityInfo)
	return info
}

// fetchActivities locks up to max activities and starts each.
func (r *Runtime) fetchActivities(max int) (int, error) {
	leases, err := r.p.FetchWorkItems(r.io, provider.WorkFetchOptions{
		LockTimeout: r.o.WorkerLockTimeout, Max: max,
		Session: &provider.SessionOptions{OwnerID: r.o.WorkerID, LockTimeout: r.o.SessionLockTimeout},
	})
	if err != nil {
		return 0, err
	}
	for _, l := range leases {
		r.work.Add(1)
		go func() {
			defer func() {
				<-r.workSlots
				r.work.Done()
			}()
			r.runActivity(l)
		}()
	}
	return len(leases), nil
}

func (r *Runtime) runActivity(l *provider.WorkItemLease) {
	item := l.Item
	complete := func(out json.RawMessage, fail *history.ErrorDetails) *provider.OrchestratorMessage {
		w := history.WorkItem{InstanceID: l.InstanceID, ExecutionID: l.ExecutionID, ID: l.ActivityID}
		if fail != nil {
			w.Kind, w.Error = history.WorkActivityFailed, fail
		} else {
			w.Kind, w.Output = history.WorkActivityCompleted, out
		}
		return &provider.OrchestratorMessage{InstanceID: l.InstanceID, Item: w}
	}
	if l.AttemptCount > r.o.MaxAttempts {
		r.log.Error("activity poisoned", "instance", l.InstanceID, "activity", item.Name, "attempts", l.AttemptCount)
		r.ackActivity(l, complete(nil, &history.ErrorDetails{Kind: history.ErrorPoison,
			Message: fmt.Sprintf("activity %s was delivered %d times (max attempts %d) without completing: its worker crashed or lost its lock each time",
				item.Name, l.AttemptCount-1, r.o.MaxAttempts)}))
		return
	}
	fn, ok := r.reg.Activity(item.Name)
	if !ok {
		msg := fmt.Sprintf("activity %s is not registered on this runtime", item.Name)
		if l.AttemptCount >= r.o.MaxAttempts {
			r.ackActivity(l, complete(nil, &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: msg}))
			return
		}
		r.log.Warn("activity not registered; will retry", "instance", l.InstanceID, "activity", item.Name, "attempt", l.AttemptCount)
		if err := r.p.AbandonWorkItem(r.io, l.LockToken, provider.AbandonOptions{Delay: r.backoff(l.AttemptCount)}); err != nil && !errors.Is(err, provider.ErrLockLost) {
			r.log.Warn("abandoning activity failed; its lock will expire", "error", err)
		}
		// The fetch loop sleeps on a deadline computed before the abandon;
		// wake it so it sleeps until the retry is due instead.
		r.hub.WakeWorker()
		return
	}

	key := activityKey{l.InstanceID, l.ExecutionID, l.ActivityID}
	ctx, cancel := context.WithCancelCause(r.acts)
	defer cancel(nil)
	ctx = context.WithValue(ctx, activityInfoKey{}, &ActivityInfo{
		InstanceID: l.InstanceID, ExecutionID: l.ExecutionID, ActivityID: l.ActivityID,
		Name: item.Name, SessionID: l.SessionID, Attempt: l.AttemptCount, WorkerID: r.o.WorkerID,
	})
	r.mu.Lock()
	r.running[key] = cancel
	r.mu.Unlock()
	rn := r.startRenewer(r.o.WorkerLockTimeout, func() error {
		return r.p.RenewWorkItemLock(r.io, l.LockToken, r.o.WorkerLockTimeout)
	}, func(error) { cancel(errActivityCanceled) })

	start := time.Now()
	out, err := callActivity(ctx, fn, item.Input)
	ran := time.Since(start)

	rn.stop()
	r.mu.Lock()
	delete(r.running, key)
	r.mu.Unlock()

	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errActivityCanceled):
		r.metrics.observeActivity(ActivityCanceled, ran)
		return // the work item is gone; nobody wants the result
	case errors.Is(cause, ErrStopped):
		r.metrics.observeActivity(ActivityCanceled, ran)
		// Shutdown cut it short: give it back to the queue untouched.
		if aerr := r.p.AbandonWorkItem(r.io, l.LockToken, provider.AbandonOptions{IgnoreAttempt: true}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
			r.log.Warn("returning activity to the queue failed; its lock will expire", "error", aerr)
		}
		return
	}
	if err != nil {
		r.metrics.observeActivity(ActivityFailed, ran)
		r.ackActivity(l, complete(nil, activityFailure(err)))
		return
	}
	r.metrics.observeActivity(ActivityCompleted, ran)
	r.ackActivity(l, complete(out, nil))
}

// callActivity runs fn, turning a panic into an error.
func callActivity(ctx context.Context, fn ActivityFunc, input json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{value: p, stack: string(debug.Stack())}
		}
	}()
	return fn(ctx, input)
}

type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("activity panicked: %v", p.value) }

// activityFailure shapes an activity error for history.
func activityFailure(err error) *history.ErrorDetails {
	var pe *panicError
	if errors.As(err, &pe) {
		return &history.ErrorDetails{Kind: history.ErrorApplication, Message: pe.Error(), Type: "panic", Details: pe.stack}
	}
	var de interface{ ErrorDetails() *history.ErrorDetails }
	if errors.As(err, &de) && de.ErrorDetails() != nil {
		return de.ErrorDetails()
	}
	return &history.ErrorDetails{Kind: history.ErrorApplication, Message: err.Error(), Type: fmt.Sprintf("%T", err)}
}

// ackActivity commits an activity's result, retrying transient failures.
func (r *Runtime) ackActivity(l *provider.WorkItemLease, completion *provider.OrchestratorMessage) {
	err := r.retry(func() error {
		return provider.AckWorkItem(r.io, r.p, &provider.WorkAck{LockToken: l.LockToken, Completion: completion})
	})
	if err == nil {
		r.hub.WakeOrchestrator()
		return
	}
	if errors.Is(err, provider.ErrLockLost) {
		r.log.Info("activity result discarded: its lock was lost", "instance", l.InstanceID, "activityId", l.ActivityID)
		return
	}
	r.log.Error("committing activity result failed; it will run again", "instance", l.InstanceID, "activityId", l.ActivityID, "error", err)
	if aerr := r.p.AbandonWorkItem(r.io, l.LockToken, provider.AbandonOptions{Delay: 100 * time.Millisecond}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
		r.log.Warn("abandoning activity failed; its lock will expire", "error", aerr)
	}
}

// cancelLocal cancels an activity running in this process.
func (r *Runtime) cancelLocal(k activityKey) {
	r.mu.Lock()
	cancel := r.running[k]
	r.mu.Unlock()
	if cancel != nil {
		cancel(errActivityCanceled)
	}
}
