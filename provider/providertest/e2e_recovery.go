package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Versioning.
var e2eVersioningCases = []e2eCase{
	{"VersionLatestForNewInstances", e2eVersionLatest},
	{"VersionPinnedAcrossRestart", e2eVersionPinned},
	{"VersionSetDefault", e2eVersionSetDefault},
	{"VersionUnknownPinnedWaits", e2eVersionUnknownWaits},
}

// Restarts, deploys, crashes and shutdown.
var e2eRecoveryCases = []e2eCase{
	{"UnregisteredOrchestrationWaitsForADeploy", e2eUnregisteredWaits},
	{"NondeterminismParks", e2eNondeterminismParks},
	{"NondeterminismFailPolicy", e2eNondeterminismFails},
	{"PoisonActivity", e2ePoisonActivity},
	{"PoisonOrchestrationTurn", e2ePoisonTurn},
	{"RestartMidOrchestration", e2eRestart},
	{"ShutdownDrainsActivities", e2eShutdownDrains},
	{"ShutdownDeadlineRequeuesActivity", e2eShutdownDeadline},
	{"TwoRuntimesShareStore", e2eTwoRuntimes},
	{"StartBeforeAnyRuntime", e2eStartBeforeRuntime},
	{"RuntimeOptionsValidation", e2eRuntimeOptionsValidation},
}

func versionedRegistry(versions ...string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	for _, v := range versions {
		duroxide.RegisterOrchestrationVersion(reg, "Flow", v, func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
			var s string
			if err := ctx.WaitForEvent("go").Await(&s); err != nil {
				return "", err
			}
			return "v" + v + " ran " + ctx.Version() + " " + s, nil
		})
	}
	return reg
}

func e2eVersionLatest(e *e2e) {
	e.runtime(versionedRegistry("1.0.0", "1.10.0", "1.9.0"))
	e.start("flow", "Flow", nil)
	e.waitEvents("flow", history.ExternalSubscribed, 1)
	if v := e.status("flow").Version; v != "1.10.0" {
		e.t.Fatalf("new instance got version %q, want the latest (1.10.0, by semver)", v)
	}
	if err := e.c.RaiseEvent(e.ctx, "flow", "go", "x"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("flow", &out)
	if out != "v1.10.0 ran 1.10.0 x" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eVersionPinned(e *e2e) {
	rt1 := e.runtime(versionedRegistry("1.0.0"))
	e.start("old", "Flow", nil)
	e.waitEvents("old", history.ExternalSubscribed, 1)
	e.shutdown(rt1)
	// A deploy adds 2.0.0: the running instance stays on 1.0.0.
	e.runtime(versionedRegistry("1.0.0", "2.0.0"))
	e.start("new", "Flow", nil)
	for _, id := range []string{"old", "new"} {
		e.waitEvents(id, history.ExternalSubscribed, 1)
		if err := e.c.RaiseEvent(e.ctx, id, "go", id); err != nil {
			e.t.Fatal(err)
		}
	}
	var old, nw string
	e.result("old", &old)
	e.result("new", &nw)
	if old != "v1.0.0 ran 1.0.0 old" || nw != "v2.0.0 ran 2.0.0 new" {
		e.t.Fatalf("outputs %q, %q", old, nw)
	}
	if v := e.status("old").Version; v != "1.0.0" {
		e.t.Fatalf("pinned instance reports version %q", v)
	}
}

func e2eVersionSetDefault(e *e2e) {
	reg := versionedRegistry("1.0.0", "2.0.0")
	reg.SetDefaultVersion("Flow", "1.0.0")
	e.runtime(reg)
	e.start("dflt", "Flow", nil)
	e.startWith("explicit", "Flow", nil, &duroxide.StartOptions{Version: "2.0.0"})
	for _, id := range []string{"dflt", "explicit"} {
		e.waitEvents(id, history.ExternalSubscribed, 1)
		if err := e.c.RaiseEvent(e.ctx, id, "go", id); err != nil {
			e.t.Fatal(err)
		}
	}
	var a, b string
	e.result("dflt", &a)
	e.result("explicit", &b)
	if a != "v1.0.0 ran 1.0.0 dflt" || b != "v2.0.0 ran 2.0.0 explicit" {
		e.t.Fatalf("outputs %q, %q", a, b)
	}
	// A default version that is not registered is a registration mistake.
	bad := duroxide.NewRegistry()
	bad.SetDefaultVersion("Nope", "9.9.9")
	if _, err := duroxide.StartRuntime(e.ctx, e.store, bad, e.options()); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("StartRuntime with an unregistered default version: %v, want ErrInvalidArgument", err)
	}
}

// waitStuck waits until the runtime has tried id and put it aside: its
// LastError is set, or (for stores that do not record it) its messages are
// delayed rather than ready.
func (e *e2e) waitStuck(id string, kind string) {
	e.t.Helper()
	a := e.admin()
	e.eventually(id+" to be put aside", func() bool {
		st, err := e.c.GetStatus(e.ctx, id)
		if err != nil {
			return false
		}
		if st.LastError != nil {
			return true
		}
		d, err := a.QueueDepths(e.ctx)
		return err == nil && d.OrchestratorDelayed > 0 && d.OrchestratorReady+d.OrchestratorLocked == 0
	})
	st := e.status(id)
	if st.State.IsTerminal() {
		e.t.Fatalf("%s is %s; it should be waiting for a fixed deploy", id, describeStatus(st))
	}
	if st.LastError != nil && st.LastError.Kind != kind {
		e.t.Fatalf("%s LastError %+v, want kind %s", id, st.LastError, kind)
	}
}

// An orchestration no runtime registers is never delivered (runtimes
// fetch only the orchestrations they register): it waits, reported as
// unserved, with no delivery counted, until a deploy registers it.
func e2eUnregisteredWaits(e *e2e) {
	rt1 := e.runtime(helloRegistry())
	e.start("late", "LateComer", "x")
	e.eventually("late to be reported unserved", func() bool {
		st, err := e.c.Inspect(e.ctx, "late", nil)
		if err != nil {
			return false
		}
		for _, w := range st.WaitingFor {
			if w.Kind == duroxide.WaitUnregisteredOrchestration && w.Unserved && w.Name == "LateComer" &&
				w.Message == "no runtime registers orchestration LateComer" && w.Attempt == 0 {
				return true
			}
		}
		return false
	})
	if st := e.status("late"); st.State != duroxide.StatePending || st.LastError != nil {
		e.t.Fatalf("late is %s, want Pending without an error: it was never delivered", describeStatus(st))
	}
	e.shutdown(rt1)
	if m := rt1.Metrics(); m.Turns.Abandoned+m.Turns.Committed != 0 {
		e.t.Fatalf("turns %+v: the runtime that does not register LateComer ran it", m.Turns)
	}
	reg := helloRegistry()
	duroxide.RegisterOrchestration(reg, "LateComer", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		var out string
		err := ctx.ScheduleActivity("Hello", s).Await(&out)
		return "late: " + out, err
	})
	e.runtime(reg)
	st := e.advanceUntilDone("late")
	var out string
	if err := st.Decode(&out); err != nil || out != "late: Hello, x!" {
		e.t.Fatalf("output %q (%v) %s", out, err, describeStatus(st))
	}
	if st.LastError != nil {
		e.t.Fatalf("LastError %+v survives a committed turn", st.LastError)
	}
}

// deployRegistry registers "Deploy" as: activity step, wait for "go",
// activity done. variant changes the first activity's name.
func deployRegistry(first string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Deploy", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var a string
		if err := ctx.ScheduleActivity(first, "in").Await(&a); err != nil {
			return "", err
		}
		var g string
		if err := ctx.WaitForEvent("go").Await(&g); err != nil {
			return "", err
		}
		return a + "+" + g, nil
	})
	for _, n := range []string{"StepA", "StepB"} {
		duroxide.RegisterActivity(reg, n, func(_ context.Context, s string) (string, error) { return n + "(" + s + ")", nil })
	}
	return reg
}

func e2eNondeterminismParks(e *e2e) {
	rt1 := e.runtime(deployRegistry("StepA"))
	e.start("dep", "Deploy", nil)
	e.waitEvents("dep", history.ExternalSubscribed, 1)
	e.shutdown(rt1)

	// A bad deploy: the code now schedules StepB where history has StepA.
	rt2 := e.runtime(deployRegistry("StepB"))
	if err := e.c.RaiseEvent(e.ctx, "dep", "go", "went"); err != nil {
		e.t.Fatal(err)
	}
	e.waitStuck("dep", "nondeterminism")
	if st := e.status("dep"); st.State != duroxide.StateRunning {
		e.t.Fatalf("parked instance is %s", describeStatus(st))
	}
	before := e.history("dep", 0)
	if count(before, history.ExternalEvent) != 0 {
		e.t.Fatalf("a nondeterministic turn was committed: %v", eventKinds(before))
	}
	e.shutdown(rt2)

	// The fix is deployed: the instance resumes where it stopped.
	e.runtime(deployRegistry("StepA"))
	st := e.advanceUntilDone("dep")
	var out string
	if err := st.Decode(&out); err != nil || out != "StepA(in)+went" {
		e.t.Fatalf("output %q (%v) %s", out, err, describeStatus(st))
	}
}

func e2eNondeterminismFails(e *e2e) {
	rt1 := e.runtime(deployRegistry("StepA"))
	e.start("dep", "Deploy", nil)
	e.waitEvents("dep", history.ExternalSubscribed, 1)
	e.shutdown(rt1)
	e.runtime(deployRegistry("StepB"), func(o *duroxide.RuntimeOptions) { o.OnNondeterminism = duroxide.Fail })
	if err := e.c.RaiseEvent(e.ctx, "dep", "go", "went"); err != nil {
		e.t.Fatal(err)
	}
	oe := e.failed("dep")
	if oe.Info.Kind != "nondeterminism" || !strings.Contains(oe.Info.Message, "StepA") {
		e.t.Fatalf("failure %+v", oe.Info)
	}
	h := e.history("dep", 0)
	if last := h[len(h)-1]; last.Kind != history.OrchestrationFailed || last.Error == nil || last.Error.Kind != history.ErrorNondeterminism {
		e.t.Fatalf("history ends with %+v", last)
	}
}

func e2ePoisonActivity(e *e2e) {
	var runs atomic.Int32
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Poisoned", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.ScheduleActivity("Crash", nil).Await(nil)
		var ae *duroxide.ActivityError
		if errors.As(err, &ae) && ae.Kind == "poison" {
			return "", fmt.Errorf("gave up: %w", err)
		}
		return "", fmt.Errorf("want a poison *ActivityError, got %v", err)
	})
	// The activity never finishes before its lock lapses: each delivery
	// looks like a worker that crashed.
	var returned atomic.Int32
	duroxide.RegisterActivity(reg, "Crash", func(ctx context.Context, _ any) (any, error) {
		runs.Add(1)
		defer returned.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.WorkerLockTimeout = 30 * time.Millisecond
		o.MaxAttempts = 3
	})
	e.start("poison", "Poisoned", nil)
	// Crash each delivery: let its lock lapse, which the run learns at its
	// next renewal. The fourth delivery is poisoned and never runs.
	for k := int32(1); k <= 3; k++ {
		e.eventually(fmt.Sprintf("delivery %d to run", k), func() bool { return runs.Load() == k })
		e.fc.Advance(40 * time.Millisecond)
		e.eventually(fmt.Sprintf("delivery %d to lose its lock", k), func() bool { return returned.Load() == k })
	}
	st := e.wait("poison")
	if st.State != duroxide.StateFailed || st.Error == nil || !strings.Contains(st.Error.Message, "gave up") {
		e.t.Fatalf("status %s", describeStatus(st))
	}
	if n := runs.Load(); n != 3 {
		e.t.Fatalf("activity ran %d times, want MaxAttempts (3)", n)
	}
	h := e.history("poison", 0)
	failed := find(h, history.ActivityFailed)
	if len(failed) != 1 || failed[0].Error == nil || failed[0].Error.Kind != history.ErrorPoison {
		e.t.Fatalf("history %v (failure %+v)", eventKinds(h), failed)
	}
}

func e2eRestart(e *e2e) {
	calls := newCounter()
	reg := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Durable", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
			var a, b string
			if err := ctx.ScheduleActivity("Count", "a").Await(&a); err != nil {
				return nil, err
			}
			if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
				return nil, err
			}
			if err := ctx.ScheduleActivity("Count", "b").Await(&b); err != nil {
				return nil, err
			}
			return []string{a, b}, nil
		})
		duroxide.RegisterActivity(reg, "Count", func(_ context.Context, k string) (string, error) {
			return fmt.Sprintf("%s#%d", k, calls.inc(k)), nil
		})
		return reg
	}
	rt1 := e.runtime(reg())
	e.start("dur", "Durable", nil)
	e.waitEvents("dur", history.TimerCreated, 1)
	e.shutdown(rt1)
	e.runtime(reg())
	e.fc.Advance(time.Minute)
	st := e.advanceUntilDone("dur")
	var out []string
	if err := st.Decode(&out); err != nil || jsonOf(e.t, out) != `["a#1","b#1"]` {
		e.t.Fatalf("output %v (%v): activities must run once each across the restart", out, err)
	}
}

func e2eShutdownDrains(e *e2e) {
	var runs atomic.Int32
	started := make(chan struct{})
	g := newGate()
	reg := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Drain", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
			var s string
			err := ctx.ScheduleActivity("Slow", nil).Await(&s)
			return s, err
		})
		duroxide.RegisterActivity(reg, "Slow", func(ctx context.Context, _ any) (string, error) {
			if runs.Add(1) == 1 {
				close(started)
			}
			if err := g.wait(ctx); err != nil {
				return "", err
			}
			return "finished", nil
		})
		return reg
	}
	rt1 := e.runtime(reg())
	e.start("drain", "Drain", nil)
	select {
	case <-started:
	case <-time.After(e2eTimeout):
		e.t.Fatal("activity never started")
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
		defer cancel()
		done <- rt1.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		e.t.Fatalf("Shutdown returned (%v) while an activity was running", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.open()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(e2eTimeout):
		e.t.Fatal("Shutdown did not return after the activity finished")
	}
	// The drained activity's result was committed: a new runtime completes
	// the instance without running it again.
	e.runtime(reg())
	var out string
	e.result("drain", &out)
	if out != "finished" || runs.Load() != 1 {
		e.t.Fatalf("output %q after %d runs", out, runs.Load())
	}
}

func e2eShutdownDeadline(e *e2e) {
	var runs atomic.Int32
	started := make(chan struct{})
	canceled := make(chan struct{})
	reg := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Requeue", func(ctx *duroxide.OrchestrationContext, _ any) (int32, error) {
			var n int32
			err := ctx.ScheduleActivity("Stubborn", nil).Await(&n)
			return n, err
		})
		duroxide.RegisterActivity(reg, "Stubborn", func(ctx context.Context, _ any) (int32, error) {
			n := runs.Add(1)
			if n == 1 {
				close(started)
				<-ctx.Done()
				close(canceled)
				return 0, ctx.Err()
			}
			return n, nil
		})
		return reg
	}
	rt1 := e.runtime(reg())
	e.start("req", "Requeue", nil)
	select {
	case <-started:
	case <-time.After(e2eTimeout):
		e.t.Fatal("activity never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rt1.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("Shutdown past its deadline: %v, want DeadlineExceeded", err)
	}
	// Shutdown does not wait for the activity past its deadline; the
	// activity sees its context canceled and returns on its own.
	select {
	case <-canceled:
	case <-time.After(e2eTimeout):
		e.t.Fatal("the activity's context was not canceled")
	}
	// The activity went back to the queue; the next runtime runs it again.
	e.runtime(reg())
	var out int32
	e.result("req", &out)
	if out != 2 {
		e.t.Fatalf("output %d, want 2 (second run)", out)
	}
}

func e2eTwoRuntimes(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Both", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		ts := make([]*duroxide.Task, n)
		for i := range ts {
			ts[i] = ctx.ScheduleActivity("AddOne", i)
		}
		sum := 0
		for _, t := range ts {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	addOne(reg)
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = "one" })
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = "two" })
	for i := range 10 {
		e.start(fmt.Sprintf("both-%d", i), "Both", 20)
	}
	for i := range 10 {
		var out int
		e.result(fmt.Sprintf("both-%d", i), &out)
		if out != 210 {
			e.t.Fatalf("both-%d: %d, want 210", i, out)
		}
	}
}

func e2ePoisonTurn(e *e2e) {
	// Every run of the code hangs (as if the node died mid-turn), so the
	// turn's lock lapses again and again; after MaxAttempts deliveries the
	// instance fails as poison without running the code.
	release := make(chan struct{})
	var runs atomic.Int32
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Hang", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		runs.Add(1)
		<-release
		return "released", nil
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.OrchestratorLockTimeout = 100 * time.Millisecond
		o.OrchestrationConcurrency = 8
		o.MaxAttempts = 3
	})
	e.t.Cleanup(func() { close(release) }) // before the runtime's shutdown
	e.start("hang", "Hang", nil)
	st := e.stepUntilDone("hang", 250*time.Millisecond)
	if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "poison" {
		e.t.Fatalf("status %s, want Failed with kind poison", describeStatus(st))
	}
	if n := runs.Load(); n != 3 {
		e.t.Fatalf("the code ran %d times, want MaxAttempts (3)", n)
	}
	h := e.history("hang", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.OrchestrationFailed)
}

func e2eStartBeforeRuntime(e *e2e) {
	e.start("early", "Greet", "early")
	e.start("early2", "Greet", "early2")
	if st := e.status("early"); st.State != duroxide.StatePending {
		e.t.Fatalf("instance with no runtime: %s", describeStatus(st))
	}
	e.runtime(helloRegistry())
	for _, id := range []string{"early", "early2"} {
		var out string
		e.result(id, &out)
		if out != "Hello, "+id+"!" {
			e.t.Fatalf("%s: %q", id, out)
		}
	}
}

func e2eRuntimeOptionsValidation(e *e2e) {
	reg := helloRegistry()
	for name, mod := range map[string]func(*duroxide.RuntimeOptions){
		"negative concurrency":  func(o *duroxide.RuntimeOptions) { o.WorkerConcurrency = -1 },
		"negative duration":     func(o *duroxide.RuntimeOptions) { o.BackoffBase = -time.Second },
		"lock timeout too tiny": func(o *duroxide.RuntimeOptions) { o.WorkerLockTimeout = time.Millisecond },
	} {
		o := e.options()
		mod(o)
		if _, err := duroxide.StartRuntime(e.ctx, e.store, reg, o); !errors.Is(err, duroxide.ErrInvalidArgument) {
			e.t.Fatalf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := duroxide.StartRuntime(e.ctx, e.store, nil, e.options()); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("nil registry: %v, want ErrInvalidArgument", err)
	}
	dup := duroxide.NewRegistry()
	duroxide.RegisterActivity(dup, "A", func(context.Context, any) (any, error) { return nil, nil })
	duroxide.RegisterActivity(dup, "A", func(context.Context, any) (any, error) { return nil, nil })
	if _, err := duroxide.StartRuntime(e.ctx, e.store, dup, e.options()); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("duplicate activity: %v, want ErrInvalidArgument", err)
	}
}

// An instance pinned to a version no runtime registers is never
// delivered (runtimes fetch only the versions they register): it waits,
// reported unserved by version, until a deploy registers it.
func e2eVersionUnknownWaits(e *e2e) {
	rt1 := e.runtime(versionedRegistry("1.0.0"))
	e.startWith("future", "Flow", nil, &duroxide.StartOptions{Version: "3.0.0"})
	e.eventually("future to be reported unserved", func() bool {
		st, err := e.c.Inspect(e.ctx, "future", nil)
		if err != nil {
			return false
		}
		for _, w := range st.WaitingFor {
			if w.Kind == duroxide.WaitUnregisteredOrchestration && w.Unserved && w.Name == "Flow" && w.Version == "3.0.0" &&
				w.Message == "no runtime registers orchestration Flow version 3.0.0" && w.Attempt == 0 {
				return true
			}
		}
		return false
	})
	if st := e.status("future"); st.State != duroxide.StatePending || st.LastError != nil {
		e.t.Fatalf("future is %s, want Pending without an error: it was never delivered", describeStatus(st))
	}
	e.shutdown(rt1)
	if m := rt1.Metrics(); m.Turns.Abandoned+m.Turns.Committed != 0 {
		e.t.Fatalf("turns %+v: the runtime that does not register Flow 3.0.0 ran it", m.Turns)
	}
	e.runtime(versionedRegistry("1.0.0", "3.0.0"))
	e.advanceTimersUntil("the instance to start", func() bool {
		h, err := e.c.GetHistory(e.ctx, "future", 0)
		return err == nil && count(h, history.ExternalSubscribed) == 1
	})
	if err := e.c.RaiseEvent(e.ctx, "future", "go", "now"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("future", &out)
	if out != "v3.0.0 ran 3.0.0 now" {
		e.t.Fatalf("output %q", out)
	}
}
