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

// blockedBy waits until a backend of the server waits for backend pid,
// or done is closed (what was to wait finished without waiting).
func blockedBy(t *testing.T, p *Provider, pid int, done <-chan struct{}) {
	t.Helper()
	for {
		select {
		case <-done:
			return
		default:
		}
		var waiting int
		err := p.pool.QueryRow(t.Context(),
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
	}
}

// session begins a transaction on its own connection, standing for
// another node's transaction, and returns it with its backend's pid.
func session(t *testing.T, p *Provider) (pgx.Tx, int) {
	t.Helper()
	tx, err := p.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid int
	if err := tx.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// none fails the test if a statement of the store failed with
// deadlock_detected (40P01).
func (d *deadlockTracer) none(t *testing.T) {
	t.Helper()
	if n := d.count(); n > 0 {
		t.Fatalf("%d statements of the store failed with deadlock_detected (40P01)", n)
	}
}

// runBlocked runs fn in a goroutine, and returns once fn waits for
// backend pid (or returned); wait returns fn's error once it returned.
func runBlocked(t *testing.T, p *Provider, pid int, fn func() error) (wait func() error) {
	t.Helper()
	var err error
	done := make(chan struct{})
	go func() { defer close(done); err = fn() }()
	blockedBy(t, p, pid, done)
	return func() error { <-done; return err }
}

// commitThenWait commits tx and returns wait's error.
func commitThenWait(t *testing.T, tx pgx.Tx, wait func() error) error {
	t.Helper()
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return wait()
}

// noDeadlock fails the test if err is deadlock_detected (40P01).
func noDeadlock(t *testing.T, what string, err error) {
	t.Helper()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		t.Fatalf("%s deadlocked: %v", what, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// liveAck is a turn of a fetched start that leaves the instance running.
func liveAck(it *provider.OrchestrationItem, msgs ...*provider.OrchestratorMessage) *provider.TurnAck {
	ts := time.Now().UnixMilli()
	return &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{
			{EventID: 1, TimestampMs: ts, Kind: history.OrchestrationStarted, Name: "T", Input: json.RawMessage(`1`)},
		},
		Metadata:          provider.ExecutionMetadata{OrchestrationName: "T", Status: provider.StatusRunning},
		OrchestratorItems: msgs}
}

// TestReplacingStartLocksHolderBeforeLockRow: a start that replaces the
// holder of a key (LockRequest.Replace) takes the holder's instance lock
// (shared) before it touches the key's execution_locks row. A live turn
// ack of the holder holds the holder's instance lock (exclusively) and
// then extends the expiry of its lock rows; a start that read the row FOR
// UPDATE to learn the holder and then waited for the holder's lock would
// wait for the ack while the ack waits for the row (40P01).
//
// Here a session plays the holder's live ack: it holds the holder's lock
// while the replacing start runs; once the start waits for it, the
// session takes the holder's keys and extends its lock row, as the ack
// does, and commits.
func TestReplacingStartLocksHolderBeforeLockRow(t *testing.T) {
	t.Parallel()
	tr := &deadlockTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 8, GroupCommitMax: 1})
	ctx := t.Context()
	const holder, key = "holder", "k"
	if _, err := p.Enqueue(ctx, lockedHolder(holder, key)); err != nil {
		t.Fatal(err)
	}
	ack, ackPID := session(t, p)
	if _, err := ack.Exec(ctx, sqlAdvisoryLock, p.lockSpace+holder); err != nil {
		t.Fatal(err)
	}
	m := lockedHolder("replacer", key)
	m.Create.Lock.Queue, m.Create.Lock.Replace = true, true
	wait := runBlocked(t, p, ackPID, func() error { return errOf(p.Enqueue(ctx, m)) })
	if _, err := ack.Exec(ctx, sqlXLockKeysOf, p.lockSpace, []string{holder}); err != nil {
		noDeadlock(t, "the live ack's keys", err)
	}
	_, err := ack.Exec(ctx, `UPDATE execution_locks SET expires_at = expires_at + 1 WHERE instance_id = $1`, holder)
	noDeadlock(t, "the live ack's extension of its lock row", err)
	noDeadlock(t, "the replacing start", commitThenWait(t, ack, wait))
	tr.none(t)
	l, err := p.GetExecutionLock(ctx, key)
	if err != nil || l.InstanceID != holder || l.Queued != 1 {
		t.Fatalf("GetExecutionLock = %+v, %v; want held by %s with the replacer queued", l, err, holder)
	}
}

// TestStartWaitsForLiveAck: a live turn ack extends its instance's lock
// rows holding its instance's lock but not the keys' (see "Lock order" in
// execlocks.go); a start takes the key's lock and then the row. Whichever
// holds the row first, the other waits for it, and neither then waits for
// the other: both commit.
func TestStartWaitsForLiveAck(t *testing.T) {
	t.Parallel()
	const holder, key = "holder", "k"
	setup := func(t *testing.T) (*Provider, *deadlockTracer) {
		tr := &deadlockTracer{}
		p := openFresh(t, &Options{tracer: tr, MaxConns: 8, GroupCommitMax: 1})
		if _, err := p.Enqueue(t.Context(), lockedHolder(holder, key)); err != nil {
			t.Fatal(err)
		}
		return p, tr
	}
	check := func(t *testing.T, p *Provider, tr *deadlockTracer, queued int) {
		t.Helper()
		tr.none(t)
		l, err := p.GetExecutionLock(t.Context(), key)
		if err != nil || l.InstanceID != holder || l.Queued != queued {
			t.Fatalf("GetExecutionLock = %+v, %v; want held by %s with %d queued", l, err, holder, queued)
		}
	}
	t.Run("ack first", func(t *testing.T) {
		t.Parallel()
		p, tr := setup(t)
		ctx := t.Context()
		// The session plays the live ack: the instance's lock, then the
		// extension of its lock row.
		ack, ackPID := session(t, p)
		if _, err := ack.Exec(ctx, sqlAdvisoryLock, p.lockSpace+holder); err != nil {
			t.Fatal(err)
		}
		if _, err := ack.Exec(ctx, `UPDATE execution_locks SET expires_at = expires_at + 1 WHERE instance_id = $1`, holder); err != nil {
			t.Fatal(err)
		}
		m := lockedHolder("second", key)
		m.Create.Lock.Queue = true
		wait := runBlocked(t, p, ackPID, func() error { return errOf(p.Enqueue(ctx, m)) })
		noDeadlock(t, "the start", commitThenWait(t, ack, wait))
		check(t, p, tr, 1)
	})
	t.Run("start first", func(t *testing.T) {
		t.Parallel()
		p, tr := setup(t)
		ctx := t.Context()
		it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Hour})
		if err != nil || it == nil {
			t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
		}
		// The session plays a start: the key's lock, then its row.
		start, startPID := session(t, p)
		if _, err := start.Exec(ctx, sqlAdvisoryLock, p.lockSpace+"xlock:"+key); err != nil {
			t.Fatal(err)
		}
		var inst, status string
		var lockedAt, expires int64
		if err := start.QueryRow(ctx, sqlXLockGet, key).Scan(&inst, &lockedAt, &expires, &status); err != nil {
			t.Fatal(err)
		}
		wait := runBlocked(t, p, startPID, func() error {
			_, err := p.AckOrchestrationItem(ctx, liveAck(it))
			return err
		})
		noDeadlock(t, "the live ack", commitThenWait(t, start, wait))
		check(t, p, tr, 0)
		l, _ := p.GetExecutionLock(ctx, key)
		if l.ExpiresAt.UnixMilli() <= expires {
			t.Fatalf("the live ack did not extend the lock: expires %v, was %d", l.ExpiresAt, expires)
		}
	})
}

// TestCleanupSkipsRowsOfLiveAcks: cleanup settles several keys in one
// transaction, in key order, holding each key's lock to its end. A group
// commit may hold the row of one key (a live ack extending its lock) while
// another ack of the group waits for the lock of an earlier key (a
// terminal ack freeing it). Cleanup waiting for that row while holding
// the earlier key would deadlock with the group (40P01); it waits for
// nothing instead, and leaves the busy key to a later run.
//
// Here the locks on "a" and "b" are expired; a session plays the group:
// it extends the row of "b", and once cleanup ran (or waits for it), it
// takes the lock of key "a".
func TestCleanupSkipsRowsOfLiveAcks(t *testing.T) {
	t.Parallel()
	tr := &deadlockTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 8, GroupCommitMax: 1})
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, lockedHolder("ia", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, lockedHolder("ib", "b")); err != nil {
		t.Fatal(err)
	}
	mustExec(t, p, `UPDATE execution_locks SET expires_at = 0`)
	group, groupPID := session(t, p)
	if _, err := group.Exec(ctx, `UPDATE execution_locks SET expires_at = expires_at WHERE instance_id = 'ib'`); err != nil {
		t.Fatal(err)
	}
	var cleanup *provider.LockCleanup
	wait := runBlocked(t, p, groupPID, func() (err error) {
		cleanup, err = p.CleanupExecutionLocks(ctx)
		return err
	})
	_, err := group.Exec(ctx, sqlAdvisoryLock, p.lockSpace+"xlock:a")
	noDeadlock(t, "the group's lock of key a", err)
	noDeadlock(t, "cleanup", commitThenWait(t, group, wait))
	tr.none(t)
	if cleanup.Locks != 1 {
		t.Fatalf("cleanup freed %d locks, want 1 (a; b's row was busy)", cleanup.Locks)
	}
	if _, err := p.GetExecutionLock(ctx, "b"); err != nil {
		t.Fatalf("GetExecutionLock(b) = %v, want the lock left", err)
	}
	// A later cleanup frees it.
	if cleanup, err = p.CleanupExecutionLocks(ctx); err != nil || cleanup.Locks != 1 {
		t.Fatalf("second cleanup = %+v, %v; want 1 lock freed", cleanup, err)
	}
}
