package replay

import (
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
)

// Limits bounds what one execution may record, so that a runaway or
// hostile orchestration fails instead of exhausting the server's memory
// and store. A zero field means no limit. The names of the limits are
// those of the public runtime options (see the Limit* constants).
type Limits struct {
	// MaxActions bounds the new events the code records in one turn:
	// activities, timers, waits, sub-orchestrations, custom status updates,
	// Now and NewGUID. The engine counts them as the code records them and
	// stops the code at the first one over the limit.
	MaxActions int
	// MaxEvents bounds the events of the execution's history.
	MaxEvents int
	// MaxBytes bounds the size of the execution's history, as EventSize
	// measures it.
	MaxBytes int64
	// MaxPayload bounds one payload, in bytes: the input of the execution,
	// of an activity or of a sub-orchestration, a custom status, the data
	// of an event, the result of an activity or a child, the output, the
	// input of the next execution.
	MaxPayload int
	// MaxValues bounds the number of values (SetValue keys) an instance
	// holds; MaxValueBytes the size of one value.
	MaxValues     int
	MaxValueBytes int
}

// Names of the limits, as the runtime options call them.
const (
	LimitActions = "MaxActionsPerTurn"
	LimitEvents  = "MaxHistoryEvents"
	LimitBytes   = "MaxHistoryBytes"
	LimitPayload = "MaxPayloadBytes"
	LimitValues  = "MaxValues"
	LimitValue   = "MaxValueBytes"
)

// ErrLimitExceeded is matched by every *LimitError.
var ErrLimitExceeded = errors.New("limit exceeded")

// LimitError reports that something went over one of the limits: What
// (for example "input of activity Charge") reached Value, over the limit
// named Limit, whose value is Max.
type LimitError struct {
	Limit string
	Max   int64
	Value int64
	What  string
}

func (e *LimitError) Error() string {
	unit := ""
	if e.Limit == LimitBytes || e.Limit == LimitPayload || e.Limit == LimitValue {
		unit = " bytes"
	}
	return fmt.Sprintf("%s: %d%s, over the limit %s = %d", e.What, e.Value, unit, e.Limit, e.Max)
}

// Is makes errors.Is(err, ErrLimitExceeded) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitExceeded }

// ErrorDetails is the failure recorded in history: kind "configuration"
// (the code or the runtime's limits must change; retrying does not help)
// with code history.CodeLimitExceeded.
func (e *LimitError) ErrorDetails() *history.ErrorDetails {
	return &history.ErrorDetails{Kind: history.ErrorConfiguration, Code: history.CodeLimitExceeded,
		Message: e.Error(), Type: "*duroxide.LimitError"}
}

// eventOverhead is what EventSize counts for the fields of an event that
// are not text: its ID, kind, times and the JSON around them.
const eventOverhead = 64

// EventSize estimates the bytes an event takes in a store: its payloads
// and texts (names, inputs, outputs, data, custom status, error texts,
// reasons, IDs) plus a fixed 64 bytes for the rest. It is what
// Limits.MaxBytes measures, computed without encoding the event.
func EventSize(ev *history.Event) int64 {
	n := eventOverhead + len(ev.Kind) + len(ev.Name) + len(ev.Version) + len(ev.Input) + len(ev.Output) +
		len(ev.Data) + len(ev.Reason) + len(ev.SessionID) + len(ev.ChildInstanceID) + len(ev.CustomStatus) + len(ev.GUID)
	if e := ev.Error; e != nil {
		n += len(e.Kind) + len(e.Message) + len(e.Type) + len(e.Details) + len(e.Code)
		if d := e.Divergence; d != nil {
			n += len(d.Expected) + len(d.Got)
		}
	}
	if p := ev.Parent; p != nil {
		n += len(p.InstanceID)
	}
	for k, v := range ev.Values {
		n += len(k) + len(v)
	}
	return int64(n)
}

// payloadOf returns the largest payload of an event and names it.
func payloadOf(ev *history.Event) (int, string) {
	switch ev.Kind {
	case history.OrchestrationStarted:
		return len(ev.Input), "input of the orchestration"
	case history.ActivityScheduled:
		return len(ev.Input), "input of activity " + ev.Name
	case history.SubOrchestrationScheduled:
		return len(ev.Input), "input of sub-orchestration " + ev.Name
	case history.DetachedOrchestrationScheduled:
		return len(ev.Input), "input of detached start " + ev.Name
	case history.CustomStatusUpdated:
		return len(ev.CustomStatus), "custom status"
	case history.ExternalEvent:
		return len(ev.Data), "data of event " + ev.Name
	case history.ActivityCompleted:
		return len(ev.Output), fmt.Sprintf("result of activity #%d", ev.SourceEventID)
	case history.SubOrchestrationCompleted:
		return len(ev.Output), fmt.Sprintf("output of sub-orchestration #%d", ev.SourceEventID)
	}
	return 0, ""
}

// checkPayload sets x.limit when ev carries a payload over the limit.
func (x *Execution) checkPayload(ev *history.Event) {
	max := x.cfg.Limits.MaxPayload
	if max <= 0 || x.limit != nil {
		return
	}
	if n, what := payloadOf(ev); n > max {
		x.limit = &LimitError{Limit: LimitPayload, Max: int64(max), Value: int64(n), What: what}
	}
}

// checkHistory sets x.limit when the history holds too many events or
// bytes.
func (x *Execution) checkHistory() {
	l := x.cfg.Limits
	switch {
	case x.limit != nil:
	case l.MaxEvents > 0 && len(x.hist) > l.MaxEvents:
		x.limit = &LimitError{Limit: LimitEvents, Max: int64(l.MaxEvents), Value: int64(len(x.hist)), What: "events in the history"}
	case l.MaxBytes > 0 && x.bytes > l.MaxBytes:
		x.limit = &LimitError{Limit: LimitBytes, Max: l.MaxBytes, Value: x.bytes, What: "size of the history"}
	}
}

// checkAction counts a new event the code recorded and checks it against
// the limits.
func (x *Execution) checkAction(ev *history.Event) {
	x.actions++
	if max := x.cfg.Limits.MaxActions; max > 0 && x.actions > max && x.limit == nil {
		x.limit = &LimitError{Limit: LimitActions, Max: int64(max), Value: int64(x.actions), What: "actions recorded in one turn"}
	}
	x.checkPayload(ev)
	x.checkHistory()
}

// checkValue sets x.limit when a new ValueSet event sets a value over
// MaxValueBytes, or a new key beyond MaxValues.
func (x *Execution) checkValue(ev *history.Event) {
	if x.limit != nil || ev.Data == nil {
		return
	}
	if max := x.cfg.Limits.MaxValueBytes; max > 0 && len(ev.Data) > max {
		x.limit = &LimitError{Limit: LimitValue, Max: int64(max), Value: int64(len(ev.Data)), What: "value " + ev.Name}
		return
	}
	if _, ok := x.values[ev.Name]; !ok {
		if max := x.cfg.Limits.MaxValues; max > 0 && len(x.values) >= max {
			x.limit = &LimitError{Limit: LimitValues, Max: int64(max), Value: int64(len(x.values) + 1),
				What: "values of the instance (setting " + ev.Name + ")"}
		}
	}
}

// checkEnding checks the payload that ends the execution: its output, or
// the input of the next execution.
func (x *Execution) checkEnding() {
	max := x.cfg.Limits.MaxPayload
	if max <= 0 || x.limit != nil || !x.finished || x.panicked != nil || x.cancelReq != nil {
		return
	}
	n, what := len(x.output), "output of the orchestration"
	var can *ContinueAsNewError
	switch {
	case errors.As(x.err, &can):
		n, what = len(can.Input), "input of the next execution (ContinueAsNew)"
	case x.err != nil:
		return
	}
	if n > max {
		x.limit = &LimitError{Limit: LimitPayload, Max: int64(max), Value: int64(n), What: what}
	}
}
