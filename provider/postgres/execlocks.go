package postgres

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
)

// Execution locks, their queues and idempotency keys; see
// provider.LockStore for the contract.
//
// Every transaction that reads a lock key or idempotency key to decide what
// to write takes the key's advisory lock first, so two starts with the same
// key on two nodes are serialized: the second sees the first's lock (or
// key) and never fails on a unique violation.
//
// Lock order. Locks are taken in this order: instances' advisory locks,
// then keys' advisory locks, then execution_locks rows. A start takes its
// key's lock and then reads the key's row FOR UPDATE (LiveLockHolder); a
// start that replaces the holder takes the holder's instance lock before
// both (LockHolderInstance reads the holder without locking its row); a
// terminal turn ack, a purge and a force release take the keys' locks
// before they delete rows (sqlXLockKeysOf).
//
// One writer of the rows takes no key lock: a live turn ack extends the
// expiry of its instance's rows (sqlUpsertTurn), holding only its
// instance's advisory lock. It cannot deadlock with the writers above:
//
//   - It never waits for a key's advisory lock (a turn ack creates no
//     instance with an execution lock or idempotency key, and a live
//     instance frees no key), so no transaction holding a key's lock waits
//     for it through that lock.
//   - It waits only for a row of a key its instance holds, and only while
//     another transaction T holds that row: T took the key's lock first,
//     and, holding the row, T never waits for what the ack holds: the
//     instance's advisory lock (a replacing start takes it before the row,
//     LockHolderInstance), or its rows (T writes the lock, queue and
//     messages of other instances; a replacing start only inserts the
//     holder's cancel).
//   - Cleanup, which settles several keys in one transaction, never waits
//     (ClaimFreeable): a group commit may hold the row of one key (a live
//     ack's extension) while another of its acks waits for the lock of a
//     second key that cleanup holds from earlier in its loop.
//
// TestReplacingStartLocksHolderBeforeLockRow, TestStartWaitsForLiveAck,
// TestCleanupSkipsRowsOfLiveAcks (lockorder_test.go) run these
// interleavings.

// sqlXLockHolder is the instance holding key $1 now, read without locking
// the row (LockHolderInstance).
const sqlXLockHolder = `SELECT instance_id FROM execution_locks WHERE lock_key = $1`

// sqlXLockTryKey tries the advisory lock of key $1 without waiting.
const sqlXLockTryKey = `SELECT pg_try_advisory_xact_lock(hashtextextended($1::text, 0))`

// sqlXLockGetSkipLocked is sqlXLockGet, skipping a row another
// transaction holds (ClaimFreeable).
const sqlXLockGetSkipLocked = sqlXLockGet + ` SKIP LOCKED`

// lockKey takes the transaction-scoped advisory lock of an execution lock
// key or idempotency key.
func (w *wtx) lockKey(kind, key string) error {
	_, err := w.tx.Exec(w.ctx, sqlAdvisoryLock, w.p.lockSpace+kind+":"+key)
	return err
}

// CheckIdempotencyKey fails with *provider.DuplicateStartError when key is
// retained; a key past its retention is deleted so it can be reused.
func (w *wtx) CheckIdempotencyKey(key string) error {
	if err := w.lockKey("idem", key); err != nil {
		return err
	}
	var inst string
	var expires int64
	var purged *int64
	err := w.tx.QueryRow(w.ctx, sqlIdemGet, key).Scan(&inst, &expires, &purged)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if expires > w.now {
		dup := &provider.DuplicateStartError{IdempotencyKey: key, InstanceID: inst}
		if purged != nil {
			dup.PurgedAt = time.UnixMilli(*purged).UTC()
		}
		return dup
	}
	_, err = w.exec(sqlIdemDelete, key)
	return err
}

// LiveLockHolder returns the live, unexpired lock on key, or nil once the
// key is free. Stale and expired locks met on the way are freed, each
// handed to its oldest queued start, which then holds the key.
func (w *wtx) LiveLockHolder(key string) (*provider.LockedError, error) {
	if err := w.lockKey("xlock", key); err != nil {
		return nil, err
	}
	for {
		var inst, status string
		var lockedAt, expires int64
		err := w.tx.QueryRow(w.ctx, sqlXLockGet, key).Scan(&inst, &lockedAt, &expires, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if expires > w.now && status != "" && !provider.Status(status).IsTerminal() {
			return &provider.LockedError{Key: key, InstanceID: inst,
				LockedAt: time.UnixMilli(lockedAt).UTC(), ExpiresAt: time.UnixMilli(expires).UTC()}, nil
		}
		if _, err := w.freeExecutionLock(key); err != nil {
			return nil, err
		}
	}
}

// LockHolderInstance takes the shared lock of the instance holding the
// execution lock key now, before the key's lock, as a turn ack that frees
// the key takes its instance's lock first: a start replacing the holder
// then enqueues the holder's cancel without waiting on the holder's lock
// while holding the key's. It reads the holder without locking its row: a
// live ack of the holder, holding the holder's lock, extends that row (see
// "Lock order"). If the key changed hands meanwhile it locks the new
// holder too, a few times at most. See sqlstore.MessageTx.
func (w *wtx) LockHolderInstance(key string) error {
	locked := ""
	for range 3 {
		var inst string
		err := w.tx.QueryRow(w.ctx, sqlXLockHolder, key).Scan(&inst)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && inst == locked {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.lockInstancesShared(nil, []string{inst}); err != nil {
			return err
		}
		locked = inst
	}
	return nil
}

// freeExecutionLock deletes the lock on key and hands the key to its
// oldest queued start. It reports whether a start took it.
func (w *wtx) freeExecutionLock(key string) (bool, error) {
	if _, err := w.exec(sqlXLockDelete, key); err != nil {
		return false, err
	}
	return w.promoteQueuedStart(key)
}

// promoteQueuedStart gives the free key to its oldest queued start: the
// lock row names that instance and its start message is enqueued, keeping
// the visibility the start asked for.
func (w *wtx) promoteQueuedStart(key string) (bool, error) {
	ids, err := w.queryStrings(sqlXLockPromote, key, w.now)
	if err != nil || len(ids) == 0 {
		return false, err
	}
	w.changes.orch = true
	w.changes.addInstance(ids[0])
	return true, nil
}

// promoteAll hands each freed key to its queue, taking the keys' advisory
// locks first.
func (w *wtx) promoteAll(keys []string) error {
	for _, k := range keys {
		if err := w.lockKey("xlock", k); err != nil {
			return err
		}
		if _, err := w.promoteQueuedStart(k); err != nil {
			return err
		}
	}
	return nil
}

func (w *wtx) FreeableLocks() ([]string, error) {
	return w.queryStrings(sqlXLockFreeable, w.now)
}

// ClaimFreeable tries the key's advisory lock and looks again under it:
// another node may have settled the lock meanwhile. It waits for nothing:
// a key whose lock another transaction holds, or whose row a live turn ack
// is extending, is left to a later cleanup (see "Lock order").
func (w *wtx) ClaimFreeable(key string) (bool, error) {
	var got bool
	if err := w.tx.QueryRow(w.ctx, sqlXLockTryKey, w.p.lockSpace+"xlock:"+key).Scan(&got); err != nil || !got {
		return false, err
	}
	holder, err := w.liveLockHolderNoWait(key)
	return !holder, err
}

func (w *wtx) FreeExecutionLock(key string) (bool, error) { return w.freeExecutionLock(key) }

func (w *wtx) DropExpiredIdempotencyKeys() (int64, error) {
	return w.exec(sqlIdemCleanup, w.now)
}

// liveLockHolderNoWait reports whether key has a lock that is live and
// unexpired, or no lock at all (nothing to free), or a lock whose row
// another transaction holds: true means leave it.
func (w *wtx) liveLockHolderNoWait(key string) (bool, error) {
	var inst, status string
	var lockedAt, expires int64
	err := w.tx.QueryRow(w.ctx, sqlXLockGetSkipLocked, key).Scan(&inst, &lockedAt, &expires, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return expires > w.now && status != "" && !provider.Status(status).IsTerminal(), nil
}

// ReleaseExecutionLock takes the key's advisory lock, deletes the lock on
// key and hands the key to its queue; see sqlstore.Tx.
func (w *wtx) ReleaseExecutionLock(key string) (bool, error) {
	if err := w.lockKey("xlock", key); err != nil {
		return false, err
	}
	n, err := w.exec(sqlXLockDelete, key)
	if err != nil || n == 0 {
		return false, err
	}
	_, err = w.promoteQueuedStart(key)
	return true, err
}
