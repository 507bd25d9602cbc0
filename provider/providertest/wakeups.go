package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// wakeupCases cover provider.Waker: NextVisible tells an idle dispatcher
// exactly when a fetch of a queue may next find something (a message
// coming due, a lock on queued work expiring), so it sleeps until then
// instead of polling. Where the answer is a future time, the cases also
// check it against the fetch itself: nothing a millisecond before, work at
// that instant. Skipped for stores that do not implement Waker.
var wakeupCases = []testCase{
	{name: "empty_store_next_visible_is_zero", run: func(e *env) {
		e.waker()
		e.wantEmpty(provider.QueueOrchestrator)
		e.wantEmpty(provider.QueueWorker)
	}},

	{name: "orchestrator_visible_message_is_due_now_and_stays_fetchable", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		e.wantDueNow(provider.QueueOrchestrator)
		e.wantDueNow(provider.QueueOrchestrator) // a read: asking twice changes nothing
		e.wantEmpty(provider.QueueWorker)
		e.fetchFor("a")
	}},

	{name: "orchestrator_delayed_messages_due_at_earliest_visible_at", run: func(e *env) {
		e.waker()
		e.createInstance("a")
		e.createInstance("b")
		now := e.clock.Now()
		e.enqueue(timerMsg("a", 2, now.Add(20*time.Second)), timerMsg("b", 2, now.Add(10*time.Second)))
		e.wantNext(provider.QueueOrchestrator, now.Add(10*time.Second))
		e.dueExactly(provider.QueueOrchestrator, now.Add(10*time.Second))
		e.fetchFor("b")
		// b is locked now, and its lock outlasts a's timer.
		e.wantNext(provider.QueueOrchestrator, now.Add(20*time.Second))
	}},

	{name: "orchestrator_locked_instance_due_at_lock_expiry", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		// The turn's own messages are queued until acked: they come back
		// when the lock expires.
		e.wantNext(provider.QueueOrchestrator, it.LockedUntil)
		// A late arrival is visible but waits for the lock.
		e.enqueue(eventMsg("a", "late", 1))
		e.wantNext(provider.QueueOrchestrator, it.LockedUntil)
		e.dueExactly(provider.QueueOrchestrator, it.LockedUntil)
		mustEqual(e.t, "instance refetched after expiry", e.fetch().InstanceID, "a")
	}},

	{name: "orchestrator_lock_renewal_moves_next_visible", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.clock.Advance(10 * time.Second)
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, time.Minute), "renew")
		e.wantNext(provider.QueueOrchestrator, e.clock.Now().Add(time.Minute))
	}},

	{name: "orchestrator_other_instance_due_before_lock_expiry", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		e.fetchFor("a")
		e.createInstance("b")
		due := e.clock.Now().Add(5 * time.Second)
		e.enqueue(timerMsg("b", 2, due))
		e.wantNext(provider.QueueOrchestrator, due)
	}},

	{name: "orchestrator_ack_of_everything_is_zero", run: func(e *env) {
		e.waker()
		e.createInstance("a")
		e.wantEmpty(provider.QueueOrchestrator)
	}},

	{name: "orchestrator_late_arrival_due_now_after_ack", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.enqueue(eventMsg("a", "late", 1))
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta()})
		e.wantDueNow(provider.QueueOrchestrator)
	}},

	{name: "orchestrator_ack_scheduling_timer_due_at_timer", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		fire := e.clock.Now().Add(time.Hour)
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta(),
			OrchestratorItems: []*provider.OrchestratorMessage{timerMsg("a", 2, fire)}})
		e.wantNext(provider.QueueOrchestrator, fire)
		e.wantEmpty(provider.QueueWorker)
	}},

	{name: "orchestrator_abandon_with_delay_due_after_delay", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: 5 * time.Second}), "abandon")
		due := e.clock.Now().Add(5 * time.Second)
		e.wantNext(provider.QueueOrchestrator, due)
		e.dueExactly(provider.QueueOrchestrator, due)
	}},

	{name: "orchestrator_abandon_without_delay_due_now", run: func(e *env) {
		e.waker()
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		e.wantDueNow(provider.QueueOrchestrator)
	}},

	{name: "worker_visible_item_is_due_now_and_stays_fetchable", run: func(e *env) {
		e.waker()
		e.enqueueWork(activityMsg("a", 1, ""))
		e.wantDueNow(provider.QueueWorker)
		e.wantEmpty(provider.QueueOrchestrator)
		e.fetchWork()
	}},

	{name: "worker_delayed_items_due_at_earliest_visible_at", run: func(e *env) {
		e.waker()
		now := e.clock.Now()
		late, soon := activityMsg("a", 1, ""), activityMsg("a", 2, "")
		late.VisibleAt, soon.VisibleAt = now.Add(20*time.Second), now.Add(15*time.Second)
		e.enqueueWork(late, soon)
		e.wantNext(provider.QueueWorker, soon.VisibleAt)
		e.dueExactly(provider.QueueWorker, soon.VisibleAt)
		mustEqual(e.t, "activity due first", e.fetchWork().ActivityID, 2)
		e.wantNext(provider.QueueWorker, late.VisibleAt)
	}},

	{name: "worker_locked_item_due_at_lock_expiry", run: func(e *env) {
		e.waker()
		e.enqueueWork(activityMsg("a", 1, ""))
		w := e.fetchWork()
		e.wantNext(provider.QueueWorker, w.LockedUntil)
		e.dueExactly(provider.QueueWorker, w.LockedUntil)
		mustEqual(e.t, "activity refetched after expiry", e.fetchWork().ActivityID, 1)
	}},

	{name: "worker_lock_renewal_moves_next_visible", run: func(e *env) {
		e.waker()
		e.enqueueWork(activityMsg("a", 1, ""))
		w := e.fetchWork()
		e.clock.Advance(10 * time.Second)
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, time.Minute), "renew")
		e.wantNext(provider.QueueWorker, e.clock.Now().Add(time.Minute))
	}},

	{name: "worker_ack_of_everything_is_zero", run: func(e *env) {
		e.waker()
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 1, ""))
		w := e.fetchWork()
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("a", 1, "ok")})
		e.wantEmpty(provider.QueueWorker)
		e.wantDueNow(provider.QueueOrchestrator) // the completion
	}},

	{name: "worker_abandon_with_delay_due_after_delay", run: func(e *env) {
		e.waker()
		e.enqueueWork(activityMsg("a", 1, ""))
		w := e.fetchWork()
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{Delay: 7 * time.Second}), "abandon")
		due := e.clock.Now().Add(7 * time.Second)
		e.wantNext(provider.QueueWorker, due)
		e.dueExactly(provider.QueueWorker, due)
	}},

	{name: "purge_empties_both_queues", run: func(e *env) {
		e.waker()
		e.admin()
		e.createInstance("a")
		e.enqueue(timerMsg("a", 2, e.clock.Now().Add(time.Hour)))
		e.enqueueWork(activityMsg("a", 3, ""))
		e.mustPurge(true, "a")
		e.wantEmpty(provider.QueueOrchestrator)
		e.wantEmpty(provider.QueueWorker)
	}},

	{name: "next_visible_after_close_returns_err_closed", run: func(e *env) {
		wk := e.waker()
		e.noErr(e.p.Close(), "Close")
		_, err := wk.NextVisible(e.ctx, provider.QueueOrchestrator)
		e.wantErr(err, provider.ErrClosed, "NextVisible after Close")
	}},
}

// waker returns the store's Waker capability, skipping the case if it has none.
func (e *env) waker() provider.Waker {
	e.t.Helper()
	w, ok := e.p.(provider.Waker)
	if !ok {
		e.t.Skip("provider does not implement provider.Waker: dispatchers poll it instead")
	}
	return w
}

// nextVisible reads NextVisible of q, failing the case on error.
func (e *env) nextVisible(q provider.Queue) time.Time {
	e.t.Helper()
	next, err := e.waker().NextVisible(e.ctx, q)
	e.noErr(err, "NextVisible")
	return next
}

// wantNext fails unless NextVisible of q is exactly want.
func (e *env) wantNext(q provider.Queue, want time.Time) {
	e.t.Helper()
	e.sameTime("NextVisible("+queueLabel(q)+")", e.nextVisible(q), want)
}

// wantEmpty fails unless NextVisible of q is the zero time (queue empty).
func (e *env) wantEmpty(q provider.Queue) {
	e.t.Helper()
	if next := e.nextVisible(q); !next.IsZero() {
		e.t.Fatalf("NextVisible(%s) = %v, want the zero time (queue empty)", queueLabel(q), next)
	}
}

// wantDueNow fails unless NextVisible of q is a time at or before now.
func (e *env) wantDueNow(q provider.Queue) {
	e.t.Helper()
	next := e.nextVisible(q)
	if next.IsZero() || next.After(e.clock.Now()) {
		e.t.Fatalf("NextVisible(%s) = %v, want a time at or before now (%v)", queueLabel(q), next, e.clock.Now())
	}
}

// dueExactly checks NextVisible against the fetch: it advances the clock to
// a millisecond before at (which must be in the future), where a fetch of q
// finds nothing, then to at, where NextVisible is due and work is there to
// fetch. It fetches nothing at at: the case does.
func (e *env) dueExactly(q provider.Queue, at time.Time) {
	e.t.Helper()
	before := at.Sub(e.clock.Now()) - time.Millisecond
	if before < 0 {
		e.t.Fatalf("dueExactly: %v is not in the future (now %v)", at, e.clock.Now())
	}
	e.clock.Advance(before)
	if q == provider.QueueWorker {
		e.fetchWorkNone(workOpts())
	} else {
		e.fetchNone()
	}
	e.clock.Advance(time.Millisecond)
	e.wantDueNow(q)
}

func queueLabel(q provider.Queue) string {
	switch q {
	case provider.QueueOrchestrator:
		return "orchestrator"
	case provider.QueueWorker:
		return "worker"
	}
	return "unknown queue"
}
