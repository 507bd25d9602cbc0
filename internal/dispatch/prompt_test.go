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
	// next answers the next NextVisible calls, in order (then then, or
	// the zero time when then is nil: nothing queued). Both are called
	// with mu held.
	next []func() time.Time
	then func() time.Time
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
		if s.then != nil {
			return s.then(), nil
		}
		return time.Time{}, nil
	}
	f := s.next[0]
	s.next = s.next[1:]
	return f(), nil
}

// newDueStore opens an in-memory SQLite store wrapped in a dueStore, and
// returns it with a function that starts an instance of orchestration O.
func newDueStore(t *testing.T) (*dueStore, func(id string)) {
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	start := func(id string) {
		m := &provider.OrchestratorMessage{InstanceID: id, Create: &provider.NewInstance{OrchestrationName: "O"},
			Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "O"}}
		if _, err := db.Enqueue(context.Background(), m); err != nil {
			t.Error(err)
		}
	}
	s := &dueStore{Provider: db}
	s.cond = sync.NewCond(&s.mu)
	return s, start
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
// it at once; the first fetch, fetches woken by a notification while no
// delayed work is near, and fetches of work visible when sent are not.
func TestFetchAtDueTimeIsPrompt(t *testing.T) {
	t.Parallel()
	store, start := newDueStore(t)
	clock := clockwork.NewFakeClock()
	store.next = []func() time.Time{
		func() time.Time { return clock.Now().Add(time.Second) }, // after fetch 1: sleep a second
		clock.Now, // after fetch 2: due already, nothing notified
		nil,       // after fetch 3: placeholder, see below
		func() time.Time { start("b"); return clock.Now() }, // after fetch 4: sent meanwhile, no delayed work known
	}
	store.next[2] = func() time.Time { return time.Time{} }
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

// TestFetchNearDueTimeIsPrompt: a fetch the dispatcher makes on a
// notification is prompt when delayed work the store reported comes due
// within promptLead (so that it does not wait for a group's commit while
// that work comes due), and not when the work is further off.
func TestFetchNearDueTimeIsPrompt(t *testing.T) {
	t.Parallel()
	store, start := newDueStore(t)
	clock := clockwork.NewFakeClock()
	far, near := clock.Now().Add(time.Second), clock.Now().Add(promptLead/2)
	store.then = func() time.Time { return far }
	r, err := Start(store, activityRegistry{}, Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()

	// The first fetch found nothing; work comes due in a second. A
	// notification wakes the loop long before: its fetch is not prompt.
	store.await(t, func() bool { return store.asked >= 1 })
	start("a")
	store.await(t, func() bool { return len(store.prompts) >= 2 })
	// From the next answer on, work comes due within promptLead: the
	// fetches after that answer, each woken by a notification (the clock
	// stands still), are prompt.
	answered := -1 // fetches made before the first such answer
	store.mu.Lock()
	store.then = func() time.Time {
		if answered < 0 {
			answered = len(store.prompts)
		}
		return near
	}
	store.mu.Unlock()
	start("b")
	store.await(t, func() bool { return answered >= 0 })
	start("c")
	store.await(t, func() bool { return len(store.prompts) > answered })
	store.mu.Lock()
	before, after := slices.Clone(store.prompts[:answered]), slices.Clone(store.prompts[answered:])
	store.mu.Unlock()
	if slices.Contains(before, true) || slices.Contains(after, false) {
		t.Fatalf("Prompt of the turn fetches = %v before work came within promptLead of due, %v after; want all false, then all true", before, after)
	}
}

// timerClock is a fake clock that records, for each timer armed on it,
// how long it runs and how many orchestrator NextVisible calls store had
// answered when it was armed.
type timerClock struct {
	*clockwork.FakeClock
	store  *dueStore
	timers [][2]int64 // {NextVisible calls answered, duration}
}

func (c *timerClock) NewTimer(d time.Duration) clockwork.Timer {
	c.store.mu.Lock()
	c.timers = append(c.timers, [2]int64{int64(c.store.asked), int64(d)})
	c.store.cond.Broadcast()
	c.store.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

// TestFetchWaitsForWorkDueSoonThatItCouldNotTakeEarly: when delayed work
// comes due within fetchAhead/2 and the fetch made at once for it took
// nothing (the turns held for their due time fill their share of the
// slots, so it could not take the work early), the dispatcher sleeps
// until the work comes due, for a prompt fetch then, instead of backing
// off from a millisecond on (which wakes it before the work is due, and
// later and later after it).
func TestFetchWaitsForWorkDueSoonThatItCouldNotTakeEarly(t *testing.T) {
	t.Parallel()
	store, _ := newDueStore(t)
	clock := &timerClock{FakeClock: clockwork.NewFakeClock(), store: store}
	soon := fetchAhead / 5
	due := clock.Now().Add(soon)
	store.then = func() time.Time { return due }
	r, err := Start(store, activityRegistry{}, Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()

	// Fetch 1 found nothing; the work comes due soon, so fetch 2 follows
	// at once and finds nothing either; then the loop sleeps: until the
	// due time (the clock stands still).
	var slept time.Duration
	store.await(t, func() bool {
		for _, tm := range clock.timers {
			if tm[0] == 2 && time.Duration(tm[1]) <= fetchAhead {
				slept = time.Duration(tm[1])
				return true
			}
		}
		return false
	})
	if slept != soon {
		t.Fatalf("after a fetch that took nothing, the loop slept %v; want %v, until the work comes due", slept, soon)
	}
	clock.Advance(soon)
	store.await(t, func() bool { return len(store.prompts) >= 3 })
	store.mu.Lock()
	got := slices.Clone(store.prompts[:3])
	store.mu.Unlock()
	if want := []bool{false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("Prompt of the turn fetches = %v, want %v (the third at the due time)", got, want)
	}
}
