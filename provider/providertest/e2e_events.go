package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// External events.
var e2eEventCases = []e2eCase{
	{"EventDelivered", e2eEventDelivered},
	{"EventRaisedBeforeWaitIsBuffered", e2eEventBuffered},
	{"EventsSameNameFIFO", e2eEventsFIFO},
	{"EventsByName", e2eEventsByName},
	{"EventWaitersSameName", e2eEventWaitersSameName},
	{"EventUnknownInstance", e2eEventUnknownInstance},
	{"EventToFinishedInstanceDropped", e2eEventToFinishedDropped},
	{"EventBeforeDelayedStart", e2eEventBeforeDelayedStart},
	{"EventsRaisedConcurrently", e2eEventsConcurrent},
	{"EventWaitSurvivesLostSelect", e2eEventWaitSurvivesLostSelect},
	{"MessageForUnknownInstanceDropped", e2eUnknownInstanceMessage},
	{"EventIdempotencyKeyDeliversOnce", e2eEventIdempotencyKey},
}

// e2eEventIdempotencyKey raises an event twice with one idempotency key:
// the second raise succeeds, reports a duplicate and delivers nothing, so
// the orchestration's second wait takes the next event. Another key, or
// the same key on another instance, delivers.
func e2eEventIdempotencyKey(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "TwoPays", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var a, b string
		if err := ctx.WaitForEvent("pay").Await(&a); err != nil {
			return "", err
		}
		err := ctx.WaitForEvent("pay").Await(&b)
		return a + b, err
	})
	e.runtime(reg)
	e.start("p1", "TwoPays", nil)
	e.start("p2", "TwoPays", nil)
	raise := func(id, data, key string) bool {
		e.t.Helper()
		dup, err := e.c.RaiseEventWithOptions(e.ctx, id, "pay", data, &duroxide.RaiseEventOptions{IdempotencyKey: key})
		if err != nil {
			e.t.Fatalf("RaiseEventWithOptions(%s, %s, key %q): %v", id, data, key, err)
		}
		return dup
	}
	mustEqual(e.t, "duplicate of the raises with keys k, k, k2 on p1 and k on p2",
		[]bool{raise("p1", "1", "k"), raise("p1", "2", "k"), raise("p1", "3", "k2"), raise("p2", "a", "k")},
		[]bool{false, true, false, false})
	// A key over the limit is refused, delivering nothing.
	long := strings.Repeat("x", duroxide.MaxEventKeyLength+1)
	if _, err := e.c.RaiseEventWithOptions(e.ctx, "p2", "pay", "bad", &duroxide.RaiseEventOptions{IdempotencyKey: long}); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("a key of %d bytes: %v, want ErrInvalidArgument", len(long), err)
	}
	if err := e.c.RaiseEvent(e.ctx, "p2", "pay", "b"); err != nil {
		e.t.Fatal(err)
	}
	var out1, out2 string
	e.result("p1", &out1)
	e.result("p2", &out2)
	mustEqual(e.t, "outputs", []string{out1, out2}, []string{"13", "ab"})
	if n := count(e.history("p1", 0), history.ExternalEvent); n != 2 {
		e.t.Fatalf("p1 received %d events, want 2", n)
	}
}

func e2eEventDelivered(e *e2e) {
	type payload struct {
		Amount int
		Note   string
	}
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Wait", func(ctx *duroxide.OrchestrationContext, _ any) (payload, error) {
		var p payload
		err := ctx.WaitForEvent("pay").Await(&p)
		return p, err
	})
	e.runtime(reg)
	e.start("wait", "Wait", nil)
	e.waitEvents("wait", history.ExternalSubscribed, 1)
	if st := e.status("wait"); st.State != duroxide.StateRunning {
		e.t.Fatalf("waiting instance is %s", st.State)
	}
	if err := e.c.RaiseEvent(e.ctx, "wait", "pay", payload{42, "tip"}); err != nil {
		e.t.Fatal(err)
	}
	var out payload
	e.result("wait", &out)
	if out != (payload{42, "tip"}) {
		e.t.Fatalf("output %+v", out)
	}
	h := e.history("wait", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.ExternalSubscribed, history.ExternalEvent, history.OrchestrationCompleted)
	if h[2].Name != "pay" || string(h[2].Data) != `{"Amount":42,"Note":"tip"}` {
		e.t.Fatalf("ExternalEvent %+v", h[2])
	}
}

func e2eEventBuffered(e *e2e) {
	g := newGate()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Late", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		if err := ctx.ScheduleActivity("Block", nil).Await(nil); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent("early").Await(&s)
		return s, err
	})
	duroxide.RegisterActivity(reg, "Block", func(ctx context.Context, _ any) (any, error) { return nil, g.wait(ctx) })
	e.runtime(reg)
	e.start("late", "Late", nil)
	e.waitEvents("late", history.ActivityScheduled, 1)
	if err := e.c.RaiseEvent(e.ctx, "late", "early", "buffered"); err != nil {
		e.t.Fatal(err)
	}
	// The event is recorded before anything waits for it.
	h := e.waitEvents("late", history.ExternalEvent, 1)
	if count(h, history.ExternalSubscribed) != 0 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
	g.open()
	var out string
	e.result("late", &out)
	if out != "buffered" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eEventsFIFO(e *e2e) {
	g := newGate()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Collect", func(ctx *duroxide.OrchestrationContext, n int) ([]int, error) {
		var out []int
		for i := range n {
			if i == 2 {
				// Half are raised while the code waits, half before.
				if err := ctx.ScheduleActivity("Block", nil).Await(nil); err != nil {
					return nil, err
				}
			}
			var v int
			if err := ctx.WaitForEvent("n").Await(&v); err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	duroxide.RegisterActivity(reg, "Block", func(ctx context.Context, _ any) (any, error) { return nil, g.wait(ctx) })
	e.runtime(reg)
	e.start("fifo", "Collect", 6)
	for i := 1; i <= 6; i++ {
		if err := e.c.RaiseEvent(e.ctx, "fifo", "n", i); err != nil {
			e.t.Fatal(err)
		}
	}
	e.waitEvents("fifo", history.ExternalEvent, 6)
	g.open()
	var out []int
	e.result("fifo", &out)
	if jsonOf(e.t, out) != `[1,2,3,4,5,6]` {
		e.t.Fatalf("events delivered in order %v", out)
	}
}

func e2eEventsByName(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Names", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		b := ctx.WaitForEvent("b")
		a := ctx.WaitForEvent("a")
		var sa, sb string
		if err := b.Await(&sb); err != nil {
			return nil, err
		}
		if err := a.Await(&sa); err != nil {
			return nil, err
		}
		return []string{sa, sb}, nil
	})
	e.runtime(reg)
	e.start("names", "Names", nil)
	e.waitEvents("names", history.ExternalSubscribed, 2)
	for _, n := range []string{"a", "c", "b"} {
		if err := e.c.RaiseEvent(e.ctx, "names", n, "to-"+n); err != nil {
			e.t.Fatal(err)
		}
	}
	var out []string
	e.result("names", &out)
	if jsonOf(e.t, out) != `["to-a","to-b"]` {
		e.t.Fatalf("output %v", out)
	}
}

func e2eEventWaitersSameName(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Two", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		first := ctx.WaitForEvent("x")
		second := ctx.WaitForEvent("x")
		var s1, s2 string
		if err := second.Await(&s2); err != nil {
			return nil, err
		}
		if err := first.Await(&s1); err != nil {
			return nil, err
		}
		return []string{s1, s2}, nil
	})
	e.runtime(reg)
	e.start("two", "Two", nil)
	e.waitEvents("two", history.ExternalSubscribed, 2)
	if err := e.c.RaiseEvent(e.ctx, "two", "x", "one"); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("two", history.ExternalEvent, 1)
	if st := e.status("two"); st.State != duroxide.StateRunning {
		e.t.Fatalf("instance %s after one of two events", st.State)
	}
	if err := e.c.RaiseEvent(e.ctx, "two", "x", "two"); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	e.result("two", &out)
	if jsonOf(e.t, out) != `["one","two"]` {
		e.t.Fatalf("the oldest wait must get the first event: %v", out)
	}
}

func e2eEventUnknownInstance(e *e2e) {
	e.runtime(duroxide.NewRegistry())
	err := e.c.RaiseEvent(e.ctx, "nobody", "x", 1)
	if !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("RaiseEvent to an unknown instance: %v, want ErrNotFound", err)
	}
	if _, err := e.c.GetStatus(e.ctx, "nobody"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("RaiseEvent created the instance: %v", err)
	}
}

func e2eEventToFinishedDropped(e *e2e) {
	e.runtime(helloRegistry())
	e.start("greet", "Greet", "x")
	e.wait("greet")
	before := e.history("greet", 0)
	// The client refuses the event; one that reaches the queue anyway (as
	// when it is raised while the instance ends) is dropped.
	var te *duroxide.InstanceTerminalError
	if err := e.c.RaiseEvent(e.ctx, "greet", "late", 0); !errors.As(err, &te) || te.State != duroxide.StateCompleted {
		e.t.Fatalf("RaiseEvent to a completed instance: %v, want *InstanceTerminalError (Completed)", err)
	}
	for i := range 3 {
		msg := &provider.OrchestratorMessage{InstanceID: "greet", Item: history.WorkItem{Kind: history.WorkExternalRaised,
			InstanceID: "greet", Name: "late", Data: json.RawMessage(fmt.Sprint(i))}}
		if _, err := e.store.Enqueue(e.ctx, msg); err != nil {
			e.t.Fatalf("enqueueing a late event: %v", err)
		}
	}
	e.fc.Advance(time.Minute) // the runtime's poll finds them (no in-process wake-up)
	e.drained()
	after := e.history("greet", 0)
	if len(after) != len(before) {
		e.t.Fatalf("events changed a completed history: %v -> %v", eventKinds(before), eventKinds(after))
	}
	if st := e.status("greet"); st.State != duroxide.StateCompleted {
		e.t.Fatalf("state %s", st.State)
	}
}

func e2eEventBeforeDelayedStart(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Later", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("hello").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.startWith("later", "Later", nil, &duroxide.StartOptions{StartAt: e2eStart.Add(time.Hour)})
	if err := e.c.RaiseEvent(e.ctx, "later", "hello", "early bird"); err != nil {
		e.t.Fatalf("RaiseEvent to a pending instance: %v", err)
	}
	if st := e.status("later"); st.State != duroxide.StatePending {
		e.t.Fatalf("delayed instance is %s before its start time", st.State)
	}
	e.fc.Advance(time.Hour)
	st := e.advanceUntilDone("later")
	var out string
	if err := st.Decode(&out); err != nil || out != "early bird" {
		e.t.Fatalf("output %q (%v)", out, err)
	}
}

func e2eEventsConcurrent(e *e2e) {
	const n = 25
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Sum", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		sum := 0
		for range n {
			var v int
			if err := ctx.WaitForEvent("add").Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	e.runtime(reg)
	e.start("sum", "Sum", n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.c.RaiseEvent(e.ctx, "sum", "add", i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	var out int
	e.result("sum", &out)
	if out != n*(n+1)/2 {
		e.t.Fatalf("sum %d, want %d: each event must be delivered exactly once", out, n*(n+1)/2)
	}
	if c := count(e.history("sum", 0), history.ExternalEvent); c != n {
		e.t.Fatalf("%d ExternalEvent events, want %d", c, n)
	}
}

func e2eEventWaitSurvivesLostSelect(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Remind", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		// One wait, raced against a reminder timer again and again: the
		// wait keeps running when the timer wins.
		approve := ctx.WaitForEvent("approve")
		reminders := 0
		for ctx.Select(approve, ctx.ScheduleTimer(time.Minute)) == 1 {
			reminders++
		}
		var who string
		if err := approve.Await(&who); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s after %d reminders", who, reminders), nil
	})
	e.runtime(reg)
	e.start("remind", "Remind", nil)
	for i := 1; i <= 2; i++ {
		e.waitEvents("remind", history.TimerCreated, i)
		e.fc.Advance(time.Minute)
		e.advanceTimersUntil("reminder fired", func() bool {
			h, err := e.c.GetHistory(e.ctx, "remind", 0)
			return err == nil && count(h, history.TimerFired) >= i
		})
	}
	e.waitEvents("remind", history.TimerCreated, 3)
	if err := e.c.RaiseEvent(e.ctx, "remind", "approve", "ada"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("remind", &out)
	if out != "ada after 2 reminders" {
		e.t.Fatalf("output %q", out)
	}
}

func e2eUnknownInstanceMessage(e *e2e) {
	e.runtime(helloRegistry())
	// A message addressed to an instance that does not exist (a purged
	// parent, a typo in a tool) is dropped; it must not block the queue.
	_, err := e.store.Enqueue(e.ctx, &provider.OrchestratorMessage{InstanceID: "ghost",
		Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "ghost", Name: "boo"}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.start("greet", "Greet", "after")
	var out string
	e.result("greet", &out)
	if out != "Hello, after!" {
		e.t.Fatalf("output %q", out)
	}
	e.advanceTimersUntil("the message for the unknown instance to be dropped", func() bool {
		d, err := e.admin().QueueDepths(e.ctx)
		return err == nil && d.OrchestratorReady+d.OrchestratorLocked+d.OrchestratorDelayed == 0
	})
	if _, err := e.c.GetStatus(e.ctx, "ghost"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("a message for an unknown instance created it: %v", err)
	}
}
