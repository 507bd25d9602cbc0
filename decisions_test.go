package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// An orchestration no runtime registers is looked up on MaxAttempts
// deliveries (the first MaxAttempts-1 wait with backoff) and then fails
// with kind configuration.
func TestUnregisteredOrchestrationFailsAtMaxAttempts(t *testing.T) {
	h := duroxidetest.New(t, duroxide.NewRegistry(), &duroxidetest.Options{
		Runtime: &duroxide.RuntimeOptions{MaxAttempts: 3, BackoffBase: time.Second},
	})
	h.Start("Ghost", "g", nil)
	st := h.AdvanceUntilDone("g")
	want := "orchestration Ghost is not registered on this runtime (looked up on 3 deliveries)"
	if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "configuration" || st.Error.Message != want {
		t.Fatalf("got %s %+v, want Failed, configuration: %s", st.State, st.Error, want)
	}
	if m := settledMetrics(t, h); m.Turns.Abandoned != 2 || m.Turns.Committed != 1 {
		t.Fatalf("turns %+v, want 2 abandoned (waiting) and 1 committed (the failure)", m.Turns)
	}
}

// An activity no runtime registers is never delivered (routing by name):
// it waits, and fails with kind configuration once UnservedTimeout has
// passed.
func TestUnregisteredActivityFailsAfterUnservedTimeout(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "CallsGhost", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.ScheduleActivity("Ghost", nil).Await(nil)
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return "", fmt.Errorf("want *ActivityError, got %v", err)
		}
		return ae.Kind + ": " + ae.Message, nil
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{
		Runtime: &duroxide.RuntimeOptions{MaxAttempts: 3, BackoffBase: time.Second, UnservedTimeout: time.Hour},
	})
	h.Start("CallsGhost", "c", nil)
	h.Advance(time.Hour)
	st := h.Wait("c")
	var out string
	if err := st.Decode(&out); err != nil {
		t.Fatalf("Decode: %v (%s %+v)", err, st.State, st.Error)
	}
	if want := `configuration: no runtime serves activity Ghost (queue "") for 1h0m0s (UnservedTimeout)`; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if m := settledMetrics(t, h); m.Activities.Failed.Count+m.Activities.Completed.Count != 0 {
		t.Fatalf("activities %+v: the unregistered activity ran", m.Activities)
	}
}

// settledMetrics shuts the runtime down, so that every turn has been
// counted, and returns its metrics.
func settledMetrics(t *testing.T, h *duroxidetest.Harness) duroxide.RuntimeMetrics {
	t.Helper()
	if err := h.Runtime.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h.Runtime.Metrics()
}

// A nondeterministic instance is parked with a backoff that doubles with
// each park in a row (1s, 2s, 4s, ...), and a fixed deploy resumes it.
func TestParkedInstanceBacksOffByParkCount(t *testing.T) {
	var broken atomic.Bool
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		if broken.Load() {
			if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
				return "", err
			}
		}
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{
		// No cache: every turn replays, so changed code is noticed.
		Runtime: &duroxide.RuntimeOptions{CacheSize: -1, BackoffBase: time.Second, BackoffMax: time.Minute},
	})
	h.Start("O", "o", nil)
	h.WaitIdle()
	start := h.Clock.Now()
	broken.Store(true)
	h.RaiseEvent("o", "go", "done")
	// Parked at 0s, then retried at 1s and 3s; the next retry is at 7s.
	h.Advance(4 * time.Second)
	if st := h.Status("o"); st.State != duroxide.StateRunning || st.LastError == nil || st.LastError.Kind != "nondeterminism" {
		t.Fatalf("status %s, last error %+v", st.State, st.LastError)
	}
	broken.Store(false) // the fixed deploy
	st := h.AdvanceUntilDone("o")
	var out string
	if err := st.Decode(&out); err != nil || out != "done" {
		t.Fatalf("after the fix: %q, %v", out, err)
	}
	if got := h.Clock.Since(start); got != 7*time.Second {
		t.Fatalf("resumed after %v, want 7s (parks back off 1s, 2s, 4s)", got)
	}
	if m := settledMetrics(t, h); m.Turns.Abandoned != 3 {
		t.Fatalf("turns %+v, want 3 abandoned (parked at 0s, 1s, 3s)", m.Turns)
	}
}
