package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// hangingActivity blocks until its context is canceled, reporting each start
// on started and each cancellation on canceled (by activity ID).
type hangingActivity struct {
	started, canceled chan int64
}

func newHanging() *hangingActivity {
	return &hangingActivity{started: make(chan int64, 16), canceled: make(chan int64, 16)}
}

func (a *hangingActivity) run(ctx context.Context, _ string) (string, error) {
	id := duroxide.ActivityContextFrom(ctx).ActivityID
	a.started <- id
	<-ctx.Done()
	a.canceled <- id
	return "late result", nil
}

// waitStarted waits (bounded in real time) for the next activity ID on ch.
func waitStarted(t *testing.T, ch <-chan int64) int64 {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(duroxidetest.DefaultTimeout):
		t.Fatal("no activity signaled in time")
		return 0
	}
}

// longLocks keeps a hanging activity's lock across a one-hour clock step,
// so the step does not also redeliver it.
func longLocks(ro duroxide.RuntimeOptions) *duroxidetest.Options {
	ro.WorkerLockTimeout = 3 * time.Hour
	return &duroxidetest.Options{Runtime: &ro}
}

// eachCacheMode runs a test with the orchestration cache on and off, so
// pure replay is covered too.
func eachCacheMode(t *testing.T, run func(t *testing.T, ro duroxide.RuntimeOptions)) {
	t.Helper()
	for _, m := range []struct {
		name string
		size int
	}{{"cache", 0}, {"replay", -1}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			run(t, duroxide.RuntimeOptions{CacheSize: m.size})
		})
	}
}

// replays checks that the instance's final history replays against reg.
func replays(t *testing.T, reg *duroxide.Registry, h *duroxidetest.Harness, id string) {
	t.Helper()
	if err := duroxide.ReplayHistory(reg, id, h.History(id)); err != nil {
		t.Fatalf("%s does not replay its own history: %v", id, err)
	}
}

// stepClock moves the harness clock while an activity runs (Advance waits
// for idleness, which a hanging activity never reaches).
func stepClock(h *duroxidetest.Harness, d time.Duration) {
	h.Clock.Advance(d)
	h.Store.WakeAll()
}

func TestActivityScheduleToCloseTimeout(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		hang := newHanging()
		slow := duroxide.RegisterActivity(reg, "Slow", hang.run)
		duroxide.RegisterOrchestration(reg, "Deadline", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			out, err := duroxide.CallActivity(ctx, slow, "x", &duroxide.ActivityOptions{ScheduleToCloseTimeout: time.Hour}).Get()
			var ae *duroxide.ActivityError
			if errors.Is(err, duroxide.ErrTimeout) && errors.As(err, &ae) && ae.Kind == "timeout" {
				return "timed out", nil
			}
			return out, err
		})
		h := duroxidetest.New(t, reg, longLocks(ro))
		h.Start("Deadline", "d1", struct{}{})
		id := waitStarted(t, hang.started)
		stepClock(h, time.Hour)
		st := h.Wait("d1")
		var out string
		if err := st.Decode(&out); err != nil || out != "timed out" {
			t.Fatalf("got %q, %v; want the call to fail with a timeout", out, err)
		}
		if got := waitStarted(t, hang.canceled); got != id {
			t.Fatalf("activity %d was canceled, want %d", got, id)
		}
		hist := h.History("d1")
		if countKind(hist, history.ActivityCancelRequested) != 1 || countKind(hist, history.ActivityCompleted) != 0 {
			t.Fatalf("want one cancel breadcrumb and no recorded late result, got %v", kinds(hist))
		}
		replays(t, reg, h, "d1")
	})
}

func TestActivityStartToCloseTimeoutRetries(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		var mu sync.Mutex
		first := int64(0)
		started := make(chan int64, 16)
		flaky := duroxide.RegisterActivity(reg, "HangOnce", func(ctx context.Context, s string) (string, error) {
			id := duroxide.ActivityContextFrom(ctx).ActivityID
			mu.Lock()
			if first == 0 {
				first = id
			}
			hang := id == first
			mu.Unlock()
			if hang {
				started <- id
				<-ctx.Done()
				return "late", nil
			}
			return s + " on a retry", nil
		})
		duroxide.RegisterOrchestration(reg, "PerAttempt", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			return duroxide.CallActivity(ctx, flaky, "done", &duroxide.ActivityOptions{
				StartToCloseTimeout: time.Hour,
				Retry:               &duroxide.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Minute},
			}).Get()
		})
		h := duroxidetest.New(t, reg, longLocks(ro))
		h.Start("PerAttempt", "p1", struct{}{})
		waitStarted(t, started)
		stepClock(h, time.Hour)
		st := h.AdvanceUntilDone("p1")
		var out string
		if err := st.Decode(&out); err != nil || out != "done on a retry" {
			t.Fatalf("got %q, %v", out, err)
		}
		if n := countKind(h.History("p1"), history.ActivityScheduled); n != 2 {
			t.Fatalf("want 2 attempts, got %d", n)
		}
		replays(t, reg, h, "p1")
	})
}

func TestRetryOnSession(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		var mu sync.Mutex
		calls := 0
		var sessions []string
		act := duroxide.RegisterActivity(reg, "Pinned", func(ctx context.Context, _ struct{}) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			sessions = append(sessions, duroxide.ActivityContextFrom(ctx).SessionID)
			if calls < 3 {
				return 0, errors.New("not yet")
			}
			return calls, nil
		})
		duroxide.RegisterOrchestration(reg, "SessionRetry", func(ctx *duroxide.OrchestrationContext, _ struct{}) (int, error) {
			return duroxide.CallActivity(ctx, act, struct{}{}, &duroxide.ActivityOptions{
				Session: "gpu-1",
				Retry:   &duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second},
			}).Get()
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("SessionRetry", "s1", struct{}{})
		st := h.AdvanceUntilDone("s1")
		var n int
		if err := st.Decode(&n); err != nil || n != 3 {
			t.Fatalf("got %d, %v", n, err)
		}
		for _, ev := range h.History("s1") {
			if ev.Kind == history.ActivityScheduled && ev.SessionID != "gpu-1" {
				t.Fatalf("attempt %d not on the session: %+v", ev.EventID, ev)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sessions {
			if s != "gpu-1" {
				t.Fatalf("an attempt ran outside the session: %v", sessions)
			}
		}
		replays(t, reg, h, "s1")
	})
}

type validationError struct{ field string }

func (e *validationError) Error() string { return "invalid " + e.field }

func TestNonRetryable(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		var mu sync.Mutex
		calls := map[string]int{}
		act := duroxide.RegisterActivity(reg, "Validate", func(_ context.Context, how string) (string, error) {
			mu.Lock()
			calls[how]++
			mu.Unlock()
			switch how {
			case "marked":
				return "", duroxide.NonRetryable(fmt.Errorf("bad input: %w", errors.New("empty")))
			case "typed":
				return "", &validationError{field: "email"}
			}
			return "", errors.New("transient")
		})
		duroxide.RegisterOrchestration(reg, "Validate", func(ctx *duroxide.OrchestrationContext, how string) (string, error) {
			_, err := duroxide.CallActivity(ctx, act, how, &duroxide.ActivityOptions{Retry: &duroxide.RetryPolicy{
				MaxAttempts: 4, InitialInterval: time.Second, Jitter: 0.5,
				NonRetryable: []string{"*duroxide_test.validationError"},
			}}).Get()
			var ae *duroxide.ActivityError
			if !errors.As(err, &ae) {
				return "", fmt.Errorf("want an *ActivityError, got %v", err)
			}
			return ae.Message, nil
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		for _, tc := range []struct {
			how, msg string
			attempts int
		}{
			{"marked", "bad input: empty", 1},
			{"typed", "invalid email", 1},
			{"other", "transient", 4},
		} {
			h.Start("Validate", tc.how, tc.how)
			st := h.AdvanceUntilDone(tc.how)
			var msg string
			if err := st.Decode(&msg); err != nil || msg != tc.msg {
				t.Fatalf("%s: got %q, %v", tc.how, msg, err)
			}
			mu.Lock()
			n := calls[tc.how]
			mu.Unlock()
			if n != tc.attempts {
				t.Fatalf("%s: %d attempts, want %d", tc.how, n, tc.attempts)
			}
			replays(t, reg, h, tc.how)
		}
	})
}

func TestActivityOptionsRejected(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		act := duroxide.RegisterActivity(reg, "Noop", func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil })
		duroxide.RegisterOrchestration(reg, "BadOptions", func(ctx *duroxide.OrchestrationContext, _ struct{}) ([]string, error) {
			var out []string
			for _, o := range []*duroxide.ActivityOptions{
				{StartToCloseTimeout: -time.Second},
				{Retry: &duroxide.RetryPolicy{Jitter: 2}},
				{Queue: strings.Repeat("q", 257)},
				{HeartbeatTimeout: -time.Minute},
				nil, // with a zero reference below
			} {
				ref := act
				if o == nil {
					ref = duroxide.Activity[struct{}, struct{}]{}
				}
				_, err := duroxide.CallActivity(ctx, ref, struct{}{}, o).Get()
				switch {
				case errors.Is(err, duroxide.ErrInvalidArgument):
					out = append(out, "invalid")
				case errors.Is(err, duroxide.ErrNotSupported):
					out = append(out, "unsupported")
				default:
					out = append(out, fmt.Sprint(err))
				}
			}
			return out, nil
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("BadOptions", "b1", struct{}{})
		var out []string
		if err := h.Wait("b1").Decode(&out); err != nil || fmt.Sprint(out) != "[invalid invalid invalid invalid invalid]" {
			t.Fatalf("got %v, %v", out, err)
		}
		if n := countKind(h.History("b1"), history.ActivityScheduled); n != 0 {
			t.Fatalf("rejected calls scheduled %d activities", n)
		}
	})
}

func countKind(h []history.Event, k history.EventKind) int {
	n := 0
	for _, ev := range h {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func kinds(h []history.Event) []history.EventKind {
	out := make([]history.EventKind, len(h))
	for i, ev := range h {
		out[i] = ev.Kind
	}
	return out
}
