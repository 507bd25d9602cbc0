package providertest

import (
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"sync"
)

// ack commits one turn, failing the case on error, and returns its result.
func (e *env) ack(a *provider.TurnAck) provider.TurnResult {
	e.t.Helper()
	res, err := e.p.AckOrchestrationItem(e.ctx, a)
	if err != nil {
		e.t.Fatalf("AckOrchestrationItem: %v", err)
	}
	return res
}

// ackErr commits one turn and returns its error.
func (e *env) ackErr(a *provider.TurnAck) error {
	_, err := e.p.AckOrchestrationItem(e.ctx, a)
	return err
}

// ackWork completes one activity, failing the case on error, and returns
// its result.
func (e *env) ackWork(a *provider.WorkAck) provider.WorkResult {
	e.t.Helper()
	res, err := e.p.AckWorkItem(e.ctx, a)
	if err != nil {
		e.t.Fatalf("AckWorkItem: %v", err)
	}
	return res
}

// ackWorkErr completes one activity and returns its error.
func (e *env) ackWorkErr(a *provider.WorkAck) error {
	_, err := e.p.AckWorkItem(e.ctx, a)
	return err
}

// turnAck is the ack of a turn of execution exec that appends events and
// leaves the execution running.
func turnAck(it *provider.OrchestrationItem, exec int64, events ...history.Event) *provider.TurnAck {
	return &provider.TurnAck{LockToken: it.LockToken, ExecutionID: exec, History: events, Metadata: runningMeta()}
}

// ackStart acks the first turn of a fetched instance: event 1, Running.
func (e *env) ackStart(it *provider.OrchestrationItem) {
	e.t.Helper()
	e.ack(turnAck(it, 1, e.startedEvent("in")))
}

// nextEventID is the first event ID after it's history.
func nextEventID(it *provider.OrchestrationItem) int64 {
	var last int64
	for _, ev := range it.History {
		last = max(last, ev.EventID)
	}
	return last + 1
}

// ackConcurrently commits acks from one goroutine each, started together
// so that a store with group commit may commit them in one transaction,
// and returns their errors in order.
func (e *env) ackConcurrently(acks ...*provider.TurnAck) []error {
	return concurrently(len(acks), func(i int) error { return e.ackErr(acks[i]) })
}

// ackWorkConcurrently is ackConcurrently for worker acks.
func (e *env) ackWorkConcurrently(acks ...*provider.WorkAck) []error {
	return concurrently(len(acks), func(i int) error { return e.ackWorkErr(acks[i]) })
}

// concurrently runs f(0..n-1) on n goroutines released at once.
func concurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}
