package duroxide_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// Orchestrations and activities no runtime registers (routing by name and
// version, UnservedTimeout) are end-to-end cases on every store in
// provider/providertest (TestEndToEnd/.../Unserved*, Unregistered*).

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
