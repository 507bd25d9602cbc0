package provider

import (
	"context"
	"fmt"
	"time"
)

// Execution locks and idempotency keys.
//
// An execution lock is a row keyed by a lock key ("workflow id") naming the
// one instance allowed to run under that key. It is written by the Enqueue
// that creates its instance (NewInstance.Lock), in the same transaction, and
// deleted by the turn ack that makes that instance terminal (Completed,
// Failed, Canceled), in the same transaction; a ContinueAsNew keeps it.
// Every other committed ack of the holder moves ExpiresAt to now+TTL.
//
// A lock is stale when its holder is terminal or gone; it is expired when
// ExpiresAt <= now. Either way an acquisition cleans it and takes the key.
// Freeing a lock, by release, expiry, cleanup or force, hands it to the
// oldest queued start on the key (NewInstance.Lock.Queue) in the same
// transaction: the lock row names that instance and its start message is
// enqueued.
//
// An idempotency key maps to the instance the first start carrying it
// created, for the key's retention period; a repeat start within it creates
// nothing and fails with *DuplicateStartError. Keys are checked before locks.
// A key is retained while now < its creation + TTL, and a lock is live while
// now < ExpiresAt. A key is retained for its full retention whatever happens
// to its instance: purging the instance (Admin.PurgeInstances) keeps the key
// and records when the instance was purged (DuplicateStartError.PurgedAt), so
// a redelivered start does not run the work again. A purged instance ID that
// is reused by a later start does not change what an earlier key names.
//
// A start refused with *LockedError writes nothing, including the hand-over
// of an expired lock to a queued start that it performed on the way (the
// error then names that queued start): the next successful start on the
// key, or CleanupExecutionLocks, hands it over for good.

// LockRequest asks a start to take an execution lock.
type LockRequest struct {
	// Key is the lock key. Required.
	Key string
	// TTL is how long the lock lives without an ack of its holder. Required (> 0).
	TTL time.Duration
	// Queue, when the key is held by a live lock, creates the instance
	// (Pending) and keeps its start message in the key's queue instead of
	// failing: when the lock is freed, the oldest queued start takes it and
	// its message is enqueued. Without Queue a held key fails the Enqueue
	// with *LockedError.
	Queue bool
	// Replace, with Queue, makes the start replace the key's live holder
	// (an instance other than the one started): in the same transaction
	// as the queued start, a WorkCancelInstance message with the reason
	// ReplaceReason is enqueued for the holder (as a cancel sent through
	// Enqueue would be), so the start and the cancel commit together or
	// not at all. A committed Enqueue names the holder it canceled in
	// EnqueueResult.Replaced ("" when the key was free); a schedule fire
	// passes that result to ScheduleStart.Settle. Without Queue it is
	// ErrInvalidArgument.
	Replace       bool
	ReplaceReason string
}

// LockedError reports a start refused because its lock key is held by a
// live instance. It matches errors.Is(err, ErrLocked).
type LockedError struct {
	Key        string
	InstanceID string
	LockedAt   time.Time
	ExpiresAt  time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("execution lock %q is held by instance %s", e.Key, e.InstanceID)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// DuplicateStartError reports a start whose idempotency key is still
// retained: nothing was written, and InstanceID is the instance the key
// first started. It matches errors.Is(err, ErrInstanceExists).
type DuplicateStartError struct {
	IdempotencyKey string
	InstanceID     string
	// PurgedAt is when the instance the key started was purged; zero while
	// it has not been. A purged instance no longer exists (its ID may even
	// name a newer instance), but its key is retained all the same.
	PurgedAt time.Time
}

func (e *DuplicateStartError) Error() string {
	if !e.PurgedAt.IsZero() {
		return fmt.Sprintf("idempotency key %q already started instance %s (purged at %s)",
			e.IdempotencyKey, e.InstanceID, e.PurgedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("idempotency key %q already started instance %s", e.IdempotencyKey, e.InstanceID)
}

// Unwrap returns ErrInstanceExists.
func (e *DuplicateStartError) Unwrap() error { return ErrInstanceExists }

// ExecutionLock is the state of one execution lock.
type ExecutionLock struct {
	Key string
	// InstanceID is the holder.
	InstanceID string
	LockedAt   time.Time
	ExpiresAt  time.Time
	TTL        time.Duration
	// HolderStatus is the holder's status; "" when the instance is gone.
	HolderStatus Status
	// Stale: the holder is terminal or gone.
	Stale bool
	// Expired: ExpiresAt is at or before now.
	Expired bool
	// Queued counts the starts waiting for the key.
	Queued int
}

// LockCleanup counts what CleanupExecutionLocks did.
type LockCleanup struct {
	// Locks is how many expired or stale locks were deleted.
	Locks int
	// Promoted is how many queued starts took a freed lock.
	Promoted int
	// IdempotencyKeys is how many keys past their retention were deleted.
	IdempotencyKeys int
}

// LockStore is the management side of execution locks, part of Provider.
type LockStore interface {
	// GetExecutionLock returns the lock on key, or ErrNotFound when there is
	// none. An empty key, here and in ReleaseExecutionLock, is
	// ErrInvalidArgument. A lock that is stale or expired is still returned, flagged.
	GetExecutionLock(ctx context.Context, key string) (*ExecutionLock, error)

	// ListExecutionLocks returns every lock, ordered by key.
	ListExecutionLocks(ctx context.Context) ([]ExecutionLock, error)

	// ReleaseExecutionLock deletes the lock on key whatever its state (an
	// operator's force release) and hands it to the oldest queued start, in
	// one transaction. It reports whether a lock was deleted.
	ReleaseExecutionLock(ctx context.Context, key string) (bool, error)

	// CleanupExecutionLocks deletes every expired or stale lock, handing
	// each to its oldest queued start, and deletes every idempotency key
	// past its retention (whether or not its instance was purged), in one
	// transaction.
	CleanupExecutionLocks(ctx context.Context) (*LockCleanup, error)
}
