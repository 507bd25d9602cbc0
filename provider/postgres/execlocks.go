package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Execution locks, their queues and idempotency keys; see
// provider.LockStore for the contract.
//
// Every transaction that reads a lock key or idempotency key to decide what
// to write takes the key's advisory lock first, so two starts with the same
// key on two nodes are serialized: the second sees the first's lock (or
// key) and never fails on a unique violation.

// lockKey takes the transaction-scoped advisory lock of an execution lock
// key or idempotency key.
func (w *wtx) lockKey(kind, key string) error {
	_, err := w.tx.Exec(w.ctx, sqlAdvisoryLock, w.p.lockSpace+kind+":"+key)
	return err
}

// checkIdempotencyKey fails with *provider.DuplicateStartError when key is
// retained; a key past its retention is deleted so it can be reused.
func (w *wtx) checkIdempotencyKey(key string) error {
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

// liveLockHolder returns the live, unexpired lock on key, or nil once the
// key is free. Stale and expired locks met on the way are freed, each
// handed to its oldest queued start, which then holds the key.
func (w *wtx) liveLockHolder(key string) (*provider.LockedError, error) {
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

// GetExecutionLock returns the lock on key; see provider.LockStore.
func (p *Provider) GetExecutionLock(ctx context.Context, key string) (*provider.ExecutionLock, error) {
	const op = "getting execution lock"
	if err := sqlstore.CheckLockKey(key); err != nil {
		return nil, p.fail(op, err)
	}
	var l *provider.ExecutionLock
	err := p.read(ctx, op, func() error {
		var err error
		l, err = sqlstore.GetExecutionLock(ctx, sharedQuerier{p.pool}, key, p.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ListExecutionLocks returns every lock by key; see provider.LockStore.
func (p *Provider) ListExecutionLocks(ctx context.Context) ([]provider.ExecutionLock, error) {
	var out []provider.ExecutionLock
	err := p.read(ctx, "listing execution locks", func() error {
		var err error
		out, err = sqlstore.ListExecutionLocks(ctx, sharedQuerier{p.pool}, p.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseExecutionLock force-releases the lock on key; see provider.LockStore.
func (p *Provider) ReleaseExecutionLock(ctx context.Context, key string) (bool, error) {
	const op = "releasing execution lock"
	if key == "" {
		return false, p.fail(op, sqlenc.Invalid("empty lock key"))
	}
	var released bool
	err := p.write(ctx, op, func(w *wtx) error {
		released = false
		if err := w.lockKey("xlock", key); err != nil {
			return err
		}
		n, err := w.exec(sqlXLockDelete, key)
		if err != nil {
			return err
		}
		released = n > 0
		if !released {
			return nil
		}
		_, err = w.promoteQueuedStart(key)
		return err
	})
	if err != nil {
		return false, err
	}
	return released, nil
}

// CleanupExecutionLocks frees expired and stale locks and drops expired
// idempotency keys; see provider.LockStore.
func (p *Provider) CleanupExecutionLocks(ctx context.Context) (*provider.LockCleanup, error) {
	var res *provider.LockCleanup
	err := p.write(ctx, "cleaning up execution locks", func(w *wtx) error {
		var err error
		res, err = sqlstore.CleanupExecutionLocks(lockCleaner{w})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// lockCleaner is the write transaction CleanupExecutionLocks runs in.
type lockCleaner struct{ w *wtx }

func (c lockCleaner) FreeableLocks() ([]string, error) {
	return c.w.queryStrings(sqlXLockFreeable, c.w.now)
}

// ClaimFreeable takes the key's advisory lock and looks again under it:
// another node may have settled the lock meanwhile.
func (c lockCleaner) ClaimFreeable(key string) (bool, error) {
	if err := c.w.lockKey("xlock", key); err != nil {
		return false, err
	}
	holder, err := c.w.liveLockHolderNoWait(key)
	return !holder, err
}

func (c lockCleaner) FreeExecutionLock(key string) (bool, error) { return c.w.freeExecutionLock(key) }

func (c lockCleaner) DropExpiredIdempotencyKeys() (int64, error) {
	return c.w.exec(sqlIdemCleanup, c.w.now)
}

// liveLockHolderNoWait reports whether key has a lock that is live and
// unexpired, or no lock at all (nothing to free): true means leave it.
func (w *wtx) liveLockHolderNoWait(key string) (bool, error) {
	var inst, status string
	var lockedAt, expires int64
	err := w.tx.QueryRow(w.ctx, sqlXLockGet, key).Scan(&inst, &lockedAt, &expires, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return expires > w.now && status != "" && !provider.Status(status).IsTerminal(), nil
}
