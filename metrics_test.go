package duroxide_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
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

	// Finished instances by orchestration and state: a failure rate can be
	// computed.
	wantFinished := []duroxide.FinishedCount{
		{Orchestration: demo.Fail, State: duroxide.StateFailed, Count: fails},
		{Orchestration: demo.Hello, State: duroxide.StateCompleted, Count: hellos},
	}
	if fmt.Sprint(m.Finished) != fmt.Sprint(wantFinished) {
		t.Errorf("finished %+v, want %+v", m.Finished, wantFinished)
	}

	// Snapshots are copies.
	m.TurnDuration.Bounds[0] = time.Hour
	if rt.Metrics().TurnDuration.Bounds[0] == time.Hour {
		t.Error("a snapshot's Bounds alias the runtime's")
	}
}

func TestBuildInfoOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   debug.BuildInfo
		want duroxide.BuildInfo
	}{
		{"the duroxide command, from a checkout", debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: "github.com/duroxide/duroxide-go", Version: "v0.0.0-20261124200000-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}},
			duroxide.BuildInfo{Version: "v0.0.0-20261124200000-0123456789ab+dirty", Revision: "0123456789abcdef-dirty", GoVersion: "go1.26.8"}},
		{"without version control", debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/duroxide/duroxide-go", Version: "(devel)"}},
			duroxide.BuildInfo{Version: "(devel)", GoVersion: "go1.26.8"}},
		{"a program depending on a release", debug.BuildInfo{GoVersion: "go1.26.1",
			Main:     debug.Module{Path: "example.com/app", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba"}},
			Deps:     []*debug.Module{{Path: "github.com/google/uuid", Version: "v1.6.0"}, {Path: "github.com/duroxide/duroxide-go", Version: "v1.2.3"}}},
			duroxide.BuildInfo{Version: "v1.2.3", GoVersion: "go1.26.1"}},
		{"a program replacing it with a checkout", debug.BuildInfo{GoVersion: "go1.26.1",
			Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: "github.com/duroxide/duroxide-go", Version: "v0.0.0", Replace: &debug.Module{Path: "../duroxide-go"}}}},
			duroxide.BuildInfo{Version: "(devel)", GoVersion: "go1.26.1"}},
		{"not linked", debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "example.com/app"}},
			duroxide.BuildInfo{Version: "unknown", GoVersion: "go1.26.1"}},
	} {
		if got := duroxide.BuildInfoOf(&tc.in); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if bi := duroxide.ReadBuildInfo(); bi.GoVersion == "" || bi.Version == "" {
		t.Fatalf("ReadBuildInfo() = %+v: no Go version or version", bi)
	}
}
