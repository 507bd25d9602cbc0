package duroxide_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// An orchestration of 5,000 sequential activities runs to completion in
// ordinary test time, and its turns do not reload the history the cache
// holds: a turn's cost does not grow with the history.
func TestLongHistoryUsesTheCache(t *testing.T) {
	t.Parallel()
	const steps = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "Long", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for range n {
			if err := ctx.ScheduleActivity("Inc", n).Await(&n); err != nil {
				return 0, err
			}
			n--
		}
		return n, nil
	})
	store, rt, c := countingRuntime(t, reg, nil)
	if err := c.StartOrchestration(ctx, "long", "Long", steps, nil); err != nil {
		t.Fatal(err)
	}
	st, err := c.WaitForOrchestration(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	var out int
	if err := st.Decode(&out); err != nil || st.State != duroxide.StateCompleted || out != steps {
		t.Fatalf("state %s, output %d (%v), want Completed with %d", st.State, out, err, steps)
	}
	if err := rt.Shutdown(ctx); err != nil { // waits for the last ack to return
		t.Fatal(err)
	}
	full, partial, fused := store.full.Load(), store.partial.Load(), store.fusedTurns.Load()
	t.Logf("turns with the whole history: %d, with only new events: %d, committed with their activity's result: %d", full, partial, fused)
	// A turn may load everything when it is fetched in the instant between
	// the previous turn's commit and its return to the cache: rarely.
	if full > steps/100 || full+partial+fused < steps {
		t.Fatalf("turns with the whole history: %d, with only new events: %d, fused: %d; want at most %d whole loads of %d turns",
			full, partial, fused, steps/100, steps)
	}
}
