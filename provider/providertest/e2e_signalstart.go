package providertest

import (
	"errors"
	"sync"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Signal-with-start (Client.SignalWithStart).
var e2eSignalStartCases = []e2eCase{
	{"SignalWithStartStartsWithTheEvent", e2eSignalStartNew},
	{"SignalWithStartDeliversToTheLiveInstance", e2eSignalStartLive},
	{"SignalWithStartRefusesAFinishedInstance", e2eSignalStartFinished},
	{"SignalWithStartConcurrentTwoRuntimes", e2eSignalStartConcurrent},
}

// orderFlow registers "Order": it takes events named "update" until it
// has seen n of them (its input), and returns their sum.
func orderFlow() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Order", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		sum := 0
		for range n {
			var v int
			if err := ctx.WaitForEvent("update").Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	return reg
}

func e2eSignalStartNew(e *e2e) {
	e.runtime(orderFlow())
	started, err := e.c.SignalWithStart(e.ctx, "order-1", "Order", 1, "update", 7, nil)
	if err != nil || !started {
		e.t.Fatalf("SignalWithStart = %v, %v; want started", started, err)
	}
	var sum int
	e.result("order-1", &sum)
	if sum != 7 {
		e.t.Fatalf("sum = %d, want 7", sum)
	}
	e.wantKinds(e.history("order-1", 0), history.OrchestrationStarted, history.ExternalEvent,
		history.ExternalSubscribed, history.OrchestrationCompleted)
}

func e2eSignalStartLive(e *e2e) {
	e.runtime(orderFlow())
	e.start("order-1", "Order", 2)
	e.waitEvents("order-1", history.ExternalSubscribed, 1)
	for _, v := range []int{3, 4} {
		started, err := e.c.SignalWithStart(e.ctx, "order-1", "Order", 99, "update", v, nil)
		if err != nil || started {
			e.t.Fatalf("SignalWithStart to a live instance = %v, %v; want delivered without a start", started, err)
		}
	}
	var sum int
	e.result("order-1", &sum)
	if sum != 7 {
		e.t.Fatalf("sum = %d, want 7", sum)
	}
}

func e2eSignalStartFinished(e *e2e) {
	e.runtime(orderFlow())
	if _, err := e.c.SignalWithStart(e.ctx, "order-1", "Order", 1, "update", 1, nil); err != nil {
		e.t.Fatal(err)
	}
	e.wait("order-1")
	_, err := e.c.SignalWithStart(e.ctx, "order-1", "Order", 1, "update", 1, nil)
	var te *duroxide.InstanceTerminalError
	if !errors.As(err, &te) || !errors.Is(err, duroxide.ErrInstanceTerminal) {
		e.t.Fatalf("SignalWithStart to a finished instance: %v, want *InstanceTerminalError", err)
	}
	// A repeated delivery key delivers nothing.
	opts := &duroxide.StartOptions{IdempotencyKey: "evt-1"}
	if _, err := e.c.SignalWithStart(e.ctx, "order-2", "Order", 2, "update", 1, opts); err != nil {
		e.t.Fatal(err)
	}
	_, err = e.c.SignalWithStart(e.ctx, "order-2", "Order", 2, "update", 1, opts)
	var dup *duroxide.DuplicateStartError
	if !errors.As(err, &dup) || dup.InstanceID != "order-2" {
		e.t.Fatalf("repeated delivery key: %v, want *DuplicateStartError naming order-2", err)
	}
	if _, err := e.c.SignalWithStart(e.ctx, "order-2", "Order", 2, "update", 5, nil); err != nil {
		e.t.Fatal(err)
	}
	var sum int
	e.result("order-2", &sum)
	if sum != 6 {
		e.t.Fatalf("sum = %d, want 6 (the repeated delivery counted once)", sum)
	}
}

// e2eSignalStartConcurrent sends n signal-with-starts for one new ID at
// once through two clients, with two runtimes serving the store: one
// call starts the instance and it sees all n events.
func e2eSignalStartConcurrent(e *e2e) {
	const n = 12
	e.runtime(orderFlow())
	e.runtime(orderFlow())
	clients := []*duroxide.Client{e.c, duroxide.NewClient(e.store)}
	var wg sync.WaitGroup
	started := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			opts := &duroxide.StartOptions{LockKey: "customer-9"}
			started[i], errs[i] = clients[i%2].SignalWithStart(e.ctx, "order-9", "Order", n, "update", i+1, opts)
		})
	}
	wg.Wait()
	starters := 0
	for i := range n {
		if errs[i] != nil {
			e.t.Fatalf("SignalWithStart %d: %v", i, errs[i])
		}
		if started[i] {
			starters++
		}
	}
	if starters != 1 {
		e.t.Fatalf("%d calls started the instance, want 1", starters)
	}
	var sum int
	e.result("order-9", &sum)
	if want := n * (n + 1) / 2; sum != want {
		e.t.Fatalf("sum = %d, want %d (every event once)", sum, want)
	}
	got := 0
	for _, ev := range e.history("order-9", 0) {
		if ev.Kind == history.ExternalEvent {
			got++
		}
	}
	if got != n {
		e.t.Fatalf("%d ExternalEvent events, want %d", got, n)
	}
}
