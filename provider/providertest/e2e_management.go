package providertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Client-side management: starts, listing, history, purge, many instances.
var e2eManagementCases = []e2eCase{
	{"DuplicateStart", e2eDuplicateStart},
	{"StartValidation", e2eStartValidation},
	{"DelayedStart", e2eDelayedStart},
	{"StartAtInThePast", e2eStartAtPast},
	{"ManyInstances", e2eManyInstances},
	{"PurgeAfterCompletion", e2ePurge},
	{"PurgeRunningNeedsForce", e2ePurgeRunning},
	{"PurgeTree", e2ePurgeTree},
	{"ForcePurgeWhileActivityRuns", e2eForcePurgeBusy},
	{"ListInstancesFiltering", e2eListInstances},
	{"GetHistoryShapes", e2eHistoryShapes},
	{"WaitForOrchestrationDeadline", e2eWaitDeadline},
}

func e2eDuplicateStart(e *e2e) {
	e.runtime(helloRegistry())
	e.start("dup", "Greet", "first")
	err := e.c.StartOrchestration(e.ctx, "dup", "Greet", "second", nil)
	if !errors.Is(err, duroxide.ErrInstanceExists) {
		e.t.Fatalf("second start: %v, want ErrInstanceExists", err)
	}
	var out string
	e.result("dup", &out)
	if out != "Hello, first!" {
		e.t.Fatalf("output %q", out)
	}
	// Still taken once finished.
	if err := e.c.StartOrchestration(e.ctx, "dup", "Greet", "third", nil); !errors.Is(err, duroxide.ErrInstanceExists) {
		e.t.Fatalf("start of a completed ID: %v, want ErrInstanceExists", err)
	}
	if n := count(e.history("dup", 0), history.OrchestrationStarted); n != 1 {
		e.t.Fatalf("%d OrchestrationStarted events", n)
	}
}

func e2eStartValidation(e *e2e) {
	e.runtime(helloRegistry())
	for _, c := range []struct{ id, name string }{{"", "Greet"}, {"x", ""}} {
		if err := e.c.StartOrchestration(e.ctx, c.id, c.name, nil, nil); !errors.Is(err, duroxide.ErrInvalidArgument) {
			e.t.Fatalf("StartOrchestration(%q, %q): %v, want ErrInvalidArgument", c.id, c.name, err)
		}
	}
	if err := e.c.StartOrchestration(e.ctx, "bad", "Greet", func() {}, nil); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("unencodable input: %v, want ErrInvalidArgument", err)
	}
	if _, err := e.c.GetStatus(e.ctx, "bad"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("a rejected start created the instance: %v", err)
	}
}

func e2eDelayedStart(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "When", func(ctx *duroxide.OrchestrationContext, _ any) (time.Time, error) {
		return ctx.Now(), nil
	})
	e.runtime(reg)
	at := e2eStart.Add(2 * time.Hour)
	e.startWith("when", "When", nil, &duroxide.StartOptions{StartAt: at})
	st := e.status("when")
	if st.State != duroxide.StatePending || st.ExecutionID != 0 {
		e.t.Fatalf("delayed instance: %s", describeStatus(st))
	}
	if h := e.history("when", 0); len(h) != 0 {
		e.t.Fatalf("delayed instance has history %v", eventKinds(h))
	}
	e.fc.Advance(time.Hour)
	e.drained()
	if st := e.status("when"); st.State != duroxide.StatePending {
		e.t.Fatalf("instance started an hour early: %s", describeStatus(st))
	}
	e.fc.Advance(time.Hour)
	st = e.advanceUntilDone("when")
	var ran time.Time
	if err := st.Decode(&ran); err != nil || ran.Before(at) {
		e.t.Fatalf("ran at %s (%v), want at or after %s", ran, err, at)
	}
}

func e2eManyInstances(e *e2e) {
	const n = 200
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Small", func(ctx *duroxide.OrchestrationContext, i int) (int, error) {
		var v int
		err := ctx.ScheduleActivity("Triple", i).Await(&v)
		return v, err
	})
	duroxide.RegisterActivity(reg, "Triple", func(_ context.Context, i int) (int, error) { return 3 * i, nil })
	e.runtime(reg)
	// Start from several goroutines at once, as many clients would.
	const clients = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				errs <- e.c.StartOrchestration(e.ctx, fmt.Sprintf("many-%03d", i), "Small", i, nil)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			e.t.Fatalf("StartOrchestration: %v", err)
		}
	}
	for i := range n {
		var v int
		e.result(fmt.Sprintf("many-%03d", i), &v)
		if v != 3*i {
			e.t.Fatalf("many-%03d: %d, want %d", i, v, 3*i)
		}
	}
	{
		a := e.store
		c, err := a.Counts(e.ctx)
		if err != nil || c.Instances != n || c.ByStatus[provider.StatusCompleted] != n {
			e.t.Fatalf("counts %+v (%v)", c, err)
		}
	}
}

func e2ePurge(e *e2e) {
	e.runtime(helloRegistry())
	e.start("gone", "Greet", "x")
	e.start("kept", "Greet", "y")
	e.wait("gone")
	e.wait("kept")
	if err := e.c.PurgeInstance(e.ctx, "gone", false); err != nil {
		e.t.Fatalf("PurgeInstance: %v", err)
	}
	if _, err := e.c.GetStatus(e.ctx, "gone"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetStatus after purge: %v", err)
	}
	if _, err := e.c.GetHistory(e.ctx, "gone", 0); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetHistory after purge: %v", err)
	}
	if err := e.c.PurgeInstance(e.ctx, "gone", false); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("second purge: %v, want ErrNotFound", err)
	}
	if st := e.status("kept"); st.State != duroxide.StateCompleted {
		e.t.Fatalf("purge touched another instance: %s", describeStatus(st))
	}
	// The ID can be reused.
	e.start("gone", "Greet", "again")
	var out string
	e.result("gone", &out)
	if out != "Hello, again!" {
		e.t.Fatalf("reused ID output %q", out)
	}
}

func e2ePurgeRunning(e *e2e) {
	e.runtime(holdRegistry())
	e.start("live", "Hold", nil)
	e.waitEvents("live", history.ExternalSubscribed, 1)
	if err := e.c.PurgeInstance(e.ctx, "live", false); !errors.Is(err, duroxide.ErrStillRunning) {
		e.t.Fatalf("purge of a running instance: %v, want ErrStillRunning", err)
	}
	if err := e.c.PurgeInstance(e.ctx, "live", true); err != nil {
		e.t.Fatalf("forced purge: %v", err)
	}
	if _, err := e.c.GetStatus(e.ctx, "live"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetStatus after forced purge: %v", err)
	}
	// Messages for the purged instance are rejected or dropped; nothing is recreated.
	if err := e.c.RaiseEvent(e.ctx, "live", "release", nil); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("RaiseEvent after purge: %v", err)
	}
}

func e2ePurgeTree(e *e2e) {
	e.runtime(childRegistry())
	e.start("p", "Parent", []string{"", "kid"})
	e.wait("p")
	if err := e.c.PurgeInstance(e.ctx, "kid", false); !errors.Is(err, duroxide.ErrChildInstance) {
		e.t.Fatalf("purge of a child: %v, want ErrChildInstance", err)
	}
	if err := e.c.PurgeInstance(e.ctx, "p", false); err != nil {
		e.t.Fatalf("purge of the root: %v", err)
	}
	for _, id := range []string{"p", "p::sub::2", "kid"} {
		if _, err := e.c.GetStatus(e.ctx, id); !errors.Is(err, duroxide.ErrNotFound) {
			e.t.Fatalf("%s after purging the root: %v", id, err)
		}
	}
}

func e2eListInstances(e *e2e) {
	reg := holdRegistry()
	duroxide.RegisterOrchestration(reg, "Quick", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) { return "q", nil })
	duroxide.RegisterOrchestration(reg, "Oops", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "", errors.New("oops")
	})
	e.runtime(reg)
	for i := range 3 {
		e.start(fmt.Sprintf("quick-%d", i), "Quick", nil)
	}
	e.start("oops", "Oops", nil)
	e.start("hold-1", "Hold", nil)
	e.start("hold-2", "Hold", nil)
	for i := range 3 {
		e.wait(fmt.Sprintf("quick-%d", i))
	}
	e.wait("oops")
	e.waitEvents("hold-1", history.ExternalSubscribed, 1)
	e.waitEvents("hold-2", history.ExternalSubscribed, 1)

	ids := func(opts *duroxide.ListOptions) map[string]bool {
		e.t.Helper()
		out := map[string]bool{}
		for {
			page, err := e.c.ListInstances(e.ctx, opts)
			if err != nil {
				e.t.Fatalf("ListInstances: %v", err)
			}
			for _, s := range page.Instances {
				if out[s.InstanceID] {
					e.t.Fatalf("%s listed twice", s.InstanceID)
				}
				out[s.InstanceID] = true
			}
			if page.NextCursor == "" {
				return out
			}
			next := *opts
			next.Cursor = page.NextCursor
			opts = &next
		}
	}
	check := func(what string, got map[string]bool, want ...string) {
		e.t.Helper()
		if len(got) != len(want) {
			e.t.Fatalf("%s: listed %v, want %v", what, got, want)
		}
		for _, w := range want {
			if !got[w] {
				e.t.Fatalf("%s: listed %v, want %v", what, got, want)
			}
		}
	}
	all := []string{"quick-0", "quick-1", "quick-2", "oops", "hold-1", "hold-2"}
	check("all", ids(&duroxide.ListOptions{}), all...)
	check("paged by 2", ids(&duroxide.ListOptions{Limit: 2}), all...)
	check("by name", ids(&duroxide.ListOptions{Orchestration: "Quick"}), "quick-0", "quick-1", "quick-2")
	check("running", ids(&duroxide.ListOptions{States: []duroxide.State{duroxide.StateRunning}}), "hold-1", "hold-2")
	check("failed or completed", ids(&duroxide.ListOptions{States: []duroxide.State{duroxide.StateFailed, duroxide.StateCompleted}}),
		"quick-0", "quick-1", "quick-2", "oops")
	check("name and state", ids(&duroxide.ListOptions{Orchestration: "Hold", States: []duroxide.State{duroxide.StateCompleted}}))
	page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{Limit: 2})
	if err != nil || len(page.Instances) != 2 || page.NextCursor == "" {
		e.t.Fatalf("first page of 2: %d instances, cursor %q (%v)", len(page.Instances), page.NextCursor, err)
	}
	if _, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{States: []duroxide.State{"Bogus"}}); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("unknown state filter: %v", err)
	}
}

func e2eHistoryShapes(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Kid", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) { return "kid", nil })
	duroxide.RegisterOrchestration(reg, "Shape", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		ctx.SetCustomStatus("s")
		var a, k, ev string
		if err := ctx.ScheduleActivity("Echo", "a").Await(&a); err != nil {
			return "", err
		}
		if err := ctx.ScheduleTimer(0).Await(nil); err != nil {
			return "", err
		}
		if err := ctx.ScheduleSubOrchestration("Kid", "", nil).Await(&k); err != nil {
			return "", err
		}
		if err := ctx.WaitForEvent("ev").Await(&ev); err != nil {
			return "", err
		}
		return a + k + ev, nil
	})
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	e.runtime(reg)
	e.start("shape", "Shape", nil)
	e.waitEvents("shape", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "shape", "ev", "!"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("shape", &out)
	if out != "akid!" {
		e.t.Fatalf("output %q", out)
	}
	h := e.history("shape", 0)
	e.checkHistory(h)
	e.wantKinds(h,
		history.OrchestrationStarted, history.CustomStatusUpdated,
		history.ActivityScheduled, history.ActivityCompleted,
		history.TimerCreated, history.TimerFired,
		history.SubOrchestrationScheduled, history.SubOrchestrationCompleted,
		history.ExternalSubscribed, history.ExternalEvent,
		history.OrchestrationCompleted)
	for _, p := range [][2]int{{3, 2}, {5, 4}, {7, 6}} {
		if h[p[0]].SourceEventID != h[p[1]].EventID {
			e.t.Fatalf("event %d completes %d, want %d", h[p[0]].EventID, h[p[0]].SourceEventID, h[p[1]].EventID)
		}
	}
	for i, ev := range h {
		if err := ev.Validate(); err != nil {
			e.t.Fatalf("event %d: %v", i, err)
		}
		if ev.TimestampMs < e2eStart.UnixMilli() {
			e.t.Fatalf("event %d timestamp %d precedes the start", i, ev.TimestampMs)
		}
	}
	if h1 := e.history("shape", 1); jsonOf(e.t, h1) != jsonOf(e.t, h) {
		e.t.Fatal("GetHistory(0) and GetHistory(1) differ for a single-execution instance")
	}
	if _, err := e.c.GetHistory(e.ctx, "shape", 2); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("unknown execution: %v, want ErrNotFound", err)
	}
	if _, err := e.c.GetHistory(e.ctx, "nobody", 0); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("unknown instance: %v, want ErrNotFound", err)
	}
	if _, err := e.c.GetHistory(e.ctx, "shape", -1); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("negative execution: %v, want ErrInvalidArgument", err)
	}
}

func e2eWaitDeadline(e *e2e) {
	e.runtime(holdRegistry())
	e.start("hold", "Hold", nil)
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := e.c.WaitForOrchestration(ctx, "hold"); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("WaitForOrchestration of a running instance: %v, want DeadlineExceeded", err)
	}
	if _, err := e.c.WaitForOrchestration(e.ctx, "nobody"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("WaitForOrchestration of an unknown instance: %v, want ErrNotFound", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "hold", "release", "bye"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("hold", &out)
	if out != "bye" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eStartAtPast(e *e2e) {
	e.runtime(helloRegistry())
	e.startWith("past", "Greet", "then", &duroxide.StartOptions{StartAt: e2eStart.Add(-time.Hour)})
	var out string
	e.result("past", &out) // no clock advance needed
	if out != "Hello, then!" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eForcePurgeBusy(e *e2e) {
	g := newGate()
	started := make(chan struct{}, 1)
	reg := helloRegistry()
	duroxide.RegisterOrchestration(reg, "Busy", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Wait", nil).Await(&s)
		return s, err
	})
	duroxide.RegisterActivity(reg, "Wait", func(ctx context.Context, _ any) (string, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		return "late result", g.wait(ctx)
	})
	e.runtime(reg)
	e.start("busy", "Busy", nil)
	select {
	case <-started:
	case <-time.After(e2eTimeout):
		e.t.Fatal("activity never started")
	}
	if err := e.c.PurgeInstance(e.ctx, "busy", true); err != nil {
		e.t.Fatalf("forced purge: %v", err)
	}
	g.open() // its result has nowhere to go and is discarded
	e.eventually("the worker queue to empty", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.WorkerLocked+d.WorkerReady+d.WorkerDelayed == 0
	})
	e.drained()
	if _, err := e.c.GetStatus(e.ctx, "busy"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("the purged instance came back: %v", err)
	}
	e.start("next", "Greet", "still working")
	var out string
	e.result("next", &out)
	if out != "Hello, still working!" {
		e.t.Fatalf("output %q", out)
	}
}
