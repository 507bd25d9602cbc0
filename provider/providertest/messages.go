package providertest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// js returns v as JSON.
func js(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ms returns t in epoch milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// enqueue enqueues messages, failing the case on error.
func (e *env) enqueue(msgs ...*provider.OrchestratorMessage) []provider.EnqueueResult {
	e.t.Helper()
	res, err := e.p.Enqueue(e.ctx, msgs...)
	if err != nil {
		e.t.Fatalf("Enqueue: %v", err)
	}
	e.checkResults(msgs, res)
	return res
}

// checkResults fails the case when the results res of a committed
// Enqueue of msgs do not hold one result per message although a message
// asked for one (provider.Provider.Enqueue).
func (e *env) checkResults(msgs []*provider.OrchestratorMessage, res []provider.EnqueueResult) {
	e.t.Helper()
	asked := slices.ContainsFunc(msgs, func(m *provider.OrchestratorMessage) bool {
		c := m.Create
		return m.DedupKey != "" || c != nil && (c.IfAbsent || c.Lock != nil && c.Lock.Replace)
	})
	if asked && len(res) != len(msgs) {
		e.t.Fatalf("Enqueue of %d messages asking for results returned %d results", len(msgs), len(res))
	}
}

// enqueueWork enqueues worker messages, failing the case on error.
func (e *env) enqueueWork(msgs ...*provider.WorkerMessage) {
	e.t.Helper()
	if err := e.h.EnqueueWork(e.ctx, e.p, msgs...); err != nil {
		e.t.Fatalf("EnqueueWork: %v", err)
	}
}

// startMsg is a StartOrchestration message that creates the instance.
func startMsg(instanceID string) *provider.OrchestratorMessage {
	input := js("input-" + instanceID)
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkStartOrchestration, InstanceID: instanceID, ExecutionID: 1,
			Name: testOrch, Version: testVersion, Input: input,
		},
		Create: &provider.NewInstance{OrchestrationName: testOrch, OrchestrationVersion: testVersion, Input: input},
	}
}

// startMsgNoCreate is a StartOrchestration message that does not create the instance row.
func startMsgNoCreate(instanceID string) *provider.OrchestratorMessage {
	m := startMsg(instanceID)
	m.Create = nil
	return m
}

// startNamedMsg is a start message creating instanceID of orchestration name.
func startNamedMsg(instanceID, name string) *provider.OrchestratorMessage {
	m := startMsg(instanceID)
	m.Item.Name = name
	m.Create.OrchestrationName = name
	return m
}

// childStartMsg starts child as a sub-orchestration of parent's
// execution parentExec, scheduled by event eventID; it creates the child.
func childStartMsg(parent string, parentExec, eventID int64, child string) *provider.OrchestratorMessage {
	m := startMsg(child)
	m.Item.Parent = &history.ParentRef{InstanceID: parent, ExecutionID: parentExec, EventID: eventID}
	m.Create.ParentInstanceID = parent
	m.Create.ParentExecutionID = parentExec
	return m
}

// eventMsg is an ExternalRaised message for instanceID named name.
func eventMsg(instanceID, name string, data any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item:       history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: instanceID, Name: name, Data: js(data)},
	}
}

// invalidMsg is an ExternalRaised message without a name: Validate fails.
func invalidMsg(instanceID string) *provider.OrchestratorMessage {
	m := eventMsg(instanceID, "x", 1)
	m.Item.Name = ""
	return m
}

// completionMsg is an ActivityCompleted message for activity id of execution 1.
func completionMsg(instanceID string, id int64, result any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkActivityCompleted, InstanceID: instanceID, ExecutionID: 1, ID: id, Output: js(result),
		},
	}
}

// timerMsg is a TimerFired message for timer id, visible at fireAt.
func timerMsg(instanceID string, id int64, fireAt time.Time) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		VisibleAt:  fireAt,
		Item: history.WorkItem{
			Kind: history.WorkTimerFired, InstanceID: instanceID, ExecutionID: 1, ID: id, FireAtMs: ms(fireAt),
		},
	}
}

// subOrchFailedMsg tells parent that its child (event eventID) failed to start.
func subOrchFailedMsg(parent string, parentExec, eventID int64, child string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: parent,
		Item: history.WorkItem{
			Kind: history.WorkSubOrchFailed, InstanceID: parent, ExecutionID: parentExec, ID: eventID,
			ChildInstanceID: child,
			Error:           &history.ErrorDetails{Kind: history.ErrorApplication, Message: "instance " + child + " already exists"},
		},
	}
}

// continueAsNewMsg starts execution exec of instanceID with input.
func continueAsNewMsg(instanceID string, exec int64, input any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkContinueAsNew, InstanceID: instanceID, ExecutionID: exec,
			Name: testOrch, Version: testVersion, Input: js(input),
		},
	}
}

// cancelMsg is a CancelInstance message for id.
func cancelMsg(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: id, Reason: "stop"},
	}
}

// activityMsg is an ActivityExecute worker message for activity id of execution 1.
func activityMsg(instanceID string, id int64, session string) *provider.WorkerMessage {
	return &provider.WorkerMessage{
		InstanceID: instanceID, ExecutionID: 1, ActivityID: id, SessionID: session,
		Item: history.WorkItem{
			Kind: history.WorkActivityExecute, InstanceID: instanceID, ExecutionID: 1, ID: id,
			Name: "Act", Input: js(id), SessionID: session,
		},
	}
}
