package duroxide_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestRuntimeMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "metrics.db"), &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if m := rt.Metrics(); m.TurnDuration.Count != 0 || m.Turns != (duroxide.TurnCounts{}) {
		t.Fatalf("fresh runtime has metrics %+v", m)
	}

	c := duroxide.NewClient(store)
	const hellos, fails = 3, 2
	var ids []string
	for i := range hellos {
		ids = append(ids, fmt.Sprint("hello-", i))
		if err := c.StartOrchestration(ctx, ids[len(ids)-1], demo.Hello, "Ada", nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range fails {
		ids = append(ids, fmt.Sprint("fail-", i))
		if err := c.StartOrchestration(ctx, ids[len(ids)-1], demo.Fail, "boom", nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if st, err := c.WaitForOrchestration(ctx, id); err != nil || !st.State.IsTerminal() {
			t.Fatalf("%s: %+v, %v", id, st, err)
		}
	}
	// Shutdown waits for the last turns' bookkeeping.
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	m := rt.Metrics()
	// Each orchestration runs one activity: a start turn and a completion turn.
	if want := (duroxide.TurnCounts{Committed: 2 * (hellos + fails)}); m.Turns != want {
		t.Errorf("turns %+v, want %+v", m.Turns, want)
	}
	for _, tc := range []struct {
		name  string
		h     duroxide.Histogram
		count uint64
	}{
		{"turn", m.TurnDuration, 2 * (hellos + fails)},
		{"completed activity", m.Activities.Completed, hellos},
		{"failed activity", m.Activities.Failed, fails},
		{"canceled activity", m.Activities.Canceled, 0},
	} {
		h := tc.h
		if h.Count != tc.count {
			t.Errorf("%s: count %d, want %d", tc.name, h.Count, tc.count)
		}
		if len(h.Bounds) == 0 || len(h.Counts) != len(h.Bounds) {
			t.Fatalf("%s: %d bounds, %d counts", tc.name, len(h.Bounds), len(h.Counts))
		}
		for i := range h.Counts {
			if i > 0 && (h.Bounds[i] <= h.Bounds[i-1] || h.Counts[i] < h.Counts[i-1]) {
				t.Errorf("%s: bucket %d not ascending: %v %v", tc.name, i, h.Bounds, h.Counts)
			}
		}
		if h.Counts[len(h.Counts)-1] > h.Count {
			t.Errorf("%s: last bucket %d above count %d", tc.name, h.Counts[len(h.Counts)-1], h.Count)
		}
		if (h.Count > 0) != (h.Sum > 0) {
			t.Errorf("%s: count %d with sum %v", tc.name, h.Count, h.Sum)
		}
	}

	// Snapshots are copies.
	m.TurnDuration.Bounds[0] = time.Hour
	if rt.Metrics().TurnDuration.Bounds[0] == time.Hour {
		t.Error("a snapshot's Bounds alias the runtime's")
	}
}
