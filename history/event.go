package history

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every decoding and validation error of this package.
var ErrInvalid = errors.New("invalid history data")

// EventKind names the kind of an Event. It is the JSON "type" field and the
// event_type column of the stores. Values are part of the storage contract.
type EventKind string

// Lifecycle events.
const (
	// OrchestrationStarted is always event 1 of an execution. Fields: Name,
	// Version, Input, Parent (for sub-orchestrations), TraceParent (when
	// started under a trace), FireAtMs (the instance deadline of
	// StartOptions.Timeout; 0: none).
	OrchestrationStarted EventKind = "OrchestrationStarted"
	// OrchestrationCompleted is terminal. Fields: Output.
	OrchestrationCompleted EventKind = "OrchestrationCompleted"
	// OrchestrationFailed is terminal. Fields: Error. Cancellation is a
	// failure with Error.Kind == ErrorCanceled.
	OrchestrationFailed EventKind = "OrchestrationFailed"
	// OrchestrationContinuedAsNew ends an execution; the next one starts with
	// Input. Fields: Input, Version (empty = same version).
	OrchestrationContinuedAsNew EventKind = "OrchestrationContinuedAsNew"
	// OrchestrationCancelRequested records a consumed cancel request.
	// Fields: Reason; FireAtMs, the end of the grace period during which the
	// code may clean up (0: none, the execution ends at once; a TimerFired
	// whose SourceEventID is this event ends the grace period); Error, set
	// when the request is an instance timeout (kind "timeout"), is then the
	// execution's failure.
	OrchestrationCancelRequested EventKind = "OrchestrationCancelRequested"
)

// Activity and timer events.
const (
	// ActivityScheduled schedules an activity; its EventID is the activity
	// id. Fields: Name, Input, SessionID, Queue, HeartbeatTimeoutMs,
	// StartToCloseTimeoutMs, ScheduleToCloseTimeoutMs, and Data: the
	// latest heartbeat details of the call's previous attempt, handed to
	// this one (a retry).
	ActivityScheduled EventKind = "ActivityScheduled"
	// ActivityCompleted: SourceEventID, Output.
	ActivityCompleted EventKind = "ActivityCompleted"
	// ActivityFailed: SourceEventID, Error; Data, the attempt's latest
	// heartbeat details.
	ActivityFailed EventKind = "ActivityFailed"
	// ActivityCancelRequested: SourceEventID, Reason. A completion may still follow.
	ActivityCancelRequested EventKind = "ActivityCancelRequested"
	// TimerCreated schedules a timer. Fields: FireAtMs.
	TimerCreated EventKind = "TimerCreated"
	// TimerFired: SourceEventID (a TimerCreated, or the
	// OrchestrationCancelRequested whose grace period ended), FireAtMs.
	TimerFired EventKind = "TimerFired"
	// TimerCanceled records that the orchestration abandoned a timer that
	// has not fired (a canceled task, a timeout whose call ended first).
	// Fields: SourceEventID, Reason. A TimerFired may still follow; it
	// completes nothing.
	TimerCanceled EventKind = "TimerCanceled"
)

// External events.
const (
	// ExternalSubscribed records a wait for the external event Name.
	ExternalSubscribed EventKind = "ExternalSubscribed"
	// ExternalEvent records the arrival of external event Name with Data.
	ExternalEvent EventKind = "ExternalEvent"
	// ExternalSubscribedCanceled: SourceEventID, Reason. Its stored name
	// keeps the spelling it was first written with.
	ExternalSubscribedCanceled EventKind = "ExternalSubscribedCancelled"
)

// Sub-orchestration events.
const (
	// SubOrchestrationScheduled: Name, Version, ChildInstanceID, Input.
	SubOrchestrationScheduled EventKind = "SubOrchestrationScheduled"
	// SubOrchestrationCompleted: SourceEventID, Output.
	SubOrchestrationCompleted EventKind = "SubOrchestrationCompleted"
	// SubOrchestrationFailed: SourceEventID, Error.
	SubOrchestrationFailed EventKind = "SubOrchestrationFailed"
	// SubOrchestrationCancelRequested: SourceEventID, Reason.
	SubOrchestrationCancelRequested EventKind = "SubOrchestrationCancelRequested"
)

// Detached starts.
const (
	// DetachedOrchestrationScheduled records a detached start: the
	// orchestration Name (Version) started as the independent instance
	// ChildInstanceID with Input, with no parent link. The start happens
	// when the turn that recorded it commits; its outcome arrives as a
	// SubOrchestrationCompleted (started) or SubOrchestrationFailed (the ID
	// was taken) whose SourceEventID is this event.
	DetachedOrchestrationScheduled EventKind = "DetachedOrchestrationScheduled"
)

// Metadata and deterministic-value events.
const (
	// CustomStatusUpdated: CustomStatus (absent = cleared).
	CustomStatusUpdated EventKind = "CustomStatusUpdated"
	// NowRecorded records the value returned by OrchestrationContext.Now.
	// Fields: TimeMs.
	NowRecorded EventKind = "NowRecorded"
	// GUIDRecorded records the value returned by OrchestrationContext.NewGUID.
	// Fields: GUID.
	GUIDRecorded EventKind = "GUIDRecorded"
	// ValueSet records OrchestrationContext.SetValue or ClearValue: Name is
	// the key, Data its new value (absent = cleared). The instance's values
	// are kept in the store, readable by clients, and carried to the next
	// execution by ContinueAsNew (OrchestrationStarted.Values).
	ValueSet EventKind = "ValueSet"
	// PatchRecorded records that the execution took the new branch of the
	// code change Name (OrchestrationContext.Patched returned true, or
	// Deprecated ran on a new execution). Fields: Name. It is a marker, not
	// a schedule: code that no longer asks about the patch replays past it.
	PatchRecorded EventKind = "PatchRecorded"
)

// EventKinds lists every known event kind, in declaration order.
var EventKinds = []EventKind{
	OrchestrationStarted, OrchestrationCompleted, OrchestrationFailed,
	OrchestrationContinuedAsNew, OrchestrationCancelRequested,
	ActivityScheduled, ActivityCompleted, ActivityFailed, ActivityCancelRequested,
	TimerCreated, TimerFired,
	ExternalSubscribed, ExternalEvent, ExternalSubscribedCanceled,
	SubOrchestrationScheduled, SubOrchestrationCompleted, SubOrchestrationFailed,
	SubOrchestrationCancelRequested,
	CustomStatusUpdated, NowRecorded, GUIDRecorded,
	PatchRecorded, TimerCanceled,
	DetachedOrchestrationScheduled, ValueSet,
}

// Known reports whether k is a kind this release understands.
func (k EventKind) Known() bool {
	_, ok := eventRules[k]
	return ok
}

// IsTerminal reports whether an event of kind k ends its execution.
func (k EventKind) IsTerminal() bool {
	return k == OrchestrationCompleted || k == OrchestrationFailed || k == OrchestrationContinuedAsNew
}

// ParentRef identifies the scheduling event of a sub-orchestration in its
// parent: which instance, which execution of it, and which event.
type ParentRef struct {
	InstanceID  string `json:"instanceId"`
	ExecutionID int64  `json:"executionId"`
	EventID     int64  `json:"eventId"`
}

// Event is one entry of an execution's history. Which fields are set depends
// on Kind; see the Kind constants. Unused fields are zero and omitted from JSON.
type Event struct {
	EventID int64     `json:"eventId"`
	Kind    EventKind `json:"type"`
	// SourceEventID links a completion or breadcrumb to its scheduling event.
	SourceEventID int64 `json:"sourceEventId,omitempty"`
	// TimestampMs is the wall-clock creation time in epoch milliseconds. It is
	// informational: replay never depends on it.
	TimestampMs int64 `json:"timestampMs"`

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
	CustomStatus    json.RawMessage `json:"customStatus,omitempty"`
	TimeMs          int64           `json:"timeMs,omitempty"`
	GUID            string          `json:"guid,omitempty"`
	// Values, on the OrchestrationStarted of an execution that a
	// ContinueAsNew started, are the instance's values (see ValueSet) as
	// the previous execution left them.
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// TraceParent is the W3C trace context (a traceparent header value)
	// an OrchestrationStarted was started under, when tracing is on. It is
	// informational: replay never depends on it.
	TraceParent string `json:"traceParent,omitempty"`
	// Queue, on ActivityScheduled, is the queue the activity is routed to
	// (ActivityOptions.Queue; "" is the default queue). It is routing
	// only: replay never compares it.
	Queue string `json:"queue,omitempty"`
	// HeartbeatTimeoutMs, on ActivityScheduled, fails an attempt that has
	// not heartbeated for that many milliseconds (0: no heartbeat timeout).
	// Replay never compares it.
	HeartbeatTimeoutMs int64 `json:"heartbeatTimeoutMs,omitempty"`
	// StartToCloseTimeoutMs and ScheduleToCloseTimeoutMs, on
	// ActivityScheduled, are the call's start-to-close (per attempt) and
	// schedule-to-close (whole call) timeouts in milliseconds (0: none),
	// recorded for status tools: the timeouts themselves are durable
	// timers (TimerCreated). Replay never compares them.
	StartToCloseTimeoutMs    int64 `json:"startToCloseTimeoutMs,omitempty"`
	ScheduleToCloseTimeoutMs int64 `json:"scheduleToCloseTimeoutMs,omitempty"`
}

// field requirements per kind.
type rule struct {
	name, source, errDetails, fireAt, child, timeMs, guid bool
}

var eventRules = map[EventKind]rule{
	OrchestrationStarted:            {name: true},
	OrchestrationCompleted:          {},
	OrchestrationFailed:             {errDetails: true},
	OrchestrationContinuedAsNew:     {},
	OrchestrationCancelRequested:    {},
	ActivityScheduled:               {name: true},
	ActivityCompleted:               {source: true},
	ActivityFailed:                  {source: true, errDetails: true},
	ActivityCancelRequested:         {source: true},
	TimerCreated:                    {fireAt: true},
	TimerFired:                      {source: true, fireAt: true},
	ExternalSubscribed:              {name: true},
	ExternalEvent:                   {name: true},
	ExternalSubscribedCanceled:      {source: true},
	SubOrchestrationScheduled:       {name: true, child: true},
	SubOrchestrationCompleted:       {source: true},
	SubOrchestrationFailed:          {source: true, errDetails: true},
	SubOrchestrationCancelRequested: {source: true},
	CustomStatusUpdated:             {},
	NowRecorded:                     {timeMs: true},
	GUIDRecorded:                    {guid: true},
	PatchRecorded:                   {name: true},
	TimerCanceled:                   {source: true},
	DetachedOrchestrationScheduled:  {name: true, child: true},
	ValueSet:                        {name: true},
}

// Validate reports whether e is well formed for its kind. The error wraps
// ErrInvalid.
func (e *Event) Validate() error {
	if e == nil {
		return fmt.Errorf("%w: nil event", ErrInvalid)
	}
	r, ok := eventRules[e.Kind]
	if !ok {
		return fmt.Errorf("%w: unknown event type %q", ErrInvalid, e.Kind)
	}
	if e.EventID < 1 {
		return fmt.Errorf("%w: %s event has eventId %d, want >= 1", ErrInvalid, e.Kind, e.EventID)
	}
	if e.SourceEventID < 0 || (r.source && e.SourceEventID == 0) {
		return fmt.Errorf("%w: %s event %d has sourceEventId %d", ErrInvalid, e.Kind, e.EventID, e.SourceEventID)
	}
	switch {
	case r.name && e.Name == "":
		return fmt.Errorf("%w: %s event %d has no name", ErrInvalid, e.Kind, e.EventID)
	case r.errDetails && e.Error == nil:
		return fmt.Errorf("%w: %s event %d has no error", ErrInvalid, e.Kind, e.EventID)
	case r.fireAt && e.FireAtMs <= 0:
		return fmt.Errorf("%w: %s event %d has no fireAtMs", ErrInvalid, e.Kind, e.EventID)
	case r.child && e.ChildInstanceID == "":
		return fmt.Errorf("%w: %s event %d has no childInstanceId", ErrInvalid, e.Kind, e.EventID)
	case r.timeMs && e.TimeMs == 0:
		return fmt.Errorf("%w: %s event %d has no timeMs", ErrInvalid, e.Kind, e.EventID)
	case r.guid && e.GUID == "":
		return fmt.Errorf("%w: %s event %d has no guid", ErrInvalid, e.Kind, e.EventID)
	}
	if e.Error != nil {
		if err := e.Error.Validate(); err != nil {
			return fmt.Errorf("%s event %d: %w", e.Kind, e.EventID, err)
		}
	}
	return nil
}

// EncodeEvent returns the storage JSON of e after validating it.
func EncodeEvent(e *Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s event %d: %v", ErrInvalid, e.Kind, e.EventID, err)
	}
	return b, nil
}

// DecodeEvent parses and validates the storage JSON of one event. Every
// failure wraps ErrInvalid.
func DecodeEvent(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("%w: decoding event: %v", ErrInvalid, err)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}
