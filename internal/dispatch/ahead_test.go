package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// earlyStore hands out every turn as if fetched an hour before it is due
// (OrchestrationItem.DueAt), and records the abandons.
type earlyStore struct {
	*sqlite.Provider
	clock    clockwork.Clock
	fetched  chan struct{}
	mu       sync.Mutex
	abandons []provider.AbandonOptions
}

func (s *earlyStore) FetchOrchestrationItems(ctx context.Context, o provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	items, err := s.Provider.FetchOrchestrationItems(ctx, o)
	for _, it := range items {
		it.DueAt = s.clock.Now().Add(time.Hour)
	}
	if len(items) > 0 {
		s.fetched <- struct{}{}
	}
	return items, err
}

func (s *earlyStore) AbandonOrchestrationItem(ctx context.Context, token string, o provider.AbandonOptions) error {
	s.mu.Lock()
	s.abandons = append(s.abandons, o)
	s.mu.Unlock()
	return s.Provider.AbandonOrchestrationItem(ctx, token, o)
}

// TestHeldTurnWaitsForDueTime: a turn fetched before its messages are due
// is not decided until the clock reads its DueAt; a runtime that stops
// meanwhile gives it back, visible again at that time, without counting
// the delivery.
func TestHeldTurnWaitsForDueTime(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clock := clockwork.NewFakeClock()
	store := &earlyStore{Provider: db, clock: clock, fetched: make(chan struct{}, 1)}
	r, err := Start(store, activityRegistry{}, Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m := &provider.OrchestratorMessage{InstanceID: "a", Create: &provider.NewInstance{OrchestrationName: "O"},
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "a", ExecutionID: 1, Name: "O"}}
	if _, err := db.Enqueue(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	<-store.fetched
	// Held: the clock stands still an hour before the due time, so no
	// turn is decided, until the runtime stops and gives it back.
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h, err := db.ReadHistory(context.Background(), "a", 0); err != nil || len(h) != 0 {
		t.Fatalf("history %v (%v), want none: the turn ran before it was due", h, err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.abandons) != 1 || store.abandons[0].Delay != time.Hour || !store.abandons[0].IgnoreAttempt {
		t.Fatalf("abandons %+v, want one with Delay 1h and IgnoreAttempt", store.abandons)
	}
}
