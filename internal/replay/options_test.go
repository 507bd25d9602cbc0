package replay

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

func TestJitteredDelayIsDeterministicAndBounded(t *testing.T) {
	p := RetryPolicy{InitialInterval: 10 * time.Second, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for k := 1; k <= 4; k++ {
		for id := int64(1); id <= 20; id++ {
			d := p.JitteredDelay(k, "inst", id)
			if d != p.JitteredDelay(k, "inst", id) {
				t.Fatalf("k=%d id=%d: not deterministic", k, id)
			}
			full := p.Delay(k)
			if d > full || d < full/2 {
				t.Fatalf("k=%d id=%d: %v outside [%v, %v]", k, id, d, full/2, full)
			}
			seen[d] = true
		}
	}
	if len(seen) < 40 {
		t.Fatalf("jitter spreads waits over only %d values out of 80", len(seen))
	}
	if d := (RetryPolicy{InitialInterval: time.Second}).JitteredDelay(1, "i", 2); d != time.Second {
		t.Fatalf("no jitter changed the wait: %v", d)
	}
}

func TestRetryPolicyFinal(t *testing.T) {
	p := RetryPolicy{NonRetryable: []string{"configuration", "*app.ValidationError"}}
	for _, tc := range []struct {
		f    history.ErrorDetails
		want bool
	}{
		{history.ErrorDetails{Kind: history.ErrorApplication, Type: "*errors.errorString"}, false},
		{history.ErrorDetails{Kind: history.ErrorApplication, Type: "*app.ValidationError"}, true},
		{history.ErrorDetails{Kind: history.ErrorConfiguration}, true},
		{history.ErrorDetails{Kind: history.ErrorApplication, Code: history.CodeNonRetryable}, true},
		{history.ErrorDetails{Kind: history.ErrorCanceled}, true},
		{history.ErrorDetails{Kind: history.ErrorTimeout}, false},
	} {
		if got := p.final(&tc.f); got != tc.want {
			t.Fatalf("%+v: final=%v, want %v", tc.f, got, tc.want)
		}
	}
}

// TestScheduleToCloseCancelsTheAttempt: the deadline timer fires first, the
// call fails with kind timeout, the attempt gets one breadcrumb and is
// reported for cancellation once; its late result changes nothing.
func TestScheduleToCloseCancelsTheAttempt(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivityOptions("A", in, ActivityOptions{ScheduleToClose: time.Hour})
			ctx.Await(a)
			_, f := a.Result()
			if f == nil {
				return json.RawMessage(`"ok"`), nil
			}
			ctx.Await(ctx.ScheduleTimer(time.Minute))
			return json.RawMessage(`"` + string(f.Kind) + `"`), nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,ActivityScheduled,TimerCreated" {
			t.Fatalf("turn 1: %s", got)
		}
		out = h.run(done(history.WorkTimerFired, 3, ""))
		if got := kinds(out.Delta); got != "TimerFired,ActivityCancelRequested,TimerCreated" {
			t.Fatalf("turn 2: %s", got)
		}
		if len(out.CanceledActivities) != 1 || out.CanceledActivities[0] != 2 {
			t.Fatalf("turn 2 cancels %v, want [2]", out.CanceledActivities)
		}
		out = h.run(done(history.WorkActivityCompleted, 2, `"late"`))
		if got := kinds(out.Delta); got != "ActivityCompleted" || len(out.CanceledActivities) != 0 {
			t.Fatalf("turn 3: %s, cancels %v", got, out.CanceledActivities)
		}
		out = h.run(done(history.WorkTimerFired, 6, ""))
		if out.Result != Completed || string(out.Output) != `"timeout"` || len(out.CanceledActivities) != 0 {
			t.Fatalf("turn 4: %v %s cancels %v", out.Result, out.Output, out.CanceledActivities)
		}
		if err := Verify(h.cfg, h.stored); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelTaskKinds cancels a timer, an event wait and a child: each
// completes at once as canceled and leaves a breadcrumb; only the child
// needs a cancel request.
func TestCancelTaskKinds(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			timer := ctx.ScheduleTimer(time.Hour)
			ev := ctx.WaitForEvent("e")
			kid := ctx.ScheduleSubOrchestration("K", "", "kid", nil)
			for _, t := range []*Task{timer, ev, kid} {
				ctx.Cancel(t)
			}
			later := ctx.WaitForEvent("e")
			ctx.Await(later)
			out, _ := later.Result()
			_, f1 := timer.Result()
			_, f2 := ev.Result()
			_, f3 := kid.Result()
			if f1.Kind != history.ErrorCanceled || f2.Kind != history.ErrorCanceled || f3.Kind != history.ErrorCanceled {
				return nil, nil
			}
			return out, nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,TimerCreated,ExternalSubscribed,SubOrchestrationScheduled,TimerCanceled,ExternalSubscribedCancelled,SubOrchestrationCancelRequested,ExternalSubscribed" {
			t.Fatalf("turn 1: %s", got)
		}
		if len(out.CanceledChildren) != 1 || out.CanceledChildren[0].InstanceID != "kid" {
			t.Fatalf("turn 1 cancels children %v", out.CanceledChildren)
		}
		// The event goes to the live wait, not the canceled one.
		out = h.run(raise("e", `"x"`))
		if out.Result != Completed || string(out.Output) != `"x"` || len(out.CanceledChildren) != 0 {
			t.Fatalf("turn 2: %v %s %s", out.Result, out.Output, kinds(out.Delta))
		}
	})
}

func TestPatchedRecordsOnceAndReplays(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		var answers []bool
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			answers = append(answers, ctx.Patched("p"), ctx.Patched("p"))
			a := ctx.ScheduleActivity("A", in, "")
			ctx.Await(a)
			return nil, nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,PatchRecorded,ActivityScheduled" {
			t.Fatalf("turn 1: %s", got)
		}
		h.run(done(history.WorkActivityCompleted, 3, `1`))
		for _, a := range answers {
			if !a {
				t.Fatalf("answers %v, want all true", answers)
			}
		}
		if err := Verify(h.cfg, h.stored); err != nil {
			t.Fatal(err)
		}
	})
	// A history recorded before the patch replays on the old branch.
	old := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, Name: "O", Version: "1.0.0", TimestampMs: 1},
		{EventID: 2, Kind: history.ActivityScheduled, Name: "A", TimestampMs: 1},
	}
	var got []bool
	err := Verify(Config{InstanceID: "i", ExecutionID: 1, Func: func(ctx *Context, _ json.RawMessage) (json.RawMessage, error) {
		got = append(got, ctx.Patched("p"))
		ctx.Await(ctx.ScheduleActivity("A", nil, ""))
		return nil, nil
	}}, old)
	if err != nil || len(got) != 1 || got[0] {
		t.Fatalf("old history: %v, answers %v; want it to replay with Patched false", err, got)
	}
}

// TestDeadlinesAbandonedWhenTheCallEnds: an attempt that succeeds in time
// abandons its start-to-close timer and the call's schedule-to-close timer,
// and their late firings change nothing.
func TestDeadlinesAbandonedWhenTheCallEnds(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivityOptions("A", in, ActivityOptions{StartToClose: time.Minute, ScheduleToClose: time.Hour})
			ctx.Await(a)
			out, _ := a.Result()
			ctx.Await(ctx.WaitForEvent("end"))
			return out, nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,ActivityScheduled,TimerCreated,TimerCreated" {
			t.Fatalf("turn 1: %s", got)
		}
		out = h.run(done(history.WorkActivityCompleted, 2, `"a"`))
		if got := kinds(out.Delta); got != "ActivityCompleted,TimerCanceled,TimerCanceled,ExternalSubscribed" {
			t.Fatalf("turn 2: %s", got)
		}
		out = h.run(done(history.WorkTimerFired, 3, ""), done(history.WorkTimerFired, 4, ""), raise("end", "1"))
		if out.Result != Completed || string(out.Output) != `"a"` {
			t.Fatalf("turn 3: %v %s %s", out.Result, out.Output, kinds(out.Delta))
		}
		if err := Verify(h.cfg, h.stored); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetryEndsAtDeadlineOrCancel: a schedule-to-close deadline that fires
// during a backoff wait ends the call with kind timeout and abandons the
// wait; canceling a retrying call does the same with kind canceled. No
// further attempt is scheduled either way.
func TestRetryEndsAtDeadlineOrCancel(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		both(t, func(t *testing.T, cached bool) {
			h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
				a := ctx.ScheduleActivityOptions("A", in, ActivityOptions{
					Retry:           &RetryPolicy{MaxAttempts: 5, InitialInterval: time.Minute},
					ScheduleToClose: 30 * time.Second,
				})
				if cancel {
					ctx.Await(ctx.WaitForEvent("stop"))
					ctx.Cancel(a)
				}
				ctx.Await(a)
				_, f := a.Result()
				return json.RawMessage(`"` + string(f.Kind) + `"`), nil
			})
			h.run() // 2 A, 3 deadline (4 stop wait)
			out := h.run(done(history.WorkActivityFailed, 2, "boom"))
			backoff := out.Delta[len(out.Delta)-1]
			if backoff.Kind != history.TimerCreated {
				t.Fatalf("turn 2: %s", kinds(out.Delta))
			}
			if cancel {
				out = h.run(raise("stop", "1"))
			} else {
				out = h.run(done(history.WorkTimerFired, 3, ""))
			}
			want := `"timeout"`
			if cancel {
				want = `"canceled"`
			}
			if out.Result != Completed || string(out.Output) != want {
				t.Fatalf("turn 3: %v %s %s", out.Result, out.Output, kinds(out.Delta))
			}
			n := 0
			for _, ev := range h.stored {
				if ev.Kind == history.ActivityScheduled {
					n++
				}
				if ev.Kind == history.TimerCanceled && ev.SourceEventID == backoff.EventID {
					n += 10
				}
			}
			if n != 11 {
				t.Fatalf("want one attempt and the backoff abandoned: %s", kinds(h.stored))
			}
			if err := Verify(h.cfg, h.stored); err != nil {
				t.Fatal(err)
			}
		})
	}
}
