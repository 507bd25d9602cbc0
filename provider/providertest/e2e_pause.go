package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Pause, resume and rewind, through the Client and real runtimes.
var e2ePauseCases = []e2eCase{
	{"PauseHoldsTurnsUntilResume", e2ePauseHolds},
	{"PauseErrors", e2ePauseErrors},
	{"PauseResumeWhileRunning", e2ePauseResumeWhileRunning},
	{"RewindFailedFromTheFailedStep", e2eRewindFailed},
	{"RewindCanceled", e2eRewindCanceled},
	{"RewindFirstTurnStartsOver", e2eRewindFromScratch},
	{"RewindNotFailedIsAConflict", e2eRewindConflict},
	{"ConcurrentRewindsOneWins", e2eRewindRace},
	{"RewindManyAfterAFixedDeploy", e2eRewindMany},
	{"RewindStuckRunningWithForce", e2eRewindRunning},
	{"RewindRunningWaiterStartsOver", e2eRewindRunningWaiter},
	{"ForcedRewindRefusesAPendingCancel", e2eRewindRunningCancelPending},
	{"ForcedRewindRefusesAQueuedCancel", e2eRewindRunningCancelQueued},
	{"ForcedRewindDropsTheTimeout", e2eRewindRunningDropsTimeout},
	{"RewindFailedDropsTheTimeout", e2eRewindFailedDropsTimeout},
}

// e2ePauseHolds pauses an instance while its activity runs: the activity
// finishes, its result and an event raised meanwhile wait (no turn records
// them while paused, whatever the time), and the resume lets the instance
// complete with both.
func e2ePauseHolds(e *e2e) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Held", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var a string
		if err := ctx.ScheduleActivity("Slow", nil).Await(&a); err != nil {
			return "", err
		}
		var ev string
		if err := ctx.WaitForEvent("go").Await(&ev); err != nil {
			return "", err
		}
		var b string
		if err := ctx.ScheduleActivity("Fast", nil).Await(&b); err != nil {
			return "", err
		}
		return a + ev + b, nil
	})
	duroxide.RegisterActivity(reg, "Slow", func(ctx context.Context, _ any) (string, error) {
		once.Do(func() { close(started) })
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "a", nil
	})
	duroxide.RegisterActivity(reg, "Fast", func(context.Context, any) (string, error) { return "b", nil })
	e.runtime(reg)
	e.start("held", "Held", nil)
	select {
	case <-started:
	case <-time.After(e2eTimeout):
		e.t.Fatal("activity Slow never started")
	}
	ctx := duroxide.WithActor(e.ctx, "ops@example")
	if err := e.c.Pause(ctx, "held", "database maintenance"); err != nil {
		e.t.Fatalf("Pause: %v", err)
	}
	pausedAt := e.fc.Now()
	st := e.status("held")
	if p := st.Paused; p == nil || p.Reason != "database maintenance" || p.By != "ops@example" || !p.At.Equal(pausedAt.Truncate(time.Millisecond)) {
		e.t.Fatalf("Status.Paused = %+v, want the reason, ops@example and %s", st.Paused, pausedAt)
	}
	// The running activity finishes; its result waits.
	close(release)
	e.eventually("the result of Slow is queued", func() bool {
		q, err := e.admin().InstanceQueue(e.ctx, "held")
		return err == nil && len(q.Messages) == 1 && len(q.Activities) == 0
	})
	if err := e.c.RaiseEvent(e.ctx, "held", "go", "-"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	// Time passes well beyond every poll interval and stall threshold.
	e.fc.Advance(time.Hour)
	ins, err := e.c.Inspect(e.ctx, "held", nil)
	if err != nil {
		e.t.Fatalf("Inspect: %v", err)
	}
	if ins.Stalled || len(ins.WaitingFor) == 0 || ins.WaitingFor[0].Kind != duroxide.WaitPaused ||
		ins.WaitingFor[0].Message != "database maintenance" || ins.WaitingFor[0].By != "ops@example" {
		e.t.Fatalf("Inspect of a paused instance: stalled %v, waits %+v", ins.Stalled, ins.WaitingFor)
	}
	page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{Stalled: true, StalledAfter: time.Minute})
	if err != nil || len(page.Instances) != 0 {
		e.t.Fatalf("stalled listing: %v, %d instances; a paused instance is not stalled", err, len(page.Instances))
	}
	if n, _, err := e.c.CountStalled(e.ctx, time.Minute, 10); err != nil || n != 0 {
		e.t.Fatalf("CountStalled: %d, %v; a paused instance is not stalled", n, err)
	}
	if page, err := e.c.ListInstances(e.ctx, nil); err != nil || len(page.Instances) != 1 || page.Instances[0].Paused == nil {
		e.t.Fatalf("ListInstances does not show the pause: %v %+v", err, page)
	}
	h := e.history("held", 0)
	if count(h, history.ActivityCompleted) != 0 || count(h, history.ExternalEvent) != 0 {
		e.t.Fatalf("a paused instance took a turn: %v", eventKinds(h))
	}
	resumedAt := e.fc.Now()
	if err := e.c.Resume(e.ctx, "held"); err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	var out string
	e.result("held", &out)
	if out != "a-b" {
		e.t.Fatalf("output %q, want a-b", out)
	}
	for _, ev := range e.history("held", 0) {
		if ev.Kind == history.ActivityCompleted && ev.TimestampMs < resumedAt.UnixMilli() {
			e.t.Fatalf("event %d (%s) recorded at %d, before the resume at %d", ev.EventID, ev.Kind, ev.TimestampMs, resumedAt.UnixMilli())
		}
	}
	if st := e.status("held"); st.Paused != nil {
		e.t.Fatalf("a resumed instance still shows a pause: %+v", st.Paused)
	}
}

func e2ePauseErrors(e *e2e) {
	reg := helloRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.start("done", "Greet", "x")
	e.wait("done")
	if err := e.c.Pause(e.ctx, "done", ""); !errors.Is(err, duroxide.ErrInstanceTerminal) {
		e.t.Fatalf("Pause of a completed instance: %v, want ErrInstanceTerminal", err)
	}
	if err := e.c.Pause(e.ctx, "nope", ""); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("Pause of an unknown instance: %v, want ErrNotFound", err)
	}
	if err := e.c.Resume(e.ctx, "nope"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("Resume of an unknown instance: %v, want ErrNotFound", err)
	}
	for _, id := range []string{"", "bad\x00id"} {
		if err := e.c.Pause(e.ctx, id, ""); !errors.Is(err, duroxide.ErrInvalidArgument) {
			e.t.Fatalf("Pause(%q): %v, want ErrInvalidArgument", id, err)
		}
	}
	e.start("w", "Waiter", nil)
	e.eventually("w running", func() bool { return len(e.history("w", 0)) > 0 })
	if err := e.c.Resume(e.ctx, "w"); !errors.Is(err, duroxide.ErrNotPaused) {
		e.t.Fatalf("Resume of a running instance: %v, want ErrNotPaused", err)
	}
	if err := e.c.Pause(e.ctx, "w", "bad\x00reason"); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("Pause with a NUL in the reason: %v, want ErrInvalidArgument", err)
	}
	if err := e.c.Pause(e.ctx, "w", "one"); err != nil {
		e.t.Fatalf("Pause: %v", err)
	}
	if err := e.c.Pause(e.ctx, "w", "two"); !errors.Is(err, duroxide.ErrAlreadyPaused) {
		e.t.Fatalf("second Pause: %v, want ErrAlreadyPaused", err)
	}
	if st := e.status("w"); st.Paused == nil || st.Paused.Reason != "one" {
		e.t.Fatalf("the second pause changed the first: %+v", st.Paused)
	}
	// A paused instance can be canceled: the cancel waits for the resume.
	if err := e.c.CancelInstance(e.ctx, "w", "stop"); err != nil {
		e.t.Fatalf("CancelInstance of a paused instance: %v", err)
	}
	if err := e.c.Resume(e.ctx, "w"); err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	e.terminalError("w", duroxide.StateCanceled)
	// A force purge of a paused instance takes the pause with it.
	e.start("p", "Waiter", nil)
	e.eventually("p running", func() bool { return len(e.history("p", 0)) > 0 })
	if err := e.c.Pause(e.ctx, "p", ""); err != nil {
		e.t.Fatalf("Pause: %v", err)
	}
	if err := e.c.PurgeInstance(e.ctx, "p", true); err != nil {
		e.t.Fatalf("PurgeInstance: %v", err)
	}
	e.start("p", "Waiter", nil)
	e.eventually("p running again", func() bool { return len(e.history("p", 0)) > 0 })
	if st := e.status("p"); st.Paused != nil {
		e.t.Fatalf("a new instance under a purged ID is paused: %+v", st.Paused)
	}
}

// rewindRegistry is an orchestration of two steps, Reserve then Charge;
// Charge fails while broken is set.
func rewindRegistry(broken bool, reserves, charges *atomic.Int64) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Order", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		var r, c string
		if err := ctx.ScheduleActivity("Reserve", n).Await(&r); err != nil {
			return "", err
		}
		if err := ctx.ScheduleActivity("Charge", n).Await(&c); err != nil {
			return "", err
		}
		return r + "/" + c, nil
	})
	duroxide.RegisterActivity(reg, "Reserve", func(_ context.Context, n int) (string, error) {
		reserves.Add(1)
		return fmt.Sprintf("reserved %d", n), nil
	})
	duroxide.RegisterActivity(reg, "Charge", func(_ context.Context, n int) (string, error) {
		charges.Add(1)
		if broken {
			return "", errors.New("charge: bad deploy")
		}
		return fmt.Sprintf("charged %d", n), nil
	})
	return reg
}

// e2eRewindFailed fails an instance in its second step, deploys a fixed
// activity (a new runtime on the same store) and rewinds it: the first
// step is not run again, the second is, and both executions stay.
func e2eRewindFailed(e *e2e) {
	var reserves, charges atomic.Int64
	rt := e.runtime(rewindRegistry(true, &reserves, &charges))
	e.start("order", "Order", 7)
	e.failed("order")
	e.shutdown(rt)
	failedHist := e.history("order", 1)
	e.runtime(rewindRegistry(false, &reserves, &charges))
	if err := e.c.Rewind(duroxide.WithActor(e.ctx, "ops"), "order", "fixed in v2"); err != nil {
		e.t.Fatalf("Rewind: %v", err)
	}
	var out string
	st := e.result("order", &out)
	if out != "reserved 7/charged 7" || st.ExecutionID != 2 {
		e.t.Fatalf("rewound instance: %q at execution %d", out, st.ExecutionID)
	}
	if reserves.Load() != 1 || charges.Load() != 2 {
		e.t.Fatalf("Reserve ran %d times (want 1), Charge %d (want 2)", reserves.Load(), charges.Load())
	}
	mustEqual(e.t, "the failed execution's history", eventKinds(e.history("order", 1)), eventKinds(failedHist))
	h := e.history("order", 2)
	mustEqual(e.t, "the new execution's history", eventKinds(h), []history.EventKind{
		history.OrchestrationStarted, history.ActivityScheduled, history.ActivityCompleted, history.ActivityScheduled,
		history.ActivityCompleted, history.OrchestrationCompleted})
	ex, err := e.c.ListExecutions(e.ctx, "order")
	if err != nil || len(ex) != 2 {
		e.t.Fatalf("ListExecutions: %v, %d executions", err, len(ex))
	}
}

// e2eRewindCanceled cancels an instance waiting for an event and rewinds
// it: it waits again, from before the cancel request, and completes with
// the event.
func e2eRewindCanceled(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.start("w", "Waiter", nil)
	e.eventually("w waits", func() bool { return len(e.history("w", 0)) >= 2 })
	if err := e.c.CancelInstance(e.ctx, "w", "oops"); err != nil {
		e.t.Fatalf("CancelInstance: %v", err)
	}
	e.terminalError("w", duroxide.StateCanceled)
	if err := e.c.Rewind(e.ctx, "w", ""); err != nil {
		e.t.Fatalf("Rewind: %v", err)
	}
	if st := e.status("w"); st.State != duroxide.StateRunning || st.Error != nil {
		e.t.Fatalf("rewound instance: %s", describeStatus(st))
	}
	if err := e.c.RaiseEvent(e.ctx, "w", "go", "again"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	var out string
	e.result("w", &out)
	if out != "again" {
		e.t.Fatalf("output %q", out)
	}
	if n := count(e.history("w", 2), history.OrchestrationCancelRequested); n != 0 {
		e.t.Fatalf("the rewound execution holds %d cancel requests", n)
	}
}

// e2eRewindFromScratch fails an instance in its first turn; the rewind
// starts it over with the same input.
func e2eRewindFromScratch(e *e2e) {
	var fixed atomic.Bool
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Picky", func(_ *duroxide.OrchestrationContext, in string) (string, error) {
		if !fixed.Load() {
			return "", errors.New("not yet")
		}
		return "ok " + in, nil
	})
	e.runtime(reg)
	e.start("picky", "Picky", "x")
	e.failed("picky")
	fixed.Store(true)
	if err := e.c.Rewind(e.ctx, "picky", ""); err != nil {
		e.t.Fatalf("Rewind: %v", err)
	}
	var out string
	e.result("picky", &out)
	if out != "ok x" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eRewindConflict(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.start("w", "Waiter", nil)
	e.eventually("w running", func() bool { return len(e.history("w", 0)) > 0 })
	err := e.c.Rewind(e.ctx, "w", "")
	var se *duroxide.InstanceStateError
	if !errors.Is(err, duroxide.ErrStateConflict) || !errors.As(err, &se) || se.State != duroxide.StateRunning {
		e.t.Fatalf("Rewind of a running instance: %v, want an *InstanceStateError", err)
	}
	if err := e.c.Rewind(e.ctx, "nope", ""); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("Rewind of an unknown instance: %v, want ErrNotFound", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "w", "go", "x"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	e.wait("w")
	if err := e.c.Rewind(e.ctx, "w", ""); !errors.Is(err, duroxide.ErrStateConflict) {
		e.t.Fatalf("Rewind of a completed instance: %v, want ErrStateConflict", err)
	}
	if n := len(e.history("w", 0)); n == 0 || e.status("w").ExecutionID != 1 {
		e.t.Fatal("a refused rewind changed the instance")
	}
}

// e2eRewindMany fails 200 instances through a bad activity, deploys the
// fixed activity on a new runtime and rewinds them one by one: all
// complete, none runs its first step twice.
func e2eRewindMany(e *e2e) {
	const n = 200
	var reserves, charges atomic.Int64
	rt := e.runtime(rewindRegistry(true, &reserves, &charges))
	for i := range n {
		e.start(fmt.Sprintf("order-%03d", i), "Order", i)
	}
	for i := range n {
		e.failed(fmt.Sprintf("order-%03d", i))
	}
	e.shutdown(rt)
	e.runtime(rewindRegistry(false, &reserves, &charges))
	for i := range n {
		if err := e.c.Rewind(e.ctx, fmt.Sprintf("order-%03d", i), "fixed"); err != nil {
			e.t.Fatalf("Rewind: %v", err)
		}
	}
	for i := range n {
		var out string
		e.result(fmt.Sprintf("order-%03d", i), &out)
		if want := fmt.Sprintf("reserved %d/charged %d", i, i); out != want {
			e.t.Fatalf("order-%03d: %q, want %q", i, out, want)
		}
	}
	if reserves.Load() != n || charges.Load() != 2*n {
		e.t.Fatalf("Reserve ran %d times (want %d), Charge %d (want %d)", reserves.Load(), n, charges.Load(), 2*n)
	}
}

// e2ePauseResumeWhileRunning pauses and resumes instances again and again
// while their turns and activities run, from several goroutines: every
// instance completes with the right result, and every history is whole
// (each activity's result recorded once).
func e2ePauseResumeWhileRunning(e *e2e) {
	const instances, steps = 8, 12
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Sum", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		total := 0
		for i := range n {
			var v int
			if err := ctx.ScheduleActivity("Twice", i).Await(&v); err != nil {
				return 0, err
			}
			total += v
		}
		return total, nil
	})
	duroxide.RegisterActivity(reg, "Twice", func(_ context.Context, i int) (int, error) { return 2 * i, nil })
	e.runtime(reg)
	for i := range instances {
		e.start(fmt.Sprintf("sum-%d", i), "Sum", steps)
	}
	var wg sync.WaitGroup
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("sum-%d", i)
			for range 20 {
				err := e.c.Pause(e.ctx, id, "churn")
				if errors.Is(err, duroxide.ErrInstanceTerminal) {
					return
				}
				if err != nil {
					e.t.Errorf("Pause(%s): %v", id, err)
					return
				}
				if err := e.c.Resume(e.ctx, id); err != nil {
					e.t.Errorf("Resume(%s): %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range instances {
		id := fmt.Sprintf("sum-%d", i)
		var out int
		e.result(id, &out)
		if want := steps * (steps - 1); out != want {
			e.t.Fatalf("%s: %d, want %d", id, out, want)
		}
		h := e.history(id, 0)
		if s, c := count(h, history.ActivityScheduled), count(h, history.ActivityCompleted); s != steps || c != steps {
			e.t.Fatalf("%s: %d activities scheduled and %d completed, want %d each: %v", id, s, c, steps, eventKinds(h))
		}
	}
}

// e2eRewindRace rewinds one failed instance from several goroutines at
// once: exactly one rewind wins, the others are refused, and the instance
// resumes once.
func e2eRewindRace(e *e2e) {
	var reserves, charges atomic.Int64
	rt := e.runtime(rewindRegistry(true, &reserves, &charges))
	e.start("order", "Order", 1)
	e.failed("order")
	e.shutdown(rt)
	e.runtime(rewindRegistry(false, &reserves, &charges))
	const n = 6
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.c.Rewind(e.ctx, "order", "")
		}()
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, duroxide.ErrStateConflict):
			e.t.Fatalf("a losing rewind: %v, want ErrStateConflict", err)
		}
	}
	if won != 1 {
		e.t.Fatalf("%d rewinds won, want 1", won)
	}
	var out string
	if st := e.result("order", &out); st.ExecutionID != 2 || charges.Load() != 2 {
		e.t.Fatalf("after the race: execution %d, Charge ran %d times; want 2 and 2", st.ExecutionID, charges.Load())
	}
}

// e2eRewindRunning gets an instance stuck Running (its second step fails
// and waits for a retry a day away), deploys a fixed activity and rewinds
// it with force: the retried step runs again at once, the first does
// not, and the old execution ends Canceled with the rewind recorded.
func e2eRewindRunning(e *e2e) {
	var reserves, charges atomic.Int64
	var broken atomic.Bool
	broken.Store(true)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Order", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		var r, c string
		if err := ctx.ScheduleActivity("Reserve", n).Await(&r); err != nil {
			return "", err
		}
		err := ctx.ScheduleActivityWithRetry("Charge", n, duroxide.RetryPolicy{MaxAttempts: 100, InitialInterval: 24 * time.Hour}).Await(&c)
		if err != nil {
			return "", err
		}
		return r + "/" + c, nil
	})
	duroxide.RegisterActivity(reg, "Reserve", func(_ context.Context, n int) (string, error) {
		reserves.Add(1)
		return fmt.Sprintf("reserved %d", n), nil
	})
	duroxide.RegisterActivity(reg, "Charge", func(_ context.Context, n int) (string, error) {
		charges.Add(1)
		if broken.Load() {
			return "", errors.New("charge: partner down")
		}
		return fmt.Sprintf("charged %d", n), nil
	})
	e.runtime(reg)
	e.start("order", "Order", 7)
	e.eventually("the retry wait", func() bool {
		h := e.history("order", 0)
		return count(h, history.ActivityFailed) == 1 && h[len(h)-1].Kind == history.TimerCreated
	})
	stuck := e.history("order", 1)

	// Without force a Running instance is refused, changing nothing.
	var se *duroxide.InstanceStateError
	if err := e.c.Rewind(e.ctx, "order", ""); !errors.As(err, &se) || se.State != duroxide.StateRunning {
		e.t.Fatalf("Rewind of a running instance without force: %v, want an *InstanceStateError", err)
	}
	// Nor with force while it is paused.
	if err := e.c.Pause(e.ctx, "order", "hold"); err != nil {
		e.t.Fatalf("Pause: %v", err)
	}
	err := e.c.RewindWithOptions(e.ctx, "order", &duroxide.RewindOptions{Force: true})
	if !errors.Is(err, duroxide.ErrStateConflict) || !strings.Contains(err.Error(), "paused") {
		e.t.Fatalf("forced rewind of a paused instance: %v, want a conflict naming the pause", err)
	}
	if err := e.c.Resume(e.ctx, "order"); err != nil {
		e.t.Fatalf("Resume: %v", err)
	}
	mustEqual(e.t, "the stuck history after refused rewinds", eventKinds(e.history("order", 1)), eventKinds(stuck))

	broken.Store(false) // the partner is fixed
	ctx := duroxide.WithActor(e.ctx, "ops")
	if err := e.c.RewindWithOptions(ctx, "order", &duroxide.RewindOptions{Reason: "partner fixed", Force: true}); err != nil {
		e.t.Fatalf("forced Rewind: %v", err)
	}
	var out string
	st := e.result("order", &out)
	if out != "reserved 7/charged 7" || st.ExecutionID != 2 {
		e.t.Fatalf("rewound instance: %q at execution %d", out, st.ExecutionID)
	}
	if reserves.Load() != 1 || charges.Load() != 2 {
		e.t.Fatalf("Reserve ran %d times (want 1), Charge %d (want 2)", reserves.Load(), charges.Load())
	}
	old := e.history("order", 1)
	mustEqual(e.t, "the old execution's history", eventKinds(old), append(eventKinds(stuck), history.OrchestrationFailed))
	if end := old[len(old)-1].Error; end == nil || end.Kind != history.ErrorCanceled || end.Code != history.CodeRewound ||
		end.Message != "rewound by ops: partner fixed" {
		e.t.Fatalf("the old execution's end: %+v", end)
	}
	ex, err := e.c.ListExecutions(e.ctx, "order")
	if err != nil || len(ex) != 2 || ex[0].Status != provider.StatusCanceled || ex[1].Status != provider.StatusCompleted {
		e.t.Fatalf("ListExecutions: %+v, %v", ex, err)
	}
	// The old execution's retry timer fires into nothing.
	e.fc.Advance(25 * time.Hour)
	if st := e.status("order"); st.State != duroxide.StateCompleted || st.ExecutionID != 2 || charges.Load() != 2 {
		e.t.Fatalf("after the old retry time: %s, Charge ran %d times", describeStatus(st), charges.Load())
	}
}

// e2eRewindRunningWaiter rewinds with force an instance waiting for an
// event that will never come: stuck in its first turn, it starts over
// with the same input under the code deployed now.
func e2eRewindRunningWaiter(e *e2e) {
	var fixed atomic.Bool
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		name := "never"
		if fixed.Load() {
			name = "go"
		}
		var s string
		err := ctx.WaitForEvent(name).Await(&s)
		return in + " " + s, err
	})
	e.runtime(reg)
	e.start("w", "Waiter", "x")
	e.eventually("w waits", func() bool { return len(e.history("w", 0)) >= 2 })
	fixed.Store(true)
	if err := e.c.RewindWithOptions(e.ctx, "w", &duroxide.RewindOptions{Force: true}); err != nil {
		e.t.Fatalf("forced Rewind: %v", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "w", "go", "now"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	var out string
	st := e.result("w", &out)
	if out != "x now" || st.ExecutionID != 2 {
		e.t.Fatalf("output %q at execution %d", out, st.ExecutionID)
	}
}

// e2eRewindRunningCancelPending: a forced rewind of a Running instance
// whose cancel was requested (its grace period running) is refused and
// changes nothing, so the cancel is not lost: the instance still ends
// Canceled at the end of its grace period, and can be rewound then.
func e2eRewindRunningCancelPending(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stubborn", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		_ = ctx.WaitForEvent("never").Await(nil) // ignores the cancel
		var s string
		err := ctx.WaitForEvent("after").Await(&s)
		return in + " " + s, err
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = time.Hour })
	e.start("s", "Stubborn", "x")
	e.eventually("s waits", func() bool { return len(e.history("s", 0)) >= 2 })
	if err := e.c.CancelInstance(e.ctx, "s", "stop"); err != nil {
		e.t.Fatalf("CancelInstance: %v", err)
	}
	e.eventually("the cancel request recorded", func() bool {
		return count(e.history("s", 0), history.OrchestrationCancelRequested) == 1
	})
	e.eventually("s waits in its grace period", func() bool {
		h := e.history("s", 0)
		return count(h, history.ExternalSubscribed) == 2
	})
	before := e.history("s", 1)
	if st := e.status("s"); st.State != duroxide.StateRunning {
		e.t.Fatalf("in the grace period: %s, want Running", describeStatus(st))
	}

	err := e.c.RewindWithOptions(e.ctx, "s", &duroxide.RewindOptions{Force: true, Reason: "unstick"})
	var se *duroxide.InstanceStateError
	if !errors.As(err, &se) || !errors.Is(err, duroxide.ErrStateConflict) || se.State != duroxide.StateRunning ||
		!strings.Contains(err.Error(), "cancel was requested") {
		e.t.Fatalf("forced rewind during a cancel's grace period: %v, want an *InstanceStateError naming the cancel", err)
	}
	mustEqual(e.t, "history after the refused rewind", eventKinds(e.history("s", 1)), eventKinds(before))
	if ex, err := e.c.ListExecutions(e.ctx, "s"); err != nil || len(ex) != 1 {
		e.t.Fatalf("ListExecutions after the refused rewind: %+v, %v", ex, err)
	}

	// The cancel goes on: the instance ends Canceled at the grace deadline.
	e.fc.Advance(time.Hour + time.Minute)
	e.eventually("s canceled", func() bool { return e.status("s").State == duroxide.StateCanceled })
	// Rewound now, it resumes from before the cancel request, by choice.
	if err := e.c.Rewind(e.ctx, "s", "undo the cancel"); err != nil {
		e.t.Fatalf("Rewind of the Canceled instance: %v", err)
	}
	e.eventually("s waits again", func() bool {
		st := e.status("s")
		return st.ExecutionID == 2 && st.State == duroxide.StateRunning
	})
}

// e2eRewindRunningCancelQueued asks to cancel a stuck instance while no
// runtime runs: the cancel waits in the queue, not in the history. A forced
// rewind is refused all the same (the store checks the queue in the
// rewind's transaction), and once a runtime takes the cancel, the Canceled
// instance can be rewound.
func e2eRewindRunningCancelQueued(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return in + " " + s, err
	})
	rt := e.runtime(reg)
	e.start("w", "Waiter", "x")
	e.eventually("w waits", func() bool { return count(e.history("w", 0), history.ExternalSubscribed) == 1 })
	e.shutdown(rt)
	if err := e.c.CancelInstance(e.ctx, "w", "stop"); err != nil {
		e.t.Fatalf("CancelInstance: %v", err)
	}
	before := e.history("w", 1)
	if count(before, history.OrchestrationCancelRequested) != 0 {
		e.t.Fatal("the cancel is in the history with no runtime running")
	}

	err := e.c.RewindWithOptions(e.ctx, "w", &duroxide.RewindOptions{Force: true, Reason: "unstick"})
	var se *duroxide.InstanceStateError
	if !errors.As(err, &se) || !errors.Is(err, duroxide.ErrStateConflict) || se.State != duroxide.StateRunning ||
		!strings.Contains(err.Error(), "cancel was requested") || !strings.Contains(err.Error(), "let the cancel finish") {
		e.t.Fatalf("forced rewind with a cancel queued: %v, want an *InstanceStateError naming the cancel", err)
	}
	mustEqual(e.t, "history after the refused rewind", eventKinds(e.history("w", 1)), eventKinds(before))
	if ex, err := e.c.ListExecutions(e.ctx, "w"); err != nil || len(ex) != 1 {
		e.t.Fatalf("ListExecutions after the refused rewind: %+v, %v", ex, err)
	}

	e.runtime(reg)
	e.eventually("w canceled", func() bool { return e.status("w").State == duroxide.StateCanceled })
	if err := e.c.Rewind(e.ctx, "w", "undo the cancel"); err != nil {
		e.t.Fatalf("Rewind of the Canceled instance: %v", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "w", "go", "y"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	var out string
	if st := e.result("w", &out); out != "x y" || st.ExecutionID != 2 {
		e.t.Fatalf("rewound instance: %q at execution %d", out, st.ExecutionID)
	}
}

// e2eRewindRunningDropsTimeout force-rewinds a waiting instance started
// with an instance timeout (StartOptions.Timeout) not yet due: the rewound
// instance holds no timeout, as after any rewind, so the deadline passing
// does not end the new execution, and an event raised afterwards
// completes it.
func e2eRewindRunningDropsTimeout(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return in + " " + s, err
	})
	e.runtime(reg)
	e.startWith("w", "Waiter", "x", &duroxide.StartOptions{Timeout: time.Hour})
	e.eventually("w waits", func() bool { return count(e.history("w", 0), history.ExternalSubscribed) == 1 })
	deadline := time.UnixMilli(e.history("w", 0)[0].TimestampMs).Add(time.Hour)
	if st, err := e.c.Inspect(e.ctx, "w", nil); err != nil || st.Deadline == nil || !st.Deadline.Equal(deadline) {
		e.t.Fatalf("Inspect before the rewind: %+v, %v; want the deadline one hour after the start", st, err)
	}
	if err := e.c.RewindWithOptions(e.ctx, "w", &duroxide.RewindOptions{Force: true, Reason: "unstick"}); err != nil {
		e.t.Fatalf("forced rewind: %v", err)
	}
	e.eventually("the new execution waits", func() bool {
		return count(e.history("w", 2), history.ExternalSubscribed) == 1
	})
	if st, err := e.c.Inspect(e.ctx, "w", nil); err != nil || st.Deadline != nil {
		e.t.Fatalf("Inspect after the rewind: %+v, %v; want no deadline", st, err)
	}
	q, err := e.admin().InstanceQueue(e.ctx, "w")
	if err != nil {
		e.t.Fatalf("InstanceQueue: %v", err)
	}
	if len(q.Messages) != 0 {
		e.t.Fatalf("queued after the forced rewind: %+v, want nothing (the timeout dropped)", q.Messages)
	}
	e.outlivesOldDeadline("w", "x y")
}

// outlivesOldDeadline lets two hours pass, past the old deadline of the
// rewound instance id (an hour after its start), then raises "go" with
// "y": a timeout still queued would have come due ahead of the event and
// ended the instance Failed. id must complete at execution 2 with want.
func (e *e2e) outlivesOldDeadline(id, want string) {
	e.t.Helper()
	e.fc.Advance(2 * time.Hour)
	if err := e.c.RaiseEvent(e.ctx, id, "go", "y"); err != nil {
		e.t.Fatalf("RaiseEvent: %v", err)
	}
	var out string
	if st := e.result(id, &out); out != want || st.ExecutionID != 2 {
		e.t.Fatalf("rewound instance: %q at execution %d, state %s", out, st.ExecutionID, st.State)
	}
}

// e2eRewindFailedDropsTimeout rewinds an instance started with a timeout
// (StartOptions.Timeout) that failed before its deadline: the timeout,
// still queued, is dropped with the rewind (Inspect shows no deadline),
// so the deadline passing does not end the rewound instance, and an event
// raised afterwards completes it.
func e2eRewindFailedDropsTimeout(e *e2e) {
	reg := duroxide.NewRegistry()
	var calls atomic.Int32
	flaky := duroxide.RegisterActivity(reg, "FailsFirst", func(context.Context, string) (string, error) {
		if calls.Add(1) == 1 {
			return "", errors.New("partner down")
		}
		return "charged", nil
	})
	duroxide.RegisterOrchestration(reg, "ChargeThenWait", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		out, err := duroxide.CallActivity(ctx, flaky, "x", nil).Get()
		if err != nil {
			return "", err
		}
		var s string
		err = ctx.WaitForEvent("go").Await(&s)
		return out + " " + s, err
	})
	e.runtime(reg)
	e.startWith("f", "ChargeThenWait", nil, &duroxide.StartOptions{Timeout: time.Hour})
	if st := e.wait("f"); st.State != duroxide.StateFailed {
		e.t.Fatalf("f ended %s, want Failed", st.State)
	}
	if err := e.c.Rewind(e.ctx, "f", "partner is back"); err != nil {
		e.t.Fatalf("Rewind: %v", err)
	}
	e.eventually("the new execution waits", func() bool {
		h, err := e.c.GetHistory(e.ctx, "f", 2)
		return err == nil && count(h, history.ExternalSubscribed) == 1
	})
	if st, err := e.c.Inspect(e.ctx, "f", nil); err != nil || st.Deadline != nil {
		e.t.Fatalf("Inspect after the rewind: %+v, %v; want no deadline", st, err)
	}
	e.outlivesOldDeadline("f", "charged y")
}
