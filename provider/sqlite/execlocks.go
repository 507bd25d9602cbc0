package sqlite

import (
	"database/sql"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// Execution locks, their queues and idempotency keys (migrations 0005 and
// 0006); see provider.LockStore for the contract.

// isTerminalStatus reports whether a stored instance status ends it.
func isTerminalStatus(s string) bool { return provider.Status(s).IsTerminal() }

// CheckIdempotencyKey fails with *provider.DuplicateStartError when key is
// retained; a key past its retention is deleted so it can be reused.
func (w *wtx) CheckIdempotencyKey(key string) error {
	var inst string
	var expires int64
	var purged sql.NullInt64
	found := false
	err := w.query(sIdemGet, func(r *sql.Rows) error { found = true; return r.Scan(&inst, &expires, &purged) }, key)
	if err != nil || !found {
		return err
	}
	if expires > w.now {
		dup := &provider.DuplicateStartError{IdempotencyKey: key, InstanceID: inst}
		if purged.Valid {
			dup.PurgedAt = time.UnixMilli(purged.Int64).UTC()
		}
		return dup
	}
	_, err = w.exec(sIdemDelete, nil, key)
	return err
}

// LiveLockHolder returns the live, unexpired lock on key, or nil once the
// key is free. Stale and expired locks met on the way are freed, each
// handed to its oldest queued start, which then holds the key.
func (w *wtx) LiveLockHolder(key string) (*provider.LockedError, error) {
	for {
		var inst, status string
		var lockedAt, expires int64
		found := false
		err := w.query(sXLockGet, func(r *sql.Rows) error {
			found = true
			return r.Scan(&inst, &lockedAt, &expires, &status)
		}, key)
		if err != nil || !found {
			return nil, err
		}
		if expires > w.now && status != "" && !isTerminalStatus(status) {
			return &provider.LockedError{Key: key, InstanceID: inst,
				LockedAt: time.UnixMilli(lockedAt).UTC(), ExpiresAt: time.UnixMilli(expires).UTC()}, nil
		}
		if _, err := w.freeExecutionLock(key); err != nil {
			return nil, err
		}
	}
}

// LockHolderInstance has nothing to lock under the single writer; see
// sqlstore.MessageTx.
func (w *wtx) LockHolderInstance(string) error { return nil }

// freeExecutionLock deletes the lock on key and hands the key to its
// oldest queued start. It reports whether a start took it.
func (w *wtx) freeExecutionLock(key string) (bool, error) {
	if _, err := w.exec(sXLockDelete, nil, key); err != nil {
		return false, err
	}
	return w.promoteQueuedStart(key)
}

// promoteQueuedStart gives the free key to its oldest queued start: the
// lock row names that instance and its start message is enqueued, keeping
// the visibility the start asked for.
func (w *wtx) promoteQueuedStart(key string) (bool, error) {
	var id, visible, ttl int64
	var inst, item string
	found := false
	err := w.query(sXLockQueueHead, func(r *sql.Rows) error {
		found = true
		return r.Scan(&id, &inst, &item, &visible, &ttl)
	}, key)
	if err != nil || !found {
		return false, err
	}
	if _, err := w.exec(sXLockQueueDelete, nil, id); err != nil {
		return false, err
	}
	if _, err := w.exec(sXLockInsert, nil, key, inst, w.now, ttl); err != nil {
		return false, err
	}
	if _, err := w.exec(sInsertMessage, nil, inst, item, max(visible, w.now), w.now); err != nil {
		return false, err
	}
	if _, err := w.exec(sXLockQueueReleaseWaiting, nil, inst, max(visible, w.now)); err != nil {
		return false, err
	}
	w.changes.orch = true
	w.changes.instances = append(w.changes.instances, inst)
	return true, nil
}

// settleExecutionLocks is the execution-lock step of a committed turn ack
// of instance: a terminal instance frees its lock (to the queue) and
// leaves any queue it waited in; a live one extends its lock.
func (w *wtx) settleExecutionLocks(instance string, terminal bool) error {
	if w.noXLocks == instance {
		return nil // nothing to extend or release
	}
	if !terminal {
		_, err := w.exec(sXLockExtend, nil, instance, w.now)
		return err
	}
	keys, err := w.queryStrings(sXLockReleaseInstance, instance)
	if err != nil {
		return err
	}
	if _, err := w.exec(sXLockQueueDeleteInstance, nil, instance); err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := w.promoteQueuedStart(k); err != nil {
			return err
		}
	}
	return nil
}

func (w *wtx) FreeableLocks() ([]string, error) {
	return w.queryStrings(sXLockFreeable, w.now)
}

// ClaimFreeable: the single writer has changed nothing since
// FreeableLocks read the key.
func (w *wtx) ClaimFreeable(string) (bool, error) { return true, nil }

func (w *wtx) FreeExecutionLock(key string) (bool, error) { return w.freeExecutionLock(key) }

func (w *wtx) DropExpiredIdempotencyKeys() (int64, error) {
	return w.exec(sIdemCleanup, nil, w.now)
}

// ReleaseExecutionLock deletes the lock on key and hands the key to its
// queue; see sqlstore.Tx.
func (w *wtx) ReleaseExecutionLock(key string) (bool, error) {
	n, err := w.exec(sXLockDelete, nil, key)
	if err != nil || n == 0 {
		return false, err
	}
	_, err = w.promoteQueuedStart(key)
	return true, err
}
