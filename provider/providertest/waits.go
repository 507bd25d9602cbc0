package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// stallAfter is the threshold the stalled-instance cases use.
const stallAfter = 5 * time.Minute

// waitCases cover what a store tells about one instance's queues
// (Admin.InstanceQueue) and which instances are stalled
// (Admin.StalledInstances).
var waitCases = []testCase{
	{name: "instance_queue_unknown_and_empty_id", run: func(e *env) {
		_, err := e.admin().InstanceQueue(e.ctx, "ghost")
		e.wantErr(err, provider.ErrNotFound, "InstanceQueue(ghost)")
		_, err = e.admin().InstanceQueue(e.ctx, "")
		e.wantErr(err, provider.ErrInvalidArgument, "InstanceQueue(\"\")")
	}},

	{name: "instance_queue_delayed_start", run: func(e *env) {
		created := e.clock.Now()
		at := created.Add(time.Hour)
		m := startMsg("a")
		m.VisibleAt = at
		e.enqueue(m)
		e.clock.Advance(time.Minute)
		q := e.queue("a")
		e.sameTime("Now", q.Now, e.clock.Now())
		e.sameTime("LastProgressAt of a Pending instance", q.LastProgressAt, created)
		e.wantCount("messages", len(q.Messages), 1)
		msg := q.Messages[0]
		mustEqual(e.t, "message kind, attempts, locked", []any{msg.Item.Kind, msg.Attempts, msg.Locked, msg.DecodeError},
			[]any{history.WorkStartOrchestration, 0, false, ""})
		e.sameTime("VisibleAt", msg.VisibleAt, at)
		e.sameTime("EnqueuedAt", msg.EnqueuedAt, created)
		mustEqual(e.t, "activities, locks, queued start",
			[]any{len(q.Activities), q.InstanceLock, len(q.HeldLocks), q.QueuedStart}, []any{0, nil, 0, nil})
		if !q.LastErrorSince.IsZero() {
			e.t.Fatalf("LastErrorSince = %v, want zero", q.LastErrorSince)
		}
	}},

	{name: "instance_queue_timer_activity_and_progress", run: func(e *env) {
		e.createInstance("a")
		e.clock.Advance(time.Minute)
		fire := e.clock.Now().Add(time.Hour)
		var turnAt time.Time
		e.runTurn("a", func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
			turnAt = e.clock.Now()
			return &provider.TurnAck{History: []history.Event{e.scheduledEvent(next), e.timerCreatedEvent(next+1, fire)},
				WorkerItems:       []*provider.WorkerMessage{activityMsg("a", next, "")},
				OrchestratorItems: []*provider.OrchestratorMessage{timerMsg("a", next+1, fire)}}
		})
		e.clock.Advance(time.Minute)
		q := e.queue("a")
		e.sameTime("LastProgressAt", q.LastProgressAt, turnAt)
		e.wantCount("messages", len(q.Messages), 1)
		mustEqual(e.t, "timer message", []any{q.Messages[0].Item.Kind, q.Messages[0].Item.FireAtMs}, []any{history.WorkTimerFired, ms(fire)})
		e.sameTime("timer VisibleAt", q.Messages[0].VisibleAt, fire)
		e.wantCount("activities", len(q.Activities), 1)
		a := q.Activities[0]
		mustEqual(e.t, "activity", []any{a.ExecutionID, a.Name, a.Attempts, a.Error}, []any{int64(1), "Act", 0, nil})
		if !a.LockedUntil.IsZero() {
			e.t.Fatalf("LockedUntil of a queued activity = %v, want zero", a.LockedUntil)
		}
		e.sameTime("EnqueuedAt", a.EnqueuedAt, turnAt)

		// Taken by a worker: running, with its lock expiry.
		w := e.fetchWork()
		q = e.queue("a")
		mustEqual(e.t, "attempts of the running activity", q.Activities[0].Attempts, 1)
		e.sameTime("LockedUntil", q.Activities[0].LockedUntil, w.LockedUntil)
		e.sameTime("VisibleAt of a locked activity", q.Activities[0].VisibleAt, w.LockedUntil)
		mustEqual(e.t, "activity ID", q.Activities[0].ActivityID, w.ActivityID)
	}},

	{name: "instance_queue_turn_in_progress", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.enqueue(eventMsg("a", "late", 2))
		q := e.queue("a")
		if q.InstanceLock == nil {
			e.t.Fatal("InstanceLock = nil during a turn")
		}
		e.sameTime("LockedUntil", q.InstanceLock.LockedUntil, it.LockedUntil)
		e.sameTime("LockedAt", q.InstanceLock.LockedAt, e.clock.Now())
		mustEqual(e.t, "messages (locked, attempts)",
			[]any{q.Messages[0].Item.Name, q.Messages[0].Locked, q.Messages[0].Attempts, q.Messages[1].Item.Name, q.Messages[1].Locked, q.Messages[1].Attempts},
			[]any{"go", true, 1, "late", false, 0})
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
		q = e.queue("a")
		mustEqual(e.t, "after the ack: lock, messages", []any{q.InstanceLock, len(q.Messages)}, []any{nil, 1})
	}},

	{name: "instance_queue_undecodable_message_is_listed", run: func(e *env) {
		if e.h.CorruptOrchestratorMessages == nil {
			e.t.Skip("the harness cannot corrupt messages")
		}
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		e.h.CorruptOrchestratorMessages(e.t, e.p, "a")
		q := e.queue("a")
		e.wantCount("messages", len(q.Messages), 1)
		if q.Messages[0].DecodeError == "" || q.Messages[0].Item.Kind != "" {
			e.t.Fatalf("corrupt message = %+v, want an empty Item and a DecodeError", q.Messages[0])
		}
	}},

	{name: "instance_queue_last_error_since_spans_a_run_of_abandons", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		first := e.clock.Now()
		e.abandonWith(e.fetchFor("a"), errDetails(history.ErrorNondeterminism, "one"))
		e.abandonWith(e.fetchFor("a"), errDetails(history.ErrorConfiguration, "two"))
		e.sameTime("LastErrorSince", e.queue("a").LastErrorSince, first)
		e.ack(&provider.TurnAck{LockToken: e.fetchFor("a").LockToken, ExecutionID: 1})
		if s := e.queue("a").LastErrorSince; !s.IsZero() {
			e.t.Fatalf("LastErrorSince after a committed turn = %v, want zero", s)
		}
		e.enqueue(eventMsg("a", "go", 2))
		again := e.clock.Now()
		e.abandonWith(e.fetchFor("a"), errDetails(history.ErrorNondeterminism, "three"))
		e.sameTime("LastErrorSince of a new run", e.queue("a").LastErrorSince, again)
	}},

	{name: "instance_queue_activity_error_recorded_by_abandon", run: func(e *env) {
		e.createInstance("a")
		e.schedule("a", 1)
		why := errDetails(history.ErrorConfiguration, "activity Act is not registered")
		first := e.clock.Now()
		e.noErr(e.p.AbandonWorkItem(e.ctx, e.fetchWork().LockToken, provider.AbandonOptions{Error: why}), "AbandonWorkItem with Error")
		a := e.queue("a").Activities[0]
		mustEqual(e.t, "Error", a.Error, why)
		e.sameTime("ErrorSince", a.ErrorSince, first)
		e.clock.Advance(time.Minute)
		e.noErr(e.p.AbandonWorkItem(e.ctx, e.fetchWork().LockToken, provider.AbandonOptions{Error: why}), "second AbandonWorkItem")
		a = e.queue("a").Activities[0]
		e.sameTime("ErrorSince after a second abandon", a.ErrorSince, first)
		mustEqual(e.t, "Attempts", a.Attempts, 2)
		e.noErr(e.p.AbandonWorkItem(e.ctx, e.fetchWork().LockToken, provider.AbandonOptions{}), "AbandonWorkItem without Error")
		a = e.queue("a").Activities[0]
		if a.Error != nil || !a.ErrorSince.IsZero() {
			e.t.Fatalf("after an abandon without Error: Error %+v, ErrorSince %v, want none", a.Error, a.ErrorSince)
		}
		err := e.p.AbandonWorkItem(e.ctx, e.fetchWork().LockToken, provider.AbandonOptions{Error: &history.ErrorDetails{Kind: "bogus"}})
		e.wantErr(err, provider.ErrInvalidArgument, "AbandonWorkItem with an invalid Error")
	}},

	{name: "instance_queue_execution_locks_and_queue_position", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.enqueue(queuedStart("b", "k", lockTTL))
		e.clock.Advance(time.Second)
		queuedAt := e.clock.Now()
		e.enqueue(queuedStart("c", "k", lockTTL))
		mustEqual(e.t, "held locks of a", e.queue("a").HeldLocks, []string{"k"})
		if e.queue("a").QueuedStart != nil {
			e.t.Fatal("the holder has a QueuedStart")
		}
		c := e.queue("c")
		if c.QueuedStart == nil {
			e.t.Fatal("QueuedStart of c = nil")
		}
		mustEqual(e.t, "c's queued start", []any{c.QueuedStart.LockKey, c.QueuedStart.Holder, c.QueuedStart.Position, len(c.HeldLocks)},
			[]any{"k", "a", 2, 0})
		e.sameTime("QueuedAt", c.QueuedStart.QueuedAt, queuedAt)
		mustEqual(e.t, "b's position", e.queue("b").QueuedStart.Position, 1)
		// The holder lets go: b takes the lock, c moves up.
		e.releaseLock("k")
		mustEqual(e.t, "held locks of b", e.queue("b").HeldLocks, []string{"k"})
		mustEqual(e.t, "c's queued start after the hand-over", []any{c.QueuedStart.LockKey, e.queue("c").QueuedStart.Holder, e.queue("c").QueuedStart.Position},
			[]any{"k", "b", 1})
	}},

	{name: "stalled_rejects_bad_options", run: func(e *env) {
		for _, o := range []provider.StalledOptions{
			{After: 0, MinAttempts: 3}, {After: -time.Second, MinAttempts: 3},
			{After: time.Minute, MinAttempts: 1}, {After: time.Minute, MinAttempts: 3, Limit: -1},
		} {
			_, err := e.admin().StalledInstances(e.ctx, o)
			e.wantErr(err, provider.ErrInvalidArgument, "StalledInstances with bad options")
		}
	}},

	{name: "stalled_not_waiting_on_event_or_future_timer", run: func(e *env) {
		e.createInstance("event")
		e.createInstance("timer")
		fire := e.clock.Now().Add(24 * time.Hour)
		e.runTurn("timer", func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
			return &provider.TurnAck{History: []history.Event{e.timerCreatedEvent(next, fire)},
				OrchestratorItems: []*provider.OrchestratorMessage{timerMsg("timer", next, fire)}}
		})
		e.clock.Advance(time.Hour)
		e.wantStalled()
		// The timer comes due and nobody takes it for the threshold.
		e.clock.Advance(23*time.Hour + stallAfter - time.Millisecond)
		e.wantStalled()
		e.clock.Advance(time.Millisecond)
		e.wantStalled("timer")
	}},

	{name: "stalled_delayed_start_only_once_due_and_untaken", run: func(e *env) {
		m := startMsg("a")
		m.VisibleAt = e.clock.Now().Add(time.Hour)
		e.enqueue(m)
		e.clock.Advance(time.Hour + stallAfter - time.Millisecond)
		e.wantStalled()
		e.clock.Advance(time.Millisecond)
		e.wantStalled("a")
		e.runStart("a")
		e.wantStalled()
	}},

	{name: "stalled_recorded_error_after_threshold", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, e.fetchFor("a").LockToken,
			provider.AbandonOptions{Delay: time.Hour, IgnoreAttempt: true, Error: errDetails(history.ErrorNondeterminism, "parked")}), "park")
		e.clock.Advance(stallAfter - time.Millisecond)
		e.wantStalled()
		e.clock.Advance(time.Millisecond)
		e.wantStalled("a")
	}},

	{name: "stalled_activity_untaken_or_redelivered_or_failing", run: func(e *env) {
		e.createInstance("untaken")
		e.schedule("untaken", 1)
		e.clock.Advance(stallAfter - time.Millisecond)
		e.wantStalled()
		e.clock.Advance(time.Millisecond)
		e.wantStalled("untaken")
		e.finish("untaken", provider.StatusCanceled)
		e.wantStalled() // terminal instances are never stalled
		e.ackWork(&provider.WorkAck{LockToken: e.fetchWork().LockToken})

		// Running (locked, renewed): not stalled, until its third delivery.
		e.createInstance("crashy")
		e.schedule("crashy", 1)
		e.clock.Advance(time.Hour)
		for range 2 {
			e.fetchWork()
			e.expireLocks()
		}
		w := e.fetchWork()
		mustEqual(e.t, "deliveries", w.AttemptCount, 3)
		e.wantStalledWith(provider.StalledOptions{After: stallAfter, MinAttempts: 4})
		e.wantStalled("crashy")
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{Delay: time.Hour}), "abandon")
		e.wantStalled("crashy")
		e.finish("crashy", provider.StatusFailed)

		// Given back with an error (not registered) and delayed.
		e.createInstance("unregistered")
		e.schedule("unregistered", 1)
		e.noErr(e.p.AbandonWorkItem(e.ctx, e.fetchWork().LockToken, provider.AbandonOptions{Delay: time.Hour, IgnoreAttempt: true,
			Error: errDetails(history.ErrorConfiguration, "activity Act is not registered")}), "abandon with Error")
		e.clock.Advance(stallAfter - time.Millisecond)
		e.wantStalled()
		e.clock.Advance(time.Millisecond)
		e.wantStalled("unregistered")
	}},

	{name: "stalled_needs_no_progress_for_the_threshold", run: func(e *env) {
		e.createInstance("a")
		e.clock.Advance(time.Hour)
		// An event arrives and the turn is parked at once: the instance
		// last progressed an hour ago, but the error is new.
		e.enqueue(eventMsg("a", "go", 1))
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, e.fetchFor("a").LockToken,
			provider.AbandonOptions{Delay: time.Hour, IgnoreAttempt: true, Error: errDetails(history.ErrorNondeterminism, "parked")}), "park")
		e.wantStalled()
		e.clock.Advance(stallAfter)
		e.wantStalled("a")
		// A committed turn is progress: it clears the error, and its event
		// is new.
		e.clock.Advance(time.Hour)
		it := e.fetchFor("a")
		e.ack(turnAck(it, 1, e.externalEvent(nextEventID(it), "go")))
		e.clock.Advance(stallAfter)
		e.wantStalled()
	}},

	{name: "stalled_lists_newest_first_with_a_limit", run: func(e *env) {
		for _, id := range []string{"a", "b", "c"} {
			e.createInstance(id)
			e.schedule(id, 1)
		}
		e.clock.Advance(stallAfter)
		e.wantStalled("c", "b", "a")
		page, err := e.admin().StalledInstances(e.ctx, provider.StalledOptions{After: stallAfter, MinAttempts: 3, Limit: 2})
		e.noErr(err, "StalledInstances")
		mustEqual(e.t, "first page", []any{page.InstanceIDs, page.More}, []any{[]string{"c", "b"}, true})
	}},
}

// queue returns the instance's queue state, failing the case on error.
func (e *env) queue(instanceID string) *provider.InstanceQueueState {
	e.t.Helper()
	q, err := e.admin().InstanceQueue(e.ctx, instanceID)
	e.noErr(err, "InstanceQueue("+instanceID+")")
	return q
}

// wantStalled fails unless exactly want (newest first) are stalled under
// stallAfter and StalledAttempts 3.
func (e *env) wantStalled(want ...string) {
	e.t.Helper()
	e.wantStalledWith(provider.StalledOptions{After: stallAfter, MinAttempts: 3}, want...)
}

func (e *env) wantStalledWith(o provider.StalledOptions, want ...string) {
	e.t.Helper()
	page, err := e.admin().StalledInstances(e.ctx, o)
	e.noErr(err, "StalledInstances")
	if want == nil {
		want = []string{}
	}
	mustEqual(e.t, "stalled instances", []any{page.InstanceIDs, page.More}, []any{want, false})
}
