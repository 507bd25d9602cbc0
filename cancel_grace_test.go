package duroxide_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// cancelOf returns the instance's OrchestrationCancelRequested event.
func cancelOf(t *testing.T, h []history.Event) history.Event {
	t.Helper()
	for _, ev := range h {
		if ev.Kind == history.OrchestrationCancelRequested {
			return ev
		}
	}
	t.Fatalf("no cancel request in %v", kinds(h))
	return history.Event{}
}

func cancelNow(t *testing.T, c *duroxide.Client, id, reason string) {
	t.Helper()
	if err := c.CancelInstance(context.Background(), id, reason); err != nil {
		t.Fatal(err)
	}
}

// TestCancelRunsCleanup: a canceled instance sees the cancellation (its
// wait fails with ErrCanceled, Canceled turns true), runs a cleanup
// activity in its grace period, and ends Canceled with the reason.
func TestCancelRunsCleanup(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		var undone atomic.Int32
		undo := duroxide.RegisterActivity(reg, "Undo", func(_ context.Context, s string) (string, error) {
			undone.Add(1)
			return "undone " + s, nil
		})
		duroxide.RegisterOrchestration(reg, "Booking", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			err := ctx.WaitForEvent("confirm").Await(nil)
			if !errors.Is(err, duroxide.ErrCanceled) || !ctx.Canceled() {
				return "", errors.New("the wait did not see the cancellation")
			}
			if _, err := duroxide.CallActivity(ctx, undo, "booking", nil).Get(); err != nil {
				return "", err
			}
			return "compensated", nil // ends Canceled all the same
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Booking", "b1", struct{}{})
		h.WaitIdle()
		cancelNow(t, h.Client, "b1", "customer left")
		st := h.Wait("b1")
		if st.State != duroxide.StateCanceled || st.Error == nil || st.Error.Message != "customer left" {
			t.Fatalf("state %s error %+v, want Canceled with the reason", st.State, st.Error)
		}
		if err := st.Decode(nil); !errors.Is(err, duroxide.ErrCanceled) || errors.Is(err, duroxide.ErrTimeout) {
			t.Fatalf("Decode: %v, want ErrCanceled", err)
		}
		if undone.Load() != 1 {
			t.Fatalf("cleanup ran %d times, want 1", undone.Load())
		}
		hist := h.History("b1")
		if c := cancelOf(t, hist); c.FireAtMs != c.TimestampMs+duroxide.DefaultCancelGracePeriod.Milliseconds() {
			t.Fatalf("cancel request records deadline %d, want its time + 30s (%d)", c.FireAtMs, c.TimestampMs)
		}
		if countKind(hist, history.ActivityCompleted) != 1 || countKind(hist, history.ExternalSubscribedCanceled) != 1 {
			t.Fatalf("history %v: want the canceled wait and the cleanup", kinds(hist))
		}
		replays(t, reg, h, "b1")
	})
}

// TestCancelIgnoredEndsAtGraceDeadline: code that ignores cancellation
// keeps running (its new timers fire) until the grace period is over, then
// the instance ends Canceled at the deadline.
func TestCancelIgnoredEndsAtGraceDeadline(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		ro.CancelGracePeriod = time.Hour
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Stubborn", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			for {
				_ = ctx.ScheduleTimer(10 * time.Minute).Await(nil) // ignores ErrCanceled
			}
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Stubborn", "s1", struct{}{})
		h.WaitIdle()
		h.Advance(time.Minute)
		canceledAt := h.Clock.Now()
		cancelNow(t, h.Client, "s1", "stop")
		st := h.AdvanceUntilDone("s1")
		if st.State != duroxide.StateCanceled {
			t.Fatalf("state %s, want Canceled", st.State)
		}
		hist := h.History("s1")
		c := cancelOf(t, hist)
		if c.FireAtMs != canceledAt.Add(time.Hour).UnixMilli() {
			t.Fatalf("grace deadline %v, want %v", time.UnixMilli(c.FireAtMs), canceledAt.Add(time.Hour))
		}
		if end := hist[len(hist)-1]; end.TimestampMs != c.FireAtMs {
			t.Fatalf("ended at %v, want at the grace deadline %v", time.UnixMilli(end.TimestampMs), time.UnixMilli(c.FireAtMs))
		}
		// Timers created in the grace period fired: the code kept running.
		fired := 0
		for _, ev := range hist {
			if ev.Kind == history.TimerFired && ev.SourceEventID != c.EventID && ev.EventID > c.EventID {
				fired++
			}
		}
		if fired < 5 {
			t.Fatalf("%d timers fired in the grace period, want 5 or more: %v", fired, kinds(hist))
		}
		replays(t, reg, h, "s1")
	})
}

// TestCancelWithoutGraceEndsAtOnce: a negative CancelGracePeriod keeps the
// earlier behaviour: the code does not run again.
func TestCancelWithoutGraceEndsAtOnce(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	var ran atomic.Int32
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		err := ctx.WaitForEvent("x").Await(nil)
		ran.Add(1)
		return "", err
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{CancelGracePeriod: -1}})
	h.Start("Waiter", "w1", struct{}{})
	h.WaitIdle()
	cancelNow(t, h.Client, "w1", "now")
	if st := h.Wait("w1"); st.State != duroxide.StateCanceled {
		t.Fatalf("state %s", st.State)
	}
	if ran.Load() != 0 || cancelOf(t, h.History("w1")).FireAtMs != 0 {
		t.Fatalf("the code ran after the cancel (%d) or a deadline was recorded", ran.Load())
	}
	replays(t, reg, h, "w1")
}

// TestCancelCascadeCleansUpChild: canceling a parent cancels its child;
// both see it (the child through CancelRequested in a Select) and both
// clean up before ending Canceled.
func TestCancelCascadeCleansUpChild(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		cleaned := make(chan string, 4)
		undo := duroxide.RegisterActivity(reg, "Undo", func(_ context.Context, who string) (struct{}, error) {
			cleaned <- who
			return struct{}{}, nil
		})
		child := duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			notice := ctx.CancelRequested()
			if ctx.Select(ctx.WaitForEvent("go"), notice) != 1 {
				return "went", nil
			}
			if err := notice.Await(nil); !errors.Is(err, duroxide.ErrCanceled) {
				return "", errors.New("the notice does not fail with ErrCanceled")
			}
			_, err := duroxide.CallActivity(ctx, undo, "child", nil).Get()
			return "", err
		})
		duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			_, err := duroxide.CallSubOrchestration(ctx, child, "p1-child", struct{}{}, nil).Get()
			if !errors.Is(err, duroxide.ErrCanceled) {
				return "", errors.New("the child's call did not fail with ErrCanceled")
			}
			_, err = duroxide.CallActivity(ctx, undo, "parent", nil).Get()
			return "", err
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Parent", "p1", struct{}{})
		h.WaitIdle()
		cancelNow(t, h.Client, "p1", "abort")
		for _, id := range []string{"p1", "p1-child"} {
			if st := h.Wait(id); st.State != duroxide.StateCanceled {
				t.Fatalf("%s is %s, want Canceled", id, st.State)
			}
		}
		h.WaitIdle()
		got := map[string]bool{}
		for len(cleaned) > 0 {
			got[<-cleaned] = true
		}
		if !got["parent"] || !got["child"] {
			t.Fatalf("cleanups %v, want parent and child", got)
		}
		replays(t, reg, h, "p1")
		replays(t, reg, h, "p1-child")
	})
}

// TestInstanceTimeout: StartOptions.Timeout cancels an instance that has
// not finished, across ContinueAsNew, with the same cleanup chance, and it
// ends Failed with kind "timeout".
func TestInstanceTimeout(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		var undone atomic.Int32
		undo := duroxide.RegisterActivity(reg, "Undo", func(_ context.Context, _ string) (struct{}, error) {
			undone.Add(1)
			return struct{}{}, nil
		})
		duroxide.RegisterOrchestration(reg, "Slow", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
			if round == 0 {
				if err := ctx.ScheduleTimer(10 * time.Minute).Await(nil); err != nil {
					return "", err
				}
				return "", ctx.ContinueAsNew(1)
			}
			err := ctx.WaitForEvent("never").Await(nil)
			if ctx.Canceled() {
				_, uerr := duroxide.CallActivity(ctx, undo, "x", nil).Get()
				return "", errors.Join(err, uerr)
			}
			return "done", err
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.StartWith("Slow", "t1", 0, &duroxide.StartOptions{Timeout: time.Hour})
		st := h.AdvanceUntilDone("t1")
		if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "timeout" {
			t.Fatalf("state %s error %+v, want Failed with kind timeout", st.State, st.Error)
		}
		err := st.Decode(nil)
		if !errors.Is(err, duroxide.ErrTimeout) || errors.Is(err, duroxide.ErrCanceled) {
			t.Fatalf("Decode: %v, want ErrTimeout", err)
		}
		if undone.Load() != 1 {
			t.Fatalf("cleanup ran %d times, want 1", undone.Load())
		}
		if st.UpdatedAt.Sub(duroxidetest.DefaultStart) != time.Hour {
			t.Fatalf("ended %v after its start, want at the one-hour deadline", st.UpdatedAt.Sub(duroxidetest.DefaultStart))
		}
		hist := h.History("t1")
		if hist[0].FireAtMs != duroxidetest.DefaultStart.Add(time.Hour).UnixMilli() {
			t.Fatalf("the second execution's start records deadline %d", hist[0].FireAtMs)
		}
		replays(t, reg, h, "t1")
	})
}

func TestInstanceTimeoutNegativeIsInvalid(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, duroxide.NewRegistry(), nil)
	err := h.Client.StartOrchestration(context.Background(), "x", "X", nil, &duroxide.StartOptions{Timeout: -time.Second})
	if !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
}

// TestCancelGraceSurvivesRestart: a runtime stops in the middle of a grace
// period; a new runtime on the same file (configured with no grace at
// all) keeps the recorded deadline and ends the instance there.
func TestCancelGraceSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(duroxidetest.DefaultStart)
	path := filepath.Join(t.TempDir(), "store.db")
	sawCancel := make(chan struct{}, 4)
	registry := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Stubborn", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			_ = ctx.WaitForEvent("a").Await(nil)
			if ctx.Canceled() && !ctx.IsReplaying() {
				select {
				case sawCancel <- struct{}{}:
				default:
				}
			}
			return "", ctx.WaitForEvent("b").Await(nil) // waits out the grace period
		})
		return reg
	}
	run := func(grace time.Duration) (*sqlite.Provider, *duroxide.Runtime) {
		store, err := sqlite.Open(ctx, path, &sqlite.Options{Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := duroxide.StartRuntime(ctx, store, registry(), &duroxide.RuntimeOptions{Clock: clock, CancelGracePeriod: grace})
		if err != nil {
			t.Fatal(err)
		}
		return store, rt
	}
	store, rt := run(time.Hour)
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "r1", "Stubborn", nil, nil); err != nil {
		t.Fatal(err)
	}
	cancelNow(t, c, "r1", "stop")
	select {
	case <-sawCancel:
	case <-time.After(duroxidetest.DefaultTimeout):
		t.Fatal("the orchestration never saw the cancellation")
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()

	store, rt = run(-1)
	t.Cleanup(func() { _ = rt.Shutdown(ctx); store.Close() })
	c = duroxide.NewClient(store)
	hist, err := c.GetHistory(ctx, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := cancelOf(t, hist).FireAtMs
	if deadline != duroxidetest.DefaultStart.Add(time.Hour).UnixMilli() {
		t.Fatalf("grace deadline %v, want one hour after the cancel", time.UnixMilli(deadline))
	}
	waits, err := c.WaitingFor(ctx, "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var graceWait bool
	for _, w := range waits {
		graceWait = graceWait || (w.Kind == duroxide.WaitTimer && w.Name == duroxide.CancelGraceWaitName && w.FiresAt.UnixMilli() == deadline)
	}
	if !graceWait {
		t.Fatalf("WaitingFor %+v does not show the grace deadline", waits)
	}
	clock.Advance(30 * time.Minute)
	store.WakeAll()
	clock.Advance(30 * time.Minute)
	store.WakeAll()
	wctx, cancel := context.WithTimeout(ctx, duroxidetest.DefaultTimeout)
	defer cancel()
	st, err := c.WaitForOrchestration(wctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != duroxide.StateCanceled {
		t.Fatalf("state %s, want Canceled", st.State)
	}
	hist, err = c.GetHistory(ctx, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := hist[len(hist)-1]; end.TimestampMs != deadline {
		t.Fatalf("ended at %v, want the recorded deadline %v", time.UnixMilli(end.TimestampMs), time.UnixMilli(deadline))
	}
	if err := duroxide.ReplayHistory(registry(), "r1", hist); err != nil {
		t.Fatal(err)
	}
}
