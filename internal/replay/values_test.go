package replay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// TestValuesAreRecordedAndReplayed: SetValue records ValueSet events, reads
// see the code's own changes at their position in replay as live, and
// ContinueAsNew hands the values on.
func TestValuesAreRecordedAndReplayed(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		var reads []string
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			v, ok := ctx.Value("k")
			reads = append(reads, string(v)+"/"+map[bool]string{true: "set", false: "unset"}[ok])
			ctx.SetValue("k", json.RawMessage(`1`))
			ctx.Await(ctx.ScheduleTimer(time.Second))
			v, _ = ctx.Value("k")
			reads = append(reads, string(v))
			ctx.SetValue("k", json.RawMessage(`2`))
			ctx.SetValue("gone", json.RawMessage(`true`))
			ctx.SetValue("gone", nil)
			return nil, ctx.ContinueAsNew(nil, "")
		})
		out := h.run()
		if got := kinds(out.Delta); got != "OrchestrationStarted,ValueSet,TimerCreated" {
			t.Fatalf("turn 1: %s", got)
		}
		out = h.run(done(history.WorkTimerFired, 3, ""))
		if got := kinds(out.Delta); got != "TimerFired,ValueSet,ValueSet,ValueSet,OrchestrationContinuedAsNew" {
			t.Fatalf("turn 2: %s", got)
		}
		if out.Result != ContinuedAsNew || len(out.Values) != 1 || string(out.Values["k"]) != "2" {
			t.Fatalf("values handed on: %v %v", out.Result, out.Values)
		}
		want := "/unset,1"
		if !cached {
			want = "/unset,/unset,1" // replayed from the start, it reads the same
		}
		if got := strings.Join(reads, ","); got != want {
			t.Fatalf("reads %s, want %s", got, want)
		}
	})
}

// TestValuesFromThePreviousExecution: an execution started with
// OrchestrationStarted.Values reads them.
func TestValuesFromThePreviousExecution(t *testing.T) {
	h := newHarness(t, false, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		v, _ := ctx.Value("k")
		return v, nil
	})
	x := New(h.cfg)
	defer x.Close()
	out, err := x.Turn(TurnInput{Now: t0, Started: &history.Event{Kind: history.OrchestrationStarted, Name: "O",
		Values: map[string]json.RawMessage{"k": json.RawMessage(`"kept"`)}}})
	if err != nil || out.Result != Completed || string(out.Output) != `"kept"` {
		t.Fatalf("got %v %s %v", out.Result, out.Output, err)
	}
}

// TestValueKeyChangeIsNondeterminism: replaying a SetValue of another key
// than history recorded is reported.
func TestValueKeyChangeIsNondeterminism(t *testing.T) {
	h := newHarness(t, false, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.SetValue("a", json.RawMessage(`1`))
		ctx.Await(ctx.ScheduleTimer(time.Second))
		return nil, nil
	})
	h.run()
	h.cfg.Func = func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.SetValue("b", json.RawMessage(`1`))
		ctx.Await(ctx.ScheduleTimer(time.Second))
		return nil, nil
	}
	out := h.run(done(history.WorkTimerFired, 3, ""))
	if nd := out.Nondeterminism; nd == nil || !strings.Contains(nd.Expected, `"a"`) || !strings.Contains(nd.Got, `"b"`) {
		t.Fatalf("got %+v", out.Nondeterminism)
	}
}

// TestValueLimits: a value over MaxValueBytes or a key beyond MaxValues
// stops the code with a LimitError; replacing or clearing a key is free.
func TestValueLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(ctx *Context)
		limit string
	}{
		{"too large", func(ctx *Context) { ctx.SetValue("k", json.RawMessage(`"`+strings.Repeat("x", 20)+`"`)) }, LimitValue},
		{"too many", func(ctx *Context) {
			for _, k := range []string{"a", "b", "a", "c"} {
				ctx.SetValue(k, json.RawMessage(`1`))
			}
		}, LimitValues},
		{"within", func(ctx *Context) {
			for _, k := range []string{"a", "b", "a"} {
				ctx.SetValue(k, json.RawMessage(`1`))
			}
			ctx.SetValue("a", nil)
			ctx.SetValue("c", json.RawMessage(`1`))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
				tc.set(ctx)
				return nil, nil
			})
			h.cfg.Limits = Limits{MaxValues: 2, MaxValueBytes: 10}
			out := h.run()
			var le *LimitError
			switch {
			case tc.limit == "" && out.Limit != nil:
				t.Fatalf("limit %v", out.Limit)
			case tc.limit != "" && (!errors.As(error(out.Limit), &le) || le.Limit != tc.limit):
				t.Fatalf("limit %v, want %s", out.Limit, tc.limit)
			}
		})
	}
}
