package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// leasingAck acks it scheduling activity 2 of instance "a", leased to the
// caller for d.
func (e *env) leasingAck(it *provider.OrchestrationItem, d time.Duration) *provider.TurnAck {
	m := activityMsg("a", 2, "")
	m.Lease = true
	a := turnAck(it, 1, e.scheduledEvent(2))
	a.WorkerItems, a.LeaseFor = []*provider.WorkerMessage{m}, d
	return a
}

// leaseCases cover TurnAck.LeaseFor: a turn ack may lease the activities it
// schedules to its caller in the same transaction, so a runtime that runs
// them saves a fetch. A leased activity behaves exactly as a fetched one:
// locked by its token, attempt 1, renewable, acked with its completion, and
// back in the queue (attempt 2) when its lock expires.
var leaseCases = []testCase{
	{name: "ack_leases_the_marked_items_and_queues_the_others", run: func(e *env) {
		it := e.lockedTurn("a")
		leased, queued := activityMsg("a", 2, ""), activityMsg("a", 3, "")
		leased.Lease = true
		a := turnAck(it, 1, e.scheduledEvent(2), e.scheduledEvent(3))
		a.WorkerItems = []*provider.WorkerMessage{leased, queued}
		a.LeaseFor = lockTimeout
		res := e.ack(a)
		e.wantCount("leases", len(res.Leased), 1)
		l := res.Leased[0]
		e.wantCount("leased activity", int(l.ActivityID), 2)
		e.wantCount("attempt of a leased activity", l.AttemptCount, 1)
		mustEqual(e.t, "leased item", l.Item.Name, leased.Item.Name)
		e.sameTime("lease expiry", l.LockedUntil, e.clock.Now().Add(lockTimeout))
		// Only the other one can be fetched.
		f := e.fetchWork()
		e.wantCount("fetched activity", int(f.ActivityID), 3)
		e.fetchWorkNone(workOpts())
		e.noErr(e.p.RenewWorkItemLock(e.ctx, l.LockToken, lockTimeout), "renew a leased activity")
		e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok")})
		mustEqual(e.t, "completion delivered", e.fetchFor("a").Messages[0].ID, int64(2))
	}},

	{name: "leased_item_returns_to_the_queue_when_its_lock_expires", run: func(e *env) {
		it := e.lockedTurn("a")
		a := e.leasingAck(it, time.Minute)
		res := e.ack(a)
		e.wantCount("leases", len(res.Leased), 1)
		e.fetchWorkNone(workOpts())
		e.clock.Advance(time.Minute + time.Millisecond)
		f := e.fetchWork()
		e.wantCount("redelivery attempt", f.AttemptCount, 2)
		e.lockLost(e.ackWorkErr(&provider.WorkAck{LockToken: res.Leased[0].LockToken}), "ack of the expired lease")
	}},

	{name: "item_leased_and_canceled_in_one_ack_is_neither", run: func(e *env) {
		it := e.lockedTurn("a")
		a := e.leasingAck(it, lockTimeout)
		a.CanceledActivities = []provider.ActivityRef{{InstanceID: "a", ExecutionID: 1, ActivityID: 2}}
		res := e.ack(a)
		e.wantCount("leases", len(res.Leased), 0)
		e.expireLocks()
		e.fetchWorkNone(workOpts())
	}},

	{name: "without_lease_for_marked_items_are_queued", run: func(e *env) {
		it := e.lockedTurn("a")
		m := activityMsg("a", 2, "")
		m.Lease = true
		a := turnAck(it, 1, e.scheduledEvent(2))
		a.WorkerItems = []*provider.WorkerMessage{m}
		res := e.ack(a)
		e.wantCount("leases", len(res.Leased), 0)
		e.wantCount("fetched attempt", e.fetchWork().AttemptCount, 1)
	}},

	{name: "failed_ack_leases_nothing", run: func(e *env) {
		it := e.lockedTurn("a")
		e.expireLocks()
		thief := e.fetchFor("a") // steals the expired lock
		a := e.leasingAck(it, lockTimeout)
		res, err := e.p.AckOrchestrationItem(e.ctx, a)
		e.lockLost(err, "ack with a stolen lock")
		e.wantCount("leases of a failed ack", len(res.Leased), 0)
		e.fetchWorkNone(workOpts())
		e.clock.Advance(lockTimeout / 2) // a lease would still hold; nothing was written at all
		e.fetchWorkNone(workOpts())
		e.ack(turnAck(thief, 1, e.externalEvent(2, "go")))
	}},

	{name: "lease_of_a_session_or_delayed_item_rejected", run: func(e *env) {
		it := e.lockedTurn("a")
		for _, m := range []*provider.WorkerMessage{activityMsg("a", 2, "s1"), activityMsg("a", 2, "")} {
			if m.SessionID == "" {
				m.VisibleAt = e.clock.Now().Add(time.Minute)
			}
			m.Lease = true
			a := turnAck(it, 1, e.scheduledEvent(2))
			a.WorkerItems, a.LeaseFor = []*provider.WorkerMessage{m}, lockTimeout
			e.wantErr(e.ackErr(a), provider.ErrInvalidArgument, "lease of a session-bound or delayed item")
		}
		bad := turnAck(it, 1, e.scheduledEvent(2))
		bad.LeaseFor = -time.Second
		e.wantErr(e.ackErr(bad), provider.ErrInvalidArgument, "negative LeaseFor")
		e.rejectedAckKeepsLock(it)
	}},
}

// takeTurnCases cover WorkAck.TakeTurn: an activity's ack may take the turn
// its completion starts, in the same transaction, when the instance is
// free. The turn is exactly what a fetch of that instance would return.
var takeTurnCases = []testCase{
	{name: "ack_takes_the_turn_with_every_visible_message", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		e.enqueue(eventMsg("a", "early", 1))
		ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"), TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}
		ackRes, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack taking the turn")
		it := ackRes.Turn
		if it == nil {
			e.t.Fatal("the ack took no turn of a free instance")
		}
		mustEqual(e.t, "instance", it.InstanceID, "a")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised, history.WorkActivityCompleted})
		e.wantCount("attempt", it.AttemptCount, 1)
		mustEqual(e.t, "history", eventIDs(it.History), []int64{1})
		e.sameTime("lock expiry", it.LockedUntil, e.clock.Now().Add(lockTimeout))
		e.fetchNone() // the instance is locked by the taken turn
		e.ack(turnAck(it, 1, e.externalEvent(2, "early"), e.completedEvent(3, "ok")))
		e.fetchNone()
	}},

	{name: "taken_turn_loads_only_history_the_caller_lacks", run: func(e *env) {
		e.createInstance("a")
		e.runningTurn("a") // event 2
		e.enqueueWork(activityMsg("a", 3, ""))
		l := e.fetchWork()
		ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 3, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout, Cached: cachedAt("a", 1, 2)}}
		ackRes, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack taking the turn")
		if ackRes.Turn == nil {
			e.t.Fatal("no turn taken")
		}
		e.wantCount("HistoryAfter", int(ackRes.Turn.HistoryAfter), 2)
		mustEqual(e.t, "new history", len(ackRes.Turn.History), 0)
	}},

	{name: "locked_instance_is_not_taken_and_its_completion_waits", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		e.enqueue(eventMsg("a", "go", 1))
		busy := e.fetchFor("a")
		ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"), TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}
		ackRes, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack while the instance is locked")
		if ackRes.Turn != nil {
			e.t.Fatal("the ack took the turn of an instance locked by another turn")
		}
		e.ack(turnAck(busy, 1, e.externalEvent(2, "go")))
		mustEqual(e.t, "completion in the next turn", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "turn_not_taken_while_other_activities_are_queued", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""), activityMsg("a", 3, ""))
		l2 := e.fetchWork()
		take := &provider.FetchOptions{LockTimeout: lockTimeout}
		first := &provider.WorkAck{LockToken: l2.LockToken, Completion: completionMsg("a", 2, "ok"), TakeTurn: take}
		firstRes, err := e.p.AckWorkItem(e.ctx, first)
		e.noErr(err, "ack of the first of two activities")
		if firstRes.Turn != nil {
			e.t.Fatal("the turn was taken while another activity of the instance was queued")
		}
		l3 := e.fetchWork()
		last := &provider.WorkAck{LockToken: l3.LockToken, Completion: completionMsg("a", 3, "ok"), TakeTurn: take}
		lastRes, err := e.p.AckWorkItem(e.ctx, last)
		e.noErr(err, "ack of the last activity")
		if lastRes.Turn == nil {
			e.t.Fatal("the last activity's ack did not take the turn")
		}
		mustEqual(e.t, "both results in one turn", kinds(lastRes.Turn.Messages),
			[]history.WorkItemKind{history.WorkActivityCompleted, history.WorkActivityCompleted})
	}},

	{name: "failed_ack_takes_no_turn", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		e.expireLocks()
		e.fetchWork() // another worker took the activity over
		e.enqueue(eventMsg("a", "go", 1))
		ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"), TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}
		ackRes, err := e.p.AckWorkItem(e.ctx, ack)
		e.lockLost(err, "ack with a lost lock")
		if ackRes.Turn != nil {
			e.t.Fatal("a failed ack took a turn")
		}
		mustEqual(e.t, "the instance is free", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkExternalRaised})
	}},

	{name: "take_turn_needs_a_completion_and_a_lock_timeout", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		e.wantErr(e.ackWorkErr(&provider.WorkAck{LockToken: l.LockToken, TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}),
			provider.ErrInvalidArgument, "TakeTurn without a completion")
		e.wantErr(e.ackWorkErr(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"), TakeTurn: &provider.FetchOptions{}}),
			provider.ErrInvalidArgument, "TakeTurn without a lock timeout")
		e.ackWork(&provider.WorkAck{LockToken: l.LockToken}) // the rejected acks changed nothing
	}},
}
