package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider"
)

// The copy scenario's orchestrations. The source runtime registers every
// orchestration but not the activity copyAdd, so the activities of
// copyWork stay queued in the source and can only run on the target.
const (
	copyWork   = "copy.Work"   // int n → sum of copyAdd(i) for i < n (copyAdd(i) = i+1)
	copyAdd    = "copy.Add"    // int i → i+1
	copyWait   = "copy.Wait"   // waits for event copyEvent, returns its string
	copyTimer  = "copy.Timer"  // sleeps input milliseconds on a durable timer, returns "woke"
	copyLoop   = "copy.Loop"   // n > 0: continues as new with n-1; 0: waits for copyEvent, returns "looped"
	copyParent = "copy.Parent" // runs copyWait children ID-c0 and ID-c1, returns their strings joined
	copyEcho   = "copy.Echo"   // returns its input
	copyFail   = "copy.Fail"   // fails with its input as the message
	copyValued = "copy.Valued" // sets the value "stage" to its input, waits for copyEvent, returns its string
	copyEvent  = "go"
)

func copyRegistry(withAdd bool) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	if withAdd {
		duroxide.RegisterActivity(reg, copyAdd, func(_ context.Context, i int) (int, error) { return i + 1, nil })
	}
	duroxide.RegisterOrchestration(reg, copyWork, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		tasks := make([]*duroxide.Task, n)
		for i := range n {
			tasks[i] = ctx.ScheduleActivity(copyAdd, i)
		}
		sum := 0
		for _, t := range tasks {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	duroxide.RegisterOrchestration(reg, copyWait, func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		var s string
		err := ctx.WaitForEvent(copyEvent).Await(&s)
		return s, err
	})
	duroxide.RegisterOrchestration(reg, copyTimer, func(ctx *duroxide.OrchestrationContext, ms int) (string, error) {
		return "woke", ctx.ScheduleTimer(time.Duration(ms) * time.Millisecond).Await(nil)
	})
	duroxide.RegisterOrchestration(reg, copyLoop, func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		if n > 0 {
			return "", ctx.ContinueAsNew(n - 1)
		}
		var s string
		if err := ctx.WaitForEvent(copyEvent).Await(&s); err != nil {
			return "", err
		}
		return "looped", nil
	})
	duroxide.RegisterOrchestration(reg, copyParent, func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		a := ctx.ScheduleSubOrchestration(copyWait, ctx.InstanceID()+"-c0", "")
		b := ctx.ScheduleSubOrchestration(copyWait, ctx.InstanceID()+"-c1", "")
		var x, y string
		if err := a.Await(&x); err != nil {
			return "", err
		}
		if err := b.Await(&y); err != nil {
			return "", err
		}
		return x + y, nil
	})
	duroxide.RegisterOrchestration(reg, copyValued, func(ctx *duroxide.OrchestrationContext, stage string) (string, error) {
		if err := ctx.SetValue("stage", stage); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent(copyEvent).Await(&s)
		return s, err
	})
	duroxide.RegisterOrchestration(reg, copyEcho, func(_ *duroxide.OrchestrationContext, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, copyFail, func(_ *duroxide.OrchestrationContext, s string) (string, error) {
		return "", errors.New(s)
	})
	return reg
}

// openTestDB opens (creating and migrating) the store a --db value names.
func openTestDB(t *testing.T, db string) store {
	t.Helper()
	spec, err := storeurl.Parse(db)
	if err != nil {
		t.Fatalf("storeurl.Parse(%q): %v", db, err)
	}
	inv := newInvocation(copyCommand, io.Discard, io.Discard, func(string) string { return "" })
	s, err := inv.openSpec(t.Context(), spec, storeurl.Create)
	if err != nil {
		t.Fatalf("opening %s: %v", spec.Display, err)
	}
	return s
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startTestRuntime runs reg on s until the returned function stops it.
func startTestRuntime(t *testing.T, s store, reg *duroxide.Registry, opts *duroxide.RuntimeOptions) func() {
	t.Helper()
	if opts == nil {
		opts = &duroxide.RuntimeOptions{}
	}
	opts.Logger = quietLogger()
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	rt, err := duroxide.StartRuntime(t.Context(), s, reg, opts)
	if err != nil {
		t.Fatalf("StartRuntime: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 20*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("runtime Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls until ok returns true, for at most limit.
func pollUntil(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		<-tick.C
	}
}

func statusOf(t *testing.T, c *duroxide.Client, id string) *duroxide.Status {
	t.Helper()
	st, err := c.GetStatus(t.Context(), id)
	if err != nil {
		t.Fatalf("GetStatus(%s): %v", id, err)
	}
	return st
}

// TestCopySQLiteToSQLite copies a store holding instances in every state
// and finishes every live one on the target.
func TestCopySQLiteToSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testCopyScenario(t, "sqlite:"+filepath.Join(dir, "from.db"), "sqlite:"+filepath.Join(dir, "to.db"))
}

// TestCopySQLiteToPostgres moves a store from SQLite to PostgreSQL, and
// TestCopyPostgresToSQLite back.
func TestCopySQLiteToPostgres(t *testing.T) {
	t.Parallel()
	testCopyScenario(t, "sqlite:"+filepath.Join(t.TempDir(), "from.db"), postgresTestDB(t, "copy_to"))
}

func TestCopyPostgresToSQLite(t *testing.T) {
	t.Parallel()
	testCopyScenario(t, postgresTestDB(t, "copy_from"), "sqlite:"+filepath.Join(t.TempDir(), "to.db"))
}

// testCopyScenario fills the store src with instances in every state
// (running with queued activities, waiting on a timer, on an event, after
// continuing as new, on its children, holding an execution lock with a
// queued start behind it, delayed, completed, failed, with an idempotency
// key, purged with its key retained), stops its runtime, copies it to dst
// with the copy command, and runs every live instance to completion there.
func testCopyScenario(t *testing.T, src, dst string) {
	ctx := t.Context()
	source := openTestDB(t, src)
	sc := duroxide.NewClient(source)
	stopSource := startTestRuntime(t, source, copyRegistry(false), &duroxide.RuntimeOptions{
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, MaxAttempts: 1000})

	start := func(id, name string, input any, opts *duroxide.StartOptions) {
		t.Helper()
		if err := sc.StartOrchestration(ctx, id, name, input, opts); err != nil {
			t.Fatalf("StartOrchestration(%s): %v", id, err)
		}
	}
	start("work", copyWork, 3, nil)
	start("event", copyWait, "", nil)
	start("timer", copyTimer, 1500, nil)
	start("loop", copyLoop, 3, nil)
	start("parent", copyParent, "", nil)
	start("locked-a", copyWait, "", &duroxide.StartOptions{LockKey: "gate"})
	start("locked-b", copyEcho, "b", &duroxide.StartOptions{LockKey: "gate", QueueIfLocked: true})
	start("delayed", copyEcho, "d", &duroxide.StartOptions{StartAt: time.Now().Add(1500 * time.Millisecond)})
	start("done", copyEcho, "done", nil)
	start("failed", copyFail, "boom", nil)
	start("idem-live", copyWait, "", &duroxide.StartOptions{IdempotencyKey: "key-live"})
	start("idem-purged", copyEcho, "p", &duroxide.StartOptions{IdempotencyKey: "key-purged"})
	start("valued", copyValued, "copying", nil)
	start("paused", copyWait, "", nil)
	// A schedule that fired (a trigger) and a paused one.
	if _, err := sc.CreateSchedule(ctx, "nightly", &duroxide.ScheduleDefinition{Cron: "0 2 * * *", Orchestration: copyEcho,
		Input: json.RawMessage(`"n"`)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.CreateSchedule(ctx, "held", &duroxide.ScheduleDefinition{Cron: "@hourly", Orchestration: copyEcho}, true); err != nil {
		t.Fatal(err)
	}
	fired, err := sc.TriggerSchedule(ctx, "nightly")
	if err != nil || fired.Outcome != "triggered" {
		t.Fatalf("TriggerSchedule: %+v, %v", fired, err)
	}

	state := func(id string) duroxide.State { return statusOf(t, sc, id).State }
	for _, id := range []string{"done", "idem-purged", fired.InstanceID} {
		pollUntil(t, id+" to complete", 20*time.Second, func() bool { return state(id) == duroxide.StateCompleted })
	}
	pollUntil(t, "failed to fail", 20*time.Second, func() bool { return state("failed") == duroxide.StateFailed })
	if err := sc.PurgeInstance(ctx, "idem-purged", false); err != nil {
		t.Fatalf("PurgeInstance: %v", err)
	}
	for _, id := range []string{"work", "event", "timer", "parent", "parent-c0", "parent-c1", "locked-a", "idem-live", "valued", "paused"} {
		pollUntil(t, id+" to run", 20*time.Second, func() bool { return state(id) == duroxide.StateRunning })
	}
	pollUntil(t, "valued to set its value", 20*time.Second, func() bool {
		var v string
		ok, err := sc.GetValue(ctx, "valued", "stage", &v)
		return err == nil && ok && v == "copying"
	})
	if err := sc.Pause(ctx, "paused", "held for the copy"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	pollUntil(t, "loop to reach its 4th execution", 20*time.Second, func() bool {
		st := statusOf(t, sc, "loop")
		return st.State == duroxide.StateRunning && st.ExecutionID == 4
	})
	stopSource()
	if got := state("locked-b"); got != duroxide.StatePending {
		t.Fatalf("locked-b is %s in the source, want Pending behind the lock", got)
	}
	if got := state("delayed"); got != duroxide.StatePending {
		t.Fatalf("delayed is %s in the source, want Pending", got)
	}
	sourceSchedules := map[string]*duroxide.ScheduleInfo{}
	for _, id := range []string{"nightly", "held"} {
		info, err := sc.GetSchedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sourceSchedules[id] = info
	}
	sourceValues, err := sc.ListValues(ctx, "valued")
	if err != nil || len(sourceValues) != 1 {
		t.Fatalf("the source's values of valued: %+v, %v", sourceValues, err)
	}
	doneHistory, err := sc.GetHistory(ctx, "done", 0)
	if err != nil {
		t.Fatal(err)
	}
	depths, err := source.QueueDepths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if depths.WorkerReady+depths.WorkerDelayed != 3 {
		t.Fatalf("the source's worker queue holds %+v, want the 3 activities of work", *depths)
	}
	if err := source.Close(); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "copy", "--from", src, "--to", dst).wantCode(t, 0)
	for _, want := range []string{"copying ", "verified: ", "copied "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("copy's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "copy: instances ") || !strings.Contains(r.stderr, "copy: history events ") {
		t.Fatalf("copy printed no progress lines:\n%s", r.stderr)
	}

	target := openTestDB(t, dst)
	t.Cleanup(func() { _ = target.Close() })
	tc := duroxide.NewClient(target)
	// Schedules (with their fire state), values and pauses came along.
	for id, want := range sourceSchedules {
		got, err := tc.GetSchedule(ctx, id)
		if err != nil {
			t.Fatalf("GetSchedule(%s) on the target: %v", id, err)
		}
		if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
			t.Errorf("schedule %s changed in the copy:\nsource %s\ntarget %s", id, b, a)
		}
	}
	if got := sourceSchedules["nightly"]; got.LastOutcome != "triggered" || got.LastInstanceID != fired.InstanceID || got.NextFireAt.IsZero() {
		t.Fatalf("the source's nightly schedule: %+v, want a triggered last fire and a next one", got)
	}
	if got, err := tc.ListValues(ctx, "valued"); err != nil || mustJSON(t, got) != mustJSON(t, sourceValues) {
		t.Errorf("values of valued on the target: %+v (%v), want %+v", got, err, sourceValues)
	}
	if st := statusOf(t, tc, "paused"); st.Paused == nil || st.Paused.Reason != "held for the copy" {
		t.Fatalf("paused on the target: %+v, want paused", st.Paused)
	}
	startTestRuntime(t, target, copyRegistry(true), nil)
	for id, data := range map[string]string{"event": "e", "loop": "", "parent-c0": "x", "parent-c1": "y", "locked-a": "a", "idem-live": "i",
		"valued": "v", "paused": "p"} {
		if err := tc.RaiseEvent(ctx, id, copyEvent, data); err != nil {
			t.Fatalf("RaiseEvent(%s): %v", id, err)
		}
	}
	// The paused instance holds its event until resumed on the target.
	if st := statusOf(t, tc, "paused"); st.State != duroxide.StateRunning || st.Paused == nil {
		t.Fatalf("paused on the target after its event: %s %+v, want Running and paused", st.State, st.Paused)
	}
	if err := tc.Resume(ctx, "paused"); err != nil {
		t.Fatalf("Resume on the target: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for id, want := range map[string]any{"work": 6, "event": "e", "timer": "woke", "loop": "looped", "parent": "xy",
		"locked-a": "a", "locked-b": "b", "delayed": "d", "done": "done", "idem-live": "i", "valued": "v", "paused": "p"} {
		st, err := tc.WaitForOrchestration(wctx, id)
		if err != nil {
			t.Fatalf("WaitForOrchestration(%s) on the target: %v", id, err)
		}
		if st.State != duroxide.StateCompleted {
			t.Fatalf("%s ended %s on the target (%+v), want Completed", id, st.State, st.Error)
		}
		wantJSON, _ := json.Marshal(want)
		if string(st.Output) != string(wantJSON) {
			t.Errorf("%s returned %s on the target, want %s", id, st.Output, wantJSON)
		}
	}
	if st := statusOf(t, tc, "failed"); st.State != duroxide.StateFailed || st.Error == nil || !strings.Contains(st.Error.Message, "boom") {
		t.Errorf("failed on the target: %s %+v, want Failed with boom", st.State, st.Error)
	}
	if execs, err := tc.ListExecutions(ctx, "loop"); err != nil || len(execs) != 4 {
		t.Errorf("loop has %d executions on the target (%v), want 4", len(execs), err)
	}
	gotHistory, err := tc.GetHistory(ctx, "done", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, doneHistory), mustJSON(t, gotHistory); a != b {
		t.Errorf("done's history changed in the copy:\nsource %s\ntarget %s", a, b)
	}

	// Idempotency keys came along, the purged instance's too.
	for key, id := range map[string]string{"key-live": "idem-live", "key-purged": "idem-purged"} {
		err := tc.StartOrchestration(ctx, "again-"+key, copyEcho, "x", &duroxide.StartOptions{IdempotencyKey: key})
		var dup *duroxide.DuplicateStartError
		if !errors.As(err, &dup) || dup.InstanceID != id {
			t.Fatalf("a repeat of %s on the target: %v, want a duplicate of %s", key, err, id)
		}
		if purged := !dup.PurgedAt.IsZero(); purged != (key == "key-purged") {
			t.Errorf("%s: PurgedAt %v", key, dup.PurgedAt)
		}
	}
	// Every activity ran once, on the target.
	evs, err := tc.GetHistory(ctx, "work", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkHistory(t, "work", 3, evs)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCopyRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "src.db")
	s := openTestDB(t, src)
	enqueueStart(t, s, "one", copyEcho, `"x"`)
	// A turn in progress: its lock is live.
	item, err := provider.FetchOrchestrationItem(t.Context(), s, provider.FetchOptions{LockTimeout: time.Hour})
	if err != nil || item == nil {
		t.Fatalf("FetchOrchestrationItem: %v, %v", item, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	full := "sqlite:" + filepath.Join(dir, "full.db")
	f := openTestDB(t, full)
	enqueueStart(t, f, "other", copyEcho, `"y"`)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		args  []string
		code  int
		parts []string
	}{
		{"no from", []string{"--to", "sqlite:x.db"}, exitUsage, []string{"missing --from"}},
		{"no to", []string{"--from", src}, exitUsage, []string{"missing --to"}},
		{"db given", []string{"--db", src, "--from", src, "--to", full}, exitUsage, []string{"--from and --to"}},
		{"bad from", []string{"--from", "nonsense", "--to", full}, exitUsage, []string{"--from", "cannot tell"}},
		{"bad to", []string{"--from", src, "--to", "postgres://u:secret@[::1/db"}, exitUsage, []string{"--to", "not a valid PostgreSQL URL"}},
		{"same store", []string{"--from", src, "--to", "sqlite://" + filepath.Join(dir, "src.db")}, exitUsage, []string{"same store"}},
		{"batch zero", []string{"--from", src, "--to", full, "--batch", "0"}, exitUsage, []string{"--batch"}},
		{"batch huge", []string{"--from", src, "--to", full, "--batch", "99999999"}, exitUsage, []string{"--batch"}},
		{"extra argument", []string{"--from", src, "--to", full, "extra"}, exitUsage, []string{"unexpected argument"}},
		{"missing source", []string{"--from", "sqlite:" + filepath.Join(dir, "none.db"), "--to", full}, exitFailure, []string{"no store at"}},
		{"target not empty", []string{"--from", src, "--to", full}, exitFailure, []string{"not empty", "1 instances"}},
		{"source served", []string{"--from", src, "--to", "sqlite:" + filepath.Join(dir, "new.db")}, exitFailure,
			[]string{"looks served", "1 unexpired instance locks", "--force"}},
		{"control characters", []string{"--from", "sqlite:\x1b[31m.db\n", "--to", full}, exitFailure, []string{`\x1b`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runCLI(t, append([]string{"copy"}, tt.args...)...).wantErr(t, tt.code, tt.parts...)
		})
	}

	// --force copies a served source; the turn's lock is not copied, so the
	// message is fetchable at once in the target.
	forced := "sqlite:" + filepath.Join(dir, "forced.db")
	r := runCLI(t, "copy", "--from", src, "--to", forced, "--force").wantCode(t, 0)
	if !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stdout, "verified") {
		t.Fatalf("copy --force:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
	target := openTestDB(t, forced)
	defer target.Close()
	got, err := provider.FetchOrchestrationItem(t.Context(), target, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || got == nil || got.InstanceID != "one" || got.AttemptCount != 2 {
		t.Fatalf("fetch on the target: %+v, %v; want instance one at its 2nd attempt", got, err)
	}
}

func TestCopyEmptyStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "a.db")
	openTestDB(t, src).Close()
	r := runCLI(t, "copy", "--from", src, "--to", "sqlite:"+filepath.Join(dir, "b.db")).wantCode(t, 0)
	if !strings.Contains(r.stdout, "nothing to copy") || !strings.Contains(r.stdout, "copied 0 rows") {
		t.Fatalf("copy of an empty store:\n%s", r.stdout)
	}
}

// TestCopyBatches copies in batches smaller than a table and checks every
// row arrived in order.
func TestCopyBatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "a.db")
	s := openTestDB(t, src)
	for i := range 25 {
		enqueueStart(t, s, fmt.Sprintf("i-%02d", i), copyEcho, `"x"`)
	}
	s.Close()
	dst := "sqlite:" + filepath.Join(dir, "b.db")
	runCLI(t, "copy", "--from", src, "--to", dst, "--batch", "7").wantCode(t, 0)
	d := openTestDB(t, dst)
	defer d.Close()
	page, err := d.ListInstances(t.Context(), provider.ListInstancesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Instances) != 25 || page.Instances[0].InstanceID != "i-24" || page.Instances[24].InstanceID != "i-00" {
		t.Fatalf("the target lists %d instances, first %v: want 25, newest first", len(page.Instances), page.Instances[0].InstanceID)
	}
}
