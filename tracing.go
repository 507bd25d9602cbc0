package duroxide

import (
	"fmt"
	"regexp"

	"github.com/duroxide/duroxide-go/internal/dispatch"
)

// Tracer receives a span per orchestration turn and per activity attempt
// (RuntimeOptions.Tracer). The core defines only this hook, so it depends
// on no tracing library; the module github.com/duroxide/duroxide-go/otel
// implements it with OpenTelemetry.
//
// Spans are linked through the history, across processes: the trace
// context an instance is started under (StartOptions.TraceParent, a W3C
// traceparent value) is recorded in its OrchestrationStarted event; every
// turn of the instance is a child of it; each activity and
// sub-orchestration a turn starts carries the turn's trace context, so its
// spans are children of that turn; a ContinueAsNew keeps the instance's.
//
// StartTurn runs on the turn's goroutine before the orchestration's code
// and its end function after the turn is committed or abandoned;
// StartActivity runs before each attempt of an activity, and the context
// it returns is the activity's. Both are called concurrently.
type Tracer = dispatch.Tracer

// TurnSpan describes an orchestration turn to a Tracer: the instance, its
// orchestration, version and execution, the delivery attempt of the turn's
// messages (from 1), and the trace context the instance was started under
// ("" if none).
type TurnSpan = dispatch.TurnSpan

// ActivitySpan describes an activity attempt to a Tracer: the instance and
// execution, the activity's scheduling event and name, the attempt (see
// ActivityContext.Attempt), and the trace context of the turn that
// scheduled it ("" if none).
type ActivitySpan = dispatch.ActivitySpan

// traceParentFormat is a W3C traceparent value: version, trace ID, parent
// span ID and flags in lowercase hex; versions after 00 may append fields.
var traceParentFormat = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$`)

// maxTraceParentLength bounds StartOptions.TraceParent.
const maxTraceParentLength = 256

// ValidateTraceParent reports whether tp may be a StartOptions.TraceParent:
// empty, or a W3C traceparent value (00-<32 hex>-<16 hex>-<2 hex>) of at
// most 256 bytes. The error wraps ErrInvalidArgument. It lets a caller that
// takes the value from a request (a traceparent header) refuse a bad one
// before starting anything.
func ValidateTraceParent(tp string) error { return checkTraceParent(tp) }

func checkTraceParent(tp string) error {
	if tp == "" {
		return nil
	}
	if len(tp) > maxTraceParentLength || !traceParentFormat.MatchString(tp) {
		return fmt.Errorf("%w: TraceParent must be a W3C traceparent value (00-<32 hex>-<16 hex>-<2 hex>)", ErrInvalidArgument)
	}
	return nil
}
