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
	prompts []bool // Prompt of each turn fetch, in order
	asked   int    // orchestrator NextVisible calls
	// next answers the next NextVisible calls, in order (then the zero
	// time: nothing queued).
	next []func() time.Time
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
	if len(s.next) == 0 {
		return time.Time{}, nil
	}
	f := s.next[0]
	s.next = s.next[1:]
	return f(), nil
}

// await waits until cond holds (s.mu held while it is checked); after a
// minute it fails t, naming the fetches so far.
func (s *dueStore) await(t *testing.T, cond func() bool) {
	t.Helper()
	timedOut := false
	stop := time.AfterFunc(time.Minute, func() {
		s.mu.Lock()
		timedOut = true
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if timedOut {
			t.Fatalf("waited a minute: %d NextVisible calls, turn fetches' Prompt %v", s.asked, s.prompts)
		}
		s.cond.Wait()
	}
}

// TestFetchAtDueTimeIsPrompt: the turn fetch the dispatcher makes when
// its sleep reaches the store's next visible time, or when it finds that
// time passed having learned of delayed work before, is prompt
// (provider.FetchOptions.Prompt), so that a store with group commit runs
// it at once; the first fetch, fetches woken by a notification, and
// fetches of work visible when sent are not.
func TestFetchAtDueTimeIsPrompt(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clock := clockwork.NewFakeClock()
	start := func(id string) {
		m := &provider.OrchestratorMessage{InstanceID: id, Create: &provider.NewInstance{OrchestrationName: "O"},
			Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "O"}}
		if _, err := db.Enqueue(context.Background(), m); err != nil {
			t.Error(err)
		}
	}
	store := &dueStore{Provider: db, next: []func() time.Time{
		func() time.Time { return clock.Now().Add(time.Second) }, // after fetch 1: sleep a second
		clock.Now, // after fetch 2: due already, nothing notified
		nil,       // after fetch 3: placeholder, see below
		func() time.Time { start("b"); return clock.Now() }, // after fetch 4: sent meanwhile, no delayed work known
	}}
	store.next[2] = func() time.Time { return time.Time{} }
	store.cond = sync.NewCond(&store.mu)
	r, err := Start(store, activityRegistry{}, Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()

	// Fetch 1 found nothing; the loop asked when work comes due (in a
	// second) and sleeps until then.
	store.await(t, func() bool { return store.asked >= 1 })
	clock.Advance(time.Second)
	// Fetch 2 at the due time; fetch 3 at once, as work is due already;
	// then the loop sleeps until a notification.
	store.await(t, func() bool { return store.asked >= 3 })
	// Fetch 4 on a notification; fetch 5 for what was sent meanwhile.
	start("a")
	store.await(t, func() bool { return store.asked >= 5 })
	store.mu.Lock()
	got := append([]bool(nil), store.prompts[:5]...)
	store.mu.Unlock()
	if want := []bool{false, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("Prompt of the turn fetches = %v, want %v", got, want)
	}
}
