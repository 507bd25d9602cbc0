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

// ContinueAsNew.
var e2eContinueAsNewCases = []e2eCase{
	{"ContinueAsNewCounter", e2eCANCounter},
	{"ContinueAsNewCarriesEvents", e2eCANCarriesEvents},
	{"ContinueAsNewVersionChange", e2eCANVersionChange},
	{"ContinueAsNewStaleTimer", e2eCANStaleTimer},
	{"ContinueAsNewKeepsCustomStatus", e2eCANKeepsCustomStatus},
	{"ContinueAsNewKeepsPinnedVersion", e2eCANKeepsVersion},
}

// Cancellation.
var e2eCancellationCases = []e2eCase{
	{"CancelRunning", e2eCancelRunning},
	{"CancelCascadesToChildren", e2eCancelCascade},
	{"CancelStopsRunningActivity", e2eCancelStopsActivity},
	{"CancelFinishedIsRefused", e2eCancelFinished},
	{"CancelUnknownInstance", e2eCancelUnknown},
	{"CancelChildSeenByParent", e2eCancelChildSeenByParent},
	{"CancelPendingDelayedStart", e2eCancelPending},
	{"CancelDuringRetryBackoff", e2eCancelDuringRetry},
	{"CancelEternalLoop", e2eCancelEternal},
}

func e2eCANCounter(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Count", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		if n < 5 {
			if err := ctx.ScheduleActivity("AddOne", n).Await(&n); err != nil {
				return "", err
			}
			return "", ctx.ContinueAsNew(n)
		}
		return fmt.Sprintf("%d in execution %d", n, ctx.ExecutionID()), nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("count", "Count", 0)
	var out string
	st := e.result("count", &out)
	if out != "5 in execution 6" || st.ExecutionID != 6 {
		e.t.Fatalf("output %q, execution %d", out, st.ExecutionID)
	}
	execs, err := e.c.ListExecutions(e.ctx, "count")
	if err != nil || len(execs) != 6 {
		e.t.Fatalf("ListExecutions: %d (%v)", len(execs), err)
	}
	for i, x := range execs {
		want := provider.StatusContinuedAsNew
		if i == 5 {
			want = provider.StatusCompleted
		}
		if x.ExecutionID != int64(i+1) || x.Status != want || string(x.Input) != fmt.Sprint(i) {
			e.t.Fatalf("execution %d: id %d status %s input %s", i+1, x.ExecutionID, x.Status, x.Input)
		}
		h := e.history("count", int64(i+1))
		e.checkHistory(h)
		if string(h[0].Input) != fmt.Sprint(i) {
			e.t.Fatalf("execution %d starts with input %s", i+1, h[0].Input)
		}
		last := h[len(h)-1]
		if i < 5 && (last.Kind != history.OrchestrationContinuedAsNew || string(last.Input) != fmt.Sprint(i+1)) {
			e.t.Fatalf("execution %d ends with %+v", i+1, last)
		}
	}
}

func e2eCANCarriesEvents(e *e2e) {
	g := newGate()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Carry", func(ctx *duroxide.OrchestrationContext, round int) ([]string, error) {
		if round == 1 {
			var first string
			if err := ctx.WaitForEvent("e").Await(&first); err != nil {
				return nil, err
			}
			if err := ctx.ScheduleActivity("Block", nil).Await(nil); err != nil {
				return nil, err
			}
			return nil, ctx.ContinueAsNew(2)
		}
		var out []string
		for range 2 {
			var s string
			if err := ctx.WaitForEvent("e").Await(&s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		var o string
		if err := ctx.WaitForEvent("other").Await(&o); err != nil {
			return nil, err
		}
		return append(out, o), nil
	})
	duroxide.RegisterActivity(reg, "Block", func(ctx context.Context, _ any) (any, error) { return nil, g.wait(ctx) })
	e.runtime(reg)
	e.start("carry", "Carry", 1)
	e.waitEvents("carry", history.ExternalSubscribed, 1)
	for _, v := range []string{"consumed", "second", "third"} {
		if err := e.c.RaiseEvent(e.ctx, "carry", "e", v); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.c.RaiseEvent(e.ctx, "carry", "other", "o"); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("carry", history.ExternalEvent, 4)
	g.open()
	var out []string
	e.result("carry", &out)
	if jsonOf(e.t, out) != `["second","third","o"]` {
		e.t.Fatalf("carried events %v, want [second third o]", out)
	}
	if st := e.status("carry"); st.ExecutionID != 2 {
		e.t.Fatalf("execution %d", st.ExecutionID)
	}
}

func e2eCANVersionChange(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestrationVersion(reg, "Evolve", "1.0.0", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		return "", ctx.ContinueAsNewVersion("2.0.0", n+1)
	})
	duroxide.RegisterOrchestrationVersion(reg, "Evolve", "2.0.0", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		return fmt.Sprintf("v%s got %d", ctx.Version(), n), nil
	})
	e.runtime(reg)
	e.startWith("evolve", "Evolve", 1, &duroxide.StartOptions{Version: "1.0.0"})
	var out string
	st := e.result("evolve", &out)
	if out != "v2.0.0 got 2" || st.Version != "2.0.0" || st.ExecutionID != 2 {
		e.t.Fatalf("output %q, %s", out, describeStatus(st))
	}
	if v := e.history("evolve", 1)[0].Version; v != "1.0.0" {
		e.t.Fatalf("execution 1 ran version %q", v)
	}
	if v := e.history("evolve", 2)[0].Version; v != "2.0.0" {
		e.t.Fatalf("execution 2 ran version %q", v)
	}
}

func e2eCANStaleTimer(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stale", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
		if round == 1 {
			ctx.ScheduleTimer(time.Minute) // never awaited; fires after the hand-over
			return "", ctx.ContinueAsNew(2)
		}
		if err := ctx.ScheduleTimer(time.Hour).Await(nil); err != nil {
			return "", err
		}
		return "slept an hour", nil
	})
	e.runtime(reg)
	e.start("stale", "Stale", 1)
	e.eventually("execution 2 to schedule its timer", func() bool {
		h, err := e.c.GetHistory(e.ctx, "stale", 2)
		return err == nil && count(h, history.TimerCreated) == 1
	})
	// Execution 1's timer (same event ID as execution 2's) fires and must
	// be ignored.
	e.fc.Advance(2 * time.Minute)
	e.advanceTimersUntil("the stale timer to be consumed", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.OrchestratorReady+d.OrchestratorLocked == 0 && d.OrchestratorDelayed == 1
	})
	if st := e.status("stale"); st.State != duroxide.StateRunning {
		e.t.Fatalf("execution 1's timer completed execution 2: %s", describeStatus(st))
	}
	e.fc.Advance(time.Hour)
	st := e.advanceUntilDone("stale")
	var out string
	if err := st.Decode(&out); err != nil || out != "slept an hour" {
		e.t.Fatalf("output %q (%v)", out, err)
	}
	h := e.history("stale", 2)
	if count(h, history.TimerFired) != 1 {
		e.t.Fatalf("execution 2 history %v", eventKinds(h))
	}
}

func e2eCANKeepsCustomStatus(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Keep", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
		if round == 1 {
			ctx.SetCustomStatus("set in execution 1")
			return "", ctx.ContinueAsNew(2)
		}
		return "", ctx.WaitForEvent("done").Await(nil)
	})
	e.runtime(reg)
	e.start("keep", "Keep", 1)
	e.eventually("execution 2 to wait", func() bool {
		h, err := e.c.GetHistory(e.ctx, "keep", 2)
		return err == nil && count(h, history.ExternalSubscribed) == 1
	})
	if st := e.status("keep"); string(st.CustomStatus) != `"set in execution 1"` {
		e.t.Fatalf("custom status after ContinueAsNew: %s", st.CustomStatus)
	}
}

// --- cancellation ---

func holdRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Hold", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("release").Await(&s)
		return s, err
	})
	return reg
}

func e2eCancelRunning(e *e2e) {
	// No grace period: the code does not run again (see CancelGrace* for the default).
	e.runtime(holdRegistry(), func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = -1 })
	e.start("hold", "Hold", nil)
	e.waitEvents("hold", history.ExternalSubscribed, 1)
	if err := e.c.CancelInstance(e.ctx, "hold", "operator said stop"); err != nil {
		e.t.Fatal(err)
	}
	oe := e.terminalError("hold", duroxide.StateCanceled)
	if !errors.Is(oe, duroxide.ErrCanceled) || oe.Info.Kind != "canceled" || oe.Info.Message != "operator said stop" {
		e.t.Fatalf("canceled error %+v (Is ErrCanceled: %v)", oe.Info, errors.Is(oe, duroxide.ErrCanceled))
	}
	h := e.history("hold", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.ExternalSubscribed, history.OrchestrationCancelRequested, history.OrchestrationFailed)
	if h[2].Reason != "operator said stop" || h[3].Error == nil || h[3].Error.Kind != history.ErrorCanceled {
		e.t.Fatalf("cancel events %+v %+v", h[2], h[3])
	}
	// A second cancel and a late event are refused and change nothing.
	var te *duroxide.InstanceTerminalError
	if err := e.c.CancelInstance(e.ctx, "hold", "again"); !errors.As(err, &te) || te.State != duroxide.StateCanceled {
		e.t.Fatalf("second cancel: %v, want *InstanceTerminalError (Canceled)", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "hold", "release", "late"); !errors.Is(err, duroxide.ErrInstanceTerminal) {
		e.t.Fatalf("late event: %v, want ErrInstanceTerminal", err)
	}
	e.drained()
	if h2 := e.history("hold", 0); len(h2) != len(h) {
		e.t.Fatalf("history changed after cancellation: %v", eventKinds(h2))
	}
}

func e2eCancelCascade(e *e2e) {
	reg := holdRegistry()
	duroxide.RegisterOrchestration(reg, "Mid", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		a := ctx.ScheduleSubOrchestration("Hold", "", nil)
		b := ctx.ScheduleSubOrchestration("Hold", "", nil)
		if err := a.Await(nil); err != nil {
			return "", err
		}
		return "", b.Await(nil)
	})
	duroxide.RegisterOrchestration(reg, "Top", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "", ctx.ScheduleSubOrchestration("Mid", "mid", nil).Await(nil)
	})
	e.runtime(reg)
	e.start("top", "Top", nil)
	leaves := []string{"mid::sub::2", "mid::sub::3"}
	for _, id := range leaves {
		e.waitEvents(id, history.ExternalSubscribed, 1)
	}
	if err := e.c.CancelInstance(e.ctx, "top", "shutdown"); err != nil {
		e.t.Fatal(err)
	}
	e.terminalError("top", duroxide.StateCanceled)
	for _, id := range append([]string{"mid"}, leaves...) {
		oe := e.terminalError(id, duroxide.StateCanceled)
		if !errors.Is(oe, duroxide.ErrCanceled) {
			e.t.Fatalf("%s: %v", id, oe)
		}
	}
	h := e.history("top", 0)
	if count(h, history.SubOrchestrationCancelRequested) != 1 {
		e.t.Fatalf("top history %v", eventKinds(h))
	}
}

func e2eCancelStopsActivity(e *e2e) {
	started := make(chan struct{})
	stopped := make(chan error, 1)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Busy", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Forever", nil).Await(&s)
		return s, err
	})
	var once sync.Once
	duroxide.RegisterActivity(reg, "Forever", func(ctx context.Context, _ any) (string, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		select {
		case stopped <- context.Cause(ctx):
		default:
		}
		return "", ctx.Err()
	})
	e.runtime(reg)
	e.start("busy", "Busy", nil)
	select {
	case <-started:
	case <-time.After(e2eTimeout):
		e.t.Fatal("activity never started")
	}
	if err := e.c.CancelInstance(e.ctx, "busy", "enough"); err != nil {
		e.t.Fatal(err)
	}
	e.terminalError("busy", duroxide.StateCanceled)
	select {
	case cause := <-stopped:
		if cause == nil {
			e.t.Fatal("activity context canceled without a cause")
		}
	case <-time.After(e2eTimeout):
		e.t.Fatal("the activity's context was not canceled")
	}
	h := e.history("busy", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.ActivityScheduled, history.OrchestrationCancelRequested,
		history.ActivityCancelRequested, history.OrchestrationFailed)
	e.eventually("the worker queue to empty", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.WorkerLocked+d.WorkerReady+d.WorkerDelayed == 0
	})
}

func e2eCancelFinished(e *e2e) {
	e.runtime(helloRegistry())
	e.start("greet", "Greet", "z")
	e.wait("greet")
	before, stBefore := e.history("greet", 0), e.status("greet")
	var te *duroxide.InstanceTerminalError
	if err := e.c.CancelInstance(e.ctx, "greet", "too late"); !errors.As(err, &te) || te.State != duroxide.StateCompleted || te.InstanceID != "greet" {
		e.t.Fatalf("CancelInstance of a completed instance: %v, want *InstanceTerminalError (Completed)", err)
	}
	e.drained()
	st := e.status("greet")
	var out string
	if err := st.Decode(&out); err != nil || st.State != duroxide.StateCompleted || out != "Hello, z!" {
		e.t.Fatalf("canceling a completed instance changed it: %s", describeStatus(st))
	}
	if !st.UpdatedAt.Equal(stBefore.UpdatedAt) {
		e.t.Fatalf("canceling a completed instance moved updatedAt from %v to %v", stBefore.UpdatedAt, st.UpdatedAt)
	}
	if after := e.history("greet", 0); len(after) != len(before) {
		e.t.Fatalf("history changed: %v", eventKinds(after))
	}
}

func e2eCancelUnknown(e *e2e) {
	e.runtime(duroxide.NewRegistry())
	if err := e.c.CancelInstance(e.ctx, "ghost", "x"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("CancelInstance of an unknown instance: %v, want ErrNotFound", err)
	}
}

func e2eCancelChildSeenByParent(e *e2e) {
	reg := holdRegistry()
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.ScheduleSubOrchestration("Hold", "kid", nil).Await(nil)
		var se *duroxide.SubOrchestrationError
		if errors.As(err, &se) && errors.Is(err, duroxide.ErrCanceled) {
			return "child canceled: " + se.Message, nil
		}
		return "", fmt.Errorf("want a canceled *SubOrchestrationError, got %v", err)
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	e.waitEvents("kid", history.ExternalSubscribed, 1)
	if err := e.c.CancelInstance(e.ctx, "kid", "kid stopped"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("p", &out)
	if out != "child canceled: kid stopped" {
		e.t.Fatalf("output %q", out)
	}
	e.terminalError("kid", duroxide.StateCanceled)
}

func e2eCancelPending(e *e2e) {
	e.runtime(holdRegistry())
	e.startWith("later", "Hold", nil, &duroxide.StartOptions{StartAt: e2eStart.Add(time.Hour)})
	if err := e.c.CancelInstance(e.ctx, "later", "never mind"); err != nil {
		e.t.Fatal(err)
	}
	e.fc.Advance(time.Hour)
	st := e.advanceUntilDone("later")
	if st.State != duroxide.StateCanceled || !errors.Is(st.Decode(nil), duroxide.ErrCanceled) {
		e.t.Fatalf("delayed instance canceled before it started: %s", describeStatus(st))
	}
}

func e2eCANKeepsVersion(e *e2e) {
	reg := duroxide.NewRegistry()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		duroxide.RegisterOrchestrationVersion(reg, "Loop", v, func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
			if n < 3 {
				return "", ctx.ContinueAsNew(n + 1)
			}
			return fmt.Sprintf("v%s/%s at %d", v, ctx.Version(), ctx.ExecutionID()), nil
		})
	}
	e.runtime(reg)
	e.startWith("loop", "Loop", 1, &duroxide.StartOptions{Version: "1.0.0"})
	var out string
	st := e.result("loop", &out)
	if out != "v1.0.0/1.0.0 at 3" || st.Version != "1.0.0" {
		e.t.Fatalf("output %q, %s: ContinueAsNew must keep the pinned version", out, describeStatus(st))
	}
}

func e2eCancelDuringRetry(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Hour}).Await(&s)
		return s, err
	})
	flaky(reg, calls, 100)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	e.waitEvents("retry", history.TimerCreated, 1) // waiting an hour before attempt 2
	if err := e.c.CancelInstance(e.ctx, "retry", "stop retrying"); err != nil {
		e.t.Fatal(err)
	}
	e.terminalError("retry", duroxide.StateCanceled)
	e.fc.Advance(2 * time.Hour)
	e.advanceTimersUntil("the backoff timer to be consumed", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.OrchestratorDelayed+d.OrchestratorReady+d.OrchestratorLocked == 0
	})
	if n := calls.get("k"); n != 1 {
		e.t.Fatalf("activity ran %d times; a canceled instance must not retry", n)
	}
}

func e2eCancelEternal(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Eternal", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
			return 0, err
		}
		return 0, ctx.ContinueAsNew(n + 1)
	})
	e.runtime(reg)
	e.start("eternal", "Eternal", 0)
	e.advanceTimersUntil("a few executions", func() bool {
		st, err := e.c.GetStatus(e.ctx, "eternal")
		return err == nil && st.ExecutionID >= 3
	})
	if err := e.c.CancelInstance(e.ctx, "eternal", "end of the world"); err != nil {
		e.t.Fatal(err)
	}
	oe := e.terminalError("eternal", duroxide.StateCanceled)
	if oe.Info.Message != "end of the world" {
		e.t.Fatalf("canceled with %+v", oe.Info)
	}
	st := e.status("eternal")
	e.fc.Advance(2 * time.Minute)
	e.advanceTimersUntil("nothing left to run", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.OrchestratorDelayed+d.OrchestratorReady+d.OrchestratorLocked == 0
	})
	if after := e.status("eternal"); after.ExecutionID != st.ExecutionID || after.State != duroxide.StateCanceled {
		e.t.Fatalf("a canceled loop went on: %s -> %s", describeStatus(st), describeStatus(after))
	}
}
