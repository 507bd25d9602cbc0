package providertest

import (
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// lockTimeout is the lock duration every case passes to fetches.
const lockTimeout = 30 * time.Second

// testOrch and testVersion name the orchestration the cases pretend to run.
const (
	testOrch    = "TestOrch"
	testVersion = "1.0.0"
)

// js returns v as JSON.
func js(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ms returns t in epoch milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fetchOpts are the options most cases fetch with.
func fetchOpts() provider.FetchOptions {
	return provider.FetchOptions{LockTimeout: lockTimeout}
}

// workOpts are the options most worker cases fetch with (no session).
func workOpts() provider.WorkFetchOptions {
	return provider.WorkFetchOptions{LockTimeout: lockTimeout}
}

// admin returns the store's Admin capability, skipping the case if it has none.
func (e *env) admin() provider.Admin {
	e.t.Helper()
	a, ok := e.p.(provider.Admin)
	if !ok {
		e.t.Skip("provider does not implement provider.Admin")
	}
	return a
}

// startMsg is a StartOrchestration message that creates the instance.
func startMsg(instanceID string) *provider.OrchestratorMessage {
	input := js("input-" + instanceID)
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkStartOrchestration, InstanceID: instanceID, ExecutionID: 1,
			Name: testOrch, Version: testVersion, Input: input,
		},
		Create: &provider.NewInstance{OrchestrationName: testOrch, OrchestrationVersion: testVersion, Input: input},
	}
}

// startMsgNoCreate is a StartOrchestration message that does not create the instance row.
func startMsgNoCreate(instanceID string) *provider.OrchestratorMessage {
	m := startMsg(instanceID)
	m.Create = nil
	return m
}

// eventMsg is an ExternalRaised message for instanceID named name.
func eventMsg(instanceID, name string, data any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item:       history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: instanceID, Name: name, Data: js(data)},
	}
}

// completionMsg is an ActivityCompleted message for activity id of execution 1.
func completionMsg(instanceID string, id int64, result any) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		Item: history.WorkItem{
			Kind: history.WorkActivityCompleted, InstanceID: instanceID, ExecutionID: 1, ID: id, Output: js(result),
		},
	}
}

// timerMsg is a TimerFired message for timer id, visible at fireAt.
func timerMsg(instanceID string, id int64, fireAt time.Time) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		VisibleAt:  fireAt,
		Item: history.WorkItem{
			Kind: history.WorkTimerFired, InstanceID: instanceID, ExecutionID: 1, ID: id, FireAtMs: ms(fireAt),
		},
	}
}

// activityMsg is an ActivityExecute worker message for activity id of execution 1.
func activityMsg(instanceID string, id int64, session string) *provider.WorkerMessage {
	return &provider.WorkerMessage{
		InstanceID: instanceID, ExecutionID: 1, ActivityID: id, SessionID: session,
		Item: history.WorkItem{
			Kind: history.WorkActivityExecute, InstanceID: instanceID, ExecutionID: 1, ID: id,
			Name: "Act", Input: js(id), SessionID: session,
		},
	}
}

// startedEvent is event 1 of an execution.
func (e *env) startedEvent() history.Event {
	return history.Event{
		EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms(e.clock.Now()),
		Name: testOrch, Version: testVersion, Input: js("in"),
	}
}

// scheduledEvent is an ActivityScheduled event with the given id.
func (e *env) scheduledEvent(id int64) history.Event {
	return history.Event{
		EventID: id, Kind: history.ActivityScheduled, TimestampMs: ms(e.clock.Now()),
		Name: "Act", Input: js(id),
	}
}

// completedEvent is an OrchestrationCompleted event with the given id.
func (e *env) completedEvent(id int64, output any) history.Event {
	return history.Event{EventID: id, Kind: history.OrchestrationCompleted, TimestampMs: ms(e.clock.Now()), Output: js(output)}
}

// runningMeta is the metadata of a turn that leaves the execution running.
func runningMeta() provider.ExecutionMetadata {
	return provider.ExecutionMetadata{
		OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusRunning, Input: js("in"),
	}
}

// enqueue enqueues messages, failing the case on error.
func (e *env) enqueue(msgs ...*provider.OrchestratorMessage) {
	e.t.Helper()
	if err := e.p.Enqueue(e.ctx, msgs...); err != nil {
		e.t.Fatalf("Enqueue: %v", err)
	}
}

// enqueueWork enqueues worker messages, failing the case on error.
func (e *env) enqueueWork(msgs ...*provider.WorkerMessage) {
	e.t.Helper()
	if err := e.p.EnqueueWork(e.ctx, msgs...); err != nil {
		e.t.Fatalf("EnqueueWork: %v", err)
	}
}

// fetch fetches one orchestration item and fails the case if there is none.
func (e *env) fetch() *provider.OrchestrationItem {
	e.t.Helper()
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
	if err != nil {
		e.t.Fatalf("FetchOrchestrationItem: %v", err)
	}
	if it == nil {
		e.t.Fatal("FetchOrchestrationItem returned nothing, want an item")
	}
	return it
}

// fetchNone asserts that no orchestration item is fetchable.
func (e *env) fetchNone() {
	e.t.Helper()
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
	if err != nil {
		e.t.Fatalf("FetchOrchestrationItem: %v", err)
	}
	if it != nil {
		e.t.Fatalf("FetchOrchestrationItem returned instance %q with %d messages, want nothing", it.InstanceID, len(it.Messages))
	}
}

// fetchWork fetches one worker item without session and fails if there is none.
func (e *env) fetchWork() *provider.WorkItemLease {
	e.t.Helper()
	return e.fetchWorkWith(workOpts())
}

// fetchWorkWith fetches one worker item and fails if there is none.
func (e *env) fetchWorkWith(opts provider.WorkFetchOptions) *provider.WorkItemLease {
	e.t.Helper()
	w, err := provider.FetchWorkItem(e.ctx, e.p, opts)
	if err != nil {
		e.t.Fatalf("FetchWorkItem: %v", err)
	}
	if w == nil {
		e.t.Fatal("FetchWorkItem returned nothing, want an item")
	}
	return w
}

// fetchWorkNone asserts that no worker item is fetchable with opts.
func (e *env) fetchWorkNone(opts provider.WorkFetchOptions) {
	e.t.Helper()
	w, err := provider.FetchWorkItem(e.ctx, e.p, opts)
	if err != nil {
		e.t.Fatalf("FetchWorkItem: %v", err)
	}
	if w != nil {
		e.t.Fatalf("FetchWorkItem returned activity %d of %q, want nothing", w.ActivityID, w.InstanceID)
	}
}

// ack commits one turn, failing the case on error.
func (e *env) ack(a *provider.TurnAck) {
	e.t.Helper()
	if err := provider.AckOrchestrationItem(e.ctx, e.p, a); err != nil {
		e.t.Fatalf("AckOrchestrationItem: %v", err)
	}
}

// ackWork completes one activity, failing the case on error.
func (e *env) ackWork(a *provider.WorkAck) {
	e.t.Helper()
	if err := provider.AckWorkItem(e.ctx, e.p, a); err != nil {
		e.t.Fatalf("AckWorkItem: %v", err)
	}
}

// createInstance starts instanceID and acks its first turn (event 1,
// OrchestrationStarted, status Running). The instance is left unlocked with
// an empty queue.
func (e *env) createInstance(instanceID string) {
	e.t.Helper()
	e.enqueue(startMsg(instanceID))
	it := e.fetch()
	if it.InstanceID != instanceID {
		e.t.Fatalf("fetched %q, want %q", it.InstanceID, instanceID)
	}
	e.ack(&provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: 1,
		History:  []history.Event{e.startedEvent()},
		Metadata: runningMeta(),
	})
}

// readHistory reads an execution's history, failing the case on error.
func (e *env) readHistory(instanceID string, executionID int64) []history.Event {
	e.t.Helper()
	evs, err := e.p.ReadHistory(e.ctx, instanceID, executionID)
	if err != nil {
		e.t.Fatalf("ReadHistory(%q, %d): %v", instanceID, executionID, err)
	}
	return evs
}

// expireLocks advances the clock past every lock taken with lockTimeout.
func (e *env) expireLocks() { e.clock.Advance(lockTimeout + time.Millisecond) }

// wantErr fails the case unless errors.Is(err, target).
func (e *env) wantErr(err, target error, what string) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// noErr fails the case on a non-nil error.
func (e *env) noErr(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// eventIDs returns the IDs of evs.
func eventIDs(evs []history.Event) []int64 {
	ids := make([]int64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}

// kinds returns the kinds of msgs.
func kinds(msgs []history.WorkItem) []history.WorkItemKind {
	ks := make([]history.WorkItemKind, len(msgs))
	for i, m := range msgs {
		ks[i] = m.Kind
	}
	return ks
}

// equal compares two values by their JSON form; good enough for the
// plain data types of the suite.
func equal(a, b any) bool { return string(js(a)) == string(js(b)) }

// mustEqual fails the case unless got and want have the same JSON form.
func mustEqual(t testing.TB, what string, got, want any) {
	t.Helper()
	if !equal(got, want) {
		t.Fatalf("%s = %s, want %s", what, js(got), js(want))
	}
}

// fetchFor fetches one item and fails unless it is for instanceID.
func (e *env) fetchFor(instanceID string) *provider.OrchestrationItem {
	e.t.Helper()
	it := e.fetch()
	if it.InstanceID != instanceID {
		e.t.Fatalf("fetched instance %q, want %q", it.InstanceID, instanceID)
	}
	return it
}

// ackErr commits one turn and returns its error.
func (e *env) ackErr(a *provider.TurnAck) error {
	return provider.AckOrchestrationItem(e.ctx, e.p, a)
}

// lockLost fails the case unless err is ErrLockLost and not retryable.
func (e *env) lockLost(err error, what string) {
	e.t.Helper()
	e.wantErr(err, provider.ErrLockLost, what)
	if provider.IsRetryable(err) {
		e.t.Fatalf("%s: error %v is retryable, want permanent", what, err)
	}
}

// retry calls f until it returns a non-retryable result (at most 1000
// tries): under contention a store may answer with a retryable error
// (ErrBusy), which the contract allows and callers retry.
func retry[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range 1000 {
		if v, err = f(); !provider.IsRetryable(err) {
			return v, err
		}
		runtime.Gosched()
	}
	return v, err
}

// retryErr is retry for calls that return only an error.
func retryErr(f func() error) error {
	_, err := retry(func() (struct{}, error) { return struct{}{}, f() })
	return err
}
