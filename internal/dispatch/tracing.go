package dispatch

import (
	"context"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Tracer receives a span per orchestration turn and per activity attempt
// (see duroxide.Tracer, which is this type).
type Tracer interface {
	// StartTurn starts the span of one orchestration turn and returns its
	// trace context as a W3C traceparent value (recorded on the
	// activities and sub-orchestrations the turn starts, so their spans
	// nest under it) and a function that ends the span.
	StartTurn(TurnSpan) (traceParent string, end func(err error))
	// StartActivity starts the span of one activity attempt. The returned
	// context, derived from ctx, is the activity's: spans the activity
	// starts from it nest under the attempt's span.
	StartActivity(ctx context.Context, a ActivitySpan) (context.Context, func(err error))
}

// TurnSpan describes an orchestration turn to a Tracer.
type TurnSpan struct {
	InstanceID    string
	Orchestration string
	Version       string
	ExecutionID   int64
	// Attempt counts deliveries of the turn's messages, from 1.
	Attempt int
	// TraceParent is the trace context the instance was started under
	// (from its OrchestrationStarted event or its start message), or "".
	TraceParent string
}

// ActivitySpan describes an activity attempt to a Tracer.
type ActivitySpan struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
	Name        string
	// Attempt counts deliveries of the activity, from 1.
	Attempt int
	// TraceParent is the trace context of the turn that scheduled it, or "".
	TraceParent string
}

// traceTurn starts the span of the turn of it (after withHistory, so its
// History is whole) and returns the instance's trace context, the turn's
// and the span's end.
func (r *Runtime) traceTurn(it *provider.OrchestrationItem) (root, tp string, end func(error)) {
	if r.o.Tracer == nil {
		return "", "", func(error) {}
	}
	s := TurnSpan{InstanceID: it.InstanceID, Attempt: it.AttemptCount}
	if it.Instance != nil {
		s.Orchestration, s.Version, s.ExecutionID = it.Instance.OrchestrationName, it.Instance.OrchestrationVersion, it.Instance.CurrentExecutionID
	}
	if len(it.History) > 0 && it.HistoryAfter == 0 && it.History[0].Kind == history.OrchestrationStarted {
		h := &it.History[0]
		s.Orchestration, s.Version, s.TraceParent = h.Name, h.Version, h.TraceParent
	}
	for i := range it.Messages {
		m := &it.Messages[i]
		if (m.Kind == history.WorkStartOrchestration || m.Kind == history.WorkContinueAsNew) && (s.TraceParent == "" || s.Orchestration == "") {
			s.Orchestration, s.TraceParent = m.Name, m.TraceParent
			if m.Version != "" {
				s.Version = m.Version
			}
			if m.ExecutionID > s.ExecutionID {
				s.ExecutionID = m.ExecutionID
			}
		}
	}
	if s.Version == "" && s.Orchestration != "" {
		if _, v, ok := r.reg.Orchestration(s.Orchestration, ""); ok {
			s.Version = v // a first turn runs the registry's default version
		}
	}
	tp, end = r.o.Tracer.StartTurn(s)
	return s.TraceParent, tp, end
}

// stampTrace records trace contexts on the work a turn starts: its
// activities and sub-orchestrations nest under the turn's span (tp), and
// a ContinueAsNew keeps the instance's (root) trace context.
func stampTrace(ack *provider.TurnAck, root, tp string) {
	if tp == "" && root == "" {
		return
	}
	for _, w := range ack.WorkerItems {
		if w.Item.Kind == history.WorkActivityExecute && w.Item.TraceParent == "" {
			w.Item.TraceParent = tp
		}
	}
	for _, m := range ack.OrchestratorItems {
		switch {
		case m.Item.TraceParent != "":
		case m.Item.Kind == history.WorkStartOrchestration:
			m.Item.TraceParent = tp
		case m.Item.Kind == history.WorkContinueAsNew:
			m.Item.TraceParent = root
		}
	}
}

// traceActivity starts the span of an activity attempt.
func (r *Runtime) traceActivity(ctx context.Context, l *provider.WorkItemLease) (context.Context, func(error)) {
	if r.o.Tracer == nil {
		return ctx, func(error) {}
	}
	return r.o.Tracer.StartActivity(ctx, ActivitySpan{InstanceID: l.InstanceID, ExecutionID: l.ExecutionID,
		ActivityID: l.ActivityID, Name: l.Item.Name, Attempt: l.AttemptCount, TraceParent: l.Item.TraceParent})
}
