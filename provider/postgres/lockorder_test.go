package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// lockedHolder is a start of instance id that takes execution lock key.
func lockedHolder(id, key string) *provider.OrchestratorMessage {
	m := providertest.HammerStart(id)
	m.Create.Lock = &provider.LockRequest{Key: key, TTL: time.Hour}
	return m
}

// endingAck is the one turn of a fetched start that runs the
// orchestration and completes it: its ack releases the instance's
// execution locks.
func endingAck(it *provider.OrchestrationItem) *provider.TurnAck {
	ts := time.Now().UnixMilli()
	return &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{
			{EventID: 1, TimestampMs: ts, Kind: history.OrchestrationStarted, Name: "T", Input: json.RawMessage(`1`)},
			{EventID: 2, TimestampMs: ts, Kind: history.OrchestrationCompleted, Output: json.RawMessage(`"ok"`)},
		},
		Metadata: provider.ExecutionMetadata{OrchestrationName: "T", Status: provider.StatusCompleted, Output: json.RawMessage(`"ok"`)}}
}

// TestEndingHolderTakesKeyLockBeforeLockRow: the lock order of execution
// locks. A start (LiveLockHolder) takes the key's advisory lock and then
// the key's execution_locks row (SELECT ... FOR UPDATE). The terminal ack
// of the holder must take the key's advisory lock before it deletes the
// row: deleting first and locking the key after waits for the start while
// the start waits for the deleted row, a deadlock the server breaks by
// aborting one (40P01).
//
// Here a session plays the start's first step (it holds the key's
// advisory lock) while the holder's terminal ack runs; once the ack waits
// for that session, the session reads the row as a start does. With the
// ack waiting for the key before touching the row, the read goes through
// and both commit; in the other order it deadlocks.
func TestEndingHolderTakesKeyLockBeforeLockRow(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{GroupCommitMax: 1})
	ctx := t.Context()
	const id, key = "holder", "k"
	if _, err := p.Enqueue(ctx, lockedHolder(id, key)); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Hour})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}

	start, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = start.Rollback(context.Background()) }()
	if _, err := start.Exec(ctx, sqlAdvisoryLock, p.lockSpace+"xlock:"+key); err != nil {
		t.Fatal(err)
	}
	var startPID int
	if err := start.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&startPID); err != nil {
		t.Fatal(err)
	}

	var (
		wg     sync.WaitGroup
		ackErr error
	)
	wg.Go(func() { _, ackErr = p.AckOrchestrationItem(ctx, endingAck(it)) })
	for {
		var waiting int
		err := p.pool.QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", startPID).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
	}
	var inst, status string
	var lockedAt, expires int64
	err = start.QueryRow(ctx, sqlXLockGet, key).Scan(&inst, &lockedAt, &expires, &status)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "40P01" {
			t.Fatalf("the start's read of the lock row deadlocked with the holder's terminal ack: %v", err)
		}
		t.Fatalf("reading the lock row: %v", err)
	}
	if inst != id || status != string(provider.StatusRunning) && status != string(provider.StatusPending) {
		t.Fatalf("lock row under the key's lock = %q (%s), want %q still live", inst, status, id)
	}
	if err := start.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ackErr != nil {
		t.Fatalf("AckOrchestrationItem: %v", ackErr)
	}
	if _, err := p.GetExecutionLock(ctx, key); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("GetExecutionLock after the terminal ack = %v, want ErrNotFound", err)
	}
}

// deadlockTracer counts the statements and batches of a store's
// connections that failed with deadlock_detected (40P01), including those
// group commit reruns and so hides from its callers.
type deadlockTracer struct {
	mu        sync.Mutex
	deadlocks int
}

func (d *deadlockTracer) note(err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		d.mu.Lock()
		d.deadlocks++
		d.mu.Unlock()
	}
}

func (d *deadlockTracer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadlocks
}

func (d *deadlockTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (d *deadlockTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, e pgx.TraceQueryEndData) {
	d.note(e.Err)
}
func (d *deadlockTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (d *deadlockTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, e pgx.TraceBatchQueryData) {
	d.note(e.Err)
}
func (d *deadlockTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestConcurrentStartsOnOneKeyNeverDeadlock runs many starts that queue
// for one execution lock key, from several goroutines, while other
// goroutines fetch the holder of the moment and end it in one turn (whose
// ack frees the key and hands it to the next queued start). Starts take
// the key's advisory lock and then its lock row; the terminal acks must
// take them in the same order, or the two deadlock. No statement may fail
// with 40P01, and every start must run, one at a time, to its end.
func TestConcurrentStartsOnOneKeyNeverDeadlock(t *testing.T) {
	t.Parallel()
	tr := &deadlockTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 8, GroupCommitMax: 1})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const key, starters, perStarter, runners = "k", 4, 20, 2
	total := starters * perStarter

	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	// fail records the first failure and stops the others.
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	for s := range starters {
		wg.Go(func() {
			for i := range perStarter {
				m := lockedHolder(fmt.Sprintf("s%d-%d", s, i), key)
				m.Create.Lock.Queue = true
				if _, err := p.Enqueue(ctx, m); err != nil {
					fail(fmt.Errorf("Enqueue: %w", err))
					return
				}
			}
		})
	}
	var (
		mu    sync.Mutex
		ended int
	)
	done := func() bool { mu.Lock(); defer mu.Unlock(); return ended == total }
	for range runners {
		wg.Go(func() {
			for !done() {
				it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Hour})
				if err != nil {
					fail(fmt.Errorf("FetchOrchestrationItem: %w", err))
					return
				}
				if it == nil {
					continue
				}
				if _, err := p.AckOrchestrationItem(ctx, endingAck(it)); err != nil {
					fail(fmt.Errorf("AckOrchestrationItem(%s): %w", it.InstanceID, err))
					return
				}
				mu.Lock()
				ended++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := tr.count(); n > 0 {
		t.Errorf("%d statements failed with deadlock_detected (40P01)", n)
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if _, err := p.GetExecutionLock(ctx, key); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("GetExecutionLock after every holder ended = %v, want ErrNotFound", err)
	}
}
