package providertest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Cancellation the orchestration sees: a grace period to clean up, and the
// instance timeout, which cancels the same way.
var e2eCancelGraceCases = []e2eCase{
	{"CancelGraceRunsCleanup", e2eCancelGraceCleanup},
	{"CancelGraceDeadline", e2eCancelGraceDeadline},
	{"InstanceTimeout", e2eInstanceTimeout},
	{"InstanceDeadlineInInspect", e2eInstanceDeadlineInInspect},
}

// compensatingRegistry has "Book", which waits for "confirm" and, when
// canceled (or timed out), runs the activity "Undo" before it returns.
func compensatingRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	undo := duroxide.RegisterActivity(reg, "Undo", func(_ context.Context, s string) (string, error) { return "undone " + s, nil })
	duroxide.RegisterOrchestration(reg, "Book", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.WaitForEvent("confirm").Await(nil)
		if !ctx.Canceled() {
			return "confirmed", err
		}
		if !errors.Is(err, duroxide.ErrCanceled) {
			return "", errors.New("the canceled wait did not fail with ErrCanceled")
		}
		_, err = duroxide.CallActivity(ctx, undo, "booking", nil).Get()
		return "", err
	})
	return reg
}

func e2eCancelGraceCleanup(e *e2e) {
	reg := compensatingRegistry()
	e.runtime(reg)
	e.start("book", "Book", nil)
	e.waitEvents("book", history.ExternalSubscribed, 1)
	if err := e.c.CancelInstance(e.ctx, "book", "customer left"); err != nil {
		e.t.Fatal(err)
	}
	oe := e.terminalError("book", duroxide.StateCanceled)
	if !errors.Is(oe, duroxide.ErrCanceled) || errors.Is(oe, duroxide.ErrTimeout) || oe.Info.Message != "customer left" {
		e.t.Fatalf("canceled error %+v", oe.Info)
	}
	h := e.history("book", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.ExternalSubscribed, history.OrchestrationCancelRequested,
		history.ExternalSubscribedCanceled, history.ActivityScheduled, history.ActivityCompleted, history.OrchestrationFailed)
	if h[2].FireAtMs != h[2].TimestampMs+duroxide.DefaultCancelGracePeriod.Milliseconds() {
		e.t.Fatalf("cancel request %+v does not record the default grace deadline", h[2])
	}
	if err := duroxide.ReplayHistory(reg, "book", h); err != nil {
		e.t.Fatalf("ReplayHistory: %v", err)
	}
	e.drained()
}

// Code that ignores the cancellation keeps running in its grace period
// (the timers it creates fire) until the deadline the request recorded,
// and the instance ends Canceled there.
func e2eCancelGraceDeadline(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stubborn", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		_ = ctx.WaitForEvent("a").Await(nil)
		for {
			_ = ctx.ScheduleTimer(10 * time.Minute).Await(nil) // ignores ErrCanceled
		}
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = time.Hour })
	e.start("stub", "Stubborn", nil)
	e.waitEvents("stub", history.ExternalSubscribed, 1)
	canceledAt := e.fc.Now()
	if err := e.c.CancelInstance(e.ctx, "stub", "stop"); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("stub", history.TimerCreated, 1)
	h, req := e.endsAtGraceDeadline("stub")
	if req.TimestampMs < canceledAt.UnixMilli() || req.FireAtMs != req.TimestampMs+time.Hour.Milliseconds() {
		e.t.Fatalf("cancel request %+v: want a deadline one hour after it", req)
	}
	// The timers the code created in its grace period fired meanwhile.
	fired := 0
	for _, ev := range find(h, history.TimerFired) {
		if ev.SourceEventID != req.EventID {
			fired++
		}
	}
	if fired < 5 {
		e.t.Fatalf("%d timers fired in the grace period, want 5 or more: %v", fired, eventKinds(h))
	}
	if err := duroxide.ReplayHistory(reg, "stub", h); err != nil {
		e.t.Fatalf("ReplayHistory: %v", err)
	}
}

// endsAtGraceDeadline requires the canceled instance id to be live still,
// lets time pass until it ends, and requires it Canceled when its cancel
// request's grace deadline fired, not before. It returns the history and
// the request.
func (e *e2e) endsAtGraceDeadline(id string) ([]history.Event, history.Event) {
	e.t.Helper()
	if st := e.status(id); st.State.IsTerminal() {
		e.t.Fatalf("%s ended %s before its grace period was over", id, st.State)
	}
	if st := e.advanceUntilDone(id); st.State != duroxide.StateCanceled {
		e.t.Fatalf("%s: state %s, want Canceled", id, st.State)
	}
	h := e.history(id, 0)
	e.checkHistory(h)
	req := find(h, history.OrchestrationCancelRequested)
	if len(req) != 1 || req[0].FireAtMs == 0 {
		e.t.Fatalf("%s: cancel requests %+v, want one with a grace deadline", id, req)
	}
	if end, deadline := h[len(h)-1].TimestampMs, req[0].FireAtMs; end < deadline || end > deadline+time.Minute.Milliseconds() {
		e.t.Fatalf("%s ended at %v, want at the grace deadline %v", id, time.UnixMilli(end), time.UnixMilli(deadline))
	}
	return h, req[0]
}

// registerChain registers "Chain": round 0 waits ten minutes and
// continues as new with round 1, which waits for an event that never
// comes and, canceled, runs cleanup before it returns.
func registerChain(reg *duroxide.Registry, cleanup func(*duroxide.OrchestrationContext) error) {
	duroxide.RegisterOrchestration(reg, "Chain", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
		if round == 0 {
			if err := ctx.ScheduleTimer(10 * time.Minute).Await(nil); err != nil {
				return "", err
			}
			return "", ctx.ContinueAsNew(1)
		}
		err := ctx.WaitForEvent("never").Await(nil)
		if ctx.Canceled() {
			return "", errors.Join(err, cleanup(ctx))
		}
		return "done", err
	})
}

// StartOptions.Timeout cancels an instance that has not finished in time,
// across ContinueAsNew ("chain"), with the same cleanup chance, and it ends
// Failed with kind "timeout".
func e2eInstanceTimeout(e *e2e) {
	reg := compensatingRegistry()
	undo := duroxide.NewActivityRef[string, string]("Undo")
	registerChain(reg, func(ctx *duroxide.OrchestrationContext) error {
		_, err := duroxide.CallActivity(ctx, undo, "chain", nil).Get()
		return err
	})
	e.runtime(reg)
	e.startWith("late", "Book", nil, &duroxide.StartOptions{Timeout: time.Hour})
	e.startWith("chain", "Chain", 0, &duroxide.StartOptions{Timeout: time.Hour})
	st := e.advanceUntilDone("late")
	if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "timeout" {
		e.t.Fatalf("state %s error %+v, want Failed with kind timeout", st.State, st.Error)
	}
	if err := st.Decode(nil); !errors.Is(err, duroxide.ErrTimeout) {
		e.t.Fatalf("Decode: %v, want ErrTimeout", err)
	}
	h := e.history("late", 0)
	e.checkHistory(h)
	// The deadline is recorded with the start; the instance ends once it passed.
	if deadline := h[0].FireAtMs; deadline != h[0].TimestampMs+time.Hour.Milliseconds() || st.UpdatedAt.UnixMilli() < deadline {
		e.t.Fatalf("deadline %v recorded at %v, ended at %v: want one hour, ended after it",
			time.UnixMilli(deadline), time.UnixMilli(h[0].TimestampMs), st.UpdatedAt)
	}
	if count(h, history.ActivityCompleted) != 1 {
		e.t.Fatalf("the cleanup did not run: %v", eventKinds(h))
	}
	if err := duroxide.ReplayHistory(reg, "late", h); err != nil {
		e.t.Fatalf("ReplayHistory: %v", err)
	}

	st = e.advanceUntilDone("chain")
	if err := st.Decode(nil); st.State != duroxide.StateFailed || !errors.Is(err, duroxide.ErrTimeout) || errors.Is(err, duroxide.ErrCanceled) {
		e.t.Fatalf("chain: state %s, %v; want Failed with ErrTimeout", st.State, err)
	}
	h = e.history("chain", 0)
	// An hour after the first execution's start (its first turn may run
	// a few fake milliseconds after e2eStart: the clock is nudged while
	// "late" runs).
	deadline := e.history("chain", 1)[0].TimestampMs + time.Hour.Milliseconds()
	if st.ExecutionID != 2 || h[0].FireAtMs != deadline || st.UpdatedAt.UnixMilli() < deadline || count(h, history.ActivityCompleted) != 1 {
		e.t.Fatalf("chain: execution %d starts with deadline %v, ended at %v: want the first deadline kept across ContinueAsNew and the cleanup run (%v)",
			st.ExecutionID, time.UnixMilli(h[0].FireAtMs), st.UpdatedAt, eventKinds(h))
	}
	if err := duroxide.ReplayHistory(reg, "chain", h); err != nil {
		e.t.Fatalf("chain: ReplayHistory: %v", err)
	}
}

// Client.Inspect shows the instance deadline of StartOptions.Timeout
// (Status.Deadline): from the first turn, the same after ContinueAsNew,
// still (passed) while the timeout's cancel runs its grace period, and
// no more once the instance has ended; never for an instance without a
// timeout.
func e2eInstanceDeadlineInInspect(e *e2e) {
	reg := duroxide.NewRegistry()
	registerChain(reg, func(ctx *duroxide.OrchestrationContext) error {
		_ = ctx.ScheduleTimer(time.Hour).Await(nil) // outlives the grace period
		return nil
	})
	duroxide.RegisterOrchestration(reg, "TwoEvents", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		if err := ctx.WaitForEvent("a").Await(nil); err != nil {
			return "", err
		}
		return "", ctx.WaitForEvent("b").Await(nil)
	})
	e.runtime(reg)
	e.startWith("chain", "Chain", 0, &duroxide.StartOptions{Timeout: time.Hour})
	e.start("plain", "Chain", 1)
	e.startWith("rewound", "TwoEvents", nil, &duroxide.StartOptions{Timeout: time.Hour})
	inspect := func(id string) *duroxide.Status {
		e.t.Helper()
		st, err := e.c.Inspect(e.ctx, id, nil)
		if err != nil {
			e.t.Fatalf("Inspect(%s): %v", id, err)
		}
		return st
	}
	wantDeadline := func(what string, st *duroxide.Status, want time.Time) {
		e.t.Helper()
		switch {
		case want.IsZero() && st.Deadline != nil:
			e.t.Fatalf("%s: deadline %v, want none", what, *st.Deadline)
		case !want.IsZero() && (st.Deadline == nil || !st.Deadline.Equal(want)):
			e.t.Fatalf("%s: deadline %v, want %v", what, st.Deadline, want)
		}
	}
	started := e.waitEvents("chain", history.TimerCreated, 1)[0]
	e.waitEvents("plain", history.ExternalSubscribed, 1)
	// An hour after the first turn, as recorded with it.
	deadline := time.UnixMilli(started.TimestampMs).Add(time.Hour)
	if started.FireAtMs != deadline.UnixMilli() {
		e.t.Fatalf("chain starts with deadline %v, want %v", time.UnixMilli(started.FireAtMs), deadline)
	}
	wantDeadline("chain after its first turn", inspect("chain"), deadline)
	wantDeadline("plain", inspect("plain"), time.Time{})

	// A forced rewind from the second turn keeps the first turn's events,
	// its recorded deadline with them, and drops the timeout: no deadline.
	e.waitEvents("rewound", history.ExternalSubscribed, 1)
	wantDeadline("rewound before the rewind", inspect("rewound"), deadline)
	if err := e.c.RaiseEvent(e.ctx, "rewound", "a", nil); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("rewound", history.ExternalSubscribed, 2)
	if err := e.c.RewindWithOptions(e.ctx, "rewound", &duroxide.RewindOptions{Force: true}); err != nil {
		e.t.Fatalf("forced rewind: %v", err)
	}
	e.eventually("the rewound execution waits for b", func() bool {
		h, err := e.c.GetHistory(e.ctx, "rewound", 2)
		return err == nil && count(h, history.ExternalSubscribed) == 2
	})
	if h := e.history("rewound", 2); h[0].FireAtMs != deadline.UnixMilli() {
		e.t.Fatalf("the rewound execution starts with deadline %d, want the copied %d", h[0].FireAtMs, deadline.UnixMilli())
	}
	wantDeadline("rewound after the rewind", inspect("rewound"), time.Time{})

	e.advanceTimersUntil("chain continues as new", func() bool {
		h, err := e.c.GetHistory(e.ctx, "chain", 2)
		return err == nil && count(h, history.ExternalSubscribed) == 1
	})
	st := inspect("chain")
	wantDeadline("chain after ContinueAsNew", st, deadline)
	if st.ExecutionID != 2 || e.fc.Now().After(deadline) {
		e.t.Fatalf("chain at execution %d at %v, want execution 2 before the deadline", st.ExecutionID, e.fc.Now())
	}

	e.advanceTimersUntil("chain times out", func() bool {
		h, err := e.c.GetHistory(e.ctx, "chain", 2)
		return err == nil && count(h, history.TimerCreated) == 1
	})
	st = inspect("chain")
	wantDeadline("chain in its grace period", st, deadline)
	if st.State != duroxide.StateRunning || !slices.ContainsFunc(st.WaitingFor, func(w duroxide.Wait) bool {
		return w.Name == duroxide.CancelGraceWaitName
	}) {
		e.t.Fatalf("chain %s waits for %+v, want the cancel grace period", st.State, st.WaitingFor)
	}

	if st := e.advanceUntilDone("chain"); st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "timeout" {
		e.t.Fatalf("chain ended %s (%+v), want Failed with kind timeout", st.State, st.Error)
	}
	wantDeadline("chain once ended", inspect("chain"), time.Time{})
	wantDeadline("plain", inspect("plain"), time.Time{})
}
