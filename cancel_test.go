package duroxide_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

func TestCancelActivityThatLostASelect(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		hang := newHanging()
		slow := duroxide.RegisterActivity(reg, "Slow", hang.run)
		duroxide.RegisterOrchestration(reg, "Race", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			f := duroxide.CallActivity(ctx, slow, "x", nil)
			if ctx.Select(f.Task(), ctx.ScheduleTimer(time.Minute)) == 0 {
				return f.Get()
			}
			f.Cancel()
			_, err := f.Get()
			if !errors.Is(err, duroxide.ErrCanceled) {
				return "", err
			}
			// Wait past the point where the late result would arrive.
			if err := ctx.ScheduleTimer(time.Hour).Await(nil); err != nil {
				return "", err
			}
			_, err = f.Get()
			if !errors.Is(err, duroxide.ErrCanceled) {
				return "", errors.New("the late result replaced the cancellation")
			}
			return "gave up", nil
		})
		h := duroxidetest.New(t, reg, longLocks(ro))
		h.Start("Race", "r1", struct{}{})
		id := waitStarted(t, hang.started)
		stepClock(h, time.Minute)
		if got := waitStarted(t, hang.canceled); got != id {
			t.Fatalf("activity %d canceled, want %d", got, id)
		}
		st := h.AdvanceUntilDone("r1")
		var out string
		if err := st.Decode(&out); err != nil || out != "gave up" {
			t.Fatalf("got %q, %v", out, err)
		}
		if n := countKind(h.History("r1"), history.ActivityCancelRequested); n != 1 {
			t.Fatalf("want one cancel breadcrumb, got %v", kinds(h.History("r1")))
		}
		replays(t, reg, h, "r1")
	})
}

func TestCancelTimerAndChild(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		child := duroxide.RegisterOrchestration(reg, "Forever", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			return "", ctx.WaitForEvent("never").Await(nil)
		})
		duroxide.RegisterOrchestration(reg, "Canceler", func(ctx *duroxide.OrchestrationContext, _ struct{}) ([]bool, error) {
			timer := ctx.ScheduleTimer(time.Hour)
			timer.Cancel()
			terr := timer.Await(nil)

			kid := duroxide.CallSubOrchestration(ctx, child, "kid", struct{}{}, nil)
			// Let the child start before canceling it.
			if err := ctx.ScheduleTimer(time.Second).Await(nil); err != nil {
				return nil, err
			}
			kid.Cancel()
			_, kerr := kid.Get()
			var se *duroxide.SubOrchestrationError
			return []bool{errors.Is(terr, duroxide.ErrCanceled), errors.Is(kerr, duroxide.ErrCanceled), errors.As(kerr, &se)}, nil
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Canceler", "c1", struct{}{})
		st := h.AdvanceUntilDone("c1")
		var got []bool
		if err := st.Decode(&got); err != nil || len(got) != 3 || !got[0] || !got[1] || !got[2] {
			t.Fatalf("got %v, %v; want the timer and the child canceled", got, err)
		}
		if kst := h.Wait("kid"); kst.State != duroxide.StateCanceled {
			t.Fatalf("child is %s, want Canceled (cascade)", kst.State)
		}
		if st.UpdatedAt.Sub(duroxidetest.DefaultStart) >= time.Hour {
			t.Fatalf("the canceled one-hour timer delayed the instance: ended at %v", st.UpdatedAt)
		}
		replays(t, reg, h, "c1")
	})
}

// TestCanceledTimerIsNoLongerAWait: Inspect stops listing a timer the code
// canceled, and a call's deadline once the call has ended.
func TestCanceledTimerIsNoLongerAWait(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	quick := duroxide.RegisterActivity(reg, "Quick", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, "Abandon", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ctx.ScheduleTimer(time.Hour).Cancel()
		if _, err := duroxide.CallActivity(ctx, quick, "x", &duroxide.ActivityOptions{ScheduleToCloseTimeout: time.Hour}).Get(); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	h := duroxidetest.New(t, reg, nil)
	h.Start("Abandon", "a1", struct{}{})
	h.WaitIdle()
	waits, err := h.Client.WaitingFor(context.Background(), "a1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0].Kind != duroxide.WaitEvent {
		t.Fatalf("waits %+v, want only the event", waits)
	}
	h.RaiseEvent("a1", "go", "done")
	if err := h.Wait("a1").Decode(nil); err != nil {
		t.Fatal(err)
	}
	replays(t, reg, h, "a1")
}
