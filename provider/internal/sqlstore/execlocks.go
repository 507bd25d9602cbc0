package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// ScanExecutionLock reads one row of QLockGet or QLockList: lock_key,
// instance_id, locked_at, expires_at, ttl_ms, the holder's status (empty when
// the holder is gone) and the number of queued starts; now is the store
// time that decides Expired.
func ScanExecutionLock(r Row, now int64) (*provider.ExecutionLock, error) {
	var l provider.ExecutionLock
	var lockedAt, expires, ttl, queued int64
	var status string
	if err := r.Scan(&l.Key, &l.InstanceID, &lockedAt, &expires, &ttl, &status, &queued); err != nil {
		return nil, err
	}
	l.Queued = int(queued)
	l.LockedAt = MsTime(lockedAt)
	l.ExpiresAt = MsTime(expires)
	l.TTL = time.Duration(ttl) * time.Millisecond
	l.HolderStatus = provider.Status(status)
	l.Stale = status == "" || provider.Status(status).IsTerminal()
	l.Expired = expires <= now
	return &l, nil
}

// CheckLockKey validates a lock key argument before a store opens its
// transaction.
func CheckLockKey(key string) error {
	if key == "" {
		return sqlenc.Invalid("empty lock key")
	}
	return nil
}

// GetExecutionLock is the body of provider.LockStore.GetExecutionLock: the
// lock on key at store time now; ErrNotFound when there is none.
func GetExecutionLock(ctx context.Context, q Querier, key string, now int64) (*provider.ExecutionLock, error) {
	l, err := ScanExecutionLock(q.QueryRow(ctx, QLockGet, key), now)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("execution lock %q: %w", key, provider.ErrNotFound)
	}
	return l, err
}

// ListExecutionLocks is the body of provider.LockStore.ListExecutionLocks:
// every lock by key, at store time now.
func ListExecutionLocks(ctx context.Context, q Querier, now int64) ([]provider.ExecutionLock, error) {
	var out []provider.ExecutionLock
	err := q.Each(ctx, QLockList, func(r Row) error {
		l, err := ScanExecutionLock(r, now)
		if err != nil {
			return err
		}
		out = append(out, *l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LockCleaner is the part of a store's write transaction that
// CleanupExecutionLocks runs in.
type LockCleaner interface {
	// FreeableLocks returns the keys of the locks that are expired or
	// held by an ended (or missing) instance.
	FreeableLocks() ([]string, error)
	// ClaimFreeable serializes with other writers of key where the store
	// needs it (PostgreSQL takes the key's advisory lock; SQLite's single
	// writer needs nothing) and reports whether the lock on key is still
	// to be freed: false when another writer settled it meanwhile.
	ClaimFreeable(key string) (bool, error)
	// FreeExecutionLock deletes the lock on key and hands it to the first
	// queued start, reporting whether one was promoted.
	FreeExecutionLock(key string) (promoted bool, err error)
	// DropExpiredIdempotencyKeys deletes the expired idempotency keys and
	// returns how many.
	DropExpiredIdempotencyKeys() (int64, error)
}

// CleanupExecutionLocks is the body of
// provider.LockStore.CleanupExecutionLocks, run in one write transaction.
func CleanupExecutionLocks(w LockCleaner) (*provider.LockCleanup, error) {
	var res provider.LockCleanup
	keys, err := w.FreeableLocks()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		free, err := w.ClaimFreeable(k)
		if err != nil {
			return nil, err
		}
		if !free {
			continue
		}
		promoted, err := w.FreeExecutionLock(k)
		if err != nil {
			return nil, err
		}
		res.Locks++
		if promoted {
			res.Promoted++
		}
	}
	n, err := w.DropExpiredIdempotencyKeys()
	if err != nil {
		return nil, err
	}
	res.IdempotencyKeys = int(n)
	return &res, nil
}
