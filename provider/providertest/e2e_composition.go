package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Sequencing, parallelism, fan-out/fan-in and Select.
var e2eCompositionCases = []e2eCase{
	{"Sequential", e2eSequential},
	{"ParallelInOrder", e2eParallelInOrder},
	{"FanOut150", e2eFanOut},
	{"FanInBySelect", e2eFanInBySelect},
	{"SelectFirstCompletionInHistoryWins", e2eSelectFirstInHistory},
	{"SelectTimeoutCancelsActivity", e2eSelectTimeoutCancelsActivity},
	{"SelectActivityBeatsTimer", e2eSelectActivityBeatsTimer},
	{"SelectAmongCompleted", e2eSelectAmongCompleted},
	{"TaskDone", e2eTaskDone},
	{"LongHistory", e2eLongHistory},
	{"InterleavedInstancesTinyCache", e2eInterleavedTinyCache},
}

func addOne(reg *duroxide.Registry) {
	duroxide.RegisterActivity(reg, "AddOne", func(_ context.Context, n int) (int, error) { return n + 1, nil })
}

func e2eSequential(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Seq", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for range 5 {
			if err := ctx.ScheduleActivity("AddOne", n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("seq", "Seq", 10)
	var out int
	e.result("seq", &out)
	if out != 15 {
		e.t.Fatalf("output %d, want 15", out)
	}
	h := e.history("seq", 0)
	e.checkHistory(h)
	want := []history.EventKind{history.OrchestrationStarted}
	for range 5 {
		want = append(want, history.ActivityScheduled, history.ActivityCompleted)
	}
	e.wantKinds(h, append(want, history.OrchestrationCompleted)...)
	for i, ev := range find(h, history.ActivityScheduled) {
		if string(ev.Input) != fmt.Sprint(10+i) {
			e.t.Fatalf("activity %d input %s, want %d", i, ev.Input, 10+i)
		}
	}
}

func e2eParallelInOrder(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Par", func(ctx *duroxide.OrchestrationContext, n int) ([]string, error) {
		ts := make([]*duroxide.Task, n)
		for i := range ts {
			ts[i] = ctx.ScheduleActivity("Slowish", i)
		}
		out := make([]string, n)
		for i, t := range ts {
			if err := t.Await(&out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	// Later activities finish first: results still come back in input order.
	gates := make([]*gate, 10)
	for i := range gates {
		gates[i] = newGate()
	}
	duroxide.RegisterActivity(reg, "Slowish", func(ctx context.Context, i int) (string, error) {
		if err := gates[i].wait(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("r%d", i), nil
	})
	e.runtime(reg)
	e.start("par", "Par", 10)
	e.waitEvents("par", history.ActivityScheduled, 10)
	for i := 9; i >= 0; i-- {
		gates[i].open()
		e.waitEvents("par", history.ActivityCompleted, 10-i)
	}
	var out []string
	e.result("par", &out)
	if jsonOf(e.t, out) != `["r0","r1","r2","r3","r4","r5","r6","r7","r8","r9"]` {
		e.t.Fatalf("output %v", out)
	}
	h := e.history("par", 0)
	e.checkHistory(h)
	// All ten were scheduled in the first turn, before any completion.
	for i := 1; i <= 10; i++ {
		if h[i].Kind != history.ActivityScheduled {
			e.t.Fatalf("event %d is %s; the ten activities must be scheduled together: %v", i+1, h[i].Kind, eventKinds(h))
		}
	}
	// Completions are recorded in the order they finished: r9 first.
	done := find(h, history.ActivityCompleted)
	if string(done[0].Output) != `"r9"` || string(done[9].Output) != `"r0"` {
		e.t.Fatalf("completion order %s ... %s", done[0].Output, done[9].Output)
	}
}

func e2eFanOut(e *e2e) {
	const n = 150
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "FanOut", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		ts := make([]*duroxide.Task, n)
		for i := range ts {
			ts[i] = ctx.ScheduleActivity("Square", i)
		}
		sum := 0
		for _, t := range ts {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	duroxide.RegisterActivity(reg, "Square", func(_ context.Context, i int) (int, error) { return i * i, nil })
	e.runtime(reg)
	e.start("fan", "FanOut", n)
	var out int
	e.result("fan", &out)
	want := 0
	for i := range n {
		want += i * i
	}
	if out != want {
		e.t.Fatalf("sum %d, want %d", out, want)
	}
	h := e.history("fan", 0)
	e.checkHistory(h)
	if count(h, history.ActivityScheduled) != n || count(h, history.ActivityCompleted) != n || len(h) != 2*n+2 {
		e.t.Fatalf("history has %d events: %d scheduled, %d completed", len(h), count(h, history.ActivityScheduled), count(h, history.ActivityCompleted))
	}
}

func e2eFanInBySelect(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "FanIn", func(ctx *duroxide.OrchestrationContext, n int) ([]int, error) {
		pending := make([]*duroxide.Task, n)
		for i := range pending {
			pending[i] = ctx.ScheduleActivity("Echo", i)
		}
		var order []int
		for len(pending) > 0 {
			k := ctx.Select(pending...)
			var v int
			if err := pending[k].Await(&v); err != nil {
				return nil, err
			}
			order = append(order, v)
			pending = append(pending[:k], pending[k+1:]...)
		}
		return order, nil
	})
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, i int) (int, error) { return i, nil })
	e.runtime(reg)
	e.start("fanin", "FanIn", 30)
	var order []int
	e.result("fanin", &order)
	// The order is the order of completions in history.
	h := e.history("fanin", 0)
	var want []int
	for _, ev := range find(h, history.ActivityCompleted) {
		var v int
		if err := json.Unmarshal(ev.Output, &v); err != nil {
			e.t.Fatalf("decoding %s: %v", ev.Output, err)
		}
		want = append(want, v)
	}
	if len(order) != 30 || jsonOf(e.t, order) != jsonOf(e.t, want) {
		e.t.Fatalf("select order %v, history order %v", order, want)
	}
}

func e2eSelectFirstInHistory(e *e2e) {
	ga, gb := newGate(), newGate()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Race", func(ctx *duroxide.OrchestrationContext, _ any) (int, error) {
		a := ctx.ScheduleActivity("Gate", "a")
		b := ctx.ScheduleActivity("Gate", "b")
		i := ctx.Select(a, b)
		// Recorded in history: a replay that picked differently would
		// schedule a different input and be caught as nondeterminism.
		if err := ctx.ScheduleActivity("Record", i).Await(nil); err != nil {
			return 0, err
		}
		if err := ctx.WaitForEvent("continue").Await(nil); err != nil {
			return 0, err
		}
		if j := ctx.Select(a, b); j != i {
			return 0, fmt.Errorf("second select returned %d, first %d", j, i)
		}
		if err := a.Await(nil); err != nil {
			return 0, err
		}
		return i, nil
	})
	duroxide.RegisterActivity(reg, "Gate", func(ctx context.Context, which string) (string, error) {
		g := ga
		if which == "b" {
			g = gb
		}
		return which, g.wait(ctx)
	})
	duroxide.RegisterActivity(reg, "Record", func(_ context.Context, i int) (int, error) { return i, nil })
	e.runtime(reg)
	e.start("race", "Race", nil)
	e.waitEvents("race", history.ActivityScheduled, 2)
	gb.open()
	e.waitEvents("race", history.ActivityScheduled, 3) // Record
	ga.open()
	e.waitEvents("race", history.ActivityCompleted, 3)
	if err := e.c.RaiseEvent(e.ctx, "race", "continue", nil); err != nil {
		e.t.Fatal(err)
	}
	var out int
	e.result("race", &out)
	if out != 1 {
		e.t.Fatalf("select returned %d, want 1 (b completed first)", out)
	}
	h := e.history("race", 0)
	e.checkHistory(h)
	ia, ib := indexOf(h, history.ActivityCompleted, 2), indexOf(h, history.ActivityCompleted, 3)
	if ia < 0 || ib < 0 || ib > ia {
		e.t.Fatalf("b's completion (%d) must precede a's (%d): %v", ib, ia, eventKinds(h))
	}
	rec := find(h, history.ActivityScheduled)[2]
	if rec.Name != "Record" || string(rec.Input) != "1" {
		e.t.Fatalf("Record scheduled as %+v", rec)
	}
}

func e2eSelectTimeoutCancelsActivity(e *e2e) {
	canceled := make(chan error, 1)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Timeout", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		work := ctx.ScheduleActivity("Hang", nil)
		timeout := ctx.ScheduleTimer(5 * time.Second)
		if ctx.Select(work, timeout) == 1 {
			return "timeout", nil
		}
		return "work", nil
	})
	duroxide.RegisterActivity(reg, "Hang", func(ctx context.Context, _ any) (string, error) {
		<-ctx.Done()
		select {
		case canceled <- context.Cause(ctx):
		default:
		}
		return "", ctx.Err()
	})
	e.runtime(reg)
	e.start("timeout", "Timeout", nil)
	e.waitEvents("timeout", history.TimerCreated, 1)
	e.eventually("the activity to start", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.WorkerLocked == 1
	})
	e.fc.Advance(5 * time.Second)
	st := e.advanceUntilDone("timeout")
	var out string
	if err := st.Decode(&out); err != nil || out != "timeout" {
		e.t.Fatalf("output %q (%v), want timeout", out, err)
	}
	select {
	case err := <-canceled:
		if err == nil {
			e.t.Fatal("activity context canceled without a cause")
		}
	case <-time.After(e2eTimeout):
		e.t.Fatal("the running activity's context was not canceled when its orchestration completed")
	}
	h := e.history("timeout", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.ActivityScheduled, history.TimerCreated, history.TimerFired,
		history.ActivityCancelRequested, history.OrchestrationCompleted)
	if h[2].FireAtMs != e2eStart.Add(5*time.Second).UnixMilli() {
		e.t.Fatalf("timer fires at %d, want start+5s", h[2].FireAtMs)
	}
	e.eventually("the canceled activity to leave the worker queue", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.WorkerLocked+d.WorkerReady+d.WorkerDelayed == 0
	})
}

func e2eSelectActivityBeatsTimer(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Quick", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		work := ctx.ScheduleActivity("Hello", "fast")
		timeout := ctx.ScheduleTimer(time.Hour)
		if ctx.Select(work, timeout) == 1 {
			return "timeout", nil
		}
		var s string
		err := work.Await(&s)
		return s, err
	})
	duroxide.RegisterActivity(reg, "Hello", func(_ context.Context, s string) (string, error) { return s, nil })
	e.runtime(reg)
	e.start("quick", "Quick", nil)
	var out string
	e.result("quick", &out)
	if out != "fast" {
		e.t.Fatalf("output %q, want fast", out)
	}
	before := e.history("quick", 0)
	// The abandoned timer fires later and changes nothing.
	e.fc.Advance(time.Hour + time.Second)
	e.advanceTimersUntil("the stale timer to be consumed", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.OrchestratorDelayed+d.OrchestratorReady+d.OrchestratorLocked == 0
	})
	after := e.history("quick", 0)
	if len(after) != len(before) || e.status("quick").State != duroxide.StateCompleted {
		e.t.Fatalf("a stale timer changed a completed instance: %v -> %v", eventKinds(before), eventKinds(after))
	}
}

func e2eSelectAmongCompleted(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Done", func(ctx *duroxide.OrchestrationContext, _ any) ([]int, error) {
		a := ctx.ScheduleActivity("AddOne", 1)
		b := ctx.ScheduleActivity("AddOne", 2)
		if err := b.Await(nil); err != nil {
			return nil, err
		}
		if err := a.Await(nil); err != nil {
			return nil, err
		}
		never := ctx.WaitForEvent("never")
		first := ctx.Select(never, a, b)
		// A completed task wins over one that never completes; between two
		// completed tasks, the one completed first in history.
		h := ctx.Select(never, b)
		return []int{first, h}, nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("done", "Done", nil)
	var out []int
	e.result("done", &out)
	h := e.history("done", 0)
	firstDone := h[indexOf(h, history.ActivityCompleted, 0)].SourceEventID
	want := 1 // a (event 2)
	if firstDone == 3 {
		want = 2
	}
	if len(out) != 2 || out[0] != want || out[1] != 1 {
		e.t.Fatalf("selects returned %v, want [%d 1] (first completion in history is event %d)", out, want, firstDone)
	}
}

func e2eTaskDone(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Done", func(ctx *duroxide.OrchestrationContext, _ any) ([]bool, error) {
		a := ctx.ScheduleActivity("AddOne", 1)
		t := ctx.ScheduleTimer(time.Minute)
		before := a.Done()
		if err := a.Await(nil); err != nil {
			return nil, err
		}
		return []bool{before, a.Done(), t.Done()}, nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("done", "Done", nil)
	var out []bool
	e.result("done", &out)
	if jsonOf(e.t, out) != `[false,true,false]` {
		e.t.Fatalf("Done() values %v", out)
	}
}

func e2eLongHistory(e *e2e) {
	const n = 60
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Long", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		v := 0
		for i := range n {
			if i%10 == 0 {
				ctx.SetCustomStatus(i)
			}
			if err := ctx.ScheduleActivity("AddOne", v).Await(&v); err != nil {
				return 0, err
			}
		}
		return v, nil
	})
	addOne(reg)
	e.runtime(reg)
	e.start("long", "Long", n)
	var out int
	e.result("long", &out)
	if out != n {
		e.t.Fatalf("output %d, want %d", out, n)
	}
	h := e.history("long", 0)
	e.checkHistory(h)
	if len(h) != 2*n+2+n/10 {
		e.t.Fatalf("history has %d events, want %d", len(h), 2*n+2+n/10)
	}
}

func e2eInterleavedTinyCache(e *e2e) {
	const n, rounds = 5, 3
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Rounds", func(ctx *duroxide.OrchestrationContext, id int) ([]int, error) {
		var got []int
		for range rounds {
			var v int
			if err := ctx.WaitForEvent("round").Await(&v); err != nil {
				return nil, err
			}
			if err := ctx.ScheduleActivity("AddOne", v*10+id).Await(&v); err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		return got, nil
	})
	addOne(reg)
	// With the cache on, two entries for five instances: every turn of an
	// instance finds its entry evicted or current, never a wrong one.
	e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		if !e.nocache {
			o.CacheSize = 2
		}
	})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
		e.start(ids[i], "Rounds", i)
	}
	for r := 1; r <= rounds; r++ {
		for _, id := range ids {
			e.waitEvents(id, history.ExternalSubscribed, r)
			if err := e.c.RaiseEvent(e.ctx, id, "round", r); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	for i, id := range ids {
		var got []int
		e.result(id, &got)
		want := fmt.Sprintf("[%d,%d,%d]", 10+i+1, 20+i+1, 30+i+1)
		if jsonOf(e.t, got) != want {
			e.t.Fatalf("%s: %v, want %s", id, got, want)
		}
	}
}
