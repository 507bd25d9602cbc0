package providertest

// Helpers of the ExecutionLocks and Idempotency groups. Names start with xl
// so they cannot collide with the helpers of the other groups.

import (
	"errors"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// xlTTL is the execution lock TTL most cases start with; xlRetention the
// idempotency retention. They differ from each other and from lockTimeout
// so a store that mixes them up fails.
const (
	xlTTL       = time.Hour
	xlRetention = 24 * time.Hour
)

// xlStartWith is startMsg(id) taking the execution lock lr.
func xlStartWith(id string, lr *provider.LockRequest) *provider.OrchestratorMessage {
	m := startMsg(id)
	m.Create.Lock = lr
	return m
}

// xlStart is a start of id that takes lock key with xlTTL, failing when held.
func xlStart(id, key string) *provider.OrchestratorMessage {
	return xlStartWith(id, &provider.LockRequest{Key: key, TTL: xlTTL})
}

// xlQueued is a start of id that takes lock key with ttl, queueing when held.
func xlQueued(id, key string, ttl time.Duration) *provider.OrchestratorMessage {
	return xlStartWith(id, &provider.LockRequest{Key: key, TTL: ttl, Queue: true})
}

// xlIdem is a start of id carrying idempotency key idem retained for ttl.
func xlIdem(id, idem string, ttl time.Duration) *provider.OrchestratorMessage {
	m := startMsg(id)
	m.Create.IdempotencyKey = idem
	m.Create.IdempotencyTTL = ttl
	return m
}

// xlNorm returns l with its times in UTC, so locks compare by instant.
func xlNorm(l provider.ExecutionLock) provider.ExecutionLock {
	l.LockedAt, l.ExpiresAt = l.LockedAt.UTC(), l.ExpiresAt.UTC()
	return l
}

// xlLock reads the lock on key, failing the case when there is none.
func (e *env) xlLock(key string) provider.ExecutionLock {
	e.t.Helper()
	l, err := e.p.GetExecutionLock(e.ctx, key)
	e.noErr(err, "GetExecutionLock("+key+")")
	if l == nil {
		e.t.Fatalf("GetExecutionLock(%q) returned nil and no error", key)
	}
	return *l
}

// xlWantLock fails the case unless the lock on want.Key is exactly want.
func (e *env) xlWantLock(want provider.ExecutionLock) {
	e.t.Helper()
	mustEqual(e.t, "lock "+want.Key, xlNorm(e.xlLock(want.Key)), xlNorm(want))
}

// xlLive is the expected state of a live lock on key held by holder since
// lockedAt, last extended at extendedAt, with ttl and queued waiting starts.
func xlLive(key, holder string, status provider.Status, lockedAt, extendedAt time.Time, ttl time.Duration, queued int) provider.ExecutionLock {
	return provider.ExecutionLock{
		Key: key, InstanceID: holder, LockedAt: lockedAt, ExpiresAt: extendedAt.Add(ttl), TTL: ttl,
		HolderStatus: status, Queued: queued,
	}
}

// xlHolder fails the case unless the lock on key exists and names holder.
func (e *env) xlHolder(key, holder string) provider.ExecutionLock {
	e.t.Helper()
	l := e.xlLock(key)
	if l.InstanceID != holder {
		e.t.Fatalf("lock %q is held by %q, want %q", key, l.InstanceID, holder)
	}
	return l
}

// xlNoLock fails the case unless there is no lock on key.
func (e *env) xlNoLock(key string) {
	e.t.Helper()
	l, err := e.p.GetExecutionLock(e.ctx, key)
	if !errors.Is(err, provider.ErrNotFound) {
		e.t.Fatalf("GetExecutionLock(%q) = %+v, %v; want ErrNotFound", key, l, err)
	}
}

// xlList lists the locks, in list order, with their times in UTC.
func (e *env) xlList() []provider.ExecutionLock {
	e.t.Helper()
	ls, err := e.p.ListExecutionLocks(e.ctx)
	e.noErr(err, "ListExecutionLocks")
	out := make([]provider.ExecutionLock, len(ls))
	for i, l := range ls {
		out[i] = xlNorm(l)
	}
	return out
}

// xlWantLocked fails the case unless err is a *LockedError with exactly
// these fields that matches ErrLocked and is permanent.
func (e *env) xlWantLocked(err error, key, holder string, lockedAt, expiresAt time.Time) {
	e.t.Helper()
	var le *provider.LockedError
	if !errors.As(err, &le) {
		e.t.Fatalf("got error %v, want *provider.LockedError", err)
	}
	e.wantErr(err, provider.ErrLocked, "LockedError")
	e.p1Permanent(err, "LockedError")
	mustEqual(e.t, "LockedError", []any{le.Key, le.InstanceID, le.LockedAt.UTC(), le.ExpiresAt.UTC()},
		[]any{key, holder, lockedAt.UTC(), expiresAt.UTC()})
}

// xlWantDup fails the case unless err is a *DuplicateStartError for idem
// naming first, matching ErrInstanceExists and not ErrLocked.
func (e *env) xlWantDup(err error, idem, first string) {
	e.t.Helper()
	var de *provider.DuplicateStartError
	if !errors.As(err, &de) {
		e.t.Fatalf("got error %v, want *provider.DuplicateStartError", err)
	}
	e.wantErr(err, provider.ErrInstanceExists, "DuplicateStartError")
	if errors.Is(err, provider.ErrLocked) {
		e.t.Fatalf("DuplicateStartError %v also matches ErrLocked", err)
	}
	e.p1Permanent(err, "DuplicateStartError")
	mustEqual(e.t, "DuplicateStartError", []string{de.IdempotencyKey, de.InstanceID}, []string{idem, first})
}

// xlAbsent fails the case unless instance id does not exist.
func (e *env) xlAbsent(id string) {
	e.t.Helper()
	_, err := e.p.ReadHistory(e.ctx, id, 0)
	e.wantErr(err, provider.ErrNotFound, "ReadHistory("+id+")")
	if a := e.p1Admin(); a != nil {
		_, err := a.GetInstance(e.ctx, id)
		e.wantErr(err, provider.ErrNotFound, "GetInstance("+id+")")
	}
}

// xlStatus fails the case unless instance id exists with status st (the
// status is checked with Admin only; without it, existence).
func (e *env) xlStatus(id string, st provider.Status) {
	e.t.Helper()
	_, err := e.p.ReadHistory(e.ctx, id, 0)
	e.noErr(err, "ReadHistory("+id+")")
	if a := e.p1Admin(); a != nil {
		info, err := a.GetInstance(e.ctx, id)
		e.noErr(err, "GetInstance("+id+")")
		mustEqual(e.t, "status of "+id, info.Status, st)
	}
}

// xlRun fetches id's start and acks its first turn (event 1, Running).
func (e *env) xlRun(id string) {
	e.t.Helper()
	it := e.fetchFor(id)
	mustEqual(e.t, "first turn of "+id, kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
	e.p1AckStart(it)
}

// xlTurn runs a turn of id (triggered by an external event) that leaves it Running.
func (e *env) xlTurn(id string) {
	e.t.Helper()
	e.p2turn(id, func(_ *provider.OrchestrationItem, next int64) *provider.TurnAck {
		return &provider.TurnAck{History: []history.Event{e.p1ExternalEvent(next, "go")}, Metadata: runningMeta()}
	})
}

// xlCancelMsg is a CancelInstance message for id.
func xlCancelMsg(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: id, Reason: "stop"},
	}
}

// xlRelease force-releases key, failing on error.
func (e *env) xlRelease(key string) bool {
	e.t.Helper()
	ok, err := e.p.ReleaseExecutionLock(e.ctx, key)
	e.noErr(err, "ReleaseExecutionLock("+key+")")
	return ok
}

// xlCleanup runs CleanupExecutionLocks, failing on error.
func (e *env) xlCleanup() provider.LockCleanup {
	e.t.Helper()
	c, err := e.p.CleanupExecutionLocks(e.ctx)
	e.noErr(err, "CleanupExecutionLocks")
	if c == nil {
		e.t.Fatal("CleanupExecutionLocks returned nil and no error")
	}
	return *c
}

// xlTerminalCase is a case that ends the holder of a lock with status and
// checks the lock is gone in the same ack and the key can be taken again.
func xlTerminalCase(status provider.Status) testCase {
	return testCase{name: "TerminalAck" + string(status) + "ReleasesLock", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(time.Minute)
		e.p2finish("a", status)
		e.xlNoLock("k")
		mustEqual(e.t, "locks", len(e.xlList()), 0)
		e.xlStatus("a", status)
		e.clock.Advance(time.Minute)
		e.enqueue(xlStart("b", "k"))
		now := e.clock.Now()
		e.xlWantLock(xlLive("k", "b", provider.StatusPending, now, now, xlTTL, 0))
		e.xlRun("b")
	}}
}
