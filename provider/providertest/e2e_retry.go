package providertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Activity retry policies: durable backoff through timers.
var e2eRetryCases = []e2eCase{
	{"RetrySucceedsAfterFailures", e2eRetrySucceeds},
	{"RetryExhaustsAttempts", e2eRetryExhausts},
	{"RetryBackoffCapped", e2eRetryBackoffCapped},
	{"RetryFirstTrySucceeds", e2eRetryFirstTry},
	{"RetryWhileAwaitingOther", e2eRetryWhileAwaitingOther},
}

// flaky registers the activity "Flaky", which fails its first `fails`
// calls per input and then returns "ok after N".
func flaky(reg *duroxide.Registry, calls *counter, fails int) {
	duroxide.RegisterActivity(reg, "Flaky", func(_ context.Context, key string) (string, error) {
		n := calls.inc(key)
		if n <= fails {
			return "", &e2eError{Code: n}
		}
		return fmt.Sprintf("ok after %d", n), nil
	})
}

// retryDelays returns, for each TimerCreated of h, how long after the
// preceding ActivityFailed it fires.
func retryDelays(e *e2e, h []history.Event) []time.Duration {
	e.t.Helper()
	var out []time.Duration
	var failedAt int64
	for _, ev := range h {
		switch ev.Kind {
		case history.ActivityFailed:
			failedAt = ev.TimestampMs
		case history.TimerCreated:
			out = append(out, time.Duration(ev.FireAtMs-failedAt)*time.Millisecond)
		}
	}
	return out
}

func e2eRetrySucceeds(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second}).Await(&s)
		return s, err
	})
	flaky(reg, calls, 2)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	st := e.advanceUntilDone("retry")
	var out string
	if err := st.Decode(&out); err != nil || out != "ok after 3" {
		e.t.Fatalf("output %q (%v) %s", out, err, describeStatus(st))
	}
	h := e.history("retry", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted,
		history.ActivityScheduled, history.ActivityFailed, history.TimerCreated, history.TimerFired,
		history.ActivityScheduled, history.ActivityFailed, history.TimerCreated, history.TimerFired,
		history.ActivityScheduled, history.ActivityCompleted, history.OrchestrationCompleted)
	if d := retryDelays(e, h); len(d) != 2 || d[0] != time.Second || d[1] != 2*time.Second {
		e.t.Fatalf("backoff delays %v, want [1s 2s]", d)
	}
}

func e2eRetryExhausts(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{MaxAttempts: 3, InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 3}).Await(nil)
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return "", fmt.Errorf("want *ActivityError, got %v", err)
		}
		return ae.Name + ": " + ae.Message, nil
	})
	flaky(reg, calls, 100)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	st := e.advanceUntilDone("retry")
	var out string
	if err := st.Decode(&out); err != nil || out != "Flaky: e2e failure code 3" {
		e.t.Fatalf("output %q (%v), want the last attempt's error", out, err)
	}
	if calls.get("k") != 3 {
		e.t.Fatalf("activity ran %d times, want 3", calls.get("k"))
	}
	h := e.history("retry", 0)
	if count(h, history.ActivityScheduled) != 3 || count(h, history.ActivityFailed) != 3 || count(h, history.TimerFired) != 2 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
	if d := retryDelays(e, h); len(d) != 2 || d[0] != 500*time.Millisecond || d[1] != 1500*time.Millisecond {
		e.t.Fatalf("backoff delays %v, want [500ms 1.5s]", d)
	}
}

func e2eRetryBackoffCapped(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{
			MaxAttempts: 4, InitialInterval: time.Second, BackoffCoefficient: 10, MaxInterval: 5 * time.Second,
		}).Await(&s)
		return s, err
	})
	flaky(reg, calls, 3)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	st := e.advanceUntilDone("retry")
	var out string
	if err := st.Decode(&out); err != nil || out != "ok after 4" {
		e.t.Fatalf("output %q (%v)", out, err)
	}
	if d := retryDelays(e, e.history("retry", 0)); len(d) != 3 || d[0] != time.Second || d[1] != 5*time.Second || d[2] != 5*time.Second {
		e.t.Fatalf("backoff delays %v, want [1s 5s 5s]", d)
	}
}

func e2eRetryFirstTry(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{MaxAttempts: 3}).Await(&s)
		return s, err
	})
	flaky(reg, calls, 0)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	var out string
	e.result("retry", &out)
	if out != "ok after 1" {
		e.t.Fatalf("output %q", out)
	}
	e.wantKinds(e.history("retry", 0), history.OrchestrationStarted, history.ActivityScheduled, history.ActivityCompleted, history.OrchestrationCompleted)
}

func e2eRetryWhileAwaitingOther(e *e2e) {
	calls := newCounter()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		r := ctx.ScheduleActivityWithRetry("Flaky", "k", duroxide.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Second})
		// The retries progress while the code awaits an event.
		var ev string
		if err := ctx.WaitForEvent("go").Await(&ev); err != nil {
			return nil, err
		}
		var s string
		if err := r.Await(&s); err != nil {
			return nil, err
		}
		return []string{ev, s}, nil
	})
	flaky(reg, calls, 2)
	e.runtime(reg)
	e.start("retry", "Retry", nil)
	e.advanceTimersUntil("all attempts", func() bool {
		h, err := e.c.GetHistory(e.ctx, "retry", 0)
		return err == nil && count(h, history.ActivityCompleted) == 1
	})
	if err := e.c.RaiseEvent(e.ctx, "retry", "go", "went"); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	e.result("retry", &out)
	if jsonOf(e.t, out) != `["went","ok after 3"]` {
		e.t.Fatalf("output %v", out)
	}
}
