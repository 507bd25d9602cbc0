package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// TestTwoRuntimeNodes runs two runtimes, each on its own store, on one
// schema (two nodes), with parents fanning out to activities and child
// orchestrations that complete into them at once: every instance completes
// with the right result, started from either node.
func TestTwoRuntimeNodes(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var v int
		err := ctx.ScheduleActivity("Double", n).Await(&v)
		return v, err
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var tasks []*duroxide.Task
		for i := range n {
			tasks = append(tasks, ctx.ScheduleActivity("Double", i))
			tasks = append(tasks, ctx.ScheduleSubOrchestration("Child", "", i))
		}
		sum := 0
		for _, task := range tasks {
			var v int
			if err := task.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var clients []*duroxide.Client
	for range 2 {
		store := openSchema(t, schema, nil)
		rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer scancel()
			_ = rt.Shutdown(sctx)
		})
		clients = append(clients, duroxide.NewClient(store))
	}
	const instances, fan = 8, 6
	for i := range instances {
		if err := clients[i%2].StartOrchestration(ctx, fmt.Sprintf("p%d", i), "Parent", fan, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := 0
	for i := range fan {
		want += 4 * i // the activity's 2i and the child's 2i
	}
	for i := range instances {
		st, err := clients[(i+1)%2].WaitForOrchestration(ctx, fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatalf("p%d: %v", i, err)
		}
		var got int
		if st.State != duroxide.StateCompleted {
			t.Fatalf("p%d: state %s, want Completed (%+v)", i, st.State, st)
		}
		if err := st.Decode(&got); err != nil || got != want {
			t.Fatalf("p%d: output %d (%v), want %d", i, got, err, want)
		}
	}
}
