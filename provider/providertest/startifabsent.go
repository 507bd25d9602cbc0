package providertest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// startIfAbsent is a start of id that creates it only when it is absent
// (provider.NewInstance.IfAbsent): signal-with-start sends it with an event.
func startIfAbsent(id string) *provider.OrchestratorMessage {
	m := startMsg(id)
	m.Create.IfAbsent = true
	return m
}

// startIfAbsentCases check signal-with-start in the store: a start-if-absent
// and an event in one Enqueue create the instance with the event queued
// behind its start, or, when the instance exists, queue only the event;
// concurrent calls for one new ID, through one store or two, create it once
// and queue every event.
var startIfAbsentCases = []testCase{
	{name: "CreatesTheInstanceWithTheEventQueued", run: func(e *env) {
		res := e.enqueue(startIfAbsent("a"), eventMsg("a", "paid", 1))
		mustEqual(e.t, "results for a new instance", res, []provider.EnqueueResult{{}, {}})
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages),
			[]history.WorkItemKind{history.WorkStartOrchestration, history.WorkExternalRaised})
		mustEqual(e.t, "instance status", it.Instance.Status, provider.StatusPending)
	}},
	{name: "TakenIDQueuesOnlyTheEvent", run: func(e *env) {
		e.enqueue(startMsg("a"))
		e.ackStart(e.fetchFor("a"))
		before := e.snapshot("a").Instances["a"]
		res := e.enqueue(startIfAbsent("a"), eventMsg("a", "paid", 1))
		mustEqual(e.t, "results for a taken ID", res, []provider.EnqueueResult{{Existed: true}, {}})
		mustEqual(e.t, "instance row", e.snapshot("a").Instances["a"], before)
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
	}},
	{name: "TakenIDSkipsTheLockCheck", run: func(e *env) {
		e.enqueue(lockedStart("a", "cust-1"))
		e.ackStart(e.fetchFor("a"))
		start := startIfAbsent("a")
		start.Create.Lock = &provider.LockRequest{Key: "cust-1", TTL: lockTTL}
		res := e.enqueue(start, eventMsg("a", "paid", 1))
		mustEqual(e.t, "results for the lock's own holder", res, []provider.EnqueueResult{{Existed: true}, {}})
		// An absent instance still meets the lock held by another.
		other := startIfAbsent("b")
		other.Create.Lock = &provider.LockRequest{Key: "cust-1", TTL: lockTTL}
		_, err := e.p.Enqueue(e.ctx, other, eventMsg("b", "paid", 1))
		var le *provider.LockedError
		if !errors.As(err, &le) || le.InstanceID != "a" {
			e.t.Fatalf("start-if-absent of b behind a's lock: %v, want *LockedError naming a", err)
		}
		it := e.fetchFor("a")
		mustEqual(e.t, "messages of a", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		e.fetchNone() // nothing was queued for b
	}},
	{name: "IdempotencyKeyNamesTheFoundInstance", run: func(e *env) {
		e.enqueue(startMsg("a"))
		start := startIfAbsent("a")
		start.Create.IdempotencyKey, start.Create.IdempotencyTTL = "delivery-1", idemRetention
		res := e.enqueue(start, eventMsg("a", "paid", 1))
		mustEqual(e.t, "results for a found instance with a key", res, []provider.EnqueueResult{{Existed: true}, {}})
		again := startIfAbsent("a")
		again.Create.IdempotencyKey, again.Create.IdempotencyTTL = "delivery-1", idemRetention
		_, err := e.p.Enqueue(e.ctx, again, eventMsg("a", "paid", 2))
		var de *provider.DuplicateStartError
		if !errors.As(err, &de) || de.InstanceID != "a" {
			e.t.Fatalf("repeated delivery: %v, want *DuplicateStartError naming a", err)
		}
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages),
			[]history.WorkItemKind{history.WorkStartOrchestration, history.WorkExternalRaised})
		mustEqual(e.t, "event data", string(it.Messages[1].Data), "1")
	}},
	{name: "EndedInstanceFailsTheCall", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "finish", 1))
		e.finish("a", provider.StatusCompleted)
		before := e.snapshot("a")
		e.wantErr(errOf(e.p.Enqueue(e.ctx, startIfAbsent("a"), eventMsg("a", "paid", 1))), provider.ErrInstanceEnded,
			"start-if-absent of a Completed instance")
		mustEqual(e.t, "store after a refused call", e.snapshot("a"), before)
		// A retained key still answers as the duplicate it is.
		e.createInstance("b")
		first := startIfAbsent("b")
		first.Create.IdempotencyKey, first.Create.IdempotencyTTL = "delivery-b", idemRetention
		e.enqueue(first, eventMsg("b", "paid", 1))
		e.finish("b", provider.StatusFailed)
		again := startIfAbsent("b")
		again.Create.IdempotencyKey, again.Create.IdempotencyTTL = "delivery-b", idemRetention
		var de *provider.DuplicateStartError
		if _, err := e.p.Enqueue(e.ctx, again, eventMsg("b", "paid", 1)); !errors.As(err, &de) || de.InstanceID != "b" {
			e.t.Fatalf("repeated delivery to an ended instance: %v, want *DuplicateStartError naming b", err)
		}
	}},
	{name: "WithOnExistsIsInvalid", run: func(e *env) {
		start := startIfAbsent("a")
		start.Create.OnExists = eventMsg("a", "x", 1)
		e.wantErr(errOf(e.p.Enqueue(e.ctx, start)), provider.ErrInvalidArgument, "IfAbsent with OnExists")
		e.fetchNone()
	}},
	{name: "ConcurrentCallsCreateOnceAndQueueEveryEvent", run: func(e *env) {
		concurrentStartIfAbsent(e, []provider.Provider{e.p}, nil)
	}},
	{name: "ConcurrentCallsThroughTwoStoresCreateOnce", run: func(e *env) {
		concurrentStartIfAbsent(e, []provider.Provider{e.p, e.sharing()}, nil)
	}},
	{name: "ConcurrentCallsWithALockCreateOnce", run: func(e *env) {
		concurrentStartIfAbsent(e, []provider.Provider{e.p, e.sharing()}, &provider.LockRequest{Key: "order-lock", TTL: lockTTL})
	}},
}

// concurrentStartIfAbsent sends start-if-absent and an event for one new
// instance from many goroutines through ps, and checks that exactly one
// call created it and every event is queued once, behind the one start.
func concurrentStartIfAbsent(e *env, ps []provider.Provider, lock *provider.LockRequest) {
	const n = 16
	var wg sync.WaitGroup
	results := make([][]provider.EnqueueResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			start := startIfAbsent("order-42")
			start.Create.Lock = lock
			results[i], errs[i] = ps[i%len(ps)].Enqueue(e.ctx, start, eventMsg("order-42", "update", i))
		})
	}
	wg.Wait()
	creators := 0
	for i := range n {
		e.noErr(errs[i], fmt.Sprintf("Enqueue %d", i))
		mustEqual(e.t, fmt.Sprintf("number of results of Enqueue %d", i), len(results[i]), 2)
		if !results[i][0].Existed {
			creators++
		}
	}
	mustEqual(e.t, "calls that created the instance", creators, 1)
	it := e.fetchFor("order-42")
	starts, events := 0, map[string]int{}
	for i, m := range it.Messages {
		switch m.Kind {
		case history.WorkStartOrchestration:
			if i != 0 {
				e.t.Fatalf("the start is message %d, want it first", i)
			}
			starts++
		case history.WorkExternalRaised:
			events[string(m.Data)]++
		}
	}
	mustEqual(e.t, "starts queued", starts, 1)
	mustEqual(e.t, "distinct events queued", len(events), n)
	for d, c := range events {
		mustEqual(e.t, "copies of event "+d, c, 1)
	}
}
