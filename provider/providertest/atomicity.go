package providertest

import (
	"errors"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// atomicityCases check that an ack is one atomic step: all of it or none of
// it, with the lock released only by success.
var atomicityCases = []testCase{
	{name: "FailedAckDuplicateEventWritesNothing", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(completionMsg("a", 2, "r"))
		it := e.fetchFor("a")
		before := e.snapshot("a", "child")
		fireAt := e.clock.Now().Add(time.Second)
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			// Event 2 is new, event 1 is stored already: the whole ack must roll back.
			History: []history.Event{e.scheduledEvent(2), e.startedEvent("in")},
			Metadata: provider.ExecutionMetadata{
				Status: provider.StatusCompleted, Output: js("done"),
				CustomStatus: &provider.CustomStatusUpdate{Value: js("half")},
			},
			WorkerItems:       []*provider.WorkerMessage{activityMsg("a", 2, "")},
			OrchestratorItems: []*provider.OrchestratorMessage{startMsg("child"), timerMsg("a", 3, fireAt)},
		})
		e.wantErr(err, provider.ErrDuplicateEvent, "ack re-appending event 1")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		e.fetchNone() // "a" is still locked and "child" was not created

		// The lock is still held: the same token commits a correct turn, and
		// nothing of the failed ack shows up afterwards.
		e.ack(turnAck(it, 1, e.scheduledEvent(2)))
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 1)), []int64{1, 2})
		e.clock.Advance(2 * time.Second)
		e.fetchNone() // no timer, no child, and the completion was consumed
		e.fetchWorkNone(workOpts())
	}},
	{name: "DuplicateEventInsideOneAckWritesNothing", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		before := e.snapshot("a")
		err := e.ackErr(turnAck(it, 1, e.scheduledEvent(2), e.scheduledEvent(3), e.externalEvent(2, "again")))
		if !errors.Is(err, provider.ErrDuplicateEvent) && !errors.Is(err, provider.ErrInvalidArgument) {
			e.t.Fatalf("ack with event 2 twice: got %v, want ErrDuplicateEvent or ErrInvalidArgument", err)
		}
		e.unchanged(before)
		e.ack(turnAck(it, 1, e.scheduledEvent(2)))
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
	}},
	{name: "MultiPartAckCommitsEverything", run: func(e *env) {
		e.enqueue(startMsg("p"))
		it := e.fetchFor("p")
		fireAt := e.clock.Now().Add(10 * time.Second)
		meta := runningMeta()
		meta.CustomStatus = &provider.CustomStatusUpdate{Value: js("busy")}
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{
				e.startedEvent("in"), e.scheduledEvent(2), e.scheduledEvent(3),
				e.timerCreatedEvent(4, fireAt), e.subOrchScheduledEvent(5, "p::child"),
			},
			Metadata:    meta,
			WorkerItems: []*provider.WorkerMessage{activityMsg("p", 2, ""), activityMsg("p", 3, "")},
			OrchestratorItems: []*provider.OrchestratorMessage{
				timerMsg("p", 4, fireAt), childStartMsg("p", 1, 5, "p::child"),
			},
		})
		mustEqual(e.t, "history", eventIDs(e.readHistory("p", 0)), []int64{1, 2, 3, 4, 5})

		w1, w2 := e.fetchWork(), e.fetchWork()
		mustEqual(e.t, "activity ids", []int64{w1.ActivityID, w2.ActivityID}, []int64{2, 3})
		e.fetchWorkNone(workOpts())

		child := e.fetchFor("p::child")
		mustEqual(e.t, "child messages", kinds(child.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		if child.Instance == nil || child.Instance.ParentInstanceID != "p" || child.Instance.ParentExecutionID != 1 {
			e.t.Fatalf("child instance row = %+v, want parent p execution 1", child.Instance)
		}
		e.fetchNone() // the timer is not due yet

		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "p")
			e.noErr(err, "GetInstance(p)")
			mustEqual(e.t, "status", info.Status, provider.StatusRunning)
			mustEqual(e.t, "current execution", info.CurrentExecutionID, int64(1))
			mustEqual(e.t, "custom status", info.CustomStatus, js("busy"))
			mustEqual(e.t, "custom status version", info.CustomStatusVersion, int64(1))
		}

		e.clock.Advance(10 * time.Second)
		timer := e.fetchFor("p")
		mustEqual(e.t, "timer turn", kinds(timer.Messages), []history.WorkItemKind{history.WorkTimerFired})
		mustEqual(e.t, "timer id", timer.Messages[0].ID, int64(4))
		if timer.Instance == nil || timer.Instance.Status != provider.StatusRunning || timer.Instance.CurrentExecutionID != 1 {
			e.t.Fatalf("instance row = %+v, want Running, execution 1", timer.Instance)
		}
		mustEqual(e.t, "history seen by fetch", eventIDs(timer.History), []int64{1, 2, 3, 4, 5})
	}},
	{name: "AckInsertsWorkerItemsBeforeCancellingActivities", run: func(e *env) {
		// Step (h) runs after (g): an activity both scheduled and canceled
		// by one turn is gone; an older one canceled by it is gone too.
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		ack := turnAck(it, 1, e.scheduledEvent(3), e.scheduledEvent(4))
		ack.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 3, ""), activityMsg("a", 4, "")}
		ack.CanceledActivities = []provider.ActivityRef{
			{InstanceID: "a", ExecutionID: 1, ActivityID: 2},
			{InstanceID: "a", ExecutionID: 1, ActivityID: 3},
			{InstanceID: "a", ExecutionID: 1, ActivityID: 99}, // unknown: ignored
		}
		e.ack(ack)
		w := e.fetchWork()
		mustEqual(e.t, "surviving activity", w.ActivityID, int64(4))
		e.fetchWorkNone(workOpts())
	}},
	{name: "LockReleasedOnlyOnSuccessfulAck", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.wantErr(e.ackErr(turnAck(it, 1, e.startedEvent("in"))), provider.ErrDuplicateEvent, "failing ack")
		e.fetchNone()
		e.enqueue(eventMsg("a", "late", 2))
		e.fetchNone()
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
		next := e.fetchFor("a")
		mustEqual(e.t, "next turn", itemNames(next.Messages), []string{"late"})
	}},
	{name: "SecondAckWithSameTokenLockLost", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
		second := turnAck(it, 1, e.externalEvent(3, "again"))
		second.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 3, "")}
		e.lockLost(e.ackErr(second), "second ack with the same token")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
		e.fetchWorkNone(workOpts())
	}},
	{name: "ConcurrentAcksWithOneTokenExactlyOneWins", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		names := []string{"first", "second"}
		errs := make([]error, 2)
		parallel(2, func(i int) {
			errs[i] = retryErr(func() error { return e.ackErr(turnAck(it, 1, e.externalEvent(2, names[i]))) })
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					e.t.Fatal("both acks with one token succeeded")
				}
				winner = i
			case !errors.Is(err, provider.ErrLockLost):
				e.t.Fatalf("losing ack: got %v, want ErrLockLost", err)
			}
		}
		if winner < 0 {
			e.t.Fatalf("no ack succeeded: %v", errs)
		}
		h := e.readHistory("a", 0)
		mustEqual(e.t, "history", eventIDs(h), []int64{1, 2})
		mustEqual(e.t, "event 2 name", h[1].Name, names[winner])
	}},
	{name: "SameTokenTwiceConcurrentlyCommitsOnce", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		first := turnAck(it, 1, e.externalEvent(2, "first"))
		second := turnAck(it, 1, e.externalEvent(3, "second"))
		second.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 3, "")}
		errs := e.ackConcurrently(first, second)
		if (errs[0] == nil) == (errs[1] == nil) {
			e.t.Fatalf("concurrent acks with one token: got %v, want exactly one success", errs)
		}
		for _, err := range errs {
			if err != nil {
				e.lockLost(err, "losing ack")
			}
		}
		h := e.readHistory("a", 0)
		if len(h) != 2 {
			e.t.Fatalf("history has events %v, want event 1 and one of the two acks", eventIDs(h))
		}
		if errs[0] == nil {
			e.fetchWorkNone(workOpts())
		} else {
			e.fetchWork()
		}
	}},
	{name: "ConcurrentAcksIsolateTheBadAck", run: func(e *env) {
		for _, id := range []string{"a", "b", "c"} {
			e.createInstance(id)
		}
		for _, id := range []string{"a", "b", "c"} {
			e.enqueue(eventMsg(id, "go", id))
		}
		items := e.fetchEach()
		mustEqual(e.t, "instances fetched", len(items), 3)
		beforeB := e.snapshot("b")
		bad := turnAck(items["b"], 1, e.externalEvent(2, "go"), e.startedEvent("in"))
		bad.WorkerItems = []*provider.WorkerMessage{activityMsg("b", 2, "")}
		bad.OrchestratorItems = []*provider.OrchestratorMessage{startMsg("b-child")}
		stray := turnAck(&provider.OrchestrationItem{LockToken: "no-such-token"}, 1, e.externalEvent(2, "stray"))
		errs := e.ackConcurrently(
			turnAck(items["a"], 1, e.externalEvent(2, "go")),
			bad,
			turnAck(items["c"], 1, e.externalEvent(2, "go")),
			stray,
		)
		e.noErr(errs[0], "ack a")
		e.wantErr(errs[1], provider.ErrDuplicateEvent, "ack b")
		e.noErr(errs[2], "ack c")
		e.lockLost(errs[3], "ack with unknown token")

		mustEqual(e.t, "history a", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
		mustEqual(e.t, "history c", eventIDs(e.readHistory("c", 0)), []int64{1, 2})
		{
			a := e.admin()
			_, err := a.GetInstance(e.ctx, "b-child")
			e.wantErr(err, provider.ErrNotFound, "GetInstance(b-child)")
		}
		mustEqual(e.t, "state of b", e.snapshot("b").Instances["b"], beforeB.Instances["b"])
		e.fetchWorkNone(workOpts())
		e.fetchNone() // b is still locked; a and c have nothing queued
		e.ack(turnAck(items["b"], 1, e.externalEvent(2, "go")))
		mustEqual(e.t, "history b", eventIDs(e.readHistory("b", 0)), []int64{1, 2})
	}},
	{name: "InvalidEventAckRejectedWritesNothing", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		before := e.snapshot("a")
		bad := turnAck(it, 1, e.scheduledEvent(2), e.invalidEvent(3))
		bad.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		err := e.ackErr(bad)
		e.wantErr(err, provider.ErrInvalidArgument, "ack with an invalid event")
		e.wantPermanent(err, "ack with an invalid event")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		e.fetchNone() // the failed ack left the lock held
		e.ack(turnAck(it, 1, e.scheduledEvent(2)))
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
	}},
	{name: "InvalidWorkerItemAckRejectedWritesNothing", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		before := e.snapshot("a")
		badItem := activityMsg("a", 3, "")
		badItem.Item.Name = ""
		bad := turnAck(it, 1, e.scheduledEvent(2), e.scheduledEvent(3))
		bad.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, ""), badItem}
		e.wantErr(e.ackErr(bad), provider.ErrInvalidArgument, "ack with an invalid worker item")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		e.fetchNone()
	}},
	{name: "InvalidOrchestratorItemAckRejectedWritesNothing", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		before := e.snapshot("a", "b")
		bad := turnAck(it, 1, e.scheduledEvent(2))
		bad.OrchestratorItems = []*provider.OrchestratorMessage{startMsg("b"), invalidMsg("b")}
		e.wantErr(e.ackErr(bad), provider.ErrInvalidArgument, "ack with an invalid orchestrator item")
		e.unchanged(before)
		e.fetchNone() // a still locked, b not created
	}},
	{name: "FailedAckKeepsFetchedMessages", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "one", 1), eventMsg("a", "two", 2))
		it := e.fetchFor("a")
		e.wantErr(e.ackErr(turnAck(it, 1, e.startedEvent("in"))), provider.ErrDuplicateEvent, "failing ack")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", itemNames(again.Messages), []string{"one", "two"})
		mustEqual(e.t, "attempt count", again.AttemptCount, 2)
	}},
	{name: "FailedAckKeepsCanceledActivities", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		e.enqueue(eventMsg("a", "cancel", 1))
		it := e.fetchFor("a")
		bad := turnAck(it, 1, e.externalEvent(3, "cancel"), e.startedEvent("in"))
		bad.CanceledActivities = []provider.ActivityRef{{InstanceID: "a", ExecutionID: 1, ActivityID: 2}}
		e.wantErr(e.ackErr(bad), provider.ErrDuplicateEvent, "failing ack")
		w := e.fetchWork()
		mustEqual(e.t, "surviving activity", w.ActivityID, int64(2))
	}},
	{name: "FailedAckRollsBackNewExecution", run: func(e *env) {
		// The ack fails at its last steps (creating an instance whose ID is
		// taken), after the new execution, its history and the current
		// execution pointer were written: all of that must roll back.
		e.createInstance("a")
		e.createInstance("taken")
		e.enqueue(eventMsg("a", "restart", 1))
		it := e.fetchFor("a")
		before := e.snapshot("a", "taken")
		bad := turnAck(it, 2, e.startedEvent("v2"))
		bad.OrchestratorItems = []*provider.OrchestratorMessage{startMsg("taken")}
		err := e.ackErr(bad)
		e.wantErr(err, provider.ErrInstanceExists, "ack creating a taken instance")
		e.unchanged(before)
		_, err = e.p.ReadHistory(e.ctx, "a", 2)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(a, 2)")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		again := e.fetchFor("a")
		if again.Instance == nil || again.Instance.CurrentExecutionID != 1 {
			e.t.Fatalf("instance row = %+v, want current execution 1", again.Instance)
		}
	}},
}
