package history

import (
	"encoding/json"
	"fmt"
)

// WorkItemKind names the kind of a WorkItem (its JSON "type" field).
type WorkItemKind string

const (
	// WorkStartOrchestration starts execution ExecutionID (normally 1) of
	// InstanceID. Fields: Name, Version (empty = resolve when started), Input,
	// Parent (for sub-orchestrations).
	WorkStartOrchestration WorkItemKind = "StartOrchestration"
	// WorkActivityExecute runs activity ID of execution ExecutionID. Fields:
	// Name, Input, SessionID, Queue, HeartbeatTimeoutMs, and Data: the
	// latest heartbeat details of the call's previous attempt (a retry).
	// It is the only worker-queue kind.
	WorkActivityExecute WorkItemKind = "ActivityExecute"
	// WorkActivityCompleted: ExecutionID, ID, Output.
	WorkActivityCompleted WorkItemKind = "ActivityCompleted"
	// WorkActivityFailed: ExecutionID, ID, Error; Data, the attempt's
	// latest heartbeat details (for the next attempt of a retried call).
	WorkActivityFailed WorkItemKind = "ActivityFailed"
	// WorkTimerFired: ExecutionID, ID, FireAtMs. Queued with its visibility
	// delayed until FireAtMs, so a timer is nothing but a delayed message.
	WorkTimerFired WorkItemKind = "TimerFired"
	// WorkExternalRaised delivers external event Name with Data.
	WorkExternalRaised WorkItemKind = "ExternalRaised"
	// WorkSubOrchCompleted goes to the parent InstanceID: ExecutionID is the
	// parent's execution, ID its SubOrchestrationScheduled event,
	// ChildInstanceID the child. Fields: Output.
	WorkSubOrchCompleted WorkItemKind = "SubOrchCompleted"
	// WorkSubOrchFailed is WorkSubOrchCompleted's failure twin. Fields: Error.
	WorkSubOrchFailed WorkItemKind = "SubOrchFailed"
	// WorkCancelInstance requests cancellation. Fields: Reason; Error, for
	// an instance timeout (kind "timeout").
	WorkCancelInstance WorkItemKind = "CancelInstance"
	// WorkContinueAsNew starts execution ExecutionID of InstanceID with Input.
	// Fields: Name, Version, Input.
	WorkContinueAsNew WorkItemKind = "ContinueAsNew"
)

// WorkItemKinds lists every known work-item kind, in declaration order.
var WorkItemKinds = []WorkItemKind{
	WorkStartOrchestration, WorkActivityExecute, WorkActivityCompleted, WorkActivityFailed,
	WorkTimerFired, WorkExternalRaised, WorkSubOrchCompleted, WorkSubOrchFailed,
	WorkCancelInstance, WorkContinueAsNew,
}

// WorkItem is a queue message. Which fields are set depends on Kind.
type WorkItem struct {
	Kind WorkItemKind `json:"type"`
	// InstanceID is the instance the message is delivered to.
	InstanceID string `json:"instanceId"`
	// ExecutionID is the target execution; completions of an older execution
	// are dropped by the runtime.
	ExecutionID int64 `json:"executionId,omitempty"`
	// ID is the scheduling event the message completes (activity, timer,
	// sub-orchestration) or, for ActivityExecute, the activity id.
	ID int64 `json:"id,omitempty"`

	Name            string          `json:"name,omitempty"`
	Version         string          `json:"version,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           *ErrorDetails   `json:"error,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	FireAtMs        int64           `json:"fireAtMs,omitempty"`
	SessionID       string          `json:"sessionId,omitempty"`
	ChildInstanceID string          `json:"childInstanceId,omitempty"`
	Parent          *ParentRef      `json:"parent,omitempty"`
	// TraceParent is the W3C trace context (a traceparent header value)
	// of a StartOrchestration, ContinueAsNew or ActivityExecute, when
	// tracing is on: the span the work belongs under.
	TraceParent string `json:"traceParent,omitempty"`
	// TimeoutMs, on StartOrchestration, is the instance timeout in
	// milliseconds (0: none).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Values, on ContinueAsNew, are the instance's values the next
	// execution starts with (history.Event.Values).
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// Queue, on ActivityExecute, routes the activity to the runtimes that
	// serve that queue ("" is the default queue).
	Queue string `json:"queue,omitempty"`
	// HeartbeatTimeoutMs, on ActivityExecute, fails an attempt that has
	// not heartbeated for that many milliseconds (0: none).
	HeartbeatTimeoutMs int64 `json:"heartbeatTimeoutMs,omitempty"`
}

type wrule struct{ exec, id, name, errDetails, fireAt, child bool }

var workRules = map[WorkItemKind]wrule{
	WorkStartOrchestration: {exec: true, name: true},
	WorkActivityExecute:    {exec: true, id: true, name: true},
	WorkActivityCompleted:  {exec: true, id: true},
	WorkActivityFailed:     {exec: true, id: true, errDetails: true},
	WorkTimerFired:         {exec: true, id: true, fireAt: true},
	WorkExternalRaised:     {name: true},
	WorkSubOrchCompleted:   {exec: true, id: true, child: true},
	WorkSubOrchFailed:      {exec: true, id: true, child: true, errDetails: true},
	WorkCancelInstance:     {},
	WorkContinueAsNew:      {exec: true, name: true},
}

// Known reports whether k is a kind this release understands.
func (k WorkItemKind) Known() bool {
	_, ok := workRules[k]
	return ok
}

// Validate reports whether w is well formed for its kind. The error wraps ErrInvalid.
func (w *WorkItem) Validate() error {
	if w == nil {
		return fmt.Errorf("%w: nil work item", ErrInvalid)
	}
	r, ok := workRules[w.Kind]
	if !ok {
		return fmt.Errorf("%w: unknown work item type %q", ErrInvalid, w.Kind)
	}
	switch {
	case w.InstanceID == "":
		return fmt.Errorf("%w: %s work item has no instanceId", ErrInvalid, w.Kind)
	case w.ExecutionID < 0 || (r.exec && w.ExecutionID == 0):
		return fmt.Errorf("%w: %s work item has executionId %d", ErrInvalid, w.Kind, w.ExecutionID)
	case w.ID < 0 || (r.id && w.ID == 0):
		return fmt.Errorf("%w: %s work item has id %d", ErrInvalid, w.Kind, w.ID)
	case r.name && w.Name == "":
		return fmt.Errorf("%w: %s work item has no name", ErrInvalid, w.Kind)
	case r.errDetails && w.Error == nil:
		return fmt.Errorf("%w: %s work item has no error", ErrInvalid, w.Kind)
	case r.fireAt && w.FireAtMs <= 0:
		return fmt.Errorf("%w: %s work item has no fireAtMs", ErrInvalid, w.Kind)
	case r.child && w.ChildInstanceID == "":
		return fmt.Errorf("%w: %s work item has no childInstanceId", ErrInvalid, w.Kind)
	}
	if w.Error != nil {
		if err := w.Error.Validate(); err != nil {
			return fmt.Errorf("%s work item: %w", w.Kind, err)
		}
	}
	return nil
}

// EncodeWorkItem returns the storage JSON of w after validating it.
func EncodeWorkItem(w *WorkItem) ([]byte, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s work item: %v", ErrInvalid, w.Kind, err)
	}
	return b, nil
}

// DecodeWorkItem parses and validates the storage JSON of one work item.
// Every failure wraps ErrInvalid.
func DecodeWorkItem(data []byte) (WorkItem, error) {
	var w WorkItem
	if err := json.Unmarshal(data, &w); err != nil {
		return WorkItem{}, fmt.Errorf("%w: decoding work item: %v", ErrInvalid, err)
	}
	if err := w.Validate(); err != nil {
		return WorkItem{}, err
	}
	return w, nil
}
