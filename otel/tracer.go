// Package duroxideotel traces duroxide orchestrations with OpenTelemetry:
// a span per orchestration turn and per activity attempt, linked across
// processes through the instance's history. It lives in its own module so
// that the duroxide core does not depend on OpenTelemetry; metrics stay
// Prometheus (see the httpapi package).
//
// Set it up in every process that runs a runtime, and pass a span's trace
// context when starting an instance:
//
//	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{
//		Tracer: duroxideotel.NewTracer(nil), // the global TracerProvider
//	})
//	...
//	ctx, span := tracer.Start(ctx, "checkout")
//	err = client.StartOrchestration(ctx, "order-42", "Checkout", in,
//		&duroxide.StartOptions{TraceParent: duroxideotel.TraceParent(ctx)})
//	span.End()
//
// Spans:
//   - "turn NAME" (internal) for each turn of orchestration NAME, a child
//     of the span the instance was started under (StartOptions.TraceParent,
//     recorded in its history), or a root when there was none;
//   - "activity NAME" (internal) for each attempt of activity NAME, a child
//     of the turn that scheduled it; the activity's context carries the
//     span, so spans the activity starts from it nest under it;
//   - a sub-orchestration's turns are children of the parent's turn that
//     started it; a ContinueAsNew keeps the instance's trace context.
//
// Attributes: duroxide.instance_id, duroxide.orchestration,
// duroxide.orchestration_version, duroxide.execution_id, duroxide.attempt
// on turns; duroxide.instance_id, duroxide.execution_id, duroxide.activity,
// duroxide.activity_id, duroxide.attempt on activities. An activity that
// returns an error ends its span with status Error and the error recorded.
//
// Turns replay orchestration code; a turn span covers the replay and the
// commit of the turn, not the orchestration's whole lifetime (that is the
// span of the caller that started it, or of the turns between them).
package duroxideotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/duroxide/duroxide-go"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/duroxide/duroxide-go/otel"

// Attribute keys.
const (
	AttrInstanceID    = attribute.Key("duroxide.instance_id")
	AttrOrchestration = attribute.Key("duroxide.orchestration")
	AttrVersion       = attribute.Key("duroxide.orchestration_version")
	AttrExecutionID   = attribute.Key("duroxide.execution_id")
	AttrAttempt       = attribute.Key("duroxide.attempt")
	AttrActivity      = attribute.Key("duroxide.activity")
	AttrActivityID    = attribute.Key("duroxide.activity_id")
)

// Options configures NewTracer. Nil means defaults.
type Options struct {
	// TracerProvider makes the spans (default: otel.GetTracerProvider(),
	// looked up at each span, so a provider set later is used).
	TracerProvider trace.TracerProvider
}

// Tracer implements duroxide.Tracer with OpenTelemetry.
type Tracer struct {
	tp trace.TracerProvider
}

var _ duroxide.Tracer = (*Tracer)(nil)

// NewTracer returns a tracer for RuntimeOptions.Tracer.
func NewTracer(opts *Options) *Tracer {
	t := &Tracer{}
	if opts != nil {
		t.tp = opts.TracerProvider
	}
	return t
}

func (t *Tracer) tracer() trace.Tracer {
	tp := t.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// w3c is the W3C trace-context propagator: the history records its
// traceparent value whatever global propagator the process uses.
var w3c = propagation.TraceContext{}

// parent returns ctx with the remote span of a traceparent value, if valid.
func parent(ctx context.Context, traceParent string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent})
}

// TraceParent returns the W3C traceparent value of ctx's span, for
// StartOptions.TraceParent, or "" when ctx has no valid span.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// StartTurn starts the span of a turn; see duroxide.Tracer.
func (t *Tracer) StartTurn(s duroxide.TurnSpan) (string, func(error)) {
	ctx, span := t.tracer().Start(parent(context.Background(), s.TraceParent), "turn "+s.Orchestration,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			AttrInstanceID.String(s.InstanceID),
			AttrOrchestration.String(s.Orchestration),
			AttrVersion.String(s.Version),
			AttrExecutionID.Int64(s.ExecutionID),
			AttrAttempt.Int(s.Attempt),
		))
	return TraceParent(ctx), endFunc(span)
}

// StartActivity starts the span of an activity attempt; see
// duroxide.Tracer.
func (t *Tracer) StartActivity(ctx context.Context, a duroxide.ActivitySpan) (context.Context, func(error)) {
	ctx, span := t.tracer().Start(parent(ctx, a.TraceParent), "activity "+a.Name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			AttrInstanceID.String(a.InstanceID),
			AttrExecutionID.Int64(a.ExecutionID),
			AttrActivity.String(a.Name),
			AttrActivityID.Int64(a.ActivityID),
			AttrAttempt.Int(a.Attempt),
		))
	return ctx, endFunc(span)
}

func endFunc(span trace.Span) func(error) {
	return func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
