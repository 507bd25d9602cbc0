package duroxide_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// A runtime runs the activities its turns schedule without fetching them
// (the turn's ack leases them to it), and the turns their results start
// without fetching them either (the activity's ack takes the turn).
func TestScheduledActivitiesAreLeasedNotFetched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "Seq", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for range 5 {
			if err := ctx.ScheduleActivity("Inc", n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	// An orchestrator fetch holds up to FetchBatch turn slots while it
	// runs; an activity's ack takes its turn only when a slot is free.
	// With FetchBatch + 3 slots (one per instance below) a slot is always
	// free, so every ack must take its turn.
	store, rt, c := countingRuntime(t, reg, &duroxide.RuntimeOptions{FetchBatch: 4, OrchestrationConcurrency: 4 + 3})
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := c.StartOrchestration(ctx, id, "Seq", 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"s1", "s2", "s3"} {
		st, err := c.WaitForOrchestration(ctx, id)
		var out int
		if err != nil || st.Decode(&out) != nil || out != 5 {
			t.Fatalf("%s: %+v %v", id, st, err)
		}
	}
	// The waits return once the last ack committed, maybe before the
	// counting store saw it return: stop the runtime, which waits for it.
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := store.fetchedWork.Load(); n != 0 {
		t.Fatalf("%d of 15 activities were fetched from the queue; want all leased by their turns", n)
	}
	// Each result's ack committed the turn it causes, run on the cached
	// execution (the instance was free and nothing else happened to it).
	if n := store.fusedTurns.Load(); n != 15 {
		t.Fatalf("%d of 15 activity acks committed their turn (%d took it); want all", n, store.takenTurns.Load())
	}
	// Only the first turns (which have no history yet) were fetched.
	if n := store.full.Load() + store.partial.Load(); n != 0 {
		t.Fatalf("%d turns with history were fetched or taken; want none", n)
	}
}
