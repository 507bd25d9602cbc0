package replaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func stepRegistry(activity string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Step", func(ctx *duroxide.OrchestrationContext, in int) (int, error) {
		var out int
		err := ctx.ScheduleActivity(activity, in).Await(&out)
		return out, err
	})
	duroxide.RegisterActivity(reg, activity, func(ctx context.Context, in int) (int, error) { return in, nil })
	return reg
}

// recordSteps runs n instances of Step (activity "Old") to completion in a
// new SQLite store and returns its --db value.
func recordSteps(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "steps.db")
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, stepRegistry("Old"), nil)
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
	return "sqlite:" + path
}

func runCheck(reg *duroxide.Registry, args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = Run(context.Background(), Config{Name: "myapp replay-check", Summary: "check", Registry: reg,
		Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	return out.String(), errb.String(), err
}

// A check of many diverging instances reports progress and keeps its
// output bounded: a summary, the first Shown divergences in detail, and a
// count of the rest; --json lists at most DefaultMaxDivergences.
func TestManyDivergencesBoundedOutput(t *testing.T) {
	const n = 250
	defer func(v int) { ProgressEvery = v }(ProgressEvery)
	ProgressEvery = 50

	db := recordSteps(t, n)
	reg := stepRegistry("New")

	out, errs, err := runCheck(reg, "--db", db)
	var de *DivergedError
	if !errors.As(err, &de) || de.N != n {
		t.Fatalf("error %v, want %d divergences; stderr: %s", err, n, errs)
	}
	if got := strings.Count(out, "DIVERGED "); got != Shown {
		t.Fatalf("%d divergences detailed, want %d:\n%s", got, Shown, out)
	}
	if !strings.Contains(out, fmt.Sprintf("... and %d more", n-Shown)) {
		t.Fatalf("no count of the rest:\n%s", out)
	}
	if len(out) > 8<<10 {
		t.Fatalf("report is %d bytes, want at most 8 KiB", len(out))
	}
	if got := strings.Count(errs, "instances checked"); got != n/50 {
		t.Fatalf("%d progress lines, want %d:\n%s", got, n/50, errs)
	}
	if !strings.Contains(errs, "replay-check: 100 instances checked, 100 diverged so far") || len(errs) > 1<<10 {
		t.Fatalf("stderr (%d bytes): %s", len(errs), errs)
	}

	out, _, err = runCheck(reg, "--db", db, "--json")
	var rep duroxide.ReplayCheckReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || !errors.As(err, &de) {
		t.Fatalf("%v, %v", err, jerr)
	}
	if rep.Diverged != n || len(rep.Divergences) != duroxide.DefaultMaxDivergences || len(out) > 64<<10 {
		t.Fatalf("diverged %d, %d listed, %d bytes", rep.Diverged, len(rep.Divergences), len(out))
	}
}

// The help and the usage hints name the command as it was invoked.
func TestNameInHelpAndHints(t *testing.T) {
	t.Parallel()
	out, _, err := runCheck(duroxide.NewRegistry(), "-h")
	if err != nil || !strings.HasPrefix(out, "Usage: myapp replay-check [--db URL]") || strings.Contains(out, "duroxide replay-check") {
		t.Fatalf("help (%v):\n%s", err, out)
	}
	for _, args := range [][]string{{"--bogus"}, {"extra"}} {
		_, _, err := runCheck(duroxide.NewRegistry(), args...)
		if err == nil || !strings.Contains(err.Error(), "myapp replay-check") || strings.Contains(err.Error(), "duroxide") {
			t.Errorf("%q: %v", args, err)
		}
	}
}
