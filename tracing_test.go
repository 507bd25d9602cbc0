package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// recordingTracer hands out numbered trace contexts and records the spans
// it is asked to start.
type recordingTracer struct {
	mu         sync.Mutex
	n          int
	turns      []duroxide.TurnSpan
	turnTP     map[string]string // trace context handed out -> instance
	activities []duroxide.ActivitySpan
	ended      int
}

func (r *recordingTracer) next() string {
	r.n++
	return fmt.Sprintf("00-%032x-%016x-01", 1, r.n)
}

func (r *recordingTracer) StartTurn(s duroxide.TurnSpan) (string, func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tp := r.next()
	r.turns = append(r.turns, s)
	r.turnTP[tp] = s.InstanceID
	return tp, func(error) { r.mu.Lock(); r.ended++; r.mu.Unlock() }
}

func (r *recordingTracer) StartActivity(ctx context.Context, a duroxide.ActivitySpan) (context.Context, func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activities = append(r.activities, a)
	return ctx, func(error) { r.mu.Lock(); r.ended++; r.mu.Unlock() }
}

// The trace context given at start is recorded in the history and handed
// to every turn (across ContinueAsNew); activities and children get the
// trace context of the turn that started them.
// It holds with the orchestration cache (turns fused with activity
// results) and without it (every turn replays from the store).
func TestTracerPropagation(t *testing.T) {
	t.Parallel()
	for _, cache := range []int{0, -1} {
		t.Run(fmt.Sprintf("cache %d", cache), func(t *testing.T) {
			t.Parallel()
			testTracerPropagation(t, cache)
		})
	}
}

func testTracerPropagation(t *testing.T, cacheSize int) {
	const rootTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := context.Background()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, round int) (int, error) {
		if err := ctx.ScheduleActivity("Act", round).Await(nil); err != nil {
			return 0, err
		}
		if round == 0 {
			return 0, ctx.ContinueAsNew(1)
		}
		return 1, ctx.ScheduleSubOrchestration("Child", "child-1", 0).Await(nil)
	})
	duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, _ int) (int, error) {
		return 0, ctx.ScheduleActivity("Act", 9).Await(nil)
	})
	duroxide.RegisterActivity(reg, "Act", func(ctx context.Context, n int) (int, error) { return n, nil })
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tr := &recordingTracer{turnTP: map[string]string{}}
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Tracer: tr, CacheSize: cacheSize})
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "p-1", "Parent", 0, &duroxide.StartOptions{TraceParent: rootTP}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitForOrchestration(ctx, "p-1"); err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("%v %v", st, err)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	for _, exec := range []int64{1, 2} {
		h, err := c.GetHistory(ctx, "p-1", exec)
		if err != nil || h[0].Kind != history.OrchestrationStarted || h[0].TraceParent != rootTP {
			t.Fatalf("execution %d starts with %+v (%v), want trace context %s", exec, h[0], err, rootTP)
		}
	}
	child, err := c.GetHistory(ctx, "child-1", 0)
	if err != nil || tr.turnTP[child[0].TraceParent] != "p-1" {
		t.Fatalf("the child's start %+v does not carry a turn of p-1's trace context", child[0])
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range tr.turns {
		want := rootTP
		if s.InstanceID == "child-1" {
			want = child[0].TraceParent
		}
		if s.TraceParent != want || s.Orchestration == "" || s.ExecutionID == 0 || s.Attempt != 1 {
			t.Fatalf("turn %+v, want trace context %s", s, want)
		}
	}
	if len(tr.activities) != 3 {
		t.Fatalf("%d activity spans, want 3", len(tr.activities))
	}
	for _, a := range tr.activities {
		if tr.turnTP[a.TraceParent] != a.InstanceID || a.Name != "Act" || a.Attempt != 1 {
			t.Fatalf("activity %+v does not carry a turn of its instance's trace context", a)
		}
	}
	if tr.ended != len(tr.turns)+len(tr.activities) {
		t.Fatalf("%d spans ended of %d", tr.ended, len(tr.turns)+len(tr.activities))
	}
}

func TestStartTraceParentValidation(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := duroxide.NewClient(store)
	for _, tp := range []string{"nonsense", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"} {
		err := c.StartOrchestration(context.Background(), "x", "X", nil, &duroxide.StartOptions{TraceParent: tp})
		if !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Errorf("TraceParent %q: %v, want ErrInvalidArgument", tp, err)
		}
	}
}
