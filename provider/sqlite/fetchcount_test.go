package sqlite

import (
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
