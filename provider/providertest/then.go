package providertest

import (
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// activityRunning leaves instance "a" with history [1 started, 2
// activity scheduled] and returns the lease of activity 2, leased by the
// turn that scheduled it.
func (e *env) activityRunning() *provider.WorkItemLease {
	e.t.Helper()
	a := e.leasingAck(e.lockedTurn("a"), lockTimeout)
	res := e.ack(a)
	e.wantCount("leases", len(res.Leased), 1)
	return res.Leased[0]
}

// thenAck is the ack of activity 2 of "a" (lease l) carrying the turn its
// result causes, computed on history up to event after: it records the
// result (event 3) and schedules activity 4, leased to the caller.
func (e *env) thenAck(l *provider.WorkItemLease, after int64) *provider.WorkAck {
	next := activityMsg("a", 4, "")
	next.Lease = true
	then := turnAck(&provider.OrchestrationItem{}, 1, e.completedEvent(3, "ok"), e.scheduledEvent(4))
	then.WorkerItems, then.LeaseFor = []*provider.WorkerMessage{next}, lockTimeout
	return &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"), Then: then, ThenAfter: after}
}

// notApplied asserts that an ack (result res) committed without its Then: the history is
// unchanged and the completion is queued for a turn.
func (e *env) notApplied(res provider.WorkResult, what string) {
	e.t.Helper()
	if res.Then != nil {
		e.t.Fatalf("%s: the ack applied its turn", what)
	}
	mustEqual(e.t, what+": history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
}

// thenCases cover WorkAck.Then: an activity's ack may carry the turn its
// result causes, computed by the caller from its copy of the execution,
// and the store commits both in one transaction, but only when nothing
// else happened to the instance; otherwise the result is queued as usual.
var thenCases = []testCase{
	{name: "then_commits_the_result_and_its_turn_together", run: func(e *env) {
		l := e.activityRunning()
		ack := e.thenAck(l, 2)
		res := e.ackWork(ack)
		if res.Then == nil {
			e.t.Fatal("the turn of a quiet instance was not applied")
		}
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 1)), []int64{1, 2, 3, 4})
		e.wantCount("leases", len(res.Then.Leased), 1)
		e.wantCount("leased activity", int(res.Then.Leased[0].ActivityID), 4)
		e.wantCount("attempt of the leased activity", res.Then.Leased[0].AttemptCount, 1)
		// The result was never queued, the instance is free, activity 4 is
		// leased, and 2 is gone.
		e.fetchNone()
		e.fetchWorkNone(workOpts())
		e.lockLost(e.ackWorkErr(&provider.WorkAck{LockToken: l.LockToken}), "second ack of activity 2")
		e.ackWork(&provider.WorkAck{LockToken: res.Then.Leased[0].LockToken, Completion: completionMsg("a", 4, "ok")})
		mustEqual(e.t, "next result delivered", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_leased_activity_returns_to_the_queue_when_its_lock_expires", run: func(e *env) {
		// A crash after the ack: the activity the turn leased is run
		// again, by whoever fetches it once its lock expired, with its
		// own work item; neither the acked activity's token nor the
		// expired lease's is good any more.
		l := e.activityRunning()
		res := e.ackWork(e.thenAck(l, 2))
		if res.Then == nil || len(res.Then.Leased) != 1 {
			e.t.Fatal("the turn of a quiet instance was not applied with its lease")
		}
		leased := res.Then.Leased[0]
		if leased.LockToken == l.LockToken {
			e.t.Fatal("the leased activity has the acked activity's token")
		}
		e.fetchWorkNone(workOpts())
		e.expireLocks()
		f := e.fetchWork()
		e.wantCount("redelivered activity", int(f.ActivityID), 4)
		e.wantCount("redelivery attempt", f.AttemptCount, 2)
		mustEqual(e.t, "redelivered item", f.Item.Name, leased.Item.Name)
		e.fetchWorkNone(workOpts())
		e.lockLost(e.ackWorkErr(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok")}), "second ack of activity 2")
		e.lockLost(e.p.RenewWorkItemLock(e.ctx, leased.LockToken, lockTimeout), "renewal of the expired lease")
		e.lockLost(e.ackWorkErr(&provider.WorkAck{LockToken: leased.LockToken, Completion: completionMsg("a", 4, "ok")}), "ack of the expired lease")
		e.ackWork(&provider.WorkAck{LockToken: f.LockToken, Completion: completionMsg("a", 4, "ok")})
		mustEqual(e.t, "result delivered once", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_not_applied_when_a_message_waits", run: func(e *env) {
		l := e.activityRunning()
		e.enqueue(eventMsg("a", "early", 1))
		ack := e.thenAck(l, 2)
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack with its turn")
		e.notApplied(res, "instance with a visible message")
		mustEqual(e.t, "both in the next turn", kinds(e.fetchFor("a").Messages),
			[]history.WorkItemKind{history.WorkExternalRaised, history.WorkActivityCompleted})
		e.fetchWorkNone(workOpts()) // the turn's activity was not scheduled
	}},

	{name: "then_not_applied_when_the_history_moved_on", run: func(e *env) {
		l := e.activityRunning()
		ack := e.thenAck(l, 1) // computed on an older copy
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack with a stale turn")
		e.notApplied(res, "stale copy")
		mustEqual(e.t, "result queued", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_not_applied_for_another_execution", run: func(e *env) {
		l := e.activityRunning()
		ack := e.thenAck(l, 2)
		ack.Then.ExecutionID = 2
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack with a turn of another execution")
		e.notApplied(res, "other execution")
		mustEqual(e.t, "result queued", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_not_applied_while_the_instance_is_locked", run: func(e *env) {
		l := e.activityRunning()
		e.enqueue(eventMsg("a", "go", 1))
		busy := e.fetchFor("a")
		ack := e.thenAck(l, 2)
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack while the instance is locked")
		e.notApplied(res, "locked instance")
		e.ack(turnAck(busy, 1, e.externalEvent(3, "go")))
		mustEqual(e.t, "result in the next turn", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_not_applied_while_another_activity_is_queued", run: func(e *env) {
		l := e.activityRunning()
		e.enqueueWork(activityMsg("a", 5, ""))
		ack := e.thenAck(l, 2)
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack while another activity is queued")
		e.notApplied(res, "other activity queued")
		mustEqual(e.t, "result queued", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_falls_back_to_taking_the_turn", run: func(e *env) {
		l := e.activityRunning()
		e.enqueue(eventMsg("a", "early", 1))
		ack := e.thenAck(l, 2)
		ack.TakeTurn = &provider.FetchOptions{LockTimeout: lockTimeout}
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack with its turn and TakeTurn")
		e.notApplied(res, "instance with a visible message")
		if res.Turn == nil {
			e.t.Fatal("the ack neither applied its turn nor took one")
		}
		mustEqual(e.t, "taken turn", kinds(res.Turn.Messages),
			[]history.WorkItemKind{history.WorkExternalRaised, history.WorkActivityCompleted})
		e.fetchNone()
	}},

	{name: "then_with_a_lost_lock_changes_nothing", run: func(e *env) {
		l := e.activityRunning()
		e.expireLocks()
		e.fetchWork() // another worker took the activity over
		ack := e.thenAck(l, 2)
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.lockLost(err, "ack with a lost lock")
		e.notApplied(res, "lost lock")
		e.fetchNone()
	}},

	{name: "then_rejected_turn_commits_nothing", run: func(e *env) {
		l := e.activityRunning()
		ack := e.thenAck(l, 2)
		ack.Then.History[1] = e.scheduledEvent(2) // already in the history
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.wantErr(err, provider.ErrDuplicateEvent, "turn appending an existing event")
		e.notApplied(res, "rejected turn")
		e.fetchNone()
		// The activity is still locked by l: its plain ack commits.
		e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok")})
		mustEqual(e.t, "result queued", kinds(e.fetchFor("a").Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},

	{name: "then_needs_a_completion_no_lock_token_and_a_position", run: func(e *env) {
		l := e.activityRunning()
		noCompletion := e.thenAck(l, 2)
		noCompletion.Completion = nil
		e.wantErr(e.ackWorkErr(noCompletion), provider.ErrInvalidArgument, "Then without a completion")
		token := e.thenAck(l, 2)
		token.Then.LockToken = "x"
		e.wantErr(e.ackWorkErr(token), provider.ErrInvalidArgument, "Then with a lock token")
		noPosition := e.thenAck(l, 0)
		res, err := e.p.AckWorkItem(e.ctx, noPosition)
		e.wantErr(err, provider.ErrInvalidArgument, "Then without ThenAfter")
		e.notApplied(res, "rejected acks")
		e.ackWork(e.thenAck(l, 2)) // the rejected acks changed nothing
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 1)), []int64{1, 2, 3, 4})
	}},
}
