package duroxidetest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// registerFixtures registers the orchestrations the tests below drive.
func registerFixtures(reg *duroxide.Registry) {
	// Sleep waits d and reports how much orchestration time passed.
	duroxide.RegisterOrchestration(reg, "Sleep", func(ctx *duroxide.OrchestrationContext, d time.Duration) (time.Duration, error) {
		start := ctx.Now()
		if err := ctx.ScheduleTimer(d).Await(nil); err != nil {
			return 0, err
		}
		return ctx.Now().Sub(start), nil
	})
	// Ticks waits n timers of 10 minutes, one after the other.
	duroxide.RegisterOrchestration(reg, "Ticks", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for i := 0; i < n; i++ {
			if err := ctx.ScheduleTimer(10 * time.Minute).Await(nil); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	// Approval waits for the event "decision" for at most timeout.
	duroxide.RegisterOrchestration(reg, "Approval", func(ctx *duroxide.OrchestrationContext, timeout time.Duration) (string, error) {
		decision := ctx.WaitForEvent("decision")
		if ctx.Select(decision, ctx.ScheduleTimer(timeout)) == 1 {
			return "timeout", nil
		}
		var approved bool
		if err := decision.Await(&approved); err != nil {
			return "", err
		}
		if approved {
			return "approved", nil
		}
		return "rejected", nil
	})
	duroxide.RegisterActivity(reg, "Explode", func(_ context.Context, msg string) (string, error) {
		return "", errors.New(msg)
	})
	duroxide.RegisterOrchestration(reg, "Fail", func(ctx *duroxide.OrchestrationContext, msg string) (string, error) {
		var out string
		if err := ctx.ScheduleActivity("Explode", msg).Await(&out); err != nil {
			return "", fmt.Errorf("step failed: %w", err)
		}
		return out, nil
	})
	// Await waits for the event "go".
	duroxide.RegisterOrchestration(reg, "Await", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	// Parent waits for a child that sleeps.
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, d time.Duration) (time.Duration, error) {
		var slept time.Duration
		err := ctx.ScheduleSubOrchestration("Sleep", "", d).Await(&slept)
		return slept, err
	})
	// Countdown sleeps a minute per step and continues as new each step.
	duroxide.RegisterOrchestration(reg, "Countdown", func(ctx *duroxide.OrchestrationContext, n int) (int64, error) {
		if n == 0 {
			return ctx.ExecutionID(), nil
		}
		if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
			return 0, err
		}
		return 0, ctx.ContinueAsNew(n - 1)
	})
	// Flaky fails until its third attempt; Retry retries it durably.
	var mu sync.Mutex
	attempts := map[string]int{}
	duroxide.RegisterActivity(reg, "Flaky", func(ctx context.Context, _ struct{}) (int, error) {
		id := duroxide.ActivityContextFrom(ctx).InstanceID
		mu.Lock()
		defer mu.Unlock()
		attempts[id]++
		if attempts[id] < 3 {
			return 0, fmt.Errorf("attempt %d failed", attempts[id])
		}
		return attempts[id], nil
	})
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ struct{}) (int, error) {
		var n int
		err := ctx.ScheduleActivityWithRetry("Flaky", struct{}{}, duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Minute}).Await(&n)
		return n, err
	})
}

func newHarness(t *testing.T, opts *duroxidetest.Options) *duroxidetest.Harness {
	t.Helper()
	reg := duroxide.NewRegistry()
	registerFixtures(reg)
	return duroxidetest.New(t, reg, opts)
}

func decode[T any](t *testing.T, st *duroxide.Status) T {
	t.Helper()
	var out T
	if err := st.Decode(&out); err != nil {
		t.Fatalf("instance %s: %v", st.InstanceID, err)
	}
	return out
}

// cacheModes runs f with the orchestration cache on and off, so both the
// resumed and the replayed code paths are covered.
func cacheModes(t *testing.T, f func(t *testing.T, opts *duroxidetest.Options)) {
	for _, c := range []struct {
		name string
		size int
	}{{"cache", 0}, {"replay", -1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f(t, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{CacheSize: c.size}})
		})
	}
}

func TestHourTimerWithoutWaiting(t *testing.T) {
	t.Parallel()
	cacheModes(t, func(t *testing.T, opts *duroxidetest.Options) {
		h := newHarness(t, opts)
		h.Start("Sleep", "s1", time.Hour)
		st := h.AdvanceUntilDone("s1")
		if got := decode[time.Duration](t, st); got != time.Hour {
			t.Fatalf("orchestration saw %v pass, want 1h", got)
		}
		if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != time.Hour {
			t.Fatalf("clock moved %v, want exactly 1h", got)
		}
	})
}

func TestAdvanceStepsThroughTimers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.Start("Ticks", "t1", 3)

	// 25 minutes: two of the three 10-minute timers, each scheduled when
	// the previous one fired.
	h.Advance(25 * time.Minute)
	if st := h.Status("t1"); st.State != duroxide.StateRunning {
		t.Fatalf("after 25m: %s, want Running", st.State)
	}
	fired := 0
	for _, e := range h.History("t1") {
		if e.Kind == history.TimerFired {
			fired++
		}
	}
	if fired != 2 {
		t.Fatalf("after 25m: %d timers fired, want 2", fired)
	}

	h.Advance(5 * time.Minute)
	st := h.Status("t1")
	if st.State != duroxide.StateCompleted || decode[int](t, st) != 3 {
		t.Fatalf("after 30m: %s %s, want Completed 3", st.State, st.Output)
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// drive acts on the instance "a" once it waits.
		drive func(t *testing.T, h *duroxidetest.Harness) *duroxide.Status
		want  string
	}{
		{"approved", func(t *testing.T, h *duroxidetest.Harness) *duroxide.Status {
			h.RaiseEvent("a", "decision", true)
			return h.Wait("a")
		}, "approved"},
		{"rejected late but in time", func(t *testing.T, h *duroxidetest.Harness) *duroxide.Status {
			h.Advance(23 * time.Hour)
			h.RaiseEvent("a", "decision", false)
			return h.Wait("a")
		}, "rejected"},
		{"timeout", func(t *testing.T, h *duroxidetest.Harness) *duroxide.Status {
			h.Advance(24 * time.Hour)
			st := h.Status("a")
			// Too late: refused.
			if err := h.Client.RaiseEvent(context.Background(), "a", "decision", true); !errors.Is(err, duroxide.ErrInstanceTerminal) {
				t.Fatalf("a late event: %v, want ErrInstanceTerminal", err)
			}
			return st
		}, "timeout"},
		{"timeout via AdvanceUntilDone", func(t *testing.T, h *duroxidetest.Harness) *duroxide.Status {
			return h.AdvanceUntilDone("a")
		}, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cacheModes(t, func(t *testing.T, opts *duroxidetest.Options) {
				h := newHarness(t, opts)
				h.Start("Approval", "a", 24*time.Hour)
				h.WaitIdle()
				st := c.drive(t, h)
				if st.State != duroxide.StateCompleted {
					t.Fatalf("state %s, want Completed", st.State)
				}
				if got := decode[string](t, st); got != c.want {
					t.Fatalf("got %q, want %q", got, c.want)
				}
			})
		})
	}
}

func TestWaitReturnsFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.Start("Fail", "f1", "card declined")
	st := h.Wait("f1")
	if st.State != duroxide.StateFailed {
		t.Fatalf("state %s, want Failed", st.State)
	}
	var oe *duroxide.OrchestrationError
	if err := st.Decode(nil); !errors.As(err, &oe) {
		t.Fatalf("Decode: %v, want *OrchestrationError", err)
	}
	if !strings.Contains(oe.Info.Message, "card declined") {
		t.Fatalf("error %q does not carry the activity's message", oe.Info.Message)
	}
}

func TestSubOrchestrationTimer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.Start("Parent", "p1", 2*time.Hour)
	if got := decode[time.Duration](t, h.AdvanceUntilDone("p1")); got != 2*time.Hour {
		t.Fatalf("child slept %v, want 2h", got)
	}
}

func TestContinueAsNewWithTimers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.Start("Countdown", "c1", 5)
	h.Advance(3 * time.Minute)
	if st := h.Status("c1"); st.State != duroxide.StateRunning || st.ExecutionID != 4 {
		t.Fatalf("after 3m: %s execution %d, want Running execution 4", st.State, st.ExecutionID)
	}
	if got := decode[int64](t, h.AdvanceUntilDone("c1")); got != 6 {
		t.Fatalf("finished in execution %d, want 6", got)
	}
	if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != 5*time.Minute {
		t.Fatalf("clock moved %v, want 5m", got)
	}
}

func TestRetryBackoffIsDurable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.Start("Retry", "r1", struct{}{})
	if got := decode[int](t, h.AdvanceUntilDone("r1")); got != 3 {
		t.Fatalf("succeeded on attempt %d, want 3", got)
	}
	// Backoff 1m then 2m.
	if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != 3*time.Minute {
		t.Fatalf("clock moved %v, want 3m", got)
	}
}

func TestStartTime(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, time.June, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, &duroxidetest.Options{Start: start})
	h.Start("Sleep", "s1", time.Minute)
	h.WaitIdle()
	var fireAt int64
	for _, e := range h.History("s1") {
		if e.Kind == history.TimerCreated {
			fireAt = e.FireAtMs
		}
	}
	if want := start.Add(time.Minute).UnixMilli(); fireAt != want {
		t.Fatalf("timer fires at %v, want %v", time.UnixMilli(fireAt).UTC(), time.UnixMilli(want).UTC())
	}
}

// fatalRecorder is a TB whose Fatalf records the message and stops the
// calling goroutine, as testing.T's does, without failing the real test.
type fatalRecorder struct {
	*testing.T
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// fatal runs f in its own goroutine and returns the message it failed with.
func (r *fatalRecorder) fatal(f func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestFailureMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(h *duroxidetest.Harness)
		want []string
	}{
		{"AdvanceUntilDone on an event wait", func(h *duroxidetest.Harness) {
			h.Start("Await", "e", nil)
			h.AdvanceUntilDone("e")
		}, []string{"no timer is pending", "RaiseEvent", "ExternalSubscribed name=go"}},
		{"AdvanceUntilDone on an unknown instance", func(h *duroxidetest.Harness) {
			h.AdvanceUntilDone("nobody")
		}, []string{"nobody", "not found"}},
		{"Wait on a timer", func(h *duroxidetest.Harness) {
			h.Start("Sleep", "s", time.Hour)
			h.Wait("s")
		}, []string{"did not finish", "AdvanceUntilDone", "TimerCreated"}},
		{"Start twice", func(h *duroxidetest.Harness) {
			h.Start("Sleep", "s", time.Hour)
			h.Start("Sleep", "s", time.Hour)
		}, []string{"already exists"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &fatalRecorder{T: t}
			reg := duroxide.NewRegistry()
			registerFixtures(reg)
			h := duroxidetest.New(rec, reg, &duroxidetest.Options{Timeout: 300 * time.Millisecond})
			msg := rec.fatal(func() { c.run(h) })
			t.Logf("failure message:\n%s", msg)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("failure message %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestEventRaisedBeforeTheWait(t *testing.T) {
	t.Parallel()
	cacheModes(t, func(t *testing.T, opts *duroxidetest.Options) {
		h := newHarness(t, opts)
		// The event may arrive before, during or after the first turn.
		h.Start("Await", "e", nil)
		h.RaiseEvent("e", "go", "hi")
		if got := decode[string](t, h.Wait("e")); got != "hi" {
			t.Fatalf("got %q, want hi", got)
		}
	})
}

func TestDelayedStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.StartWith("Sleep", "d", time.Minute, &duroxide.StartOptions{StartAt: duroxidetest.DefaultStart.Add(time.Hour)})
	h.Advance(59 * time.Minute)
	if st := h.Status("d"); st.State != duroxide.StatePending {
		t.Fatalf("before its start time: %s, want Pending", st.State)
	}
	h.Advance(time.Minute)
	if st := h.Status("d"); st.State != duroxide.StateRunning {
		t.Fatalf("at its start time: %s, want Running", st.State)
	}
	h.AdvanceUntilDone("d")
	if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != time.Hour+time.Minute {
		t.Fatalf("clock moved %v, want 1h1m", got)
	}
}
