package providertest

import (
	"errors"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Durable timers, driven by the fake clock.
var e2eTimerCases = []e2eCase{
	{"TimerFires", e2eTimerFires},
	{"TimerZeroAndNegative", e2eTimerZeroAndNegative},
	{"TimersFireInDueOrder", e2eTimersFireInDueOrder},
	{"TimerSleepLoop", e2eTimerSleepLoop},
	{"TimerVsEventEventWins", e2eTimerVsEventEventWins},
	{"TimerVsEventTimerWins", e2eTimerVsEventTimerWins},
	{"TimerDoesNotFireEarly", e2eTimerDoesNotFireEarly},
	{"TimerFanOut", e2eTimerFanOut},
}

func e2eTimerFires(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Sleep", func(ctx *duroxide.OrchestrationContext, _ any) ([]time.Time, error) {
		before := ctx.Now()
		if err := ctx.ScheduleTimer(10 * time.Minute).Await(nil); err != nil {
			return nil, err
		}
		return []time.Time{before, ctx.Now()}, nil
	})
	e.runtime(reg)
	e.start("sleep", "Sleep", nil)
	e.waitEvents("sleep", history.TimerCreated, 1)
	e.fc.Advance(10 * time.Minute)
	st := e.advanceUntilDone("sleep")
	var out []time.Time
	if err := st.Decode(&out); err != nil {
		e.t.Fatalf("Decode: %v (%s)", err, describeStatus(st))
	}
	if !out[0].Equal(e2eStart) || out[1].Sub(out[0]) < 10*time.Minute {
		e.t.Fatalf("Now before %s and after %s the 10m timer (start %s)", out[0], out[1], e2eStart)
	}
	h := e.history("sleep", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.NowRecorded, history.TimerCreated, history.TimerFired,
		history.NowRecorded, history.OrchestrationCompleted)
	want := e2eStart.Add(10 * time.Minute).UnixMilli()
	if h[2].FireAtMs != want || h[3].FireAtMs != want || h[3].SourceEventID != h[2].EventID {
		e.t.Fatalf("timer events %+v %+v, want fire at %d", h[2], h[3], want)
	}
}

func e2eTimerZeroAndNegative(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Instant", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		if err := ctx.ScheduleTimer(0).Await(nil); err != nil {
			return "", err
		}
		if err := ctx.ScheduleTimer(-5 * time.Second).Await(nil); err != nil {
			return "", err
		}
		return "ok", nil
	})
	e.runtime(reg)
	e.start("instant", "Instant", nil)
	var out string
	e.result("instant", &out) // no clock advance needed
	if out != "ok" {
		e.t.Fatalf("output %q", out)
	}
	h := e.history("instant", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.TimerCreated, history.TimerFired, history.TimerCreated,
		history.TimerFired, history.OrchestrationCompleted)
	for _, ev := range find(h, history.TimerCreated) {
		if ev.FireAtMs != e2eStart.UnixMilli() {
			e.t.Fatalf("timer %d fires at %d, want now (%d): a negative duration is zero", ev.EventID, ev.FireAtMs, e2eStart.UnixMilli())
		}
	}
}

func e2eTimersFireInDueOrder(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Order", func(ctx *duroxide.OrchestrationContext, _ any) ([]int, error) {
		ts := []*duroxide.Task{
			ctx.ScheduleTimer(3 * time.Minute),
			ctx.ScheduleTimer(1 * time.Minute),
			ctx.ScheduleTimer(2 * time.Minute),
		}
		idx := []int{0, 1, 2}
		var order []int
		for len(ts) > 0 {
			k := ctx.Select(ts...)
			order = append(order, idx[k])
			ts = append(ts[:k], ts[k+1:]...)
			idx = append(idx[:k], idx[k+1:]...)
		}
		return order, nil
	})
	e.runtime(reg)
	e.start("order", "Order", nil)
	e.waitEvents("order", history.TimerCreated, 3)
	// Step through time so each timer fires in its own turn.
	for i := 1; i <= 3; i++ {
		e.fc.Advance(time.Minute)
		e.advanceTimersUntil("timer to fire", func() bool {
			h, err := e.c.GetHistory(e.ctx, "order", 0)
			return err == nil && count(h, history.TimerFired) >= i
		})
	}
	var out []int
	e.result("order", &out)
	if jsonOf(e.t, out) != `[1,2,0]` {
		e.t.Fatalf("timers completed in order %v, want [1 2 0]", out)
	}
}

func e2eTimerSleepLoop(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Loop", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		v := 0
		for range n {
			if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
				return 0, err
			}
			if err := ctx.ScheduleActivity("AddOne", v).Await(&v); err != nil {
				return 0, err
			}
		}
		return v, nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("loop", "Loop", 4)
	for i := 1; i <= 4; i++ {
		e.waitEvents("loop", history.TimerCreated, i)
		e.fc.Advance(time.Minute)
		e.advanceTimersUntil("timer to fire", func() bool {
			h, err := e.c.GetHistory(e.ctx, "loop", 0)
			return err == nil && count(h, history.TimerFired) >= i
		})
	}
	st := e.wait("loop")
	var out int
	if err := st.Decode(&out); err != nil || out != 4 {
		e.t.Fatalf("output %d (%v)", out, err)
	}
	h := e.history("loop", 0)
	e.checkHistory(h)
	if count(h, history.TimerFired) != 4 || count(h, history.ActivityCompleted) != 4 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
	// Each timer is scheduled a minute after the previous one fired, at the
	// earliest.
	created := find(h, history.TimerCreated)
	for i := 1; i < len(created); i++ {
		if created[i].FireAtMs-created[i-1].FireAtMs < time.Minute.Milliseconds() {
			e.t.Fatalf("timer %d fires %dms after timer %d", i, created[i].FireAtMs-created[i-1].FireAtMs, i-1)
		}
	}
}

func approvalRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Approval", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		ev := ctx.WaitForEvent("approve")
		timeout := ctx.ScheduleTimer(time.Hour)
		if ctx.Select(ev, timeout) == 1 {
			return "timeout", nil
		}
		var who string
		if err := ev.Await(&who); err != nil {
			return "", err
		}
		return "approved by " + who, nil
	})
	return reg
}

func e2eTimerVsEventEventWins(e *e2e) {
	e.runtime(approvalRegistry())
	e.start("appr", "Approval", nil)
	e.waitEvents("appr", history.TimerCreated, 1)
	if err := e.c.RaiseEvent(e.ctx, "appr", "approve", "ada"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("appr", &out)
	if out != "approved by ada" {
		e.t.Fatalf("output %q", out)
	}
	h := e.history("appr", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.ExternalSubscribed, history.TimerCreated, history.ExternalEvent,
		history.OrchestrationCompleted)
}

func e2eTimerVsEventTimerWins(e *e2e) {
	e.runtime(approvalRegistry())
	e.start("appr", "Approval", nil)
	e.waitEvents("appr", history.TimerCreated, 1)
	e.fc.Advance(time.Hour)
	st := e.advanceUntilDone("appr")
	var out string
	if err := st.Decode(&out); err != nil || out != "timeout" {
		e.t.Fatalf("output %q (%v)", out, err)
	}
	before := e.history("appr", 0)
	// An event for a finished instance is refused.
	if err := e.c.RaiseEvent(e.ctx, "appr", "approve", "late"); !errors.Is(err, duroxide.ErrInstanceTerminal) {
		e.t.Fatalf("RaiseEvent to a completed instance: %v, want ErrInstanceTerminal", err)
	}
	e.drained()
	after := e.history("appr", 0)
	if len(after) != len(before) || e.status("appr").State != duroxide.StateCompleted {
		e.t.Fatalf("a late event changed a completed instance: %v -> %v", eventKinds(before), eventKinds(after))
	}
}

func e2eTimerDoesNotFireEarly(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Patient", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		t := ctx.ScheduleTimer(time.Hour)
		probe := ctx.WaitForEvent("probe")
		if ctx.Select(t, probe) == 1 {
			// A probe arrived: the timer must still be pending.
			if t.Done() {
				return "", errors.New("the timer fired before its time")
			}
			if err := t.Await(nil); err != nil {
				return "", err
			}
			return "probed then fired", nil
		}
		return "fired", nil
	})
	e.runtime(reg)
	e.start("patient", "Patient", nil)
	e.waitEvents("patient", history.TimerCreated, 1)
	e.fc.Advance(59 * time.Minute)
	if err := e.c.RaiseEvent(e.ctx, "patient", "probe", nil); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("patient", history.ExternalEvent, 1)
	if h := e.history("patient", 0); count(h, history.TimerFired) != 0 {
		e.t.Fatalf("timer fired early: %v", eventKinds(h))
	}
	e.fc.Advance(time.Minute)
	st := e.advanceUntilDone("patient")
	var out string
	if err := st.Decode(&out); err != nil || out != "probed then fired" {
		e.t.Fatalf("output %q (%v)", out, err)
	}
}

func e2eTimerFanOut(e *e2e) {
	const n = 50
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Timers", func(ctx *duroxide.OrchestrationContext, n int) ([]int, error) {
		ts := make([]*duroxide.Task, n)
		idx := make([]int, n)
		for i := range ts {
			ts[i] = ctx.ScheduleTimer(time.Duration(i%5+1) * time.Minute)
			idx[i] = i
		}
		var order []int
		for len(ts) > 0 {
			k := ctx.Select(ts...)
			order = append(order, idx[k])
			ts = append(ts[:k], ts[k+1:]...)
			idx = append(idx[:k], idx[k+1:]...)
		}
		return order, nil
	})
	e.runtime(reg)
	e.start("timers", "Timers", n)
	e.waitEvents("timers", history.TimerCreated, n)
	e.advanceTimersUntil("every timer fired", func() bool {
		st, err := e.c.GetStatus(e.ctx, "timers")
		return err == nil && st.State.IsTerminal()
	})
	var order []int
	e.result("timers", &order)
	// Earlier fire times first; timers due together in scheduling order.
	var want []int
	for d := range 5 {
		for i := d; i < n; i += 5 {
			want = append(want, i)
		}
	}
	if jsonOf(e.t, order) != jsonOf(e.t, want) {
		e.t.Fatalf("timers completed in order\n%v\nwant\n%v", order, want)
	}
}
