package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// The end-to-end cases of activity options (timeouts, retries on a
// session, NonRetryable, Jitter) run on every store in
// provider/providertest (TestEndToEnd); this file keeps what needs no store.

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
