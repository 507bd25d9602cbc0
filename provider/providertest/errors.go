package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// errorCases check the sentinel errors the contract promises, their
// retryability, and that a failing call writes nothing.
var errorCases = []testCase{
	{name: "AckUnknownTokenLockLost", run: func(e *env) {
		e.createInstance("a")
		ack := &provider.TurnAck{
			LockToken: "no-such-token", ExecutionID: 1,
			History:           []history.Event{e.scheduledEvent(2)},
			Metadata:          runningMeta(),
			WorkerItems:       []*provider.WorkerMessage{activityMsg("a", 2, "")},
			OrchestratorItems: []*provider.OrchestratorMessage{startMsg("b")},
		}
		e.lockLost(e.ackErr(ack), "ack with an unknown token")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1})
		e.fetchWorkNone(workOpts())
		e.fetchNone()
	}},
	{name: "AbandonUnknownTokenLockLost", run: func(e *env) {
		e.createInstance("a")
		err := e.p.AbandonOrchestrationItem(e.ctx, "no-such-token", provider.AbandonOptions{Delay: time.Minute})
		e.lockLost(err, "abandon with an unknown token")
	}},
	{name: "RenewUnknownTokenLockLost", run: func(e *env) {
		e.createInstance("a")
		err := e.p.RenewOrchestrationItemLock(e.ctx, "no-such-token", lockTimeout)
		e.lockLost(err, "renew with an unknown token")
	}},
	{name: "AckEmptyTokenFailsWritesNothing", run: func(e *env) {
		e.createInstance("a")
		err := e.ackErr(&provider.TurnAck{ExecutionID: 1, History: []history.Event{e.scheduledEvent(2)}})
		if err == nil {
			e.t.Fatal("ack with an empty token succeeded")
		}
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1})
	}},
	{name: "DuplicateEventIDRejectedNotOverwritten", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		dup := e.startedEvent("in")
		dup.Name, dup.Input = "Other", js("other")
		err := e.ackErr(turnAck(it, 1, dup))
		e.wantErr(err, provider.ErrDuplicateEvent, "ack re-appending event 1")
		e.wantPermanent(err, "duplicate event")
		h := e.readHistory("a", 0)
		mustEqual(e.t, "history", eventIDs(h), []int64{1})
		mustEqual(e.t, "stored event 1", h[0], e.startedEvent("in"))
	}},
	{name: "ReadHistoryUnknownInstanceNotFound", run: func(e *env) {
		_, err := e.p.ReadHistory(e.ctx, "nobody", 0)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(nobody, 0)")
		e.wantPermanent(err, "ReadHistory of an unknown instance")
		_, err = e.p.ReadHistory(e.ctx, "nobody", 1)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(nobody, 1)")
	}},
	{name: "ReadHistoryUnknownExecutionNotFound", run: func(e *env) {
		e.createInstance("a")
		_, err := e.p.ReadHistory(e.ctx, "a", 2)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(a, 2)")
	}},
	{name: "FetchOnEmptyStoreReturnsNothing", run: func(e *env) {
		items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: 10})
		e.noErr(err, "FetchOrchestrationItems")
		mustEqual(e.t, "items", len(items), 0)
		work, err := e.p.FetchWorkItems(e.ctx, provider.WorkFetchOptions{LockTimeout: lockTimeout, Max: 10})
		e.noErr(err, "FetchWorkItems")
		mustEqual(e.t, "work items", len(work), 0)
	}},
	{name: "StaleAckAfterLockExpiryRejectedWithNothingWritten", run: func(e *env) {
		// A worker that outlived its lock must not commit stale work,
		// even when nobody has taken the instance over yet.
		e.createInstance("a")
		e.enqueue(completionMsg("a", 2, "r"))
		it := e.fetchFor("a")
		e.expireLocks()
		before := e.snapshot("a", "child")
		meta := runningMeta()
		meta.Status, meta.Output = provider.StatusCompleted, js("stale")
		meta.CustomStatus = &provider.CustomStatusUpdate{Value: js("stale")}
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:           []history.Event{e.scheduledEvent(2), e.completedEvent(3, "stale")},
			Metadata:          meta,
			WorkerItems:       []*provider.WorkerMessage{activityMsg("a", 2, "")},
			OrchestratorItems: []*provider.OrchestratorMessage{startMsg("child")},
		})
		e.lockLost(err, "ack after lock expiry")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", kinds(again.Messages), []history.WorkItemKind{history.WorkActivityCompleted})
		mustEqual(e.t, "attempt count", again.AttemptCount, 2)
		e.fetchNone() // no child was created
	}},
	{name: "EnqueueInvalidItemWritesNothing", run: func(e *env) {
		_, err := e.p.Enqueue(e.ctx, startMsg("a"), eventMsg("b", "ok", 1), invalidMsg("b"))
		e.wantErr(err, provider.ErrInvalidArgument, "Enqueue with an invalid item")
		e.wantPermanent(err, "Enqueue with an invalid item")
		e.fetchNone()
		{
			a := e.admin()
			_, err := a.GetInstance(e.ctx, "a")
			e.wantErr(err, provider.ErrNotFound, "GetInstance(a)")
		}
	}},
	{name: "EnqueueEmptyInstanceIDInvalid", run: func(e *env) {
		m := eventMsg("a", "x", 1)
		m.InstanceID = ""
		e.wantErr(errOf(e.p.Enqueue(e.ctx, eventMsg("a", "ok", 1), m)), provider.ErrInvalidArgument, "Enqueue with an empty instance ID")
		e.fetchNone()
	}},
	{name: "TokenIsDeadAfterAck", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
		e.lockLost(e.ackErr(turnAck(it, 1, e.externalEvent(3, "again"))), "ack after ack")
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew after ack")
		e.lockLost(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon after ack")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
		e.fetchNone()
	}},
	{name: "TokenIsDeadAfterAbandon", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Minute}), "abandon")
		late := turnAck(it, 1, e.externalEvent(2, "go"))
		late.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		e.lockLost(e.ackErr(late), "ack after abandon")
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew after abandon")
		e.lockLost(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon after abandon")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1})
		e.fetchWorkNone(workOpts())
		e.clock.Advance(time.Minute)
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", itemNames(again.Messages), []string{"go"})
	}},
	{name: "CallsAfterCloseReturnErrClosed", run: func(e *env) {
		e.createInstance("a")
		e.noErr(e.p.Close(), "Close")
		e.wantErr(errOf(e.p.Enqueue(e.ctx, eventMsg("a", "x", 1))), provider.ErrClosed, "Enqueue after Close")
		_, err := e.p.FetchOrchestrationItems(e.ctx, fetchOpts())
		e.wantErr(err, provider.ErrClosed, "FetchOrchestrationItems after Close")
		_, err = e.p.ReadHistory(e.ctx, "a", 0)
		e.wantErr(err, provider.ErrClosed, "ReadHistory after Close")
		e.wantErr(e.ackErr(&provider.TurnAck{LockToken: "t", ExecutionID: 1}), provider.ErrClosed, "ack after Close")
		e.wantErr(e.p.RenewOrchestrationItemLock(e.ctx, "t", lockTimeout), provider.ErrClosed, "renew after Close")
		e.wantPermanent(err, "ErrClosed")
	}},
}
