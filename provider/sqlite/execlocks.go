package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// Execution locks, their queues and idempotency keys (migrations 0005 and
// 0006); see provider.LockStore for the contract.

// isTerminalStatus reports whether a stored instance status ends it.
func isTerminalStatus(s string) bool { return provider.Status(s).IsTerminal() }

// checkIdempotencyKey fails with *provider.DuplicateStartError when key is
// retained; a key past its retention is deleted so it can be reused.
func (w *wtx) checkIdempotencyKey(key string) error {
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

// liveLockHolder returns the live, unexpired lock on key, or nil once the
// key is free. Stale and expired locks met on the way are freed, each
// handed to its oldest queued start, which then holds the key.
func (w *wtx) liveLockHolder(key string) (*provider.LockedError, error) {
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

// scanExecutionLock scans a row of xlockSelect.
func (p *Provider) scanExecutionLock(r interface{ Scan(...any) error }) (*provider.ExecutionLock, error) {
	var l provider.ExecutionLock
	var lockedAt, expires, ttl int64
	var status string
	if err := r.Scan(&l.Key, &l.InstanceID, &lockedAt, &expires, &ttl, &status, &l.Queued); err != nil {
		return nil, err
	}
	l.LockedAt = time.UnixMilli(lockedAt).UTC()
	l.ExpiresAt = time.UnixMilli(expires).UTC()
	l.TTL = time.Duration(ttl) * time.Millisecond
	l.HolderStatus = provider.Status(status)
	l.Stale = status == "" || isTerminalStatus(status)
	l.Expired = expires <= p.now()
	return &l, nil
}

// GetExecutionLock returns the lock on key; see provider.LockStore.
func (p *Provider) GetExecutionLock(ctx context.Context, key string) (*provider.ExecutionLock, error) {
	const op = "getting execution lock"
	if key == "" {
		return nil, p.fail(op, sqlenc.Invalid("empty lock key"))
	}
	var l *provider.ExecutionLock
	err := p.read(ctx, op, func() error {
		var err error
		l, err = p.scanExecutionLock(p.rstmts[rXLockGet].QueryRowContext(ctx, key))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("execution lock %q: %w", key, provider.ErrNotFound)
		}
		return interpretError(err, nil)
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
		out = out[:0]
		return queryRows(ctx, p.rstmts[rXLockList], func(r *sql.Rows) error {
			l, err := p.scanExecutionLock(r)
			if err != nil {
				return err
			}
			out = append(out, *l)
			return nil
		})
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
		n, err := w.exec(sXLockDelete, nil, key)
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
	var res provider.LockCleanup
	err := p.write(ctx, "cleaning up execution locks", func(w *wtx) error {
		res = provider.LockCleanup{}
		keys, err := w.queryStrings(sXLockFreeable, w.now)
		if err != nil {
			return err
		}
		for _, k := range keys {
			promoted, err := w.freeExecutionLock(k)
			if err != nil {
				return err
			}
			res.Locks++
			if promoted {
				res.Promoted++
			}
		}
		n, err := w.exec(sIdemCleanup, nil, w.now)
		res.IdempotencyKeys = int(n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}
