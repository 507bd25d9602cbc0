package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// pauser returns the store's Pauser side, skipping the case when it has
// none.
func (e *env) pauser() provider.Pauser {
	e.t.Helper()
	p, ok := e.p.(provider.Pauser)
	if !ok {
		e.t.Skip("the store does not implement provider.Pauser")
	}
	return p
}

func (e *env) rewinder() provider.Rewinder {
	e.t.Helper()
	r, ok := e.p.(provider.Rewinder)
	if !ok {
		e.t.Skip("the store does not implement provider.Rewinder")
	}
	return r
}

func (e *env) pause(id, reason string) {
	e.t.Helper()
	e.noErr(e.pauser().PauseInstance(e.ctx, id, provider.PauseInfo{Reason: reason, By: "tester"}), "PauseInstance("+id+")")
}

func (e *env) resume(id string) {
	e.t.Helper()
	e.noErr(e.pauser().ResumeInstance(e.ctx, id), "ResumeInstance("+id+")")
}

// failInstance runs a turn of instanceID (history [1 started]) that ends
// it Failed at event 2.
func (e *env) failInstance(id string) {
	e.t.Helper()
	e.enqueue(eventMsg(id, "boom", 1))
	it := e.fetchFor(id)
	fail := errDetails(history.ErrorApplication, "boom")
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		History:  []history.Event{{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: fail}},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Error: fail}})
}

// pauseCases cover provider.Pauser and provider.Rewinder.
var pauseCases = []testCase{
	{name: "pause_holds_turns_and_queued_activities_until_resume", run: func(e *env) {
		e.createInstance("a")
		ids := e.schedule("a", 1)
		e.enqueue(eventMsg("a", "late", 1))
		e.pause("a", "maintenance")
		e.fetchNone()
		e.fetchWorkNone(workOpts())
		// However long it lasts: the pause's lock never expires.
		e.clock.Advance(365 * 24 * time.Hour)
		e.fetchNone()
		e.fetchWorkNone(workOpts())
		e.resume("a")
		it := e.fetchFor("a")
		mustEqual(e.t, "messages after the resume", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		w := e.fetchWork()
		mustEqual(e.t, "activity after the resume", []any{w.InstanceID, w.ActivityID}, []any{"a", ids[0]})
	}},
	{name: "pause_records_who_why_and_when", run: func(e *env) {
		e.createInstance("a")
		e.createInstance("b")
		at := e.clock.Now()
		e.pause("a", "db down")
		p, err := e.pauser().GetPause(e.ctx, "a")
		e.noErr(err, "GetPause(a)")
		if p == nil {
			e.t.Fatal("GetPause of a paused instance: nil")
		}
		mustEqual(e.t, "pause", []any{p.Reason, p.By}, []any{"db down", "tester"})
		e.sameTime("paused at", p.At, at)
		p, err = e.pauser().GetPause(e.ctx, "b")
		e.noErr(err, "GetPause(b)")
		if p != nil {
			e.t.Fatalf("GetPause of a running instance: %+v", p)
		}
		all, err := e.pauser().ListPauses(e.ctx, []string{"a", "b", "missing"})
		e.noErr(err, "ListPauses")
		if _, ok := all["a"]; len(all) != 1 || !ok || all["a"].Reason != "db down" {
			e.t.Fatalf("ListPauses: %+v, want only a", all)
		}
		_, err = e.pauser().ListPauses(e.ctx, make([]string, 1001))
		e.wantErr(err, provider.ErrInvalidArgument, "ListPauses of 1001 IDs")
		e.resume("a")
		p, err = e.pauser().GetPause(e.ctx, "a")
		e.noErr(err, "GetPause(a) after the resume")
		if p != nil {
			e.t.Fatalf("GetPause after the resume: %+v", p)
		}
	}},
	{name: "pause_discards_the_turn_in_flight", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.pause("a", "")
		e.lockLost(e.ackErr(turnAck(it, 1, e.externalEvent(2, "go"))), "ack of a turn fetched before the pause")
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renewal of that turn's lock")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 1)), []int64{1})
		e.fetchNone()
		e.resume("a")
		again := e.fetchFor("a")
		e.wantCount("messages of the turn taken again", len(again.Messages), 1)
		// The discarded delivery is not counted: pausing again and again
		// never poisons an instance.
		e.wantCount("deliveries of the turn taken again", again.AttemptCount, 1)
		e.ack(turnAck(again, 1, e.externalEvent(2, "go")))
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 1)), []int64{1, 2})
	}},
	{name: "pause_lets_a_running_activity_finish_and_its_result_wait", run: func(e *env) {
		l := e.activityRunning()
		e.pause("a", "")
		ack := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}
		if res := e.ackWork(ack); res.Turn != nil {
			e.t.Fatal("the ack of an activity took the turn of a paused instance")
		}
		e.fetchNone()
		e.resume("a")
		it := e.fetchFor("a")
		mustEqual(e.t, "the waiting result", kinds(it.Messages), []history.WorkItemKind{history.WorkActivityCompleted})
	}},
	{name: "pause_refuses_the_fused_turn", run: func(e *env) {
		l := e.activityRunning()
		e.pause("a", "")
		ack := e.thenAck(l, 2)
		res, err := e.p.AckWorkItem(e.ctx, ack)
		e.noErr(err, "ack with its turn")
		e.notApplied(res, "ack of a paused instance's activity")
		e.fetchNone()
		e.fetchWorkNone(workOpts())
	}},
	{name: "pause_errors", run: func(e *env) {
		p := e.pauser()
		e.wantErr(p.PauseInstance(e.ctx, "nope", provider.PauseInfo{}), provider.ErrNotFound, "pause of an unknown instance")
		e.wantErr(p.ResumeInstance(e.ctx, "nope"), provider.ErrNotFound, "resume of an unknown instance")
		e.wantErr(p.PauseInstance(e.ctx, "", provider.PauseInfo{}), provider.ErrInvalidArgument, "pause of an empty ID")
		e.createInstance("a")
		e.wantErr(p.ResumeInstance(e.ctx, "a"), provider.ErrNotPaused, "resume of a running instance")
		e.pause("a", "one")
		e.wantErr(p.PauseInstance(e.ctx, "a", provider.PauseInfo{Reason: "two"}), provider.ErrAlreadyPaused, "second pause")
		e.createInstance("f")
		e.failInstance("f")
		e.wantErr(p.PauseInstance(e.ctx, "f", provider.PauseInfo{}), provider.ErrStateConflict, "pause of a failed instance")
	}},
	{name: "paused_instances_are_not_stalled", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		e.pause("a", "")
		e.clock.Advance(time.Hour)
		page, err := e.admin().StalledInstances(e.ctx, provider.StalledOptions{After: time.Minute, MinAttempts: 3, Limit: 10})
		e.noErr(err, "StalledInstances")
		e.wantCount("stalled instances", len(page.InstanceIDs), 0)
	}},
	{name: "purge_removes_the_pause", run: func(e *env) {
		e.createInstance("a")
		e.pause("a", "")
		_, err := e.admin().PurgeInstances(e.ctx, []string{"a"}, provider.PurgeOptions{Force: true})
		e.noErr(err, "PurgeInstances")
		e.createInstance("a")
		p, err := e.pauser().GetPause(e.ctx, "a")
		e.noErr(err, "GetPause")
		if p != nil {
			e.t.Fatalf("a new instance under a purged ID is paused: %+v", p)
		}
	}},
	{name: "rewind_adds_an_execution_and_queues_its_work", run: func(e *env) {
		r := e.rewinder()
		e.createInstance("a")
		e.failInstance("a")
		before := e.readHistory("a", 1)
		started := before[0]
		act := activityMsg("a", 2, "")
		act.ExecutionID, act.Item.ExecutionID = 2, 2
		req := &provider.RewindRequest{InstanceID: "a", FromExecutionID: 1, ExecutionID: 2,
			History:    []history.Event{started, e.scheduledEvent(2)},
			Messages:   []provider.OrchestratorMessage{*eventMsg("a", "again", 1)},
			Activities: []provider.WorkerMessage{*act}}
		e.noErr(r.RewindInstance(e.ctx, req), "RewindInstance")
		info := e.instance("a")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID, info.Error == nil},
			[]any{provider.StatusRunning, int64(2), true})
		mustEqual(e.t, "old execution", eventIDs(e.readHistory("a", 1)), eventIDs(before))
		mustEqual(e.t, "new execution", eventIDs(e.readHistory("a", 2)), []int64{1, 2})
		ex, err := e.admin().GetExecution(e.ctx, "a", 2)
		e.noErr(err, "GetExecution(a, 2)")
		mustEqual(e.t, "new execution row", ex.Status, provider.StatusRunning)
		w := e.fetchWork()
		mustEqual(e.t, "activity", []any{w.ExecutionID, w.ActivityID}, []any{int64(2), int64(2)})
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		// The same rewind again: the instance is Running now.
		e.wantErr(r.RewindInstance(e.ctx, req), provider.ErrStateConflict, "second rewind")
	}},
	{name: "rewind_conflicts_and_bad_requests", run: func(e *env) {
		r := e.rewinder()
		e.createInstance("a")
		start := e.readHistory("a", 1)[0]
		ok := func() *provider.RewindRequest {
			return &provider.RewindRequest{InstanceID: "a", FromExecutionID: 1, ExecutionID: 2, History: []history.Event{start}}
		}
		e.wantErr(r.RewindInstance(e.ctx, ok()), provider.ErrStateConflict, "rewind of a running instance")
		e.failInstance("a")
		stale := ok()
		stale.FromExecutionID, stale.ExecutionID = 2, 3
		e.wantErr(r.RewindInstance(e.ctx, stale), provider.ErrStateConflict, "rewind of another execution")
		missing := ok()
		missing.InstanceID = "nope"
		e.wantErr(r.RewindInstance(e.ctx, missing), provider.ErrNotFound, "rewind of an unknown instance")
		for what, bad := range map[string]func(*provider.RewindRequest){
			"nil history, messages and activities": func(q *provider.RewindRequest) { q.History = nil },
			"a gap in the execution IDs":           func(q *provider.RewindRequest) { q.ExecutionID = 5 },
			"event IDs not from 1":                 func(q *provider.RewindRequest) { q.History[0].EventID = 2 },
			"an invalid event":                     func(q *provider.RewindRequest) { q.History = append(q.History, e.invalidEvent(2)) },
			"a message creating an instance": func(q *provider.RewindRequest) {
				q.Messages = []provider.OrchestratorMessage{*startMsg("a")}
			},
			"a leased activity": func(q *provider.RewindRequest) {
				m := activityMsg("a", 2, "")
				m.ExecutionID, m.Lease = 2, true
				q.Activities = []provider.WorkerMessage{*m}
			},
		} {
			q := ok()
			bad(q)
			e.wantErr(r.RewindInstance(e.ctx, q), provider.ErrInvalidArgument, what)
		}
		e.wantErr(r.RewindInstance(e.ctx, nil), provider.ErrInvalidArgument, "nil request")
		info := e.instance("a")
		mustEqual(e.t, "instance after refused rewinds", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusFailed, int64(1)})
	}},

	{name: "rewind_running_ends_the_live_execution", run: func(e *env) {
		r := e.rewinder()
		e.createInstance("a")
		start := e.readHistory("a", 1)[0]
		e.enqueueWork(activityMsg("a", 2, "")) // stuck: failing and retried
		act := activityMsg("a", 2, "")
		act.ExecutionID, act.Item.ExecutionID = 2, 2
		end := history.Event{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()),
			Error: &history.ErrorDetails{Kind: history.ErrorCanceled, Code: history.CodeRewound, Message: "rewound: stuck"}}
		req := func() *provider.RewindRequest {
			return &provider.RewindRequest{InstanceID: "a", FromExecutionID: 1, ExecutionID: 2, End: &end,
				History: []history.Event{start}, Activities: []provider.WorkerMessage{*act}}
		}
		// Not while a turn holds the instance, nor while it is paused.
		e.enqueue(eventMsg("a", "raised", 1))
		it := e.fetchFor("a")
		e.wantErr(r.RewindInstance(e.ctx, req()), provider.ErrStateConflict, "rewind during a turn")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "AbandonOrchestrationItem")
		e.pause("a", "")
		e.wantErr(r.RewindInstance(e.ctx, req()), provider.ErrStateConflict, "rewind of a paused instance")
		e.resume("a")
		bad := req()
		bad.End = &history.Event{EventID: 2, Kind: history.OrchestrationCompleted}
		e.wantErr(r.RewindInstance(e.ctx, bad), provider.ErrInvalidArgument, "End not a failure")
		mustEqual(e.t, "instance after refused rewinds", eventIDs(e.readHistory("a", 1)), []int64{1})

		e.noErr(r.RewindInstance(e.ctx, req()), "RewindInstance of the running instance")
		info := e.instance("a")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, int64(2)})
		old := e.readHistory("a", 1)
		mustEqual(e.t, "old execution's history", eventIDs(old), []int64{1, 2})
		mustEqual(e.t, "old execution's end", []any{old[1].Kind, old[1].Error.Code}, []any{history.OrchestrationFailed, history.CodeRewound})
		ex, err := e.admin().GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		mustEqual(e.t, "old execution row", []any{ex.Status, ex.Error != nil && ex.Error.Code == history.CodeRewound},
			[]any{provider.StatusCanceled, true})
		// The old execution's activity is gone; the new one's is queued;
		// the event raised before the rewind waits for the new execution.
		w := e.fetchWork()
		mustEqual(e.t, "activity", []any{w.ExecutionID, w.ActivityID}, []any{int64(2), int64(2)})
		it = e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "AbandonOrchestrationItem")
		e.wantErr(r.RewindInstance(e.ctx, req()), provider.ErrStateConflict, "second rewind from execution 1")
	}},
	{name: "rewind_running_refuses_a_stale_plan", run: func(e *env) {
		// The End event of a forced rewind must follow the execution's
		// last event: a turn committed since the history was read makes
		// the plan stale, refused as a conflict, not a store error.
		r := e.rewinder()
		e.createInstance("a")
		start := e.readHistory("a", 1)[0]
		req := func(endID int64) *provider.RewindRequest {
			end := history.Event{EventID: endID, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()),
				Error: &history.ErrorDetails{Kind: history.ErrorCanceled, Code: history.CodeRewound, Message: "rewound"}}
			return &provider.RewindRequest{InstanceID: "a", FromExecutionID: 1, ExecutionID: 2, End: &end,
				History: []history.Event{start}}
		}
		e.wantErr(r.RewindInstance(e.ctx, req(3)), provider.ErrStateConflict, "End after a gap")
		e.enqueue(eventMsg("a", "late", 1))
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{{EventID: 2, Kind: history.ExternalEvent, Name: "late", Data: js(1), TimestampMs: ms(e.clock.Now())}}})
		e.wantErr(r.RewindInstance(e.ctx, req(2)), provider.ErrStateConflict, "End planned before the last turn")
		mustEqual(e.t, "history after refused rewinds", eventIDs(e.readHistory("a", 1)), []int64{1, 2})
		e.noErr(r.RewindInstance(e.ctx, req(3)), "RewindInstance with End after the last event")
		mustEqual(e.t, "old execution", eventIDs(e.readHistory("a", 1)), []int64{1, 2, 3})
	}},
	{name: "rewind_running_refuses_a_pending_cancel", run: func(e *env) {
		// A cancel queued and not yet taken, one a turn gave back for
		// later, one requested (in the history): each is refused in the
		// rewind's transaction. An instance timeout not yet due is no
		// request: the rewind goes on; a due one is refused.
		r := e.rewinder()
		forced := func(id string) *provider.RewindRequest {
			h := e.readHistory(id, 1)
			end := history.Event{EventID: h[len(h)-1].EventID + 1, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()),
				Error: &history.ErrorDetails{Kind: history.ErrorCanceled, Code: history.CodeRewound, Message: "rewound"}}
			return &provider.RewindRequest{InstanceID: id, FromExecutionID: 1, ExecutionID: 2, End: &end, History: h[:1]}
		}
		refused := func(id, what string) {
			e.t.Helper()
			e.wantErr(r.RewindInstance(e.ctx, forced(id)), provider.ErrStateConflict, what)
			info := e.instance(id)
			mustEqual(e.t, what+": instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, int64(1)})
		}
		timeout := func(id string, due time.Time) *provider.OrchestratorMessage {
			return &provider.OrchestratorMessage{InstanceID: id, VisibleAt: due,
				Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: id, Reason: "timed out",
					Error: &history.ErrorDetails{Kind: history.ErrorTimeout, Message: "timed out"}}}
		}

		e.createInstance("q")
		e.enqueue(cancelMsg("q"))
		refused("q", "rewind with a cancel queued")
		it := e.fetchFor("q")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Hour}), "AbandonOrchestrationItem")
		refused("q", "rewind with a cancel given back for later")
		e.clock.Advance(2 * time.Hour)
		it = e.fetchFor("q")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkCancelInstance})
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{{EventID: 2, Kind: history.OrchestrationCancelRequested, TimestampMs: ms(e.clock.Now())}}})
		refused("q", "rewind with a cancel requested")
		mustEqual(e.t, "history after refused rewinds", eventIDs(e.readHistory("q", 1)), []int64{1, 2})

		e.createInstance("t")
		e.enqueue(timeout("t", e.clock.Now().Add(time.Hour)))
		e.noErr(r.RewindInstance(e.ctx, forced("t")), "rewind with an instance timeout not yet due")
		info := e.instance("t")
		mustEqual(e.t, "rewound instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, int64(2)})

		e.createInstance("d")
		e.enqueue(timeout("d", e.clock.Now().Add(time.Minute)))
		e.clock.Advance(2 * time.Minute)
		refused("d", "rewind with an instance timeout due")
	}},
}
