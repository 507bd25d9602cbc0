package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// startOp is a grouped call that creates instance id (and enqueues its
// start), then fails with fail if set.
func startOp(t *testing.T, ctx context.Context, id string, fail error) sqlstore.Request[*groupOp] {
	t.Helper()
	m, err := sqlenc.EncodeMessage(providertest.HammerStart(id))
	if err != nil {
		t.Fatal(err)
	}
	return sqlstore.Request[*groupOp]{Ctx: ctx, Op: &groupOp{
		locks: sqlstore.SharedLocks(nil, m),
		fn: func(w *wtx) error {
			if fail != nil {
				// It goes on after its enqueue (to fail): run alone,
				// its enqueue must not commit (see wtx.sendLast).
				w.fold = false
			}
			if err := w.InsertMessages([]*sqlenc.Msg{m}); err != nil {
				return err
			}
			return fail
		},
	}}
}

// TestGroupCommitIsolatesFailingCall: in one group run call after call,
// a call that fails after writing rolls back alone; the others commit, in
// one transaction.
func TestGroupCommitIsolatesFailingCall(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	p.serialGroups = true
	ctx := t.Context()
	if got := runFailingMiddle(t, p); got != 1 || p.groups.Load() != 1 {
		t.Fatalf("commits = %d, groups = %d: want one group committed once", got, p.groups.Load())
	}
	// The committed starts are fetchable.
	items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{Max: 10, LockTimeout: time.Minute})
	if err != nil || len(items) != 2 {
		t.Fatalf("FetchOrchestrationItems = %d items, %v; want a and c", len(items), err)
	}
}

// runFailingMiddle runs a group of three starts, a, b and c, where b
// fails after writing, checks that only b failed and wrote nothing, and
// returns how many commits the group made.
func runFailingMiddle(t *testing.T, p *Provider) int64 {
	t.Helper()
	ctx := t.Context()
	boom := errors.New("boom")
	commits0 := p.Stats().Commits
	errs := p.runGroup([]sqlstore.Request[*groupOp]{
		startOp(t, ctx, "a", nil),
		startOp(t, ctx, "b", boom),
		startOp(t, ctx, "c", nil),
	})
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("outcomes = %v, want [nil boom nil]", errs)
	}
	for id, want := range map[string]bool{"a": true, "b": false, "c": true} {
		_, err := p.GetInstance(ctx, id)
		if got := err == nil; got != want || (!got && !errors.Is(err, provider.ErrNotFound)) {
			t.Fatalf("GetInstance(%q) = %v, want exists = %v", id, err, want)
		}
	}
	if n := mustExecCount(t, p, "b"); n != 0 {
		t.Fatalf("the failed call left %d queued messages", n)
	}
	return p.Stats().Commits - commits0
}

// TestGroupCommitBrokenGroupRunsCallsAlone: a group whose declared locks
// cannot be taken (another session holds one past the lock timeout) is
// rolled back and its calls run alone: the one that does not need the
// held lock commits.
func TestGroupCommitBrokenGroupRunsCallsAlone(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{LockTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	blocker, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.Background()) }()
	if _, err := blocker.Exec(ctx, sqlAdvisoryLock, p.lockSpace+"held"); err != nil {
		t.Fatal(err)
	}
	errs := p.runGroup([]sqlstore.Request[*groupOp]{
		startOp(t, ctx, "held", nil),
		startOp(t, ctx, "free", nil),
	})
	if !errors.Is(p.fail("test", errs[0]), provider.ErrBusy) || errs[1] != nil {
		t.Fatalf("outcomes = %v, want [ErrBusy nil]", errs)
	}
	if p.groups.Load() != 0 {
		t.Fatalf("groups = %d, want none committed", p.groups.Load())
	}
	if _, err := p.GetInstance(ctx, "free"); err != nil {
		t.Fatalf("GetInstance(free) = %v", err)
	}
}

// TestGroupCommitRerunsDeadlockVictim: a call that lost a deadlock in a
// group (40P01) is rolled back to its savepoint and runs again alone once
// the group committed.
func TestGroupCommitRerunsDeadlockVictim(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	victim := startOp(t, ctx, "victim", nil)
	runs := 0
	fn := victim.Op.fn
	victim.Op.fn = func(w *wtx) error {
		runs++
		if err := fn(w); err != nil || runs > 1 {
			return err
		}
		return &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	}
	commits0 := p.Stats().Commits
	errs := p.runGroup([]sqlstore.Request[*groupOp]{startOp(t, ctx, "other", nil), victim})
	if errs[0] != nil || errs[1] != nil || runs != 2 {
		t.Fatalf("outcomes = %v after %d runs of the victim, want [nil nil] after 2", errs, runs)
	}
	if got := p.Stats().Commits - commits0; got != 2 {
		t.Fatalf("commits = %d, want the group's and the victim's own", got)
	}
	for _, id := range []string{"other", "victim"} {
		if _, err := p.GetInstance(ctx, id); err != nil {
			t.Fatalf("GetInstance(%q) = %v", id, err)
		}
	}
}

// TestGroupCommitLocksInInstanceOrder: the declared locks of a group are
// taken once each, in instance order, exclusive if any call wants it so.
func TestGroupCommitLocksInInstanceOrder(t *testing.T) {
	t.Parallel()
	group := []sqlstore.Request[*groupOp]{
		{Op: &groupOp{locks: []sqlstore.Lock{{Instance: "c"}, {Instance: "a"}}}},
		{Op: &groupOp{locks: []sqlstore.Lock{{Instance: "b", Exclusive: true}, {Instance: "a", Exclusive: true}}}},
		{Op: &groupOp{}},
	}
	ids, excl := groupLocks(group)
	if len(ids) != 3 || ids[0] != "a" || ids[1] != "b" || ids[2] != "c" || !excl[0] || !excl[1] || excl[2] {
		t.Fatalf("groupLocks = %v %v, want [a b c] [true true false]", ids, excl)
	}
}

func mustExecCount(t *testing.T, p *Provider, instance string) int64 {
	t.Helper()
	var n int64
	if err := p.pool.QueryRow(t.Context(), "SELECT count(*) FROM orchestrator_queue WHERE instance_id = $1", instance).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitOff: with GroupCommitMax 1, concurrent calls each commit
// alone, and all of them commit.
func TestGroupCommitOff(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{GroupCommitMax: 1})
	ctx := t.Context()
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = p.Enqueue(ctx, providertest.HammerStart(fmt.Sprintf("off-%d", i))) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if p.groups.Load() != 0 {
		t.Fatalf("groups = %d with group commit off", p.groups.Load())
	}
	items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{Max: n, LockTimeout: time.Minute})
	if err != nil || len(items) != n {
		t.Fatalf("FetchOrchestrationItems = %d items, %v; want %d", len(items), err, n)
	}
}

// TestGroupCommitNotifiesOtherNodes: the calls of a group notify other
// nodes with one notification sent with the group's COMMIT, naming the
// instances of the calls that committed.
func TestGroupCommitNotifiesOtherNodes(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	p := openSchema(t, schema, nil)
	other := openSchema(t, schema, nil)
	orch, stop := other.Subscribe(provider.QueueOrchestrator)
	defer stop()
	watchA, stopA := other.WatchInstance("a")
	defer stopA()
	watchC, stopC := other.WatchInstance("c")
	defer stopC()
	ctx := t.Context()
	errs := p.runGroup([]sqlstore.Request[*groupOp]{
		startOp(t, ctx, "a", nil),
		startOp(t, ctx, "b", errors.New("boom")),
		startOp(t, ctx, "c", nil),
	})
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("outcomes = %v, want [nil boom nil]", errs)
	}
	waitFor(t, orch, 10*time.Second, "the other node's orchestrator subscriber after the group")
	waitFor(t, watchA, 10*time.Second, "the other node's watcher of a")
	waitFor(t, watchC, 10*time.Second, "the other node's watcher of c")
}

// TestStartsDoNotJoinGroups: an enqueue that starts an instance runs in a
// transaction of its own (sqlstore.EnqueueLocks marks it Alone), so a
// caller starting instances never waits for a group to take its start:
// many concurrent starts form no group, and every one is created.
func TestStartsDoNotJoinGroups(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{GroupCommitLanes: 1})
	ctx := t.Context()
	const n = 48
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = p.Enqueue(ctx, providertest.HammerStart(fmt.Sprintf("solo-%d", i))) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	if g := p.groups.Load(); g != 0 {
		t.Fatalf("groups = %d, want none: starts joined groups", g)
	}
	for i := range n {
		if _, err := p.GetInstance(ctx, fmt.Sprintf("solo-%d", i)); err != nil {
			t.Fatalf("GetInstance(solo-%d) = %v", i, err)
		}
	}
}

// TestWorkFetchesDoNotJoinGroups: a worker fetch runs in a transaction of
// its own (sqlstore.WorkFetchLocks marks it Alone), so an activity fetch
// loop never waits for a group of acks to commit durably: many concurrent
// fetches form no group, and every row is leased once.
func TestWorkFetchesDoNotJoinGroups(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{GroupCommitLanes: 1})
	ctx := t.Context()
	const n = 48
	for i := range n {
		if err := p.enqueueWork(ctx, providertest.HammerActivity(fmt.Sprintf("w-%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	got := make([][]*provider.WorkItemLease, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = p.FetchWorkItems(ctx, provider.WorkFetchOptions{Max: 1, LockTimeout: time.Minute})
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		for _, l := range got[i] {
			if seen[l.InstanceID] {
				t.Fatalf("%s leased twice", l.InstanceID)
			}
			seen[l.InstanceID] = true
		}
	}
	if g := p.groups.Load(); g != 0 {
		t.Fatalf("groups = %d, want none: worker fetches joined groups", g)
	}
	if len(seen) != n {
		t.Fatalf("%d rows leased, want %d", len(seen), n)
	}
}

// TestPromptFetchRunsAlone: while every group commit lane is busy, a turn
// fetch marked prompt (provider.FetchOptions.Prompt: work came due) runs
// at once in a transaction of its own, where an ordinary fetch queues for
// the next group.
func TestPromptFetchRunsAlone(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	// Hold every lane, as groups committing would.
	for range p.group.Lanes {
		if !p.group.TryAcquire() {
			t.Fatal("a lane is busy")
		}
	}
	held := p.group.Lanes
	defer func() {
		for range held {
			p.group.Release()
		}
	}()
	// Bounded only so that a fetch that queues fails instead of hanging.
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	items, err := p.FetchOrchestrationItems(bounded, provider.FetchOptions{Max: 1, LockTimeout: time.Minute, Prompt: true})
	if err != nil || len(items) != 1 {
		t.Fatalf("prompt FetchOrchestrationItems with every lane busy = %d items, %v; want a at once", len(items), err)
	}
	// An ordinary fetch queues for a lane: it runs once they are released.
	done := make(chan error, 1)
	go func() {
		_, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{Max: 1, LockTimeout: time.Minute})
		done <- err
	}()
	for ; held > 0; held-- {
		p.group.Release()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
