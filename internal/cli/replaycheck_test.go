package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func replayCheckRegistry(activity string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Step", func(ctx *duroxide.OrchestrationContext, in int) (int, error) {
		var out int
		err := ctx.ScheduleActivity(activity, in).Await(&out)
		return out, err
	})
	duroxide.RegisterActivity(reg, activity, func(ctx context.Context, in int) (int, error) { return in, nil })
	return reg
}

// recordSteps runs n instances of Step (activity "Old") to completion in
// the store db names.
func recordSteps(t *testing.T, db string, n int) {
	t.Helper()
	ctx := context.Background()
	spec, err := storeurl.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	inv := newInvocation(replayCheckCommand, io.Discard, io.Discard, func(string) string { return "" })
	store, err := inv.openSpec(ctx, spec, storeurl.Create)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, replayCheckRegistry("Old"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	for i := range n {
		if err := c.StartOrchestration(ctx, fmt.Sprintf("step-%03d", i), "Step", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if st, err := c.WaitForOrchestration(ctx, fmt.Sprintf("step-%03d", i)); err != nil || st.State != duroxide.StateCompleted {
			t.Fatalf("step-%03d: %v %v", i, st, err)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// replay-check reads a PostgreSQL store as it reads SQLite.
func TestReplayCheckPostgres(t *testing.T) {
	t.Parallel()
	db := postgresTestDB(t, "replaycheck")
	recordSteps(t, db, 3)
	getenv := func(string) string { return "" }
	var out, errb bytes.Buffer
	if code := runReplayCheckWith(context.Background(), replayCheckRegistry("Old"), []string{"--db", db}, &out, &errb, getenv); code != exitOK ||
		!strings.Contains(out.String(), "3 checked, 3 passed") {
		t.Fatalf("same code: exit %d: %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := runReplayCheckWith(context.Background(), replayCheckRegistry("New"), []string{"--db", db, "--orchestration", "Step"}, &out, &errb, getenv); code != exitDiverged ||
		!strings.Contains(out.String(), "3 diverged") || !strings.Contains(out.String(), `expected: activity "Old" with input`) {
		t.Fatalf("changed code: exit %d: %s %s", code, out.String(), errb.String())
	}
}

// A check of many diverging instances reports progress and keeps its
// output bounded: a summary, the first replayCheckShown divergences in
// detail, and a count of the rest; --json lists at most
// DefaultMaxDivergences.
func TestReplayCheckManyDivergencesBoundedOutput(t *testing.T) {
	const n = 250
	defer func(v int) { replayCheckProgressEvery = v }(replayCheckProgressEvery)
	replayCheckProgressEvery = 50

	ctx := context.Background()
	db := "sqlite:" + filepath.Join(t.TempDir(), "big.db")
	recordSteps(t, db, n)
	getenv := func(string) string { return "" }
	reg := replayCheckRegistry("New")

	var out, errb bytes.Buffer
	code := runReplayCheckWith(ctx, reg, []string{"--db", db}, &out, &errb, getenv)
	if code != exitDiverged {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitDiverged, errb.String())
	}
	if got := strings.Count(out.String(), "DIVERGED "); got != replayCheckShown {
		t.Fatalf("%d divergences detailed, want %d:\n%s", got, replayCheckShown, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("... and %d more", n-replayCheckShown)) {
		t.Fatalf("no count of the rest:\n%s", out.String())
	}
	if out.Len() > 8<<10 {
		t.Fatalf("report is %d bytes, want at most 8 KiB", out.Len())
	}
	if got := strings.Count(errb.String(), "instances checked"); got != n/50 {
		t.Fatalf("%d progress lines, want %d:\n%s", got, n/50, errb.String())
	}
	if !strings.Contains(errb.String(), "replay-check: 100 instances checked, 100 diverged so far") || errb.Len() > 1<<10 {
		t.Fatalf("stderr (%d bytes): %s", errb.Len(), errb.String())
	}

	out.Reset()
	code = runReplayCheckWith(ctx, reg, []string{"--db", db, "--json"}, &out, &errb, getenv)
	var rep duroxide.ReplayCheckReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != exitDiverged {
		t.Fatalf("exit %d, %v", code, err)
	}
	if rep.Diverged != n || len(rep.Divergences) != duroxide.DefaultMaxDivergences || out.Len() > 64<<10 {
		t.Fatalf("diverged %d, %d listed, %d bytes", rep.Diverged, len(rep.Divergences), out.Len())
	}
}

// The duroxide binary's replay-check checks against the demo
// orchestrations: a recorded demo.Hello replays.
func TestReplayCheckDemoCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "demo.db")
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "hello-1", demo.Hello, "Ada", nil); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitForOrchestration(ctx, "hello-1"); err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("%v %v", st, err)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	getenv := func(string) string { return "" }
	if code := run(ctx, []string{"replay-check", "--db", "sqlite:" + path, "--orchestration", demo.Hello}, &out, &errb, getenv); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "1 checked, 1 passed, 0 diverged") || !strings.Contains(out.String(), "OK:") {
		t.Fatalf("output: %s", out.String())
	}
}
