package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// dueStore records the turn fetches and, for the orchestrator queue,
// reports next visible times the test sets.
type dueStore struct {
	*sqlite.Provider
	mu      sync.Mutex
	cond    *sync.Cond
	prompts []bool      // Prompt of each turn fetch, in order
	asked   int         // orchestrator NextVisible calls
	next    []time.Time // what the next NextVisible calls return (then zero)
}

func (s *dueStore) FetchOrchestrationItems(ctx context.Context, o provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	s.mu.Lock()
	s.prompts = append(s.prompts, o.Prompt)
	s.cond.Broadcast()
	s.mu.Unlock()
	return s.Provider.FetchOrchestrationItems(ctx, o)
}

func (s *dueStore) NextVisible(ctx context.Context, q provider.Queue) (time.Time, error) {
	if q != provider.QueueOrchestrator {
		return s.Provider.NextVisible(ctx, q)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	s.cond.Broadcast()
	var t time.Time
	if len(s.next) > 0 {
		t, s.next = s.next[0], s.next[1:]
	}
	return t, nil
}

// await waits until cond holds (s.mu held while it is checked).
func (s *dueStore) await(cond func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		s.cond.Wait()
	}
}

// TestFetchAtDueTimeIsPrompt: the turn fetch the dispatcher makes when
// its sleep reaches the store's next visible time is prompt
// (provider.FetchOptions.Prompt), so that a store with group commit runs
// it at once; fetches woken by a notification, and the first one, are not.
func TestFetchAtDueTimeIsPrompt(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clock := clockwork.NewFakeClock()
	store := &dueStore{Provider: db, next: []time.Time{clock.Now().Add(time.Second)}}
	store.cond = sync.NewCond(&store.mu)
	r, err := Start(store, activityRegistry{}, Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()

	// The first fetch found nothing; the loop asked when work comes due
	// (in a second) and sleeps until then.
	store.await(func() bool { return store.asked == 1 })
	clock.Advance(time.Second)
	// It came due: a prompt fetch, then the loop asks again (nothing due
	// now: it sleeps until the poll interval or a notification).
	store.await(func() bool { return store.asked == 2 })
	// A notification wakes it: an ordinary fetch.
	start := &provider.OrchestratorMessage{InstanceID: "a", Create: &provider.NewInstance{OrchestrationName: "O"},
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "a", ExecutionID: 1, Name: "O"}}
	if _, err := db.Enqueue(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	store.await(func() bool { return len(store.prompts) == 3 })
	store.mu.Lock()
	got := append([]bool(nil), store.prompts...)
	store.mu.Unlock()
	if want := []bool{false, true, false}; !slices.Equal(got, want) {
		t.Fatalf("Prompt of the turn fetches = %v, want %v", got, want)
	}
}
