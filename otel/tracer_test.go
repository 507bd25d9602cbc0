package duroxideotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/duroxide/duroxide-go"
	duroxideotel "github.com/duroxide/duroxide-go/otel"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func registry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestrationVersion(reg, "Sequence", "2.0.0", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for i := range n {
			if err := ctx.ScheduleActivity(fmt.Sprintf("Step%d", i+1), i).Await(nil); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, "FanOut", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var tasks []*duroxide.Task
		for i := range n {
			tasks = append(tasks, ctx.ScheduleActivity("Work", i))
		}
		child := ctx.ScheduleSubOrchestration("Sequence", ctx.InstanceID()+"-child", 1)
		for _, t := range append(tasks, child) {
			if err := t.Await(nil); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	for _, name := range []string{"Step1", "Step2", "Step3", "Work"} {
		duroxide.RegisterActivity(reg, name, func(ctx context.Context, i int) (int, error) {
			// The activity's context carries its span.
			if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
				return 0, errors.New("no span in the activity's context")
			}
			return i, nil
		})
	}
	return reg
}

// runTraced runs orchestration name with input under a root span and
// returns the ended spans, the root last.
func runTraced(t *testing.T, name, id string, input int) (root sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, registry(), &duroxide.RuntimeOptions{
		Tracer: duroxideotel.NewTracer(&duroxideotel.Options{TracerProvider: tp})})
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	sctx, span := tp.Tracer("test").Start(ctx, "start "+name)
	if err := c.StartOrchestration(sctx, id, name, input, &duroxide.StartOptions{TraceParent: duroxideotel.TraceParent(sctx)}); err != nil {
		t.Fatal(err)
	}
	span.End()
	st, err := c.WaitForOrchestration(ctx, id)
	if err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("%v %v (%v)", st, err, st.Error)
	}
	if err := rt.Shutdown(ctx); err != nil { // every span has ended
		t.Fatal(err)
	}
	ended := rec.Ended()
	if len(ended) == 0 || ended[0].Name() != "start "+name {
		t.Fatalf("the root span is not the first ended")
	}
	return ended[0], ended[1:]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// tree checks that every span is in root's trace and returns the spans
// by ID.
func tree(t *testing.T, root sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan) map[trace.SpanID]sdktrace.ReadOnlySpan {
	t.Helper()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{root.SpanContext().SpanID(): root}
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("span %q is in another trace", s.Name())
		}
		byID[s.SpanContext().SpanID()] = s
	}
	if root.Parent().IsValid() {
		t.Fatalf("the root span has a parent")
	}
	return byID
}

func TestSequenceSpanTree(t *testing.T) {
	t.Parallel()
	root, spans := runTraced(t, "Sequence", "seq-1", 3)
	byID := tree(t, root, spans)
	var activities []string
	turns := 0
	for _, s := range spans {
		a := attrs(s)
		if a[duroxideotel.AttrInstanceID].AsString() != "seq-1" || a[duroxideotel.AttrExecutionID].AsInt64() != 1 || a[duroxideotel.AttrAttempt].AsInt64() != 1 {
			t.Fatalf("span %q attributes %v", s.Name(), a)
		}
		switch s.Name() {
		case "turn Sequence":
			turns++
			if s.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Fatalf("turn span is not a child of the root")
			}
			if a[duroxideotel.AttrOrchestration].AsString() != "Sequence" || a[duroxideotel.AttrVersion].AsString() != "2.0.0" {
				t.Fatalf("turn attributes %v", a)
			}
		case "activity Step1", "activity Step2", "activity Step3":
			activities = append(activities, a[duroxideotel.AttrActivity].AsString())
			p, ok := byID[s.Parent().SpanID()]
			if !ok || p.Name() != "turn Sequence" {
				t.Fatalf("activity %q is not a child of a turn", s.Name())
			}
			if s.Status().Code == codes.Error {
				t.Fatalf("activity failed: %v", s.Status())
			}
		default:
			t.Fatalf("unexpected span %q", s.Name())
		}
	}
	slices.Sort(activities)
	if !slices.Equal(activities, []string{"Step1", "Step2", "Step3"}) {
		t.Fatalf("activity spans %v", activities)
	}
	// One turn starts the instance and one ends it; each activity's
	// completion needs a turn, which may be fused with the next.
	if turns < 2 || turns > 4 {
		t.Fatalf("%d turn spans, want 2 to 4", turns)
	}
}

func TestFanOutSpanTree(t *testing.T) {
	t.Parallel()
	root, spans := runTraced(t, "FanOut", "fan-1", 4)
	byID := tree(t, root, spans)
	work, childTurns, childSteps := 0, 0, 0
	for _, s := range spans {
		a := attrs(s)
		p := byID[s.Parent().SpanID()]
		if p == nil {
			t.Fatalf("span %q has no parent in the trace", s.Name())
		}
		switch s.Name() {
		case "turn FanOut":
			if p != root || a[duroxideotel.AttrInstanceID].AsString() != "fan-1" {
				t.Fatalf("parent turn: parent %q, attributes %v", p.Name(), a)
			}
		case "activity Work":
			work++
			if p.Name() != "turn FanOut" || a[duroxideotel.AttrInstanceID].AsString() != "fan-1" {
				t.Fatalf("Work: parent %q, attributes %v", p.Name(), a)
			}
		case "turn Sequence":
			childTurns++
			if p.Name() != "turn FanOut" || a[duroxideotel.AttrInstanceID].AsString() != "fan-1-child" {
				t.Fatalf("child turn: parent %q, attributes %v", p.Name(), a)
			}
		case "activity Step1":
			childSteps++
			if p.Name() != "turn Sequence" || a[duroxideotel.AttrInstanceID].AsString() != "fan-1-child" {
				t.Fatalf("child activity: parent %q, attributes %v", p.Name(), a)
			}
		default:
			t.Fatalf("unexpected span %q", s.Name())
		}
	}
	if work != 4 || childSteps != 1 || childTurns < 2 {
		t.Fatalf("%d Work spans (want 4), %d child activity spans (want 1), %d child turns (want 2+)", work, childSteps, childTurns)
	}
	// All the Work activities were scheduled by the same (first) turn.
	var first trace.SpanID
	for _, s := range spans {
		if s.Name() == "activity Work" {
			if first.IsValid() && s.Parent().SpanID() != first {
				t.Fatalf("the fanned-out activities have different parents")
			}
			first = s.Parent().SpanID()
		}
	}
}

func TestTraceParent(t *testing.T) {
	t.Parallel()
	if got := duroxideotel.TraceParent(context.Background()); got != "" {
		t.Fatalf("no span: %q", got)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	sc := span.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if got := duroxideotel.TraceParent(ctx); got != want {
		t.Fatalf("TraceParent = %q, want %q", got, want)
	}
}

// An activity's error ends its span with status Error.
func TestActivityErrorStatus(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := duroxideotel.NewTracer(&duroxideotel.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	_, end := tr.StartActivity(context.Background(), duroxide.ActivitySpan{InstanceID: "i", Name: "Charge", Attempt: 2})
	end(errors.New("card declined"))
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Status().Code != codes.Error || ended[0].Status().Description != "card declined" || len(ended[0].Events()) != 1 {
		t.Fatalf("spans %v", ended)
	}
}
