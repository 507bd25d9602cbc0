package providertest

// What the ExecutionLocks and Idempotency cases share: starts that take an
// execution lock or carry an idempotency key, and reading and checking locks.

import (
	"errors"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// lockTTL is the execution lock TTL most cases start with; idemRetention the
// idempotency retention. They differ from each other and from lockTimeout
// so a store that mixes them up fails.
const (
	lockTTL       = time.Hour
	idemRetention = 24 * time.Hour
)

// startWithLock is startMsg(id) taking the execution lock lr.
func startWithLock(id string, lr *provider.LockRequest) *provider.OrchestratorMessage {
	m := startMsg(id)
	m.Create.Lock = lr
	return m
}

// lockedStart is a start of id that takes lock key with lockTTL, failing when held.
func lockedStart(id, key string) *provider.OrchestratorMessage {
	return startWithLock(id, &provider.LockRequest{Key: key, TTL: lockTTL})
}

// queuedStart is a start of id that takes lock key with ttl, queueing when held.
func queuedStart(id, key string, ttl time.Duration) *provider.OrchestratorMessage {
	return startWithLock(id, &provider.LockRequest{Key: key, TTL: ttl, Queue: true})
}

// idemStart is a start of id carrying idempotency key idem retained for ttl.
func idemStart(id, idem string, ttl time.Duration) *provider.OrchestratorMessage {
	m := startMsg(id)
	m.Create.IdempotencyKey = idem
	m.Create.IdempotencyTTL = ttl
	return m
}

// utcLock returns l with its times in UTC, so locks compare by instant.
func utcLock(l provider.ExecutionLock) provider.ExecutionLock {
	l.LockedAt, l.ExpiresAt = l.LockedAt.UTC(), l.ExpiresAt.UTC()
	return l
}

// getLock reads the lock on key, failing the case when there is none.
func (e *env) getLock(key string) provider.ExecutionLock {
	e.t.Helper()
	l, err := e.p.GetExecutionLock(e.ctx, key)
	e.noErr(err, "GetExecutionLock("+key+")")
	if l == nil {
		e.t.Fatalf("GetExecutionLock(%q) returned nil and no error", key)
	}
	return *l
}

// wantLock fails the case unless the lock on want.Key is exactly want.
func (e *env) wantLock(want provider.ExecutionLock) {
	e.t.Helper()
	mustEqual(e.t, "lock "+want.Key, utcLock(e.getLock(want.Key)), utcLock(want))
}

// liveLock is the expected state of a live lock on key held by holder since
// lockedAt, last extended at extendedAt, with ttl and queued waiting starts.
func liveLock(key, holder string, status provider.Status, lockedAt, extendedAt time.Time, ttl time.Duration, queued int) provider.ExecutionLock {
	return provider.ExecutionLock{
		Key: key, InstanceID: holder, LockedAt: lockedAt, ExpiresAt: extendedAt.Add(ttl), TTL: ttl,
		HolderStatus: status, Queued: queued,
	}
}

// wantHolder fails the case unless the lock on key exists and names holder.
func (e *env) wantHolder(key, holder string) provider.ExecutionLock {
	e.t.Helper()
	l := e.getLock(key)
	if l.InstanceID != holder {
		e.t.Fatalf("lock %q is held by %q, want %q", key, l.InstanceID, holder)
	}
	return l
}

// wantNoLock fails the case unless there is no lock on key.
func (e *env) wantNoLock(key string) {
	e.t.Helper()
	l, err := e.p.GetExecutionLock(e.ctx, key)
	if !errors.Is(err, provider.ErrNotFound) {
		e.t.Fatalf("GetExecutionLock(%q) = %+v, %v; want ErrNotFound", key, l, err)
	}
}

// listLocks lists the locks, in list order, with their times in UTC.
func (e *env) listLocks() []provider.ExecutionLock {
	e.t.Helper()
	ls, err := e.p.ListExecutionLocks(e.ctx)
	e.noErr(err, "ListExecutionLocks")
	out := make([]provider.ExecutionLock, len(ls))
	for i, l := range ls {
		out[i] = utcLock(l)
	}
	return out
}

// wantLockedErr fails the case unless err is a *LockedError with exactly
// these fields that matches ErrLocked and is permanent.
func (e *env) wantLockedErr(err error, key, holder string, lockedAt, expiresAt time.Time) {
	e.t.Helper()
	var le *provider.LockedError
	if !errors.As(err, &le) {
		e.t.Fatalf("got error %v, want *provider.LockedError", err)
	}
	e.wantErr(err, provider.ErrLocked, "LockedError")
	e.wantPermanent(err, "LockedError")
	mustEqual(e.t, "LockedError", []any{le.Key, le.InstanceID, le.LockedAt.UTC(), le.ExpiresAt.UTC()},
		[]any{key, holder, lockedAt.UTC(), expiresAt.UTC()})
}

// wantDupErr fails the case unless err is a *DuplicateStartError for idem
// naming first, matching ErrInstanceExists and not ErrLocked.
func (e *env) wantDupErr(err error, idem, first string) {
	e.t.Helper()
	var de *provider.DuplicateStartError
	if !errors.As(err, &de) {
		e.t.Fatalf("got error %v, want *provider.DuplicateStartError", err)
	}
	e.wantErr(err, provider.ErrInstanceExists, "DuplicateStartError")
	if errors.Is(err, provider.ErrLocked) {
		e.t.Fatalf("DuplicateStartError %v also matches ErrLocked", err)
	}
	e.wantPermanent(err, "DuplicateStartError")
	mustEqual(e.t, "DuplicateStartError", []string{de.IdempotencyKey, de.InstanceID}, []string{idem, first})
}

// releaseLock force-releases key, failing on error.
func (e *env) releaseLock(key string) bool {
	e.t.Helper()
	ok, err := e.p.ReleaseExecutionLock(e.ctx, key)
	e.noErr(err, "ReleaseExecutionLock("+key+")")
	return ok
}

// cleanupLocks runs CleanupExecutionLocks, failing on error.
func (e *env) cleanupLocks() provider.LockCleanup {
	e.t.Helper()
	c, err := e.p.CleanupExecutionLocks(e.ctx)
	e.noErr(err, "CleanupExecutionLocks")
	if c == nil {
		e.t.Fatal("CleanupExecutionLocks returned nil and no error")
	}
	return *c
}
