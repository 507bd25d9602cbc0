package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// TestDelayedTurnAckLeasesFromItsCommit: a turn ack that waits for its
// instance's advisory lock longer than the lease it hands out still hands
// out a live lease. The lease is dated from when the rows are locked, not
// from when the transaction began, so the caller never runs an activity
// whose lease another node may already have taken over.
func TestDelayedTurnAckLeasesFromItsCommit(t *testing.T) {
	t.Parallel()
	clock := providertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := openFresh(t, &Options{Clock: clock.Now})
	ctx := t.Context()
	const id = "slow-commit"
	if _, err := p.Enqueue(ctx, providertest.HammerStart(id)); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Hour})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}

	// Another session holds the instance's advisory lock.
	blocker, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.Background()) }()
	if _, err := blocker.Exec(ctx, sqlAdvisoryLock, p.lockSpace+id); err != nil {
		t.Fatal(err)
	}
	var blockerPID int
	if err := blocker.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}

	ack := providertest.HammerTurn(it, 0)
	ack.WorkerItems[0].Lease = true
	ack.LeaseFor = 30 * time.Second
	var (
		wg     sync.WaitGroup
		res    provider.TurnResult
		ackErr error
	)
	wg.Go(func() { res, ackErr = p.AckOrchestrationItem(ctx, ack) })

	// Wait until the ack is queued behind the blocker, then let two
	// minutes pass before it may go on.
	for {
		var waiting int
		err := p.pool.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", blockerPID).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
	}
	clock.Advance(2 * time.Minute)
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ackErr != nil {
		t.Fatalf("AckOrchestrationItem: %v", ackErr)
	}
	if len(res.Leased) != 1 {
		t.Fatalf("Leased = %d leases, want 1", len(res.Leased))
	}
	if l := res.Leased[0]; !l.LockedUntil.After(clock.Now()) {
		t.Fatalf("lease locked until %v, already expired at %v", l.LockedUntil, clock.Now())
	}
}
