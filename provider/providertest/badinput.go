package providertest

import (
	"errors"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// lockedTurn creates instanceID, enqueues an event and returns its locked turn.
func (e *env) lockedTurn(instanceID string) *provider.OrchestrationItem {
	e.t.Helper()
	e.createInstance(instanceID)
	e.enqueue(eventMsg(instanceID, "go", 1))
	return e.fetchFor(instanceID)
}

// rejectedAckKeepsLock asserts that a rejected ack of it wrote nothing and
// left the lock held: the history is unchanged, nothing is queued, and a
// valid ack with the same token still commits.
func (e *env) rejectedAckKeepsLock(it *provider.OrchestrationItem) {
	e.t.Helper()
	mustEqual(e.t, "history after rejected ack", eventIDs(e.readHistory(it.InstanceID, 0)), []int64{1})
	e.fetchNone()
	e.fetchWorkNone(workOpts())
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.scheduledEvent(2)}})
	mustEqual(e.t, "history after valid ack", eventIDs(e.readHistory(it.InstanceID, 0)), []int64{1, 2})
}

// badInputCases cover malformed arguments (ErrInvalidArgument, nothing
// written) and corrupt stored data (reported, dead-lettered, never blocking).
var badInputCases = []testCase{
	{name: "enqueue_empty_instance_id_rejected_whole_call", run: func(e *env) {
		bad := eventMsg("", "x", 1)
		_, err := e.p.Enqueue(e.ctx, startMsg("ok"), bad)
		e.wantErr(err, provider.ErrInvalidArgument, "Enqueue with empty instance ID")
		e.fetchNone()
	}},

	{name: "enqueue_nil_message_rejected", run: func(e *env) {
		_, err := e.p.Enqueue(e.ctx, startMsg("ok"), nil)
		e.wantErr(err, provider.ErrInvalidArgument, "Enqueue(nil)")
		e.fetchNone()
	}},

	{name: "enqueue_invalid_work_item_rejected", run: func(e *env) {
		bad := eventMsg("bad", "x", 1)
		bad.Item.Kind = "NoSuchKind"
		_, err := e.p.Enqueue(e.ctx, bad)
		e.wantErr(err, provider.ErrInvalidArgument, "Enqueue with unknown item kind")
		noName := eventMsg("bad", "", 1) // ExternalRaised requires a name
		e.wantErr(errOf(e.p.Enqueue(e.ctx, noName)), provider.ErrInvalidArgument, "Enqueue with item failing Validate")
		e.fetchNone()
	}},

	{name: "ack_with_invalid_worker_items_rejected", run: func(e *env) {
		it := e.lockedTurn("w")
		noInstance := activityMsg("", 2, "")
		e.wantErr(e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			WorkerItems: []*provider.WorkerMessage{activityMsg("w", 1, ""), noInstance}}),
			provider.ErrInvalidArgument, "ack with a worker item without instance ID")
		e.wantErr(e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			WorkerItems: []*provider.WorkerMessage{nil}}),
			provider.ErrInvalidArgument, "ack with a nil worker item")
		noName := activityMsg("w", 1, "")
		noName.Item.Name = "" // ActivityExecute requires a name
		e.wantErr(e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			WorkerItems: []*provider.WorkerMessage{noName}}),
			provider.ErrInvalidArgument, "ack with a worker item failing Validate")
		e.rejectedAckKeepsLock(it)
		e.fetchWorkNone(workOpts())
	}},

	{name: "fetch_with_zero_lock_timeout_rejected", run: func(e *env) {
		e.enqueue(startMsg("z"))
		_, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{})
		e.wantErr(err, provider.ErrInvalidArgument, "FetchOrchestrationItems with zero LockTimeout")
		e.wantCount("first valid fetch attempt count", e.fetch().AttemptCount, 1)
	}},

	{name: "fetch_work_with_zero_lock_timeout_rejected", run: func(e *env) {
		e.enqueueWork(activityMsg("z", 1, ""))
		_, err := e.p.FetchWorkItems(e.ctx, provider.WorkFetchOptions{})
		e.wantErr(err, provider.ErrInvalidArgument, "FetchWorkItems with zero LockTimeout")
		e.wantCount("first valid fetch attempt count", e.fetchWork().AttemptCount, 1)
	}},

	{name: "fetch_work_with_bad_session_options_rejected", run: func(e *env) {
		e.enqueueSession("S1", 1)
		noOwner := sessionOpts("")
		_, err := e.p.FetchWorkItems(e.ctx, noOwner)
		e.wantErr(err, provider.ErrInvalidArgument, "FetchWorkItems with empty session owner")
		noLease := sessionOpts(ownerA)
		noLease.Session.LockTimeout = 0
		_, err = e.p.FetchWorkItems(e.ctx, noLease)
		e.wantErr(err, provider.ErrInvalidArgument, "FetchWorkItems with zero session lease")
		mustEqual(e.t, "B can still claim", e.fetchWorkWith(sessionOpts(ownerB)).AttemptCount, 1)
	}},

	{name: "ack_with_execution_id_zero_rejected_lock_kept", run: func(e *env) {
		it := e.lockedTurn("x0")
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 0,
			History:     []history.Event{e.scheduledEvent(2)},
			WorkerItems: []*provider.WorkerMessage{activityMsg("x0", 2, "")},
		})
		e.wantErr(err, provider.ErrInvalidArgument, "ack with ExecutionID 0")
		e.rejectedAckKeepsLock(it)
	}},

	{name: "ack_with_invalid_event_rejected_lock_kept", run: func(e *env) {
		it := e.lockedTurn("xe")
		bad := e.scheduledEvent(3)
		bad.Name = "" // ActivityScheduled requires a name
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:     []history.Event{e.scheduledEvent(2), bad},
			WorkerItems: []*provider.WorkerMessage{activityMsg("xe", 2, "")},
		})
		e.wantErr(err, provider.ErrInvalidArgument, "ack with event failing Validate")
		e.rejectedAckKeepsLock(it)
	}},

	{name: "ack_with_invalid_queued_items_rejected_lock_kept", run: func(e *env) {
		it := e.lockedTurn("xq")
		badWork := activityMsg("", 2, "")
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.scheduledEvent(2)}, WorkerItems: []*provider.WorkerMessage{badWork},
		})
		e.wantErr(err, provider.ErrInvalidArgument, "ack with invalid worker item")
		badOrch := eventMsg("xq", "x", 1)
		badOrch.Item.Kind = "NoSuchKind"
		err = e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.scheduledEvent(2)}, OrchestratorItems: []*provider.OrchestratorMessage{badOrch, nil},
		})
		e.wantErr(err, provider.ErrInvalidArgument, "ack with invalid orchestrator items")
		e.rejectedAckKeepsLock(it)
	}},

	{name: "ack_nil_turn_rejected", run: func(e *env) {
		err := e.ackErr(nil)
		e.wantErr(err, provider.ErrInvalidArgument, "ack(nil)")
	}},

	{name: "worker_ack_with_invalid_completion_rejected_row_kept", run: func(e *env) {
		e.enqueueWork(activityMsg("wc", 1, ""))
		w := e.fetchWork()
		bad := completionMsg("wc", 1, "r")
		bad.Item.ID = 0 // ActivityCompleted requires the activity id
		err := e.ackWorkErr(&provider.WorkAck{LockToken: w.LockToken, Completion: bad})
		e.wantErr(err, provider.ErrInvalidArgument, "worker ack with invalid completion")
		e.fetchNone()
		e.fetchWorkNone(workOpts()) // still locked by w
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("wc", 1, "r")})
		mustEqual(e.t, "completion", e.fetchFor("wc").Messages[0].ID, 1)
	}},

	{name: "read_history_empty_instance_id_rejected", run: func(e *env) {
		_, err := e.p.ReadHistory(e.ctx, "", 0)
		e.wantErr(err, provider.ErrInvalidArgument, `ReadHistory("")`)
	}},

	{name: "list_dead_letters_negative_limit_rejected", run: func(e *env) {
		_, err := e.admin().ListDeadLetters(e.ctx, -1)
		e.wantErr(err, provider.ErrInvalidArgument, "ListDeadLetters(-1)")
	}},

	{name: "corrupt_history_fetch_reports_history_error", run: func(e *env) {
		if e.h.CorruptHistory == nil {
			e.t.Skip("Harness.CorruptHistory is nil")
		}
		e.createInstance("ch")
		e.h.CorruptHistory(e.t, e.p, "ch")
		e.enqueue(eventMsg("ch", "go", 1))
		it := e.fetchFor("ch")
		if !errors.Is(it.HistoryError, provider.ErrCorruptData) {
			e.t.Fatalf("HistoryError = %v, want ErrCorruptData", it.HistoryError)
		}
		if it.History != nil {
			e.t.Fatalf("History has %d events, want nil with HistoryError", len(it.History))
		}
		if it.Instance == nil || it.Instance.CurrentExecutionID != 1 {
			e.t.Fatalf("Instance = %+v, want the stored row", it.Instance)
		}
		mustEqual(e.t, "kinds", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
	}},

	{name: "corrupt_history_attempt_count_climbs_on_refetch", run: func(e *env) {
		if e.h.CorruptHistory == nil {
			e.t.Skip("Harness.CorruptHistory is nil")
		}
		e.createInstance("cc")
		e.h.CorruptHistory(e.t, e.p, "cc")
		e.enqueue(eventMsg("cc", "go", 1))
		for want := 1; want <= 3; want++ {
			it := e.fetchFor("cc")
			e.wantCount("fetch of corrupt history attempt count", it.AttemptCount, want)
			e.wantErr(it.HistoryError, provider.ErrCorruptData, "HistoryError")
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Second}), "abandon")
			e.clock.Advance(time.Second)
		}
	}},

	{name: "corrupt_history_ack_appending_failure_succeeds_and_fails_instance", run: func(e *env) {
		if e.h.CorruptHistory == nil {
			e.t.Skip("Harness.CorruptHistory is nil")
		}
		e.createInstance("ca")
		e.h.CorruptHistory(e.t, e.p, "ca")
		e.enqueue(eventMsg("ca", "go", 1))
		it := e.fetchFor("ca")
		fail := &history.ErrorDetails{Kind: history.ErrorPoison, Message: "history cannot be decoded"}
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{{EventID: 99999, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: fail}},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Error: fail},
		})
		e.enqueue(eventMsg("ca", "after", 2))
		mustEqual(e.t, "status", e.fetchFor("ca").Instance.Status, provider.StatusFailed)
		_, err := e.p.ReadHistory(e.ctx, "ca", 1)
		e.wantErr(err, provider.ErrCorruptData, "ReadHistory after append (old rows still corrupt)")
	}},

	{name: "corrupt_history_read_history_corrupt_data", run: func(e *env) {
		if e.h.CorruptHistory == nil {
			e.t.Skip("Harness.CorruptHistory is nil")
		}
		e.createInstance("cr")
		e.schedule("cr", 2)
		e.h.CorruptHistory(e.t, e.p, "cr")
		for _, exec := range []int64{0, 1} {
			evs, err := e.p.ReadHistory(e.ctx, "cr", exec)
			e.wantErr(err, provider.ErrCorruptData, "ReadHistory of corrupt history")
			if len(evs) != 0 {
				e.t.Fatalf("ReadHistory returned %d events with its error, want none", len(evs))
			}
		}
	}},

	{name: "corrupt_orchestrator_messages_dead_lettered_without_blocking", run: func(e *env) {
		if e.h.CorruptOrchestratorMessages == nil {
			e.t.Skip("Harness.CorruptOrchestratorMessages is nil")
		}
		e.enqueue(startMsg("bad"))
		e.h.CorruptOrchestratorMessages(e.t, e.p, "bad")
		e.enqueue(startMsg("good"))
		mustEqual(e.t, "kinds", kinds(e.fetchFor("good").Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.fetchNone()
		{
			a := e.p
			dl, err := a.ListDeadLetters(e.ctx, 0)
			e.noErr(err, "ListDeadLetters")
			e.wantCount("dead letters", len(dl), 1)
			mustEqual(e.t, "dead letter", []any{dl[0].Queue, dl[0].InstanceID}, []any{"orchestrator", "bad"})
			if dl[0].Error == "" || len(dl[0].Payload) == 0 {
				e.t.Fatalf("dead letter lacks error or payload: %+v", dl[0])
			}
			e.sameTime("DeadAt", dl[0].DeadAt, e.clock.Now())
			mustEqual(e.t, "orchestrator ready", e.depths().OrchestratorReady, 0)
		}
	}},

	{name: "corrupt_message_skipped_later_good_message_of_same_instance_delivered", run: func(e *env) {
		if e.h.CorruptOrchestratorMessages == nil {
			e.t.Skip("Harness.CorruptOrchestratorMessages is nil")
		}
		e.createInstance("cm")
		e.enqueue(eventMsg("cm", "a", 1))
		e.h.CorruptOrchestratorMessages(e.t, e.p, "cm")
		good := eventMsg("cm", "b", 2)
		e.enqueue(good)
		mustEqual(e.t, "messages", e.fetchFor("cm").Messages, []history.WorkItem{good.Item})
	}},

	{name: "corrupt_work_items_dead_lettered_other_activities_served", run: func(e *env) {
		if e.h.CorruptWorkItems == nil {
			e.t.Skip("Harness.CorruptWorkItems is nil")
		}
		e.enqueueWork(activityMsg("bad", 1, ""), activityMsg("bad", 2, ""))
		e.h.CorruptWorkItems(e.t, e.p, "bad")
		e.enqueueWork(activityMsg("good", 1, ""))
		w := e.fetchWork()
		mustEqual(e.t, "served", []any{w.InstanceID, w.ActivityID}, []any{"good", 1})
		e.fetchWorkNone(workOpts())
		e.expireLocks()
		mustEqual(e.t, "redelivered", e.fetchWork().InstanceID, "good")
		{
			a := e.p
			dl, err := a.ListDeadLetters(e.ctx, 0)
			e.noErr(err, "ListDeadLetters")
			e.wantCount("dead letters", len(dl), 2)
			for _, d := range dl {
				mustEqual(e.t, "dead letter", []any{d.Queue, d.InstanceID}, []any{"worker", "bad"})
			}
			one, err := a.ListDeadLetters(e.ctx, 1)
			e.noErr(err, "ListDeadLetters(1)")
			e.wantCount("dead letters with limit 1", len(one), 1)
		}
	}},
}
