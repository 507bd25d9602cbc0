package duroxide_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// Orchestrations that fan out to parallel activities keep their executions
// cached while the results come in: no activity's ack runs a turn ahead
// that the store must refuse (other results are still to come), which
// would drop the cached execution, and no turn reloads the whole history,
// not even one fetched as soon as the previous turn's commit released the
// instance, before its ack returned.
func TestFanOutKeepsTheCache(t *testing.T) {
	t.Parallel()
	const orchestrations, width = 8, 40
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "Fan", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		tasks, results := make([]*duroxide.Task, n), make([]int, n)
		for i := range tasks {
			tasks[i] = ctx.ScheduleActivity("Inc", i)
		}
		for i, task := range tasks {
			if err := task.Await(&results[i]); err != nil {
				return 0, err
			}
		}
		sum := 0
		for _, v := range results {
			sum += v
		}
		return sum, nil
	})
	store, rt, c := countingRuntime(t, reg, nil)
	for i := range orchestrations {
		if err := c.StartOrchestration(ctx, fmt.Sprint("fan-", i), "Fan", width, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range orchestrations {
		st, err := c.WaitForOrchestration(ctx, fmt.Sprint("fan-", i))
		if err != nil {
			t.Fatal(err)
		}
		var out int
		if err := st.Decode(&out); err != nil || st.State != duroxide.StateCompleted || out != width*(width+1)/2 {
			t.Fatalf("state %s, output %d (%v), want Completed with %d", st.State, out, err, width*(width+1)/2)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	full, partial, refused := store.full.Load(), store.partial.Load(), store.refusedFused.Load()
	t.Logf("turns with the whole history: %d, with only new events: %d, fused turns refused: %d", full, partial, refused)
	if full != 0 || refused != 0 {
		t.Fatalf("%d turns loaded the whole history and %d fused turns were refused, want none", full, refused)
	}
}
