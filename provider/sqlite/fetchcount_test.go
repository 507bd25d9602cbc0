package sqlite

import (
	"encoding/json"
	"github.com/duroxide/duroxide-go/history"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// stmtCounter counts the writer statements p runs, by statement.
func stmtCounter(t *testing.T, p *Provider) func(stmtID) int {
	var mu sync.Mutex
	n := map[stmtID]int{}
	p.testHookStmt = func(id stmtID) {
		mu.Lock()
		n[id]++
		mu.Unlock()
	}
	t.Cleanup(func() { p.testHookStmt = nil })
	return func(id stmtID) int {
		mu.Lock()
		defer mu.Unlock()
		c := n[id]
		n[id] = 0
		return c
	}
}

// A fetch that asks for more than is queued reads the candidates once:
// fewer than the candidate query's limit means there are no more, so it
// does not ask again. One that finds more candidates than it wants, and
// loses none, does not ask again either.
func TestFetchReadsCandidatesOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "s.db"), nil)
	count := stmtCounter(t, p)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := p.Enqueue(ctx, benchStart(id)); err != nil {
			t.Fatal(err)
		}
	}
	items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Minute, Max: 8})
	if err != nil || len(items) != 3 {
		t.Fatalf("fetched %d turns (%v), want 3", len(items), err)
	}
	if n := count(sOrchCandidates); n != 1 {
		t.Fatalf("the turn fetch read candidates %d times, want 1", n)
	}
	if items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Minute, Max: 8}); err != nil || len(items) != 0 {
		t.Fatalf("fetched %d turns (%v), want none", len(items), err)
	}
	if n := count(sOrchCandidates); n != 1 {
		t.Fatalf("an empty turn fetch read candidates %d times, want 1", n)
	}

	if err := p.enqueueWork(ctx, benchActivity("a", 2), benchActivity("a", 3), benchActivity("b", 2)); err != nil {
		t.Fatal(err)
	}
	opts := provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 2,
		Session: &provider.SessionOptions{OwnerID: "w", LockTimeout: time.Minute}}
	leases, err := p.FetchWorkItems(ctx, opts)
	if err != nil || len(leases) != 2 {
		t.Fatalf("fetched %d activities (%v), want 2", len(leases), err)
	}
	opts.Max = 8
	leases, err = p.FetchWorkItems(ctx, opts)
	if err != nil || len(leases) != 1 {
		t.Fatalf("fetched %d activities (%v), want the third", len(leases), err)
	}
	if n := count(sWorkCandidatesSession); n != 2 {
		t.Fatalf("two activity fetches read candidates %d times, want 2", n)
	}
}

// A fused step (WorkAck.Then) that keeps a Running execution Running
// writes neither the execution's status nor the instance's: the store read
// both as Running in its quiet check. One that ends the execution writes
// both, as any turn ack.
func TestFusedStepKeepsRunningStatuses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "s.db"), nil)
	count := stmtCounter(t, p)
	if _, err := p.Enqueue(ctx, benchStart("f")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	if _, err := p.AckOrchestrationItem(ctx, benchTurn(it)); err != nil { // events 1-3, activity 3
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	step := func(act, after int64, then *provider.TurnAck) {
		t.Helper()
		leases, err := p.FetchWorkItems(ctx, benchWorkFetch)
		if err != nil || len(leases) != 1 || leases[0].ActivityID != act {
			t.Fatalf("fetched %v (%v), want activity %d", leases, err, act)
		}
		ack := benchCompletion(leases[0])
		ack.Then, ack.ThenAfter = then, after
		count(sUpsertExecution)
		count(sSetInstanceStatus)
		res, err := p.AckWorkItem(ctx, ack)
		if err != nil || res.Then == nil {
			t.Fatalf("fused step after event %d: %+v, %v; want it applied", after, res, err)
		}
	}
	status := func() (inst, exec string) {
		t.Helper()
		if err := p.readers.QueryRowContext(ctx, `SELECT i.status, e.status FROM instances AS i
JOIN executions AS e ON e.instance_id = i.instance_id AND e.execution_id = 1 WHERE i.instance_id = 'f'`).Scan(&inst, &exec); err != nil {
			t.Fatal(err)
		}
		return inst, exec
	}

	step(3, 3, &provider.TurnAck{ExecutionID: 1,
		History: []history.Event{
			{EventID: 4, Kind: history.ActivityCompleted, TimestampMs: now, SourceEventID: 3, Output: json.RawMessage(`{"charged":true}`)},
			{EventID: 5, Kind: history.ActivityScheduled, TimestampMs: now, Name: "Charge", Input: benchInput},
		},
		Metadata:    provider.ExecutionMetadata{Status: provider.StatusRunning},
		WorkerItems: []*provider.WorkerMessage{benchActivity("f", 5)},
	})
	if u, s := count(sUpsertExecution), count(sSetInstanceStatus); u != 0 || s != 0 {
		t.Fatalf("a step that keeps the execution Running wrote its status %d times and the instance's %d times, want none", u, s)
	}
	if inst, exec := status(); inst != "Running" || exec != "Running" {
		t.Fatalf("instance %s, execution %s after a running step, want Running", inst, exec)
	}

	step(5, 5, &provider.TurnAck{ExecutionID: 1,
		History: []history.Event{
			{EventID: 6, Kind: history.ActivityCompleted, TimestampMs: now, SourceEventID: 5, Output: json.RawMessage(`{"charged":true}`)},
			{EventID: 7, Kind: history.OrchestrationCompleted, TimestampMs: now, Output: json.RawMessage(`1`)},
		},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: json.RawMessage(`1`)},
	})
	if u, s := count(sUpsertExecution), count(sSetInstanceStatus); u != 1 || s != 1 {
		t.Fatalf("the final step wrote the execution %d times and the instance's status %d times, want 1 and 1", u, s)
	}
	if inst, exec := status(); inst != "Completed" || exec != "Completed" {
		t.Fatalf("instance %s, execution %s after the final step, want Completed", inst, exec)
	}
}
