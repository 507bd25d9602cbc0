package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// createInstance starts instanceID and acks its first turn (event 1,
// OrchestrationStarted, status Running). The instance is left unlocked with
// an empty queue.
func (e *env) createInstance(instanceID string) {
	e.t.Helper()
	e.enqueue(startMsg(instanceID))
	e.ackStart(e.fetchFor(instanceID))
}

// runStart fetches id's start and acks its first turn (event 1, Running).
func (e *env) runStart(id string) {
	e.t.Helper()
	it := e.fetchFor(id)
	mustEqual(e.t, "first turn of "+id, kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
	e.ackStart(it)
}

// runTurn triggers a turn of instanceID with an external event, fetches it and
// acks what build returns. build gets the item and the next free event ID;
// runTurn fills in LockToken, and ExecutionID when build left it 0 (the
// current execution, or 1).
func (e *env) runTurn(instanceID string, build func(it *provider.OrchestrationItem, next int64) *provider.TurnAck) {
	e.t.Helper()
	e.enqueue(eventMsg(instanceID, "go", nil))
	it := e.fetchFor(instanceID)
	a := build(it, nextEventID(it))
	a.LockToken = it.LockToken
	if a.ExecutionID == 0 {
		a.ExecutionID = 1
		if it.Instance != nil && it.Instance.CurrentExecutionID > 0 {
			a.ExecutionID = it.Instance.CurrentExecutionID
		}
	}
	e.ack(a)
}

// runningTurn runs a turn of id (triggered by an external event) that leaves it Running.
func (e *env) runningTurn(id string) {
	e.t.Helper()
	e.runTurn(id, func(_ *provider.OrchestrationItem, next int64) *provider.TurnAck {
		return &provider.TurnAck{History: []history.Event{e.externalEvent(next, "go")}, Metadata: runningMeta()}
	})
}

// schedule runs a turn of instanceID that schedules n activities of
// execution 1 (activity ID = event ID) and returns their IDs.
func (e *env) schedule(instanceID string, n int) []int64 {
	e.t.Helper()
	var ids []int64
	e.runTurn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		a := &provider.TurnAck{Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning}}
		for i := range int64(n) {
			id := next + i
			ids = append(ids, id)
			a.History = append(a.History, e.scheduledEvent(id))
			a.WorkerItems = append(a.WorkerItems, activityMsg(instanceID, id, ""))
		}
		return a
	})
	return ids
}

// finish runs a turn that ends instanceID's current execution with status
// Completed (output "out-<id>"), Failed or Canceled (error message "boom").
func (e *env) finish(instanceID string, status provider.Status) {
	e.t.Helper()
	e.runTurn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		meta := provider.ExecutionMetadata{Status: status}
		var ev history.Event
		switch status {
		case provider.StatusCompleted:
			ev = e.completedEvent(next, "out-"+instanceID)
			meta.Output = js("out-" + instanceID)
		case provider.StatusFailed, provider.StatusCanceled:
			kind := history.ErrorApplication
			if status == provider.StatusCanceled {
				kind = history.ErrorCanceled
			}
			ev = history.Event{EventID: next, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: errDetails(kind, "boom")}
			meta.Error = errDetails(kind, "boom")
		default:
			e.t.Fatalf("finish: unsupported status %s", status)
		}
		return &provider.TurnAck{History: []history.Event{ev}, Metadata: meta}
	})
}

// createFinished creates instanceID and ends it with status.
func (e *env) createFinished(instanceID string, status provider.Status) {
	e.t.Helper()
	e.createInstance(instanceID)
	e.finish(instanceID, status)
}

// continueAsNew runs the two turns of a continue-as-new of running instance
// instanceID: its current execution appends OrchestrationContinuedAsNew and
// ends with status ContinuedAsNew, then the next execution starts with event
// 1 and input. The clock advances by step before each turn.
func (e *env) continueAsNew(instanceID string, input any, step time.Duration) {
	e.t.Helper()
	var nextExec int64
	e.clock.Advance(step)
	e.runTurn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		nextExec = it.Instance.CurrentExecutionID + 1
		return &provider.TurnAck{
			ExecutionID: it.Instance.CurrentExecutionID,
			History: []history.Event{{
				EventID: next, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js(input),
			}},
			Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
			OrchestratorItems: []*provider.OrchestratorMessage{continueAsNewMsg(instanceID, nextExec, input)},
		}
	})
	e.clock.Advance(step)
	it := e.fetchFor(instanceID)
	mustEqual(e.t, "continue-as-new turn messages", kinds(it.Messages), []history.WorkItemKind{history.WorkContinueAsNew})
	meta := runningMeta()
	meta.Input = js(input)
	e.ack(&provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: nextExec,
		History: []history.Event{e.startedEvent(input)}, Metadata: meta,
	})
}

// createChild creates child under execution 1 of parent and acks its first turn.
func (e *env) createChild(parent, child string) {
	e.t.Helper()
	e.enqueue(childStartMsg(parent, 1, 2, child))
	it := e.fetchFor(child)
	meta := runningMeta()
	meta.ParentInstanceID = parent
	meta.ParentExecutionID = 1
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: meta})
}

// cancelTurn runs a turn of instanceID whose ack cancels refs.
func (e *env) cancelTurn(instanceID string, refs ...provider.ActivityRef) {
	e.t.Helper()
	e.runTurn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		a := &provider.TurnAck{CanceledActivities: refs}
		for i, r := range refs {
			a.History = append(a.History, history.Event{
				EventID: next + int64(i), Kind: history.ActivityCancelRequested,
				TimestampMs: ms(e.clock.Now()), SourceEventID: max(r.ActivityID, 1),
			})
		}
		return a
	})
}
