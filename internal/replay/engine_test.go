package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// harness runs turns of one execution the way the dispatcher does, either
// keeping the live execution (cache) or replaying every turn.
type harness struct {
	t      *testing.T
	cfg    Config
	live   *Execution
	cached bool
	stored []history.Event
	turn   int
}

func newHarness(t *testing.T, cached bool, fn Func) *harness {
	h := &harness{t: t, cfg: Config{InstanceID: "i", ExecutionID: 1, Func: fn}, cached: cached}
	t.Cleanup(func() {
		if h.live != nil {
			h.live.Close()
		}
	})
	return h
}

func (h *harness) run(msgs ...history.WorkItem) *TurnOutput {
	h.t.Helper()
	in := TurnInput{Now: t0.Add(time.Duration(h.turn) * time.Second), History: h.stored, Messages: msgs}
	if len(h.stored) == 0 {
		in.Started = &history.Event{Kind: history.OrchestrationStarted, Name: "O", Version: "1.0.0", Input: json.RawMessage(`"in"`)}
	}
	h.turn++
	x := h.live
	if x == nil || !h.cached {
		if x != nil {
			x.Close()
		}
		x = New(h.cfg)
		h.live = x
	}
	out, err := x.Turn(in)
	if err != nil {
		h.t.Fatalf("turn %d: %v", h.turn, err)
	}
	if out.Nondeterminism == nil {
		h.stored = append(h.stored, out.Delta...)
	}
	return out
}

func kinds(evs []history.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Kind))
	}
	return strings.Join(s, ",")
}

func both(t *testing.T, f func(t *testing.T, cached bool)) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) { f(t, cached) })
	}
}

func done(kind history.WorkItemKind, id int64, out string) history.WorkItem {
	w := history.WorkItem{Kind: kind, InstanceID: "i", ExecutionID: 1, ID: id}
	switch kind {
	case history.WorkActivityFailed, history.WorkSubOrchFailed:
		w.Error = &history.ErrorDetails{Kind: history.ErrorApplication, Message: out}
	case history.WorkTimerFired:
		w.FireAtMs = 1
	default:
		w.Output = json.RawMessage(out)
	}
	return w
}

func raise(name, data string) history.WorkItem {
	return history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: name, Data: json.RawMessage(data)}
}

func TestSequenceAndDedup(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("A", in, "")
			ctx.Await(a)
			out, _ := a.Result()
			b := ctx.ScheduleActivity("B", out, "")
			ctx.Await(b)
			out, _ = b.Result()
			return out, nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,ActivityScheduled" {
			t.Fatalf("turn 1: %s", got)
		}
		// Duplicate and stale completions are dropped.
		stale := done(history.WorkActivityCompleted, 2, `"x"`)
		stale.ExecutionID = 9
		out = h.run(done(history.WorkActivityCompleted, 2, `"a"`), done(history.WorkActivityCompleted, 2, `"a-again"`), stale)
		if got := kinds(out.Delta); got != "ActivityCompleted,ActivityScheduled" {
			t.Fatalf("turn 2: %s", got)
		}
		if string(out.Delta[1].Input) != `"a"` || out.Delta[1].EventID != 4 {
			t.Fatalf("B scheduled with %s as event %d", out.Delta[1].Input, out.Delta[1].EventID)
		}
		out = h.run(done(history.WorkActivityCompleted, 2, `"late duplicate"`))
		if len(out.Delta) != 0 || out.Result != Running {
			t.Fatalf("a duplicate made a turn: %s %v", kinds(out.Delta), out.Result)
		}
		out = h.run(done(history.WorkActivityCompleted, 4, `"b"`))
		if out.Result != Completed || string(out.Output) != `"b"` || kinds(out.Delta) != "ActivityCompleted,OrchestrationCompleted" {
			t.Fatalf("turn 4: %v %s %s", out.Result, out.Output, kinds(out.Delta))
		}
	})
}

func TestSelectFollowsHistoryOrder(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("A", nil, "")
			b := ctx.ScheduleTimer(time.Minute)
			c := ctx.WaitForEvent("go")
			return json.Marshal(ctx.Select(a, b, c))
		})
		h.run()
		// All three complete in one batch; the first in the batch wins.
		out := h.run(raise("go", "1"), done(history.WorkTimerFired, 3, ""), done(history.WorkActivityCompleted, 2, `0`))
		if string(out.Output) != "2" {
			t.Fatalf("Select = %s, want 2 (the event came first)", out.Output)
		}
	})
}

func TestEventsAreBufferedAndFIFO(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			ctx.Await(ctx.ScheduleTimer(time.Second))
			var got []string
			for i := 0; i < 3; i++ {
				e := ctx.WaitForEvent("x")
				ctx.Await(e)
				out, _ := e.Result()
				got = append(got, string(out))
			}
			return json.Marshal(strings.Join(got, ""))
		})
		h.run()
		// Two events arrive before anyone waits; a third after.
		h.run(raise("x", `1`), raise("x", `2`), raise("other", `9`))
		h.run(done(history.WorkTimerFired, 2, ""))
		out := h.run(raise("x", `3`))
		if out.Result != Completed || string(out.Output) != `"123"` {
			t.Fatalf("got %v %s", out.Result, out.Output)
		}
	})
}

func TestNowAndGUIDAreRecorded(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		var seen []string
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			now, id := ctx.Now(), ctx.NewGUID()
			seen = append(seen, fmt.Sprint(now.UnixMilli(), id))
			ctx.Await(ctx.ScheduleTimer(time.Hour))
			seen = append(seen, fmt.Sprint(ctx.Now().UnixMilli()))
			return nil, nil
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,NowRecorded,GUIDRecorded,TimerCreated" {
			t.Fatalf("turn 1: %s", got)
		}
		if out.Delta[3].FireAtMs != t0.Add(time.Hour).UnixMilli() {
			t.Fatalf("timer fires at %d", out.Delta[3].FireAtMs)
		}
		out = h.run(done(history.WorkTimerFired, 4, ""))
		if out.Result != Completed {
			t.Fatalf("result %v", out.Result)
		}
		if !cached && seen[0] != seen[1] {
			t.Fatalf("replay saw different recorded values: %q vs %q", seen[0], seen[1])
		}
		if last := seen[len(seen)-1]; last != fmt.Sprint(t0.Add(time.Second).UnixMilli()) {
			t.Fatalf("Now after the timer = %s, want the second turn's time", last)
		}
	})
}

func TestNondeterminismIsReported(t *testing.T) {
	h := newHarness(t, false, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleActivity("A", nil, ""))
		return nil, nil
	})
	h.run()
	// The code changes: it now schedules B first.
	h.cfg.Func = func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleActivity("B", nil, ""))
		return nil, nil
	}
	out := h.run(done(history.WorkActivityCompleted, 2, `1`))
	nd := out.Nondeterminism
	if nd == nil || nd.EventID != 2 || !strings.Contains(nd.Expected, `"A"`) || !strings.Contains(nd.Got, `"B"`) {
		t.Fatalf("got %+v", nd)
	}
	// A completion for a schedule that does not exist is reported too.
	h2 := newHarness(t, false, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleTimer(time.Second))
		return nil, nil
	})
	h2.run()
	out = h2.run(done(history.WorkActivityCompleted, 2, `1`))
	if out.Nondeterminism == nil {
		t.Fatal("an activity completion for a timer was accepted")
	}
}

func TestCancelEndsWithBreadcrumbsThenTerminal(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("A", nil, "")
			c := ctx.ScheduleSubOrchestration("C", "", "", nil)
			ctx.Await(a)
			ctx.Await(c)
			return nil, nil
		})
		h.run()
		out := h.run(history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Reason: "stop"})
		if out.Result != Canceled || out.Error.Kind != history.ErrorCanceled || out.Error.Message != "stop" {
			t.Fatalf("got %v %+v", out.Result, out.Error)
		}
		if got := kinds(out.Delta); got != "OrchestrationCancelRequested,ActivityCancelRequested,SubOrchestrationCancelRequested,OrchestrationFailed" {
			t.Fatalf("delta %s", got)
		}
		if len(out.CanceledActivities) != 1 || len(out.CanceledChildren) != 1 || out.CanceledChildren[0].InstanceID != "i::sub::3" {
			t.Fatalf("canceled %v %v", out.CanceledActivities, out.CanceledChildren)
		}
	})
}

func TestContinueAsNewCarriesUnconsumedEvents(t *testing.T) {
	h := newHarness(t, true, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleTimer(time.Second))
		return nil, ctx.ContinueAsNew(json.RawMessage(`2`), "2.0.0")
	})
	h.run()
	out := h.run(raise("a", `1`), done(history.WorkTimerFired, 2, ""), raise("b", `2`))
	if out.Result != ContinuedAsNew || string(out.ContinueAsNew.Input) != "2" || out.ContinueAsNew.Version != "2.0.0" {
		t.Fatalf("got %v %+v", out.Result, out.ContinueAsNew)
	}
	if len(out.Carried) != 2 || out.Carried[0].Name != "a" || out.Carried[1].Name != "b" {
		t.Fatalf("carried %+v", out.Carried)
	}
}

func TestRetryRunsInTheEngine(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			r := ctx.ScheduleActivityWithRetry("A", nil, "", RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second})
			other := ctx.WaitForEvent("go")
			ctx.Await(other) // retries progress while the code waits on something else
			ctx.Await(r)
			out, fail := r.Result()
			if fail != nil {
				return nil, errors.New(fail.Message)
			}
			return out, nil
		})
		h.run()
		out := h.run(done(history.WorkActivityFailed, 2, "first"))
		if got := kinds(out.Delta); got != "ActivityFailed,TimerCreated" {
			t.Fatalf("after a failure: %s", got)
		}
		if fire := out.Delta[1].FireAtMs; fire != t0.Add(2*time.Second).UnixMilli() {
			t.Fatalf("backoff timer fires at %d", fire)
		}
		out = h.run(done(history.WorkTimerFired, 5, ""))
		if got := kinds(out.Delta); got != "TimerFired,ActivityScheduled" {
			t.Fatalf("after the backoff: %s", got)
		}
		h.run(done(history.WorkActivityCompleted, 7, `"ok"`))
		out = h.run(raise("go", "1"))
		if out.Result != Completed || string(out.Output) != `"ok"` {
			t.Fatalf("got %v %s", out.Result, out.Output)
		}
	})
}

func TestRetryPolicyDelays(t *testing.T) {
	p := RetryPolicy{InitialInterval: time.Second, MaxInterval: 5 * time.Second, BackoffCoefficient: 3}
	for k, want := range map[int]time.Duration{1: time.Second, 2: 3 * time.Second, 3: 5 * time.Second, 40: 5 * time.Second} {
		if got := p.Delay(k); got != want {
			t.Errorf("Delay(%d) = %v, want %v", k, got, want)
		}
	}
}

func TestPanicFailsWithStack(t *testing.T) {
	h := newHarness(t, true, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		var m map[string]int
		//lint:ignore SA5000 the orchestration panics on purpose, with a runtime error
		m["boom"] = 1
		return nil, nil
	})
	out := h.run()
	if out.Result != Failed || out.Error.Type != "panic" || !strings.Contains(out.Error.Details, "engine_test.go") {
		t.Fatalf("got %v %+v", out.Result, out.Error)
	}
}

func TestLoggerIsSilentWhileReplaying(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	fn := func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Logger().Info("before")
		ctx.Await(ctx.ScheduleTimer(time.Second))
		ctx.Logger().Info("after", "replaying", ctx.IsReplaying())
		return nil, nil
	}
	h := newHarness(t, false, fn)
	h.cfg.Logger = logger
	h.run()
	h.run(done(history.WorkTimerFired, 2, ""))
	if got := strings.Count(buf.String(), "msg=before"); got != 1 {
		t.Fatalf("'before' logged %d times:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "replaying=false") {
		t.Fatalf("missing 'after':\n%s", buf.String())
	}
	_ = io.Discard
}

func TestStaleLiveExecution(t *testing.T) {
	x := New(Config{InstanceID: "i", ExecutionID: 1, Func: func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleTimer(time.Second))
		return nil, nil
	}})
	defer x.Close()
	out, err := x.Turn(TurnInput{Now: t0, Started: &history.Event{Kind: history.OrchestrationStarted, Name: "O"}})
	if err != nil {
		t.Fatal(err)
	}
	// The store holds more than the live execution knows (another node ran a turn).
	longer := append(append([]history.Event(nil), out.Delta...), history.Event{EventID: 3, Kind: history.TimerFired, SourceEventID: 2, FireAtMs: 1})
	if _, err := x.Turn(TurnInput{Now: t0, History: longer}); !errors.Is(err, ErrStale) {
		t.Fatalf("got %v, want ErrStale", err)
	}
}

// A loop that waits afresh each round, with a reminder timer, gets each
// event: waits that lost a Select do not take arrivals.
func TestWaitThatLostSelectDoesNotTakeEvents(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			reminders := 0
			for {
				ev := ctx.WaitForEvent("approve")
				if ctx.Select(ev, ctx.ScheduleTimer(time.Hour)) == 0 {
					out, _ := ev.Result()
					return json.Marshal(fmt.Sprintf("%s after %d reminders", out, reminders))
				}
				reminders++
			}
		})
		h.run()                                    // wait #2, timer #3
		h.run(done(history.WorkTimerFired, 3, "")) // reminder; wait #5, timer #6
		h.run(done(history.WorkTimerFired, 6, "")) // reminder; wait #8, timer #9
		out := h.run(raise("approve", `"yes"`))    // goes to the live wait, not the losers
		if out.Result != Completed || string(out.Output) != `"\"yes\" after 2 reminders"` {
			t.Fatalf("got %v %s", out.Result, out.Output)
		}
	})
}

// A wait created once and selected again each round takes the event too,
// including one that arrived while it was not being selected.
func TestReusedWaitAcrossSelects(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			ev := ctx.WaitForEvent("approve")
			for i := 0; ; i++ {
				timer := ctx.ScheduleTimer(time.Hour)
				if ctx.Select(ev, timer) == 0 {
					out, _ := ev.Result()
					return json.Marshal(fmt.Sprintf("%s in round %d", out, i))
				}
				if i == 0 {
					// Between selects: an activity the event may arrive during.
					ctx.Await(ctx.ScheduleActivity("Remind", nil, ""))
				}
			}
		})
		h.run()                                    // wait #2, timer #3
		h.run(done(history.WorkTimerFired, 3, "")) // activity #5
		h.run(raise("approve", `"yes"`))           // arrives while nobody selects the wait
		out := h.run(done(history.WorkActivityCompleted, 5, `null`))
		if out.Result != Completed || string(out.Output) != `"\"yes\" in round 1"` {
			t.Fatalf("got %v %s", out.Result, out.Output)
		}
	})
}

// OpenActivities counts the activities whose result the execution has not
// applied: scheduled ones, less those completed, failed or canceled, the
// same live or replayed.
func TestOpenActivities(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("A", in, "")
			b := ctx.ScheduleActivity("B", in, "")
			c := ctx.ScheduleActivity("C", in, "")
			ctx.Await(a)
			ctx.Cancel(c)
			ctx.Await(b)
			d := ctx.ScheduleActivity("D", in, "")
			ctx.Await(d)
			return nil, nil
		})
		for i, step := range []struct {
			msgs []history.WorkItem
			open int
		}{
			{nil, 3}, // A, B, C
			{[]history.WorkItem{done(history.WorkActivityCompleted, 2, `1`)}, 1},      // B (C canceled)
			{[]history.WorkItem{done(history.WorkActivityFailed, 3, `no`)}, 1},        // D
			{[]history.WorkItem{done(history.WorkActivityCompleted, 4, `"late"`)}, 1}, // C's late result changes nothing
		} {
			h.run(step.msgs...)
			if got := h.live.OpenActivities(); got != step.open {
				t.Fatalf("turn %d: %d open activities, want %d", i+1, got, step.open)
			}
		}
	})
}
