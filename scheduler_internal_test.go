package duroxide

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// flakyScheduleStore fails its first ListSchedules calls, and reports
// every call on calls.
type flakyScheduleStore struct {
	*sqlite.Provider
	fails atomic.Int32
	calls chan struct{}
}

func (s *flakyScheduleStore) ListSchedules(ctx context.Context) ([]provider.Schedule, error) {
	defer func() {
		select {
		case s.calls <- struct{}{}:
		default:
		}
	}()
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("store unavailable (test)")
	}
	return s.Provider.ListSchedules(ctx)
}

// TestSchedulerRetriesAfterStoreErrors: a scheduler pass that fails is
// retried after a backoff of the runtime's clock, and the schedule then
// fires on time.
func TestSchedulerRetriesAfterStoreErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, fc, start := fakeClockStore(t)
	store := &flakyScheduleStore{Provider: db, calls: make(chan struct{}, 1)}
	store.fails.Store(2)
	c := NewClientWithOptions(store, &ClientOptions{Clock: fc})
	first := start.Add(time.Minute)
	if _, err := c.CreateSchedule(ctx, "s", &ScheduleDefinition{Interval: time.Hour, Start: first, Orchestration: "o",
		Overlap: OverlapAllow}, false); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	RegisterOrchestration(reg, "o", func(ctx *OrchestrationContext, in json.RawMessage) (string, error) { return "ok", nil })
	rt, err := StartRuntime(ctx, store, reg, &RuntimeOptions{Clock: fc, Logger: slog.New(slog.DiscardHandler), LockCleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })

	// Two failing passes, then one that succeeds: each retry waits for
	// the clock (1s, then 2s). Advance it until the third call is made.
	limit := time.After(20 * time.Second)
	for n := 0; n < 3; {
		select {
		case <-store.calls:
			n++
		case <-time.After(20 * time.Millisecond):
			fc.Advance(time.Second)
		case <-limit:
			t.Fatalf("the scheduler made %d ListSchedules calls, want 3", n)
		}
	}
	// The fire comes when its time does (or, on a loaded machine where the
	// retries took longer than the minute, as its catch-up).
	if d := first.Sub(fc.Now()); d > 0 {
		fc.Advance(d)
	}
	for {
		st, err := c.GetStatus(ctx, fireInstanceID("s", first))
		if err == nil && st.State == StateCompleted {
			break
		}
		select {
		case <-store.calls:
		case <-limit:
			t.Fatalf("the fire at %v did not complete: %v, %v", first, st, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestListSchedulesPage pages through schedules by ID: limits, the cursor,
// a huge limit capped, and bad input refused.
func TestListSchedulesPage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := NewClient(db)
	ids := []string{"a", "b", "c", "d", "e"}
	for _, id := range ids {
		if _, err := c.CreateSchedule(ctx, id, &ScheduleDefinition{Cron: "@daily", Orchestration: "o"}, false); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	opts := &ScheduleListOptions{Limit: 2}
	pages := 0
	for {
		page, err := c.ListSchedulesPage(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Schedules) > 2 {
			t.Fatalf("page of %d, want at most 2", len(page.Schedules))
		}
		for _, s := range page.Schedules {
			got = append(got, s.ID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	if pages != 3 || len(got) != len(ids) {
		t.Fatalf("%d pages of %v, want 3 pages of %v", pages, got, ids)
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("paged %v, want %v", got, ids)
		}
	}
	all, err := c.ListSchedulesPage(ctx, &ScheduleListOptions{Limit: 1 << 30})
	if err != nil || len(all.Schedules) != len(ids) || all.NextCursor != "" {
		t.Fatalf("huge limit: %+v, %v", all, err)
	}
	def, err := c.ListSchedulesPage(ctx, nil)
	if err != nil || len(def.Schedules) != len(ids) {
		t.Fatalf("default page: %+v, %v", def, err)
	}
	for _, bad := range []*ScheduleListOptions{{Limit: -1}, {Cursor: "nonsense"}, {Cursor: "s1.!!"}, {Cursor: "s1."}} {
		if _, err := c.ListSchedulesPage(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("ListSchedulesPage(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// crashAfterFireStore commits each fire and then fails it, as a runtime
// that crashed between the fire's commit and whatever it did next would.
type crashAfterFireStore struct {
	*sqlite.Provider
	crashes atomic.Int32
}

func (s *crashAfterFireStore) FireSchedules(ctx context.Context, schedules []provider.ScheduleDue) ([]bool, error) {
	fired, err := s.Provider.FireSchedules(ctx, schedules)
	if err == nil && slices.Contains(fired, true) {
		s.crashes.Add(1)
		return nil, errors.New("crashed after the fire committed (test)")
	}
	return fired, err
}

func (s *crashAfterFireStore) FireSchedule(ctx context.Context, id string, due, next time.Time, fires []provider.ScheduleStart) (bool, error) {
	fired, err := s.FireSchedules(ctx, []provider.ScheduleDue{{ID: id, Due: due, Next: next, Fires: fires}})
	if err != nil {
		return false, err
	}
	return fired[0], nil
}

// TestReplaceFireCancelsHolderInItsTransaction: an OverlapReplace fire
// cancels the running holder in the fire's own store transaction, so the
// holder is canceled even when the runtime fails right after the commit.
func TestReplaceFireCancelsHolderInItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, fc, start := fakeClockStore(t)
	store := &crashAfterFireStore{Provider: db}
	c := NewClientWithOptions(store, &ClientOptions{Clock: fc})
	first := start.Add(time.Minute)
	if _, err := c.CreateSchedule(ctx, "r", &ScheduleDefinition{Interval: 5 * time.Minute, Start: first, Orchestration: "hold",
		Overlap: OverlapReplace}, false); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	RegisterOrchestration(reg, "hold", func(ctx *OrchestrationContext, in json.RawMessage) (string, error) {
		return "held", ctx.WaitForEvent("done").Await(nil)
	})
	rt, err := StartRuntime(ctx, store, reg, &RuntimeOptions{Clock: fc, Logger: slog.New(slog.DiscardHandler), LockCleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })

	limit := time.After(20 * time.Second)
	firedThrough := func(at time.Time) {
		for {
			if d := at.Sub(fc.Now()); d > 0 {
				fc.Advance(d)
			}
			s, err := c.GetSchedule(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if s.NextFireAt.After(at) {
				return
			}
			select {
			case <-limit:
				t.Fatalf("the fire at %v did not commit: %+v", at, s)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	firedThrough(first)
	second := first.Add(5 * time.Minute)
	firedThrough(second)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := c.WaitForOrchestration(wctx, fireInstanceID("r", first))
	if err != nil || st.State != StateCanceled {
		t.Fatalf("the replaced holder: %v, %v; want it Canceled", st, err)
	}
	if info, err := c.GetSchedule(ctx, "r"); err != nil || info.LastInstanceID != fireInstanceID("r", second) {
		t.Fatalf("schedule after the replacing fire: %+v, %v", info, err)
	}
	if n := store.crashes.Load(); n != 2 {
		t.Fatalf("%d fires failed after their commit, want 2", n)
	}
	// A manual trigger replaces the same way and names the holder it
	// canceled: the second fire, which took the lock from the first.
	f, err := c.TriggerSchedule(ctx, "r")
	if err != nil || f.ReplacedInstanceID != fireInstanceID("r", second) {
		t.Fatalf("TriggerSchedule = %+v, %v; want it to replace %s", f, err, fireInstanceID("r", second))
	}
	if st, err := c.WaitForOrchestration(wctx, fireInstanceID("r", second)); err != nil || st.State != StateCanceled {
		t.Fatalf("the holder a trigger replaced: %v, %v; want it Canceled", st, err)
	}
}

// batchRecordingStore records the schedules of each FireSchedules call.
type batchRecordingStore struct {
	*sqlite.Provider
	mu      sync.Mutex
	batches [][]string
}

func (s *batchRecordingStore) FireSchedules(ctx context.Context, schedules []provider.ScheduleDue) ([]bool, error) {
	var ids []string
	for _, sd := range schedules {
		ids = append(ids, sd.ID)
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return s.Provider.FireSchedules(ctx, schedules)
}

// TestSchedulesDueTogetherFireInOneTransaction: the schedules due at one
// time are fired by one FireSchedules call (one store transaction), not
// one each.
func TestSchedulesDueTogetherFireInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, fc, start := fakeClockStore(t)
	store := &batchRecordingStore{Provider: db}
	c := NewClientWithOptions(store, &ClientOptions{Clock: fc})
	first := start.Add(time.Minute)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if _, err := c.CreateSchedule(ctx, id, &ScheduleDefinition{Interval: time.Hour, Start: first, Orchestration: "o",
			Overlap: OverlapAllow}, false); err != nil {
			t.Fatal(err)
		}
	}
	reg := NewRegistry()
	RegisterOrchestration(reg, "o", func(ctx *OrchestrationContext, in json.RawMessage) (string, error) { return "ok", nil })
	rt, err := StartRuntime(ctx, store, reg, &RuntimeOptions{Clock: fc, Logger: slog.New(slog.DiscardHandler), LockCleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	fc.Advance(first.Sub(fc.Now()))
	limit := time.After(20 * time.Second)
	for _, id := range ids {
		for {
			s, err := c.GetSchedule(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if s.NextFireAt.After(first) {
				break
			}
			select {
			case <-limit:
				t.Fatalf("schedule %s did not fire: %+v", id, s)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if _, err := c.GetStatus(ctx, fireInstanceID(id, first)); err != nil {
			t.Fatalf("fire of %s: %v", id, err)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.batches) != 1 || !slices.Equal(store.batches[0], ids) {
		t.Fatalf("FireSchedules calls: %v, want one with %v", store.batches, ids)
	}
}

// fakeClockStore opens an in-memory SQLite store on a fake clock at a
// fixed start time, closed when the test ends.
func fakeClockStore(t *testing.T) (*sqlite.Provider, *clockwork.FakeClock, time.Time) {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	db, err := sqlite.Open(t.Context(), "", &sqlite.Options{Clock: fc.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, fc, start
}
