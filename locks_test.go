package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// gateRegistry has "Gate", which waits for the event "go" and then returns
// its data, fails when the data is "fail", or continues as new (keeping its
// lock) when the data is "again".
func gateRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Gate", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		if err := ctx.WaitForEvent("go").Await(&s); err != nil {
			return "", err
		}
		switch s {
		case "fail":
			return "", errors.New("failed on purpose")
		case "again":
			return "", ctx.ContinueAsNew(nil)
		}
		return s, nil
	})
	return reg
}

func lockOf(t *testing.T, h *duroxidetest.Harness, key string) *duroxide.LockStatus {
	t.Helper()
	st, err := h.Client.GetLock(context.Background(), key)
	if err != nil {
		t.Fatalf("GetLock(%s): %v", key, err)
	}
	return st
}

func holder(st *duroxide.LockStatus) string {
	if st.InstanceID == nil {
		return ""
	}
	return *st.InstanceID
}

// The execution lock behaviour matrix through the Go API: a start takes the lock,
// a concurrent start is refused naming the holder, and the lock is released
// when the holder completes, fails or is canceled, each time letting the
// next start through.
func TestExecutionLockReleasedOnEveryEnding(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	lock := &duroxide.StartOptions{LockKey: "w"}
	endings := []struct {
		name string
		end  func(id string)
		want duroxide.State
	}{
		{"completed", func(id string) { h.RaiseEvent(id, "go", "ok") }, duroxide.StateCompleted},
		{"failed", func(id string) { h.RaiseEvent(id, "go", "fail") }, duroxide.StateFailed},
		{"canceled", func(id string) {
			if err := h.Client.CancelInstance(ctx, id, "stop"); err != nil {
				t.Fatal(err)
			}
		}, duroxide.StateCanceled},
	}
	for i, e := range endings {
		id := fmt.Sprintf("run-%d", i)
		h.StartWith("Gate", id, nil, lock)
		h.WaitIdle()
		st := lockOf(t, h, "w")
		if !st.IsLocked || holder(st) != id || st.IsStale || st.HolderStatus != duroxide.StateRunning {
			t.Fatalf("%s: lock after start = %+v, want held by %s", e.name, st, id)
		}
		if !st.ExpiresAt.Equal(st.LockedSince.Add(duroxide.DefaultLockTTL)) && !st.ExpiresAt.After(*st.LockedSince) {
			t.Fatalf("%s: expiresAt %v not after lockedSince %v", e.name, st.ExpiresAt, st.LockedSince)
		}
		err := h.Client.StartOrchestration(ctx, id+"-rival", "Gate", nil, lock)
		var locked *duroxide.WorkflowLockedError
		if !errors.As(err, &locked) || locked.ExistingInstanceID != id || locked.WorkflowID != "w" || !errors.Is(err, duroxide.ErrWorkflowLocked) {
			t.Fatalf("%s: rival start: %v, want *WorkflowLockedError naming %s", e.name, err, id)
		}
		if _, err := h.Client.GetStatus(ctx, id+"-rival"); !errors.Is(err, duroxide.ErrNotFound) {
			t.Fatalf("%s: the refused start created its instance: %v", e.name, err)
		}
		e.end(id)
		if st := h.Wait(id); st.State != e.want {
			t.Fatalf("%s: instance ended %s", e.name, st.State)
		}
		if st := lockOf(t, h, "w"); st.IsLocked {
			t.Fatalf("%s: lock still held after the holder ended: %+v", e.name, st)
		}
	}
	if ls, err := h.Client.ListLocks(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("locks left: %+v, %v", ls, err)
	}
}

// ContinueAsNew keeps the lock, and every committed turn extends it.
func TestExecutionLockSurvivesContinueAsNewAndIsExtended(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	h.StartWith("Gate", "g", nil, &duroxide.StartOptions{LockKey: "w", LockTTL: time.Hour})
	h.WaitIdle()
	first := lockOf(t, h, "w")
	h.Advance(30 * time.Minute)
	h.RaiseEvent("g", "go", "again")
	h.WaitIdle()
	if st := h.Status("g"); st.State != duroxide.StateRunning || st.ExecutionID != 2 {
		t.Fatalf("after ContinueAsNew: %s, execution %d", st.State, st.ExecutionID)
	}
	second := lockOf(t, h, "w")
	if holder(second) != "g" || !second.ExpiresAt.After(*first.ExpiresAt) {
		t.Fatalf("lock after ContinueAsNew = %+v (before: expires %v): want kept by g and extended", second, first.ExpiresAt)
	}
	if err := h.Client.StartOrchestration(ctx, "r", "Gate", nil, &duroxide.StartOptions{LockKey: "w"}); !errors.Is(err, duroxide.ErrWorkflowLocked) {
		t.Fatalf("start during the second execution: %v", err)
	}
	h.RaiseEvent("g", "go", "done")
	h.Wait("g")
	if st := lockOf(t, h, "w"); st.IsLocked {
		t.Fatalf("lock kept after completion: %+v", st)
	}
}

// A lock whose holder stops making progress for its TTL is expired: a new
// start takes it over, and the old holder's end does not free the new
// holder's lock.
func TestExecutionLockExpiresAfterTTL(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{LockCleanupInterval: -1}})
	opts := &duroxide.StartOptions{LockKey: "w", LockTTL: time.Minute}
	h.StartWith("Gate", "old", nil, opts)
	h.Advance(2 * time.Minute)
	if st := lockOf(t, h, "w"); !st.IsLocked || !st.IsStale || holder(st) != "old" {
		t.Fatalf("expired lock = %+v, want held by old and stale", st)
	}
	h.StartWith("Gate", "new", nil, opts)
	h.WaitIdle()
	if st := lockOf(t, h, "w"); holder(st) != "new" || st.IsStale {
		t.Fatalf("after the takeover: %+v", st)
	}
	h.RaiseEvent("old", "go", "late")
	h.Wait("old")
	if st := lockOf(t, h, "w"); holder(st) != "new" {
		t.Fatalf("the old holder's end freed the new holder's lock: %+v", st)
	}
	if n, err := h.Client.CleanupExpiredLocks(ctx); err != nil || n != 0 {
		t.Fatalf("cleanup of a live lock: %d, %v", n, err)
	}
}

// Queued starts wait durably and run one at a time in arrival order; the
// runtime's periodic sweep hands an expired lock to the next in line.
func TestQueuedStartsRunInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	q := &duroxide.StartOptions{LockKey: "w", QueueIfLocked: true}
	ids := []string{"q0", "q1", "q2", "q3"}
	for _, id := range ids {
		h.StartWith("Gate", id, nil, q)
	}
	h.WaitIdle()
	st := lockOf(t, h, "w")
	if holder(st) != "q0" || st.Queued != 3 {
		t.Fatalf("lock = %+v, want held by q0 with 3 queued", st)
	}
	for i, id := range ids {
		for _, later := range ids[i+1:] {
			if s := h.Status(later); s.State != duroxide.StatePending {
				t.Fatalf("%s is %s while %s holds the lock", later, s.State, id)
			}
		}
		if s := h.Status(id); s.State != duroxide.StateRunning {
			t.Fatalf("%s is %s, want Running with the lock", id, s.State)
		}
		h.RaiseEvent(id, "go", id)
		h.Wait(id)
		h.WaitIdle()
	}
	if ls, err := h.Client.ListLocks(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("locks left: %+v, %v", ls, err)
	}

	// The sweep: a holder that stops acking loses its lock to the queue.
	h.StartWith("Gate", "stuck", nil, &duroxide.StartOptions{LockKey: "s", LockTTL: time.Minute})
	h.StartWith("Gate", "next", nil, &duroxide.StartOptions{LockKey: "s", QueueIfLocked: true})
	// The sweep runs every minute of the clock, on its own goroutine: keep
	// moving the clock until it has run past the TTL (bounded in real
	// time, not in steps: the goroutine may be scheduled late).
	for giveUp := time.Now().Add(30 * time.Second); holder(lockOf(t, h, "s")) != "next" && time.Now().Before(giveUp); {
		h.Advance(time.Minute)
		runtime.Gosched()
	}
	if st := lockOf(t, h, "s"); holder(st) != "next" {
		t.Fatalf("after the TTL and sweeps: %+v", st)
	}
	h.WaitIdle()
	if s := h.Status("next"); s.State != duroxide.StateRunning {
		t.Fatalf("promoted start is %s", s.State)
	}
}

// A repeated idempotency key starts nothing and names the first instance,
// even when the lock it took is still held (idempotency comes first); after
// the retention the key starts a new instance.
func TestIdempotentStart(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{LockCleanupInterval: -1}})
	opts := &duroxide.StartOptions{IdempotencyKey: "evt_1", LockKey: "w", IdempotencyRetention: time.Hour}
	h.StartWith("Gate", "first", nil, opts)
	err := h.Client.StartOrchestration(ctx, "second", "Gate", nil, opts)
	var dup *duroxide.DuplicateStartError
	if !errors.As(err, &dup) || dup.InstanceID != "first" || dup.IdempotencyKey != "evt_1" || !errors.Is(err, duroxide.ErrInstanceExists) {
		t.Fatalf("repeat: %v, want *DuplicateStartError naming first", err)
	}
	h.RaiseEvent("first", "go", "x")
	h.Wait("first")
	if err := h.Client.StartOrchestration(ctx, "third", "Gate", nil, opts); !errors.As(err, &dup) || dup.InstanceID != "first" {
		t.Fatalf("repeat after the end, within retention: %v", err)
	}
	h.Advance(2 * time.Hour)
	if err := h.Client.StartOrchestration(ctx, "fourth", "Gate", nil, opts); err != nil {
		t.Fatalf("start after the retention: %v", err)
	}
}

// Many concurrent starts on one key: exactly one wins, every other is
// refused naming it, and no lock is left once it ends.
func TestConcurrentLockedStartsOneWins(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = h.Client.StartOrchestration(ctx, fmt.Sprintf("c%d", i), "Gate", nil, &duroxide.StartOptions{LockKey: "w"})
		})
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two winners: %s and c%d", winner, i)
			}
			winner = fmt.Sprintf("c%d", i)
		}
	}
	if winner == "" {
		t.Fatal("no start won")
	}
	for _, err := range errs {
		var locked *duroxide.WorkflowLockedError
		if err != nil && (!errors.As(err, &locked) || locked.ExistingInstanceID != winner) {
			t.Fatalf("loser's error %v does not name %s", err, winner)
		}
	}
	h.RaiseEvent(winner, "go", "x")
	h.Wait(winner)
	if ls, err := h.Client.ListLocks(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("locks left: %+v, %v", ls, err)
	}
}

func TestStartOptionsValidation(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	for _, o := range []*duroxide.StartOptions{
		{QueueIfLocked: true},
		{LockKey: "w", LockTTL: -time.Second},
		{IdempotencyKey: "k", IdempotencyRetention: -time.Second},
	} {
		if err := h.Client.StartOrchestration(ctx, "x", "Gate", nil, o); !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := h.Client.GetLock(ctx, ""); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Errorf("GetLock(\"\"): %v", err)
	}
	if ok, err := h.Client.ReleaseLock(ctx, "nothing"); ok || err != nil {
		t.Errorf("ReleaseLock of no lock: %v, %v", ok, err)
	}
}

// Queued starts are in the store: they survive a restart of the process
// and still run in arrival order.
func TestQueuedStartsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/q.db"
	reg := gateRegistry()
	open := func() (*sqlite.Provider, *duroxide.Runtime) {
		store, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return store, rt
	}
	wait := func(c *duroxide.Client, id string) *duroxide.Status {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := c.WaitForOrchestration(wctx, id)
		if err != nil {
			t.Fatalf("waiting for %s: %v", id, err)
		}
		return st
	}

	store, rt := open()
	c := duroxide.NewClient(store)
	q := &duroxide.StartOptions{LockKey: "w", QueueIfLocked: true}
	for _, id := range []string{"a", "b", "c"} {
		if err := c.StartOrchestration(ctx, id, "Gate", nil, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, rt = open()
	defer func() {
		_ = rt.Shutdown(ctx)
		_ = store.Close()
	}()
	c = duroxide.NewClient(store)
	var order []string
	for _, id := range []string{"a", "b", "c"} {
		st, err := c.GetLock(ctx, "w")
		if err != nil || holder(st) != id {
			t.Fatalf("lock = %+v, %v; want held by %s", st, err, id)
		}
		if err := c.RaiseEvent(ctx, id, "go", id); err != nil {
			t.Fatal(err)
		}
		if st := wait(c, id); st.State != duroxide.StateCompleted {
			t.Fatalf("%s ended %s", id, st.State)
		}
		hist, err := c.GetHistory(ctx, id, 0)
		if err != nil || len(hist) == 0 {
			t.Fatalf("history of %s: %v", id, err)
		}
		order = append(order, id)
	}
	if st, err := c.GetLock(ctx, "w"); err != nil || st.IsLocked {
		t.Fatalf("lock after the last one: %+v, %v (order %v)", st, err, order)
	}
}

// A queued start canceled while it waits leaves the queue: it ends
// Canceled and never takes the lock.
func TestCanceledQueuedStartLeavesTheQueue(t *testing.T) {
	ctx := context.Background()
	h := duroxidetest.New(t, gateRegistry(), nil)
	q := &duroxide.StartOptions{LockKey: "w", QueueIfLocked: true}
	for _, id := range []string{"a", "b", "c"} {
		h.StartWith("Gate", id, nil, q)
	}
	if err := h.Client.CancelInstance(ctx, "b", "not needed"); err != nil {
		t.Fatal(err)
	}
	if st := h.Wait("b"); st.State != duroxide.StateCanceled {
		t.Fatalf("b is %s", st.State)
	}
	if st := lockOf(t, h, "w"); holder(st) != "a" || st.Queued != 1 {
		t.Fatalf("lock = %+v, want held by a with c queued", st)
	}
	h.RaiseEvent("a", "go", "x")
	h.Wait("a")
	h.WaitIdle()
	if st := lockOf(t, h, "w"); holder(st) != "c" || st.Queued != 0 {
		t.Fatalf("lock = %+v, want held by c", st)
	}
	if st := h.Status("b"); st.State != duroxide.StateCanceled {
		t.Fatalf("b is %s after a ended", st.State)
	}
}
