package providertest

import (
	"context"
	"errors"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Instance values (OrchestrationContext.SetValue) and waiting for a change
// (Client.WaitForStatusChange).
var e2eValueCases = []e2eCase{
	{"ValuesSetClearedAndKeptAcrossContinueAsNew", e2eValuesAcrossContinueAsNew},
	{"ValuesOverTheLimitsFailTheOrchestration", e2eValuesLimits},
	{"WaitForStatusChangeSeesValuesAndState", e2eWaitForStatusChange},
}

// stepper registers "Stepper": each "step" event it receives sets the
// value "step" to the event's number and the custom status to "at N";
// step 2 clears "first"; at 3 it continues as new (round 2), keeping its
// values, and reads them back; the round-2 "done" event ends it.
func stepper() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stepper", func(ctx *duroxide.OrchestrationContext, round int) (map[string]int, error) {
		if round == 2 {
			var step, first int
			okStep, err := ctx.GetValue("step", &step)
			if err != nil {
				return nil, err
			}
			okFirst, _ := ctx.GetValue("first", &first)
			if err := ctx.SetValue("round", 2); err != nil {
				return nil, err
			}
			if err := ctx.WaitForEvent("done").Await(nil); err != nil {
				return nil, err
			}
			out := map[string]int{}
			if okStep {
				out["step"] = step
			}
			if okFirst {
				out["first"] = first
			}
			return out, nil
		}
		if err := ctx.SetValue("first", true); err != nil {
			return nil, err
		}
		for {
			var n int
			if err := ctx.WaitForEvent("step").Await(&n); err != nil {
				return nil, err
			}
			if err := ctx.SetValue("step", n); err != nil {
				return nil, err
			}
			ctx.SetCustomStatus(n)
			if n == 2 {
				if err := ctx.ClearValue("first"); err != nil {
					return nil, err
				}
			}
			if n == 3 {
				return nil, ctx.ContinueAsNew(2)
			}
		}
	})
	return reg
}

// wantValues checks the values a client reads for id.
func (e *e2e) wantValues(id string, want map[string]string) {
	e.t.Helper()
	vs, err := e.c.ListValues(e.ctx, id)
	if err != nil {
		e.t.Fatalf("ListValues(%s): %v", id, err)
	}
	got := map[string]string{}
	for _, v := range vs {
		got[v.Key] = string(v.Value)
	}
	if len(got) != len(want) {
		e.t.Fatalf("values of %s = %v, want %v", id, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			e.t.Fatalf("values of %s = %v, want %v", id, got, want)
		}
	}
}

func e2eValuesAcrossContinueAsNew(e *e2e) {
	e.runtime(stepper())
	e.start("s", "Stepper", 1)
	e.waitEvents("s", history.ExternalSubscribed, 1)
	e.wantValues("s", map[string]string{"first": "true"})
	for n := 1; n <= 2; n++ {
		if err := e.c.RaiseEvent(e.ctx, "s", "step", n); err != nil {
			e.t.Fatal(err)
		}
		e.waitEvents("s", history.ExternalSubscribed, n+1)
	}
	e.wantValues("s", map[string]string{"step": "2"})
	var step int
	if ok, err := e.c.GetValue(e.ctx, "s", "step", &step); !ok || err != nil || step != 2 {
		e.t.Fatalf("GetValue(step) = %v, %v, %d; want 2", ok, err, step)
	}
	if ok, err := e.c.GetValue(e.ctx, "s", "first", nil); ok || err != nil {
		e.t.Fatalf("GetValue of a cleared key = %v, %v; want false", ok, err)
	}
	if _, err := e.c.GetValue(e.ctx, "nobody", "step", nil); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetValue of an unknown instance: %v, want ErrNotFound", err)
	}
	if err := e.c.RaiseEvent(e.ctx, "s", "step", 3); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("round 2 sets its value", func() bool {
		ok, err := e.c.GetValue(e.ctx, "s", "round", nil)
		return ok && err == nil
	})
	e.wantValues("s", map[string]string{"step": "3", "round": "2"})
	if err := e.c.RaiseEvent(e.ctx, "s", "done", nil); err != nil {
		e.t.Fatal(err)
	}
	var out map[string]int
	e.result("s", &out)
	if len(out) != 1 || out["step"] != 3 {
		e.t.Fatalf("round 2 read %v, want step 3 (the values the first execution left)", out)
	}
	e.wantValues("s", map[string]string{"step": "3", "round": "2"})
}

func e2eValuesLimits(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Many", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for i := range n {
			if err := ctx.SetValue(string(rune('a'+i)), i); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, "Big", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		return 0, ctx.SetValue("big", make([]byte, n))
	})
	duroxide.RegisterOrchestration(reg, "BadKey", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.SetValue("", 1)
		if !errors.Is(err, duroxide.ErrInvalidArgument) {
			return "", errors.New("SetValue with an empty key did not fail")
		}
		return "refused", nil
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.MaxValues, o.MaxValueBytes = 3, 100 })
	e.start("ok", "Many", 3)
	e.start("many", "Many", 4)
	e.start("big", "Big", 200)
	e.start("badkey", "BadKey", nil)
	var n int
	e.result("ok", &n)
	e.wantValues("ok", map[string]string{"a": "0", "b": "1", "c": "2"})
	for _, id := range []string{"many", "big"} {
		oe := e.failed(id)
		if !errors.Is(oe, duroxide.ErrLimitExceeded) {
			e.t.Fatalf("%s failed with %v, want ErrLimitExceeded", id, oe)
		}
		e.wantValues(id, map[string]string{}) // the failing turn committed none
	}
	var s string
	e.result("badkey", &s)
}

func e2eWaitForStatusChange(e *e2e) {
	e.runtime(stepper())
	e.start("w", "Stepper", 1)
	e.waitEvents("w", history.ExternalSubscribed, 1)
	st, err := e.c.GetStatus(e.ctx, "w")
	if err != nil {
		e.t.Fatal(err)
	}
	// Nothing changes: the wait ends with its context.
	short, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.c.WaitForStatusChange(short, "w", st.ETag); !errors.Is(err, context.Canceled) {
		e.t.Fatalf("WaitForStatusChange without a change: %v, want context.Canceled", err)
	}
	changed := make(chan *duroxide.Status, 1)
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, e2eTimeout)
		defer cancel()
		next, err := e.c.WaitForStatusChange(ctx, "w", st.ETag)
		if err != nil {
			e.t.Errorf("WaitForStatusChange: %v", err)
		}
		changed <- next
	}()
	if err := e.c.RaiseEvent(e.ctx, "w", "step", 1); err != nil {
		e.t.Fatal(err)
	}
	next := <-changed
	if next == nil || next.ETag == st.ETag || next.ValuesVersion <= st.ValuesVersion || string(next.CustomStatus) != "1" {
		e.t.Fatalf("after a step: %+v (before %+v)", next, st)
	}
	// A stale ETag returns at once; an unknown instance is not found.
	if again, err := e.c.WaitForStatusChange(e.ctx, "w", st.ETag); err != nil || again.ETag == st.ETag {
		e.t.Fatalf("WaitForStatusChange with a stale ETag: %+v, %v", again, err)
	}
	if _, err := e.c.WaitForStatusChange(e.ctx, "nobody", ""); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("WaitForStatusChange of an unknown instance: %v", err)
	}
}
