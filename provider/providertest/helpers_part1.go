package providertest

// Helpers of the Atomicity, Errors, InstanceCreation, InstanceLocking,
// LockExpiry and MultiExecution groups. Names start with p1 so they cannot
// collide with the helpers of the other groups.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// p1Admin returns the store's Admin capability, or nil when it has none.
// Cases use it for extra checks that must not decide whether they run.
func (e *env) p1Admin() provider.Admin {
	a, _ := e.p.(provider.Admin)
	return a
}

// p1InstanceState is everything observable about one instance.
type p1InstanceState struct {
	Known      bool                      // ReadHistory(id, 0) did not return ErrNotFound
	Current    []history.Event           // ReadHistory(id, 0)
	Executions map[int64][]history.Event // ReadHistory(id, n) for every readable n
	Info       *provider.InstanceInfo    // Admin only
	ExecInfos  []provider.ExecutionInfo  // Admin only
}

// p1State is what a case compares before and after a call that must write nothing.
type p1State struct {
	Instances map[string]p1InstanceState
	Depths    *provider.QueueDepths // Admin only
	Counts    *provider.Counts      // Admin only
}

// p1Snapshot reads the observable state of the named instances and, with
// Admin, the store-wide queue depths and counts. It does not fetch, so it
// changes nothing.
func (e *env) p1Snapshot(ids ...string) p1State {
	e.t.Helper()
	s := p1State{Instances: map[string]p1InstanceState{}}
	a := e.p1Admin()
	for _, id := range ids {
		var is p1InstanceState
		cur, err := e.p.ReadHistory(e.ctx, id, 0)
		switch {
		case errors.Is(err, provider.ErrNotFound):
		case err != nil:
			e.t.Fatalf("ReadHistory(%q, 0): %v", id, err)
		default:
			is.Known, is.Current = true, cur
			is.Executions = map[int64][]history.Event{}
			for x := int64(1); x <= 20; x++ {
				evs, err := e.p.ReadHistory(e.ctx, id, x)
				if errors.Is(err, provider.ErrNotFound) {
					break
				}
				if err != nil {
					e.t.Fatalf("ReadHistory(%q, %d): %v", id, x, err)
				}
				is.Executions[x] = evs
			}
		}
		if a != nil {
			info, err := a.GetInstance(e.ctx, id)
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				e.t.Fatalf("GetInstance(%q): %v", id, err)
			}
			is.Info = info
			execs, err := a.ListExecutions(e.ctx, id)
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				e.t.Fatalf("ListExecutions(%q): %v", id, err)
			}
			is.ExecInfos = execs
		}
		s.Instances[id] = is
	}
	if a != nil {
		d, err := a.QueueDepths(e.ctx)
		e.noErr(err, "QueueDepths")
		c, err := a.Counts(e.ctx)
		e.noErr(err, "Counts")
		s.Depths, s.Counts = d, c
	}
	return s
}

// p1Unchanged fails the case unless the store looks exactly as in before.
func (e *env) p1Unchanged(before p1State) {
	e.t.Helper()
	ids := make([]string, 0, len(before.Instances))
	for id := range before.Instances {
		ids = append(ids, id)
	}
	after := e.p1Snapshot(ids...)
	for _, id := range ids {
		mustEqual(e.t, fmt.Sprintf("state of instance %q", id), after.Instances[id], before.Instances[id])
	}
	mustEqual(e.t, "queue depths", after.Depths, before.Depths)
	mustEqual(e.t, "store counts", after.Counts, before.Counts)
}

// p1FetchMax fetches up to max items in one call.
func (e *env) p1FetchMax(max int) []*provider.OrchestrationItem {
	e.t.Helper()
	items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: max})
	e.noErr(err, "FetchOrchestrationItems")
	return items
}

// p1FetchEach fetches one item at a time until none is left and returns them by instance.
func (e *env) p1FetchEach() map[string]*provider.OrchestrationItem {
	e.t.Helper()
	got := map[string]*provider.OrchestrationItem{}
	for {
		it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
		e.noErr(err, "FetchOrchestrationItem")
		if it == nil {
			return got
		}
		if got[it.InstanceID] != nil {
			e.t.Fatalf("instance %q fetched twice while locked", it.InstanceID)
		}
		got[it.InstanceID] = it
	}
}

// p1Turn is the ack of a turn of execution exec that appends events and
// leaves the execution running.
func p1Turn(it *provider.OrchestrationItem, exec int64, events ...history.Event) *provider.TurnAck {
	return &provider.TurnAck{LockToken: it.LockToken, ExecutionID: exec, History: events, Metadata: runningMeta()}
}

// p1AckStart acks the first turn of a fetched instance: event 1, Running.
func (e *env) p1AckStart(it *provider.OrchestrationItem) {
	e.t.Helper()
	e.ack(p1Turn(it, 1, e.startedEvent()))
}

// p1ExternalEvent is an ExternalEvent history event.
func (e *env) p1ExternalEvent(id int64, name string) history.Event {
	return history.Event{EventID: id, Kind: history.ExternalEvent, TimestampMs: ms(e.clock.Now()), Name: name, Data: js(name)}
}

// p1TimerCreatedEvent is a TimerCreated history event.
func (e *env) p1TimerCreatedEvent(id int64, fireAt time.Time) history.Event {
	return history.Event{EventID: id, Kind: history.TimerCreated, TimestampMs: ms(e.clock.Now()), FireAtMs: ms(fireAt)}
}

// p1SubOrchScheduledEvent is a SubOrchestrationScheduled history event.
func (e *env) p1SubOrchScheduledEvent(id int64, child string) history.Event {
	return history.Event{
		EventID: id, Kind: history.SubOrchestrationScheduled, TimestampMs: ms(e.clock.Now()),
		Name: testOrch, Version: testVersion, ChildInstanceID: child, Input: js("child-in"),
	}
}

// p1StartedEvent is event 1 of an execution with the given input.
func (e *env) p1StartedEvent(input any) history.Event {
	ev := e.startedEvent()
	ev.Input = js(input)
	return ev
}

// p1InvalidEvent is an ActivityScheduled event without a name: Validate fails.
func (e *env) p1InvalidEvent(id int64) history.Event {
	ev := e.scheduledEvent(id)
	ev.Name = ""
	return ev
}

// p1InvalidMsg is an ExternalRaised message without a name: Validate fails.
func p1InvalidMsg(instanceID string) *provider.OrchestratorMessage {
	m := eventMsg(instanceID, "x", 1)
	m.Item.Name = ""
	return m
}

// p1ChildStartMsg starts child as a sub-orchestration of parent's
// execution parentExec, scheduled by event eventID; it creates the child.
func p1ChildStartMsg(parent string, parentExec, eventID int64, child string) *provider.OrchestratorMessage {
	m := startMsg(child)
	m.Item.Parent = &history.ParentRef{InstanceID: parent, ExecutionID: parentExec, EventID: eventID}
	m.Create.ParentInstanceID = parent
	m.Create.ParentExecutionID = parentExec
	return m
}

// p1SubOrchFailedMsg tells parent that its child (event eventID) failed to start.
func p1SubOrchFailedMsg(parent string, parentExec, eventID int64, child string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: parent,
		Item: history.WorkItem{
			Kind: history.WorkSubOrchFailed, InstanceID: parent, ExecutionID: parentExec, ID: eventID,
			ChildInstanceID: child,
			Error:           &history.ErrorDetails{Kind: history.ErrorApplication, Message: "instance " + child + " already exists"},
		},
	}
}

// p1ContinueAsNewMsg starts execution exec of instanceID with input.
func p1ContinueAsNewMsg(instanceID string, exec int64, input any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkContinueAsNew, InstanceID: instanceID, ExecutionID: exec,
			Name: testOrch, Version: testVersion, Input: js(input),
		},
	}
}

// p1ContinueAsNew runs the two turns of a continue-as-new of a running
// instance: execution exec appends OrchestrationContinuedAsNew as event
// lastEvent+1 with status ContinuedAsNew, then execution exec+1 starts with
// event 1 and input. The clock advances one second before each turn.
func (e *env) p1ContinueAsNew(instanceID string, exec, lastEvent int64, input any) {
	e.t.Helper()
	e.enqueue(eventMsg(instanceID, "restart", input))
	e.clock.Advance(time.Second)
	it := e.fetchFor(instanceID)
	e.ack(&provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: exec,
		History: []history.Event{{
			EventID: lastEvent + 1, Kind: history.OrchestrationContinuedAsNew,
			TimestampMs: ms(e.clock.Now()), Input: js(input),
		}},
		Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
		OrchestratorItems: []*provider.OrchestratorMessage{p1ContinueAsNewMsg(instanceID, exec+1, input)},
	})
	e.clock.Advance(time.Second)
	it = e.fetchFor(instanceID)
	mustEqual(e.t, "continue-as-new turn messages", kinds(it.Messages), []history.WorkItemKind{history.WorkContinueAsNew})
	meta := runningMeta()
	meta.Input = js(input)
	e.ack(&provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: exec + 1,
		History: []history.Event{e.p1StartedEvent(input)}, Metadata: meta,
	})
}

// p1Names returns the Name of each message (the event names of ExternalRaised messages).
func p1Names(msgs []history.WorkItem) []string {
	names := make([]string, len(msgs))
	for i, m := range msgs {
		names[i] = m.Name
	}
	return names
}

// p1EventKinds returns the kinds of evs.
func p1EventKinds(evs []history.Event) []history.EventKind {
	ks := make([]history.EventKind, len(evs))
	for i, ev := range evs {
		ks[i] = ev.Kind
	}
	return ks
}

// p1Permanent fails the case if err is marked retryable.
func (e *env) p1Permanent(err error, what string) {
	e.t.Helper()
	if provider.IsRetryable(err) {
		e.t.Fatalf("%s: error %v is retryable, want permanent", what, err)
	}
}

// p1Parallel runs f(0), ..., f(n-1) on n goroutines released at the same
// moment, and waits for all of them.
func p1Parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// p1FetchRetry fetches up to max items, retrying retryable errors.
func (e *env) p1FetchRetry(max int) ([]*provider.OrchestrationItem, error) {
	var items []*provider.OrchestrationItem
	err := retryErr(func() error {
		var err error
		items, err = e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: max})
		return err
	})
	return items, err
}

// p1Errors collects errors from goroutines; the case reports them afterwards.
type p1Errors struct {
	mu   sync.Mutex
	errs []error
}

func (c *p1Errors) add(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// check fails the case if any goroutine reported an error.
func (c *p1Errors) check(e *env) {
	e.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) > 0 {
		e.t.Fatalf("%d goroutine errors, first: %v", len(c.errs), c.errs[0])
	}
}
