package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/turn"
	"github.com/duroxide/duroxide-go/provider"
)

// ActivityInfo describes the activity call a context belongs to.
type ActivityInfo struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
	Name        string
	SessionID   string
	// Attempt counts deliveries of this activity, from 1: every start of
	// the function, including runs cut short by a crash, a lost lock or a
	// shutdown, and every delivery to a runtime lacking the activity; not a
	// delivery given back unstarted because Shutdown was canceling
	// activities (see runActivity).
	Attempt int
	// WorkerID is the runtime's worker (session owner) ID.
	WorkerID string
	// Queue is the queue the activity was routed to ("" is the default).
	Queue string
	// HeartbeatTimeout is the attempt's heartbeat timeout (0: none).
	HeartbeatTimeout time.Duration

	hb *heartbeats
}

// Heartbeat records a heartbeat of the attempt with details (nil keeps
// the details recorded before): it renews the attempt's lock, stores the
// time and details on its worker row and restarts the heartbeat timeout.
func (a *ActivityInfo) Heartbeat(ctx context.Context, details json.RawMessage) error {
	if a == nil || a.hb == nil {
		return errors.New("heartbeat outside a running activity")
	}
	return a.hb.beat(ctx, details)
}

// HeartbeatDetails returns the latest heartbeat details of the call (see
// heartbeats.latest), nil when there are none.
func (a *ActivityInfo) HeartbeatDetails(ctx context.Context) (json.RawMessage, error) {
	if a == nil || a.hb == nil {
		return nil, nil
	}
	return a.hb.latest(ctx)
}

type activityInfoKey struct{}

// ActivityInfoFrom returns the ActivityInfo of an activity's context, or nil.
func ActivityInfoFrom(ctx context.Context) *ActivityInfo {
	info, _ := ctx.Value(activityInfoKey{}).(*ActivityInfo)
	return info
}

// fetchActivities locks up to max activities and starts each. A worker
// fetch never waits for a group's commit (sqlstore.WorkFetchLocks), so it
// ignores prompt.
func (r *Runtime) fetchActivities(max int, _ bool) (int, error) {
	names := r.activityNames()
	if names != nil && len(names) == 0 {
		return 0, nil // it registers no activity: nothing to fetch
	}
	leases, err := r.p.FetchWorkItems(r.io, provider.WorkFetchOptions{
		LockTimeout: r.o.WorkerLockTimeout, Max: max,
		Session:    &provider.SessionOptions{OwnerID: r.o.WorkerID, LockTimeout: r.o.SessionLockTimeout},
		Activities: names, Queues: r.o.Queues,
	})
	if err != nil {
		return 0, err
	}
	r.startActivities(leases)
	return len(leases), nil
}

// startActivities runs leased activities, each on a goroutine of its own
// (from r.pool), holding one worker slot each (taken by the caller).
func (r *Runtime) startActivities(leases []*provider.WorkItemLease) {
	for _, l := range leases {
		r.work.Add(1)
		r.pool.run(func() {
			defer func() { <-r.workSlots }()
			r.runActivity(l)
		})
	}
}

// reserveLeases marks for leasing (provider.TurnAck.LeaseFor) the
// activities of ack this runtime can run now: registered here, with no
// session or delay, one free worker slot each, which it takes. It returns
// how many slots it took; the caller runs the leases the ack returns and
// gives back the slots it did not use (releaseSlots).
func (r *Runtime) reserveLeases(ack *provider.TurnAck) int {
	select {
	case <-r.stopping:
		return 0
	default:
	}
	n := 0
	for _, m := range ack.WorkerItems {
		if m.SessionID != "" || !m.VisibleAt.IsZero() {
			continue
		}
		if _, ok := r.reg.Activity(m.Item.Name); !ok || !r.serves(m.Item.Queue) {
			continue
		}
		select {
		case r.workSlots <- struct{}{}:
		default:
			return n // no free slot: the rest go through the queue
		}
		m.Lease = true
		n++
	}
	if n > 0 {
		ack.LeaseFor = r.o.WorkerLockTimeout
	}
	return n
}

// reserveTurn asks ack to take the turn its completion starts
// (provider.WorkAck.TakeTurn) when an orchestration slot is free, which it
// takes: the runtime then runs that turn without fetching it. It reports
// whether it took a slot.
func (r *Runtime) reserveTurn(ack *provider.WorkAck) bool {
	if ack.Completion == nil {
		return false
	}
	// While other activities of the instance run here, their results
	// should reach one turn together: the last one takes it.
	r.mu.Lock()
	others := r.runningOf[ack.Completion.InstanceID]
	r.mu.Unlock()
	if others > 0 {
		return false
	}
	select {
	case <-r.stopping:
		return false
	default:
	}
	select {
	case r.orchSlots <- struct{}{}:
	default:
		return false
	}
	ack.TakeTurn = r.orchestrationFetch(0)
	if r.cache != nil {
		ack.TakeTurn.Cached = r.cache.position
	}
	return true
}

// releaseSlots gives back n worker slots.
func (r *Runtime) releaseSlots(n int) {
	for range n {
		<-r.workSlots
	}
}

// inflight is an activity whose function is running.
type inflight struct {
	key    activityKey
	lease  *provider.WorkItemLease
	cancel context.CancelCauseFunc
	rn     *renewer
	start  time.Time
	// abandoned is set, under Runtime.mu, when Shutdown gave the work
	// item back and stopped waiting for the function.
	abandoned bool
}

// runActivity runs one fetched activity and commits or gives back its
// work item. It marks it done in Runtime.work, unless Shutdown stopped
// waiting for it (see abandonRunning), which then did.
func (r *Runtime) runActivity(l *provider.WorkItemLease) {
	awaited := true // by Shutdown, through Runtime.work
	defer func() {
		if awaited {
			r.work.Done()
		}
	}()
	item := l.Item
	complete := func(out json.RawMessage, fail *history.ErrorDetails) *provider.OrchestratorMessage {
		return activityCompletion(l, out, fail, item.Data)
	}
	if l.AttemptCount > r.o.MaxAttempts {
		r.log.Error("activity poisoned", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID,
			logkey.Activity, item.Name, logkey.Attempt, l.AttemptCount)
		r.ackActivity(l, complete(nil, &history.ErrorDetails{Kind: history.ErrorPoison,
			Message: fmt.Sprintf("activity %s was delivered %d times (max attempts %d) without completing: its worker crashed, lost its lock or was shut down each time",
				item.Name, l.AttemptCount-1, r.o.MaxAttempts)}))
		return
	}
	fn, ok := r.reg.Activity(item.Name)
	if !ok {
		msg := fmt.Sprintf("activity %s is not registered on this runtime", item.Name)
		if turn.Unregistered(l.AttemptCount, r.o.MaxAttempts) {
			r.ackActivity(l, complete(nil, &history.ErrorDetails{Kind: history.ErrorConfiguration,
				Message: fmt.Sprintf("%s (looked up on %d deliveries)", msg, l.AttemptCount)}))
			return
		}
		r.log.Warn("activity not registered; will retry", logkey.Instance, l.InstanceID, logkey.Activity, item.Name, logkey.Attempt, l.AttemptCount)
		// The error on the row lets clients say why the activity waits
		// (Client.WaitingFor) and since when.
		abandon := provider.AbandonOptions{Delay: r.backoff(l.AttemptCount),
			Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: msg}}
		if err := r.p.AbandonWorkItem(r.io, l.LockToken, abandon); err != nil && !errors.Is(err, provider.ErrLockLost) {
			r.log.Warn("abandoning activity failed; its lock will expire", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID, logkey.Error, err)
		}
		return
	}

	ctx, cancel := context.WithCancelCause(r.acts)
	defer cancel(nil)
	info := &ActivityInfo{
		InstanceID: l.InstanceID, ExecutionID: l.ExecutionID, ActivityID: l.ActivityID,
		Name: item.Name, SessionID: l.SessionID, Attempt: l.AttemptCount, WorkerID: r.o.WorkerID,
		Queue: item.Queue, HeartbeatTimeout: time.Duration(item.HeartbeatTimeoutMs) * time.Millisecond,
	}
	ctx = context.WithValue(ctx, activityInfoKey{}, info)
	a := &inflight{key: activityKey{l.InstanceID, l.ExecutionID, l.ActivityID}, lease: l, cancel: cancel}
	if r.o.testHookActivityStart != nil {
		r.o.testHookActivityStart()
	}
	r.mu.Lock()
	if r.acts.Err() != nil {
		// Shutdown is canceling activities: do not start another. The
		// function never ran, so the delivery is not counted.
		r.mu.Unlock()
		r.giveBack(l, provider.AbandonOptions{IgnoreAttempt: true})
		return
	}
	a.start = time.Now()
	info.hb = r.startHeartbeats(l, cancel)
	a.rn = r.startRenewer(r.o.WorkerLockTimeout, func() error {
		return r.p.RenewWorkItemLock(r.io, l.LockToken, r.o.WorkerLockTimeout)
	}, func(error) { cancel(errActivityCanceled) })
	r.running[l.LockToken] = a
	r.runningOf[l.InstanceID]++
	r.mu.Unlock()

	spanCtx, endSpan := r.traceActivity(ctx, l)
	out, err := callActivity(spanCtx, fn, item.Input)
	endSpan(err)
	ran := time.Since(a.start)
	missed := info.hb.finish()

	a.rn.stop()
	r.mu.Lock()
	abandoned := a.abandoned
	if _, ok := r.running[l.LockToken]; ok { // not cut loose by abandonRunning
		delete(r.running, l.LockToken)
		r.forgetRunning(l.InstanceID)
	}
	if len(r.running) == 0 && r.drained != nil {
		close(r.drained)
		r.drained = nil
	}
	r.mu.Unlock()
	if abandoned {
		// Shutdown gave the work item back and no longer waits for this
		// goroutine; the store may be closed by now. Drop the result.
		awaited = false
		r.log.Debug("activity returned after shutdown; result discarded", logkey.Instance, l.InstanceID,
			logkey.ActivityID, l.ActivityID, logkey.Activity, item.Name)
		return
	}

	switch cause := context.Cause(ctx); {
	case missed:
		// The watchdog failed the attempt already (heartbeats.expire).
		r.metrics.observeActivity(ActivityFailed, ran)
		return
	case errors.Is(cause, errActivityCanceled):
		r.metrics.observeActivity(ActivityCanceled, ran)
		// The work item is gone, or back in the queue once its lost lock
		// expires: the fetch loop may not know of it (a leased item never
		// woke it), so it looks again.
		r.kickWorker()
		return
	case errors.Is(cause, ErrRuntimeStopped) && err != nil:
		// Shutdown cut it short: give it back to the queue. The function
		// ran, so the delivery counts.
		r.metrics.observeActivity(ActivityCanceled, ran)
		r.giveBack(l, provider.AbandonOptions{})
		return
	}
	if err != nil {
		r.metrics.observeActivity(ActivityFailed, ran)
		r.ackActivity(l, activityCompletion(l, nil, activityFailure(err), info.hb.known()))
		return
	}
	r.metrics.observeActivity(ActivityCompleted, ran)
	r.ackActivity(l, complete(out, nil))
}

// awaitActivities waits, at most grace in real time, for the running
// activities to return.
func (r *Runtime) awaitActivities(grace time.Duration) {
	r.mu.Lock()
	if len(r.running) == 0 || grace <= 0 {
		r.mu.Unlock()
		return
	}
	if r.drained == nil {
		r.drained = make(chan struct{})
	}
	drained := r.drained
	r.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// forgetRunning counts one running activity of instance less; r.mu held.
func (r *Runtime) forgetRunning(instance string) {
	if r.runningOf[instance]--; r.runningOf[instance] <= 0 {
		delete(r.runningOf, instance)
	}
}

// abandonRunning gives the work items of the running activities back to
// the queue and stops waiting for their functions (Shutdown's deadline
// and grace passed). Activities fetched but not started are not started
// (see runActivity): the activities' parent context is canceled.
func (r *Runtime) abandonRunning() {
	r.mu.Lock()
	cut := make([]*inflight, 0, len(r.running))
	for tok, a := range r.running {
		a.abandoned = true
		delete(r.running, tok)
		r.forgetRunning(a.lease.InstanceID)
		cut = append(cut, a)
	}
	r.mu.Unlock()
	for _, a := range cut {
		a.rn.stop()
		r.metrics.observeActivity(ActivityCanceled, time.Since(a.start))
		// The function started, so the delivery counts (its attempt count
		// is kept): it may have had side effects.
		r.giveBack(a.lease, provider.AbandonOptions{})
		r.work.Done()
	}
}

// giveBack returns an activity's work item to the queue.
func (r *Runtime) giveBack(l *provider.WorkItemLease, opts provider.AbandonOptions) {
	if err := r.p.AbandonWorkItem(r.io, l.LockToken, opts); err != nil && !errors.Is(err, provider.ErrLockLost) {
		r.log.Warn("returning activity to the queue failed; its lock will expire", logkey.Instance, l.InstanceID,
			logkey.ActivityID, l.ActivityID, logkey.Error, err)
	}
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
// When this runtime holds the instance's execution in its cache, it runs
// the turn the result causes first and commits both at once
// (provider.WorkAck.Then); otherwise, or if the instance changed
// meanwhile, the result is enqueued and its turn taken (WorkAck.TakeTurn)
// or left to a fetch.
func (r *Runtime) ackActivity(l *provider.WorkItemLease, completion *provider.OrchestratorMessage) {
	start := time.Now()
	ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completion}
	reserved := r.reserveTurn(ack)
	var f *fusedTurn
	if reserved {
		f = r.fuseTurn(ack, l.ExecutionID)
	}
	var res provider.WorkResult
	ackWork := func() (err error) {
		res, err = r.p.AckWorkItem(r.io, ack)
		return err
	}
	err := r.retry(ackWork)
	if f != nil {
		if err == nil && res.Then != nil {
			r.metrics.observeTurn(TurnCommitted, time.Since(start))
			<-r.orchSlots // before its activities start (see startTurn)
			f.committed(r, ack.Then, *res.Then)
			return
		}
		f.dropped(r)
		if err != nil && !errors.Is(err, provider.ErrLockLost) {
			// The turn may be what failed: commit the result alone.
			ack.Then, ack.ThenAfter = nil, 0
			err = r.retry(ackWork)
		}
	}
	if err == nil && res.Turn != nil {
		r.startTurn(res.Turn, time.Now()) // it keeps the reserved slot
		return
	}
	if reserved {
		<-r.orchSlots
	}
	if err == nil {
		return
	}
	if errors.Is(err, provider.ErrLockLost) {
		r.log.Info("activity result discarded: its lock was lost", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID)
		r.kickWorker() // the item may be back in the queue
		return
	}
	r.log.Error("committing activity result failed; it will run again", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID, logkey.Error, err)
	if aerr := r.p.AbandonWorkItem(r.io, l.LockToken, provider.AbandonOptions{Delay: 100 * time.Millisecond}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
		r.log.Warn("abandoning activity failed; its lock will expire", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID, logkey.Error, aerr)
	}
}

// cancelLocal cancels an activity running in this process.
func (r *Runtime) cancelLocal(k activityKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.running {
		if a.key == k {
			a.cancel(errActivityCanceled)
		}
	}
}

// fusedTurn is a turn run ahead of its commit (provider.WorkAck.Then).
type fusedTurn struct {
	instance      string
	orchestration string // for the finished counts
	d             turn.Decision
	reserved      int // worker slots reserved for its leases
	endSpan       func(error)
}

// fuseTurn runs the turn that ack's completion causes on the cached
// execution of its instance, if the cache holds execution executionID,
// and sets it as ack.Then. The caller holds an orchestration slot. The
// execution is out of the cache until the ack settles; if the store does
// not apply the turn, it is dropped (it ran ahead of the store).
func (r *Runtime) fuseTurn(ack *provider.WorkAck, executionID int64) *fusedTurn {
	if r.cache == nil {
		return nil
	}
	inst := ack.Completion.InstanceID
	exec, last, ok := r.cache.position(inst)
	if !ok || exec != executionID || last < 1 {
		return nil
	}
	x := r.cache.take(inst, exec, false)
	if x == nil {
		return nil
	}
	if x.OpenActivities() > 1 {
		// Another activity's result has yet to reach the execution: its
		// worker row or its completion is in the store, which would refuse
		// the turn (the instance is not quiet), and a refused turn costs the
		// cached execution. The result is queued, for one turn with the
		// others'.
		r.cache.put(x)
		return nil
	}
	h := x.History()
	if len(h) == 0 || h[0].Kind != history.OrchestrationStarted {
		x.Close()
		return nil
	}
	it := &provider.OrchestrationItem{
		InstanceID: inst, AttemptCount: 1, History: h, Messages: []history.WorkItem{ack.Completion.Item},
		Instance: &provider.InstanceMeta{OrchestrationName: h[0].Name, OrchestrationVersion: h[0].Version,
			Status: provider.StatusRunning, CurrentExecutionID: exec},
	}
	root, tp, endSpan := r.traceTurn(it)
	d := turn.Decide(turn.Input{
		Item: it, Cached: x, Registry: r.reg, Now: r.clock.Now(),
		Policy: turn.Policy{MaxAttempts: r.o.MaxAttempts, FailOnNondeterminism: r.o.FailOnNondeterminism,
			Backoff: r.backoff, Logger: r.log, Limits: r.o.Limits, CancelGrace: r.o.CancelGrace},
	})
	if d.Abandon != nil || d.Ack == nil {
		endSpan(nil)
		// Not a plain turn (nondeterminism, say): leave it to the taken or
		// fetched turn, which replays from the store.
		x.Close()
		if d.Exec != nil {
			d.Exec.Close()
		}
		return nil
	}
	if d.Exec != x {
		x.Close()
	}
	stampTrace(d.Ack, root, tp)
	f := &fusedTurn{instance: inst, orchestration: orchestrationOf(it, d.Ack), d: d, reserved: r.reserveLeases(d.Ack), endSpan: endSpan}
	ack.Then, ack.ThenAfter = d.Ack, last
	return f
}

// committed finishes a fused turn the store applied: caches its
// execution, runs the activities it leased here, cancels what it canceled.
func (f *fusedTurn) committed(r *Runtime, ack *provider.TurnAck, res provider.TurnResult) {
	f.endSpan(nil)
	if l := f.d.Log; l != nil {
		r.log.LogAttrs(r.io, l.Level, l.Msg, append([]slog.Attr{slog.String(logkey.Instance, f.instance)}, l.Attrs...)...)
	}
	r.metrics.observeFinished(ack.Metadata.Status, f.orchestration)
	if f.d.Exec != nil {
		r.cache.put(f.d.Exec)
	}
	r.releaseSlots(f.reserved - len(res.Leased))
	r.startActivities(res.Leased)
	for _, a := range f.d.CancelLocal {
		r.cancelLocal(activityKey{a.InstanceID, a.ExecutionID, a.ActivityID})
	}
}

// dropped gives up a fused turn the store did not apply.
func (f *fusedTurn) dropped(r *Runtime) {
	f.endSpan(nil)
	if f.d.Exec != nil {
		f.d.Exec.Close()
	}
	r.releaseSlots(f.reserved)
}
