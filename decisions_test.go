package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// An orchestration no runtime registers is never delivered (routing by
// name): it waits, counting no delivery, and fails with kind
// configuration once UnservedTimeout has passed.
func TestUnregisteredOrchestrationFailsAfterUnservedTimeout(t *testing.T) {
	// The routes' ttl (WorkerLockTimeout) outlasts the test, so the
	// runtime's announcement stays live whenever its renewal runs, and so
	// does the failing turn's lock (OrchestratorLockTimeout) across the
	// clock steps.
	h := duroxidetest.New(t, duroxide.NewRegistry(), &duroxidetest.Options{
		Runtime: &duroxide.RuntimeOptions{MaxAttempts: 3, BackoffBase: time.Second, UnservedTimeout: time.Hour,
			WorkerLockTimeout: 3 * time.Hour, OrchestratorLockTimeout: 3 * time.Hour},
	})
	h.Start("Ghost", "g", nil)
	// One-minute steps: the renewal (every hour) runs after the hour has
	// passed, within two hours whenever its timer was armed.
	for range 150 {
		if h.Status("g").State != duroxide.StatePending {
			break
		}
		h.Advance(time.Minute)
	}
	st := h.Wait("g")
	want := "no runtime registers orchestration Ghost for 1h0m0s (UnservedTimeout)"
	if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Kind != "configuration" || st.Error.Message != want {
		t.Fatalf("got %s %+v, want Failed, configuration: %s", st.State, st.Error, want)
	}
	if m := settledMetrics(t, h); m.Turns.Abandoned != 0 || m.Turns.Committed != 1 {
		t.Fatalf("turns %+v, want none abandoned and 1 committed (the failure)", m.Turns)
	}
}

// Without an UnservedTimeout, an orchestration no runtime registers waits
// undelivered, and Inspect says why.
func TestUnregisteredOrchestrationWaitsUndelivered(t *testing.T) {
	h := duroxidetest.New(t, duroxide.NewRegistry(), &duroxidetest.Options{
		Runtime: &duroxide.RuntimeOptions{MaxAttempts: 3, BackoffBase: time.Second},
	})
	h.Start("Ghost", "g", nil)
	h.Advance(2 * time.Second) // within the routes' ttl (WorkerLockTimeout): the announcement is live
	st, err := h.Client.Inspect(t.Context(), "g", &duroxide.WaitOptions{StalledAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != duroxide.StatePending || len(st.WaitingFor) != 1 {
		t.Fatalf("got %s waiting for %+v, want Pending with one wait", st.State, st.WaitingFor)
	}
	w := st.WaitingFor[0]
	if w.Kind != duroxide.WaitUnregisteredOrchestration || !w.Unserved || w.Name != "Ghost" || w.Attempt != 0 ||
		w.Message != "no runtime registers orchestration Ghost" || !w.Stalled ||
		!strings.Contains(w.StalledReason, "no runtime registers orchestration Ghost since ") {
		t.Fatalf("wait %+v, want Ghost unserved, undelivered, stalled", w)
	}
	if m := settledMetrics(t, h); m.Turns.Abandoned+m.Turns.Committed != 0 {
		t.Fatalf("turns %+v, want none: the instance was never delivered", m.Turns)
	}
}

// An instance pinned to a version no runtime registers (the name is) is
// never delivered (routing by version): Inspect and the stall rules name
// the version, and it fails with kind configuration once UnservedTimeout
// has passed.
func TestUnregisteredVersionWaitsThenFailsAfterUnservedTimeout(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Flow", func(*duroxide.OrchestrationContext, string) (string, error) { return "v1", nil })
	h := duroxidetest.New(t, reg, &duroxidetest.Options{
		Runtime: &duroxide.RuntimeOptions{MaxAttempts: 3, BackoffBase: time.Second, UnservedTimeout: time.Hour,
			WorkerLockTimeout: 3 * time.Hour, OrchestratorLockTimeout: 3 * time.Hour},
	})
	h.StartWith("Flow", "f2", "x", &duroxide.StartOptions{Version: "2.0.0"})
	h.Advance(2 * time.Second)
	st, err := h.Client.Inspect(t.Context(), "f2", &duroxide.WaitOptions{StalledAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	unserved := "no runtime registers orchestration Flow version 2.0.0"
	if len(st.WaitingFor) != 1 {
		t.Fatalf("waiting for %+v, want one wait", st.WaitingFor)
	}
	if w := st.WaitingFor[0]; w.Kind != duroxide.WaitUnregisteredOrchestration || !w.Unserved || w.Name != "Flow" ||
		w.Version != "2.0.0" || w.Attempt != 0 || w.Message != unserved || !w.Stalled ||
		!strings.Contains(w.StalledReason, unserved+" since ") {
		t.Fatalf("wait %+v, want Flow 2.0.0 unserved, undelivered, stalled", w)
	}
	for range 150 {
		if h.Status("f2").State != duroxide.StatePending {
			break
		}
		h.Advance(time.Minute)
	}
	final := h.Wait("f2")
	want := unserved + " for 1h0m0s (UnservedTimeout)"
	if final.State != duroxide.StateFailed || final.Error == nil || final.Error.Kind != "configuration" || final.Error.Message != want {
		t.Fatalf("got %s %+v, want Failed, configuration: %s", final.State, final.Error, want)
	}
	if m := settledMetrics(t, h); m.Turns.Abandoned != 0 || m.Turns.Committed != 1 {
		t.Fatalf("turns %+v, want none abandoned and 1 committed (the failure)", m.Turns)
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
