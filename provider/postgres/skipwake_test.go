package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// fetchSpy is a store that counts its orchestration fetches that find
// nothing (empty), signalling fetched after each.
type fetchSpy struct {
	*Provider
	empty   atomic.Int64
	fetched chan struct{}
}

func (s *fetchSpy) FetchOrchestrationItems(ctx context.Context, opts provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	items, err := s.Provider.FetchOrchestrationItems(ctx, opts)
	if err == nil && len(items) == 0 {
		s.empty.Add(1)
	}
	select {
	case s.fetched <- struct{}{}:
	default:
	}
	return items, err
}

// TestRefusedWriteWakesSkippingFetch: an orchestration fetch skips an
// instance whose advisory lock another transaction holds, counting on
// that transaction's commit to notify. A write of this store refused
// after it took the lock (here a rewind of an instance that is not
// Failed) rolls back and must wake the dispatchers all the same: a
// runtime whose fetches skipped the ready instance meanwhile then takes
// it at once. Without the wake-up its fetch loop sleeps until its poll
// interval passes, on a clock that here does not move. (The end-to-end
// case ConcurrentRewindsOneWins hung this way under load: the losing
// rewinds held the instance's lock while the turn of the winner's
// activity result was fetched.)
func TestRefusedWriteWakesSkippingFetch(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	p := openFresh(t, &Options{Clock: fc.Now})
	ctx := t.Context()
	c := duroxide.NewClient(p)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Echo", func(_ *duroxide.OrchestrationContext, n int) (int, error) { return n, nil })
	if err := c.StartOrchestration(ctx, "x", "Echo", 7, nil); err != nil {
		t.Fatal(err)
	}

	// A rewind of x, refused once it holds x's lock, holds it until
	// released.
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.afterInstanceLock = func(id string) {
		if id == "x" {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	refused := make(chan error, 1)
	go func() {
		refused <- p.RewindInstance(ctx, &provider.RewindRequest{InstanceID: "x", FromExecutionID: 1, ExecutionID: 2,
			Messages: []provider.OrchestratorMessage{{InstanceID: "x",
				Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "x", Name: "e"}}}})
	}()
	<-held

	// A runtime whose fetches find x locked: the first looks again at
	// once, the second leaves the loop asleep until something wakes it.
	spy := &fetchSpy{Provider: p, fetched: make(chan struct{}, 1)}
	rt, err := duroxide.StartRuntime(ctx, spy, reg, &duroxide.RuntimeOptions{Clock: fc, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	for spy.empty.Load() < 2 {
		<-spy.fetched
	}
	close(release)
	if err := <-refused; !errors.Is(err, provider.ErrStateConflict) {
		t.Fatalf("rewind of an instance that is not Failed: %v, want ErrStateConflict", err)
	}

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := c.WaitForOrchestration(wctx, "x")
	if err != nil {
		t.Fatalf("x after the refused rewind released its lock (the clock never moved): %v", err)
	}
	var out int
	if st.State != duroxide.StateCompleted || st.Decode(&out) != nil || out != 7 {
		t.Fatalf("x: %s, output %d; want Completed, 7", st.State, out)
	}
}

// TestRefusedWritesWakeLocalFetchers: every write of this store that
// takes an instance's advisory lock (exclusive or shared) and is then
// refused wakes this store's orchestrator subscribers, since a fetch may
// have skipped the instance meanwhile; another node's are not woken (its
// fetch loop looks again after a back-off).
func TestRefusedWritesWakeLocalFetchers(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	p := openSchema(t, schema, nil)
	other := openSchema(t, schema, nil)
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("x")); err != nil {
		t.Fatal(err)
	}
	orch, stop := p.Subscribe(provider.QueueOrchestrator)
	defer stop()
	for _, c := range []struct {
		name string
		op   func() error
		want error
	}{
		{"rewind of an instance not Failed", func() error {
			return p.RewindInstance(ctx, &provider.RewindRequest{InstanceID: "x", FromExecutionID: 1, ExecutionID: 2,
				Messages: []provider.OrchestratorMessage{{InstanceID: "x",
					Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "x", Name: "e"}}}})
		}, provider.ErrStateConflict},
		{"resume of an instance not paused", func() error { return p.ResumeInstance(ctx, "x") }, provider.ErrNotPaused},
		{"purge of a live instance", func() error {
			_, err := p.PurgeInstances(ctx, []string{"x"}, provider.PurgeOptions{})
			return err
		}, provider.ErrStillRunning},
		{"enqueue of a start for a taken ID", func() error {
			_, err := p.Enqueue(ctx, providertest.HammerEvent("x"), providertest.HammerStart("x"))
			return err
		}, provider.ErrInstanceExists},
		{"turn ack with a lock it does not hold", func() error {
			ack := providertest.HammerTurn(providertest.MustFetch(t, p), 0)
			ack.LockToken += "-not"
			_, err := p.AckOrchestrationItem(ctx, ack)
			return err
		}, provider.ErrLockLost},
	} {
		drain(orch)
		if err := c.op(); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		select {
		case <-orch:
		default:
			t.Errorf("%s: refused, and the orchestrator subscribers were not woken", c.name)
		}
	}
	// The other node's subscribers hear of nothing: a later commit's
	// notification comes after any of the refused writes' would have.
	otherOrch, stopOther := other.Subscribe(provider.QueueOrchestrator)
	defer stopOther()
	otherWork, stopWork := other.Subscribe(provider.QueueWorker)
	defer stopWork()
	if err := p.RewindInstance(ctx, &provider.RewindRequest{InstanceID: "x", FromExecutionID: 1, ExecutionID: 2,
		Messages: []provider.OrchestratorMessage{{InstanceID: "x",
			Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "x", Name: "e"}}}}); !errors.Is(err, provider.ErrStateConflict) {
		t.Fatalf("rewind: %v", err)
	}
	if err := p.enqueueWork(ctx, providertest.HammerActivity("x", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, otherWork, 10*time.Second, "the other node's worker subscriber")
	select {
	case <-otherOrch:
		t.Fatal("the other node's orchestrator subscriber was woken by a refused write")
	default:
	}
}

// TestWakeSkippedLeavesRerunsToTheirEnd: a write that took an instance's
// lock and failed wakes the orchestrator subscribers, unless it runs
// again at once (a guard of its last batch refused it, or its work ack's
// turn was not applied): the run that ends it notifies, and a wake-up
// before it would only cost the dispatchers a fetch for nothing.
func TestWakeSkippedLeavesRerunsToTheirEnd(t *testing.T) {
	t.Parallel()
	p := &Provider{}
	orch, stop := p.hub.Subscribe(provider.QueueOrchestrator)
	defer stop()
	for _, c := range []struct {
		name   string
		locked bool
		err    error
		wake   bool
	}{
		{"refused", true, provider.ErrStateConflict, true},
		{"refused without a lock", false, provider.ErrStateConflict, false},
		{"a guard of its last batch refused", true, fmt.Errorf("turn: %w", &pgconn.PgError{Code: codeNotLast}), false},
		{"its turn not applied", true, fmt.Errorf("work ack: %w", sqlstore.ErrThenNotApplied), false},
	} {
		drain(orch)
		p.wakeSkipped(&wtx{locked: c.locked}, c.err)
		woken := false
		select {
		case <-orch:
			woken = true
		default:
		}
		if woken != c.wake {
			t.Errorf("%s: woken %t, want %t", c.name, woken, c.wake)
		}
	}
}
