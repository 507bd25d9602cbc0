package providertest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// hammerCases run goroutines that enqueue, fetch and ack turns and
// activities at once, through one store and through two stores sharing
// one database (two processes).
var hammerCases = []testCase{
	{name: "one_store_loses_and_repeats_nothing", run: func(e *env) {
		Hammer(e.t, []provider.Provider{e.p}, 8, 10)
	}},
	{name: "two_stores_never_lock_one_instance_twice", run: func(e *env) {
		Hammer(e.t, []provider.Provider{e.p, e.sharing()}, 6, 10)
	}},
}

// Hammer starts goroutines*perGoroutine instances through the stores ps
// (shared round robin by the goroutines) and has the goroutines run them
// to completion. An instance gets three messages (its start, its one
// activity's completion, an external event), in as many turns as the
// batches fall, and completes when it has seen all three. Hammer fails t
// on any error, on an instance held by two fetchers at once, on a history
// that does not match what was acked, on a lost or repeated message, and
// when the store's counts and queues do not show exactly the completed
// instances once the run is over. The stores' locks must not expire
// during the run (a frozen test clock, or the real one).
func Hammer(t *testing.T, ps []provider.Provider, goroutines, perGoroutine int) {
	t.Helper()
	ctx := t.Context()
	total := goroutines * perGoroutine
	var (
		mu       sync.Mutex
		held     = map[string]bool{}
		seen     = map[string]int{} // messages consumed per instance
		histLen  = map[string]int{} // events acked per instance
		done     int
		failures int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures++
		mu.Unlock()
		t.Errorf(format, args...)
	}
	finished := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done >= total || failures > 0
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			p := ps[g%len(ps)]
			for i := range perGoroutine {
				if _, err := p.Enqueue(ctx, HammerStart(fmt.Sprintf("h-%d-%d", g, i))); err != nil {
					fail("Enqueue: %v", err)
					return
				}
			}
			wake, stop := p.Subscribe(provider.QueueOrchestrator)
			defer stop()
			for !finished() {
				items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Minute, Max: 2})
				if err != nil {
					fail("FetchOrchestrationItems: %v", err)
					return
				}
				for _, it := range items {
					id := it.InstanceID
					mu.Lock()
					if held[id] {
						mu.Unlock()
						fail("instance %s fetched while held by another fetcher", id)
						return
					}
					held[id] = true
					prevSeen, prevLen := seen[id], histLen[id]
					mu.Unlock()
					if len(it.History) != prevLen {
						fail("instance %s: fetched history has %d events, %d were acked", id, len(it.History), prevLen)
						return
					}
					ack := HammerTurn(it, prevSeen)
					mu.Lock()
					// Clear the in-memory mark before the ack commits: it is
					// the store's lock that must be exclusive.
					delete(held, id)
					seen[id] = prevSeen + len(it.Messages)
					histLen[id] = prevLen + len(ack.History)
					if seen[id] > 3 {
						mu.Unlock()
						fail("instance %s consumed %d messages, want 3", id, seen[id])
						return
					}
					if seen[id] == 3 {
						done++
					}
					mu.Unlock()
					if _, err := p.AckOrchestrationItem(ctx, ack); err != nil {
						fail("ack %s: %v", id, err)
						return
					}
				}
				leases, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 2})
				if err != nil {
					fail("FetchWorkItems: %v", err)
					return
				}
				for _, l := range leases {
					if _, err := p.AckWorkItem(ctx, HammerCompletion(l)); err != nil {
						fail("AckWorkItem: %v", err)
						return
					}
					if _, err := p.Enqueue(ctx, HammerEvent(l.InstanceID)); err != nil {
						fail("Enqueue event: %v", err)
						return
					}
				}
				if len(items) == 0 && len(leases) == 0 {
					select {
					case <-wake:
					case <-time.After(200 * time.Millisecond): // a fallback only: wake-ups cover both queues
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	c, err := ps[0].Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Instances != int64(total) || c.ByStatus[provider.StatusCompleted] != int64(total) || c.HistoryEvents != int64(5*total) {
		t.Fatalf("counts = %+v, want %d completed instances with 5 events each", c, total)
	}
	d, err := ps[0].QueueDepths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *d != (provider.QueueDepths{}) {
		t.Fatalf("queues not empty after the run: %+v", d)
	}
}

// HammerTurn acks the messages of one turn of a hammer instance that had
// consumed seen messages before: the start schedules the activity, the
// completion and the event are recorded, and the third message completes
// the instance.
func HammerTurn(it *provider.OrchestrationItem, seen int) *provider.TurnAck {
	ts := time.Now().UnixMilli()
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}
	next := int64(len(it.History)) + 1
	add := func(ev history.Event) {
		ev.EventID, ev.TimestampMs = next, ts
		next++
		ack.History = append(ack.History, ev)
	}
	for _, m := range it.Messages {
		switch m.Kind {
		case history.WorkStartOrchestration:
			add(history.Event{Kind: history.OrchestrationStarted, Name: "T", Input: json.RawMessage(`1`)})
			add(history.Event{Kind: history.ActivityScheduled, Name: "A"})
			ack.Metadata = provider.ExecutionMetadata{OrchestrationName: "T", Status: provider.StatusRunning}
			ack.WorkerItems = []*provider.WorkerMessage{HammerActivity(it.InstanceID, 2)}
		case history.WorkActivityCompleted:
			add(history.Event{Kind: history.ActivityCompleted, SourceEventID: 2})
		case history.WorkExternalRaised:
			add(history.Event{Kind: history.ExternalEvent, Name: "go"})
		}
	}
	if seen+len(it.Messages) == 3 {
		add(history.Event{Kind: history.OrchestrationCompleted, Output: json.RawMessage(`"ok"`)})
		ack.Metadata.Status = provider.StatusCompleted
		ack.Metadata.Output = json.RawMessage(`"ok"`)
	}
	return ack
}

// HammerStart is the message that creates and starts hammer instance id
// (orchestration "T", input 1).
func HammerStart(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "T", Input: json.RawMessage(`1`)},
		Create:     &provider.NewInstance{OrchestrationName: "T", Input: json.RawMessage(`1`)},
	}
}

// HammerEvent is the external event "go" (data true) for instance id.
func HammerEvent(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: id, Name: "go", Data: json.RawMessage(`true`)},
	}
}

// HammerCompletion acks leased activity l with its completion (output 2).
func HammerCompletion(l *provider.WorkItemLease) *provider.WorkAck {
	return &provider.WorkAck{
		LockToken: l.LockToken,
		Completion: &provider.OrchestratorMessage{
			InstanceID: l.InstanceID,
			Item: history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: l.InstanceID,
				ExecutionID: l.ExecutionID, ID: l.ActivityID, Output: json.RawMessage(`2`)},
		},
	}
}

// HammerActivity is activity act ("A") of execution 1 of instance id.
func HammerActivity(id string, act int64) *provider.WorkerMessage {
	return &provider.WorkerMessage{
		InstanceID: id, ExecutionID: 1, ActivityID: act,
		Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: id, ExecutionID: 1, ID: act, Name: "A"},
	}
}

// MustFetch fetches one turn from p, failing t when there is none.
func MustFetch(t testing.TB, p provider.Provider) *provider.OrchestrationItem {
	t.Helper()
	it, err := provider.FetchOrchestrationItem(t.Context(), p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	return it
}

// RunFirstTurn starts the hammer instance id through p and acks its first
// turn (two events, one activity), failing t on any error. p must hold no
// other ready instance.
func RunFirstTurn(t testing.TB, p provider.Provider, id string) {
	t.Helper()
	if _, err := p.Enqueue(t.Context(), HammerStart(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AckOrchestrationItem(t.Context(), HammerTurn(MustFetch(t, p), 0)); err != nil {
		t.Fatal(err)
	}
}
