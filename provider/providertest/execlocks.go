package providertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// execLockCases cover execution locks (provider/locks.go): taken
// by the Enqueue that creates the holder, extended by its acks, released by
// its terminal ack, taken over when expired, queued starts handed the lock in
// arrival order, force release, cleanup and purge.
var execLockCases = []testCase{
	{name: "StartWithLockAcquiresIt", run: func(e *env) {
		e.clock.Advance(time.Second)
		e.enqueue(lockedStart("a", "k"))
		now := e.clock.Now()
		e.wantLock(liveLock("k", "a", provider.StatusPending, now, now, lockTTL, 0))
		e.wantStatus("a", provider.StatusPending)
		e.runStart("a")
	}},
	{name: "UnknownKeyNotFound", run: func(e *env) {
		e.wantNoLock("nope")
		mustEqual(e.t, "locks of an empty store", len(e.listLocks()), 0)
		e.enqueue(lockedStart("a", "k"))
		e.wantNoLock("K")
		e.wantNoLock("k2")
	}},
	{name: "ListOrderedByKey", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("c", "kc"))
		e.clock.Advance(time.Second)
		e.enqueue(startWithLock("a", &provider.LockRequest{Key: "ka", TTL: 2 * time.Hour}))
		e.clock.Advance(time.Second)
		e.enqueue(lockedStart("b", "kb"), queuedStart("q", "kb", lockTTL))
		t2 := e.clock.Now()
		mustEqual(e.t, "locks", e.listLocks(), []provider.ExecutionLock{
			utcLock(liveLock("ka", "a", provider.StatusPending, t0.Add(time.Second), t0.Add(time.Second), 2*time.Hour, 0)),
			utcLock(liveLock("kb", "b", provider.StatusPending, t2, t2, lockTTL, 1)),
			utcLock(liveLock("kc", "c", provider.StatusPending, t0, t0, lockTTL, 0)),
		})
		{
			a := e.p
			c, err := a.Counts(e.ctx)
			e.noErr(err, "Counts")
			mustEqual(e.t, "Counts.ExecutionLocks", c.ExecutionLocks, int64(3))
		}
	}},
	{name: "HeldKeyRefusesSecondStartAndWritesNothing", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(time.Minute)
		before := e.snapshot("a", "b")
		_, err := e.p.Enqueue(e.ctx, lockedStart("b", "k"))
		e.wantLockedErr(err, "k", "a", t0, t0.Add(lockTTL))
		if errors.Is(err, provider.ErrInstanceExists) {
			e.t.Fatalf("LockedError %v matches ErrInstanceExists", err)
		}
		e.unchanged(before)
		e.absent("b")
		e.fetchNone() // b's start was not queued
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 0))
	}},
	{name: "RefusedStartRollsBackWholeEnqueue", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		t0 := e.clock.Now()
		before := e.snapshot("a", "b", "c")
		_, err := e.p.Enqueue(e.ctx, startMsg("c"), eventMsg("a", "x", 1), lockedStart("d", "free"), lockedStart("b", "k"))
		e.wantLockedErr(err, "k", "a", t0, t0.Add(lockTTL))
		e.unchanged(before)
		e.absent("b")
		e.absent("c")
		e.absent("d")
		e.wantNoLock("free")
		it := e.fetchFor("a")
		mustEqual(e.t, "messages of a", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.fetchNone()
		e.wantLock(liveLock("k", "a", provider.StatusPending, t0, t0, lockTTL, 0))
	}},
	{name: "SameKeyTwiceInOneEnqueueFails", run: func(e *env) {
		t0 := e.clock.Now()
		_, err := e.p.Enqueue(e.ctx, lockedStart("a", "k"), lockedStart("b", "k"))
		e.wantLockedErr(err, "k", "a", t0, t0.Add(lockTTL))
		e.absent("a")
		e.absent("b")
		e.wantNoLock("k")
		e.fetchNone()
	}},
	{name: "SameKeyInOneEnqueueQueuesSecond", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"), queuedStart("b", "k", lockTTL))
		e.wantLock(liveLock("k", "a", provider.StatusPending, t0, t0, lockTTL, 1))
		e.wantStatus("b", provider.StatusPending)
		e.runStart("a")
		e.fetchNone()
	}},
	{name: "DifferentKeysDoNotInterfere", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k1"), lockedStart("b", "k2"))
		got := e.fetchEach()
		mustEqual(e.t, "fetched", sorted([]string{got["a"].InstanceID, got["b"].InstanceID}), []string{"a", "b"})
		e.ackStart(got["a"])
		e.ackStart(got["b"])
		e.finish("a", provider.StatusCompleted)
		e.wantNoLock("k1")
		e.wantLock(liveLock("k2", "b", provider.StatusRunning, t0, t0, lockTTL, 0))
	}},
	{name: "LockCheckedBeforeInstanceID", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"), startMsg("x"))
		_, err := e.p.Enqueue(e.ctx, lockedStart("x", "k"))
		e.wantLockedErr(err, "k", "a", t0, t0.Add(lockTTL))
	}},
	{name: "InstanceIDCollisionDoesNotTakeFreeLock", run: func(e *env) {
		e.createInstance("a")
		before := e.snapshot("a")
		_, err := e.p.Enqueue(e.ctx, lockedStart("a", "k"))
		e.wantErr(err, provider.ErrInstanceExists, "locked start on a taken ID")
		if errors.Is(err, provider.ErrLocked) {
			e.t.Fatalf("error %v matches ErrLocked", err)
		}
		e.unchanged(before)
		e.wantNoLock("k")
		e.enqueue(lockedStart("b", "k"))
		e.wantHolder("k", "b")
	}},
	{name: "InvalidLockRequestWritesNothing", run: func(e *env) {
		for i, lr := range []*provider.LockRequest{
			{Key: "", TTL: lockTTL},
			{Key: "k", TTL: 0},
			{Key: "k", TTL: -time.Second},
			{Key: "", TTL: lockTTL, Queue: true},
			{Key: "k", TTL: 0, Queue: true},
		} {
			_, err := e.p.Enqueue(e.ctx, startMsg("ok"), startWithLock("a", lr))
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("start with lock request %d %+v", i, *lr))
			e.absent("a")
			e.absent("ok")
			e.wantNoLock("k")
			mustEqual(e.t, "locks", len(e.listLocks()), 0)
			e.fetchNone()
		}
	}},
	{name: "AckCreatingInstanceWithLockOrKeyIsInvalid", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		for i, child := range []*provider.OrchestratorMessage{
			lockedStart("child", "other"),
			func() *provider.OrchestratorMessage {
				m := startMsg("child")
				m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "key", time.Hour
				return m
			}(),
		} {
			e.enqueue(eventMsg("a", "go", nil))
			it := e.fetchFor("a")
			err := e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
				History: []history.Event{e.externalEvent(nextEventID(it), "go")}, Metadata: runningMeta(),
				OrchestratorItems: []*provider.OrchestratorMessage{child}})
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("ack %d creating a child with a lock or key", i))
			e.absent("child")
			e.wantNoLock("other")
			e.abandonWith(it, nil)
		}
	}},
	{name: "AcksOfHolderExtendLockToNowPlusTTL", run: func(e *env) {
		const ttl = 5 * time.Minute
		t0 := e.clock.Now()
		e.enqueue(startWithLock("a", &provider.LockRequest{Key: "k", TTL: ttl}))
		e.clock.Advance(2 * time.Minute)
		e.runStart("a")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), ttl, 0))
		for range 3 { // each turn comes after the previous expiry would have hit
			e.clock.Advance(4 * time.Minute)
			e.runningTurn("a")
			e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), ttl, 0))
		}
	}},
	{name: "AbandonDoesNotExtendLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(10 * time.Minute)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 0))
		it = e.fetchFor("a")
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 0))
	}},
	{name: "HolderAckRevivesItsExpiredLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(lockTTL + time.Minute)
		e.runningTurn("a")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), lockTTL, 0))
	}},
	{name: "ContinueAsNewKeepsAndExtendsLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(10 * time.Minute)
		e.runTurn("a", func(_ *provider.OrchestrationItem, next int64) *provider.TurnAck {
			return &provider.TurnAck{
				History:           []history.Event{{EventID: next, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js("again")}},
				Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
				OrchestratorItems: []*provider.OrchestratorMessage{continueAsNewMsg("a", 2, "again")},
			}
		})
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), lockTTL, 0))
		e.clock.Advance(10 * time.Minute)
		it := e.fetchFor("a")
		mustEqual(e.t, "continue-as-new turn", kinds(it.Messages), []history.WorkItemKind{history.WorkContinueAsNew})
		meta := runningMeta()
		meta.Input = js("again")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 2, History: []history.Event{e.startedEvent("again")}, Metadata: meta})
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), lockTTL, 0))
		e.finish("a", provider.StatusCompleted)
		e.wantNoLock("k")
	}},
	terminalReleasesLockCase(provider.StatusCompleted),
	terminalReleasesLockCase(provider.StatusFailed),
	terminalReleasesLockCase(provider.StatusCanceled),
	{name: "TerminalAckOnFirstTurnReleasesLock", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		it := e.fetchFor("a")
		meta := runningMeta()
		meta.Status, meta.Output = provider.StatusCompleted, js("done")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in"), e.completedEvent(2, "done")}, Metadata: meta})
		e.wantNoLock("k")
	}},
	{name: "DuplicateEventAckLeavesLockUntouched", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(10 * time.Minute)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		err := e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(1, "dup")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("dup")}})
		e.wantErr(err, provider.ErrDuplicateEvent, "terminal ack with a duplicate event")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 0))
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(2, "ok")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("ok")}})
		e.wantNoLock("k")
	}},
	{name: "StaleTokenAckLeavesLockUntouched", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(eventMsg("a", "go", 1))
		old := e.fetchFor("a")
		e.expireLocks()
		cur := e.fetchFor("a")
		err := e.ackErr(&provider.TurnAck{LockToken: old.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(2, "stale")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("stale")}})
		e.lockLost(err, "terminal ack with a stale token")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 0))
		e.ack(&provider.TurnAck{LockToken: cur.LockToken, ExecutionID: 1,
			History: []history.Event{e.externalEvent(2, "go")}, Metadata: runningMeta()})
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, e.clock.Now(), lockTTL, 0))
	}},
	{name: "ExpiredLockIsReported", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.clock.Advance(lockTTL - time.Millisecond)
		e.wantLock(liveLock("k", "a", provider.StatusPending, t0, t0, lockTTL, 0))
		e.clock.Advance(time.Millisecond) // ExpiresAt <= now
		want := liveLock("k", "a", provider.StatusPending, t0, t0, lockTTL, 0)
		want.Expired = true
		e.wantLock(want)
		mustEqual(e.t, "listed", e.listLocks(), []provider.ExecutionLock{utcLock(want)})
	}},
	{name: "ExpiredLockTakenOverByNewStart", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.clock.Advance(lockTTL + time.Second)
		e.enqueue(lockedStart("b", "k"))
		now := e.clock.Now()
		e.wantLock(liveLock("k", "b", provider.StatusPending, now, now, lockTTL, 0))
		e.wantStatus("a", provider.StatusPending) // the old holder is not touched
		got := e.fetchEach()
		if got["a"] == nil || got["b"] == nil || len(got) != 2 {
			e.t.Fatalf("fetched %d instances, want a and b", len(got))
		}
	}},
	{name: "OldHolderAcksDoNotTouchNewHoldersLock", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(lockTTL + time.Second)
		e.enqueue(lockedStart("b", "k"))
		tb := e.clock.Now()
		e.runStart("b")
		e.clock.Advance(time.Minute)
		e.runningTurn("a")
		e.wantLock(liveLock("k", "b", provider.StatusRunning, tb, tb, lockTTL, 0))
		e.finish("a", provider.StatusCompleted)
		e.wantLock(liveLock("k", "b", provider.StatusRunning, tb, tb, lockTTL, 0))
		e.clock.Advance(time.Minute)
		e.runningTurn("b")
		e.wantLock(liveLock("k", "b", provider.StatusRunning, tb, e.clock.Now(), lockTTL, 0))
	}},
	{name: "ExpiredLockGoesToQueuedStartBeforeNewStart", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(queuedStart("q", "k", lockTTL))
		e.clock.Advance(lockTTL + time.Second)
		now := e.clock.Now()
		_, err := e.p.Enqueue(e.ctx, lockedStart("b", "k"))
		e.wantLockedErr(err, "k", "q", now, now.Add(lockTTL))
		e.absent("b")
		// The failed Enqueue wrote nothing, its hand-over included: cleanup
		// (or the next start) hands the lock to q.
		mustEqual(e.t, "cleanup", e.cleanupLocks(), provider.LockCleanup{Locks: 1, Promoted: 1})
		e.wantLock(liveLock("k", "q", provider.StatusPending, now, now, lockTTL, 0))
		e.runStart("q")
		e.fetchNone()
	}},
	{name: "ExpiredLockGoesToQueuedStartAndNewStartQueuesBehind", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(queuedStart("q", "k", lockTTL))
		e.clock.Advance(lockTTL + time.Second)
		now := e.clock.Now()
		e.enqueue(queuedStart("b", "k", lockTTL))
		e.wantLock(liveLock("k", "q", provider.StatusPending, now, now, lockTTL, 1))
		e.runStart("q")
		e.fetchNone()
		e.finish("q", provider.StatusCompleted)
		e.wantHolder("k", "b")
		e.runStart("b")
	}},
	{name: "QueuedStartWhileHeldIsPendingAndHeldBack", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("b", "k", lockTTL))
		e.wantStatus("b", provider.StatusPending)
		mustEqual(e.t, "history of b", len(e.readHistory("b", 0)), 0)
		e.fetchNone()
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 1))
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("c", "k", lockTTL))
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 2))
		e.clock.Advance(2 * lockTTL / 3) // the holder's turn still extends, queued starts wait
		e.runningTurn("a")
		e.fetchNone()
	}},
	{name: "QueuedStartWhenFreeAcquiresAtOnce", run: func(e *env) {
		now := e.clock.Now()
		e.enqueue(queuedStart("a", "k", 2*time.Hour))
		e.wantLock(liveLock("k", "a", provider.StatusPending, now, now, 2*time.Hour, 0))
		e.runStart("a")
	}},
	{name: "QueuedStartsPromotedInArrivalOrder", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		ttls := map[string]time.Duration{"b": 2 * time.Hour, "c": 3 * time.Hour, "d": 4 * time.Hour}
		for _, id := range []string{"b", "c", "d"} {
			e.clock.Advance(time.Second)
			e.enqueue(queuedStart(id, "k", ttls[id]))
		}
		e.fetchNone()
		prev := "a"
		for i, id := range []string{"b", "c", "d"} {
			e.clock.Advance(time.Minute)
			e.finish(prev, provider.StatusCompleted)
			now := e.clock.Now()
			e.wantLock(liveLock("k", id, provider.StatusPending, now, now, ttls[id], 2-i))
			e.runStart(id) // its start became fetchable in the same ack
			e.fetchNone()
			e.wantLock(liveLock("k", id, provider.StatusRunning, now, now, ttls[id], 2-i))
			prev = id
		}
		e.finish("d", provider.StatusFailed)
		e.wantNoLock("k")
		e.fetchNone()
	}},
	{name: "QueuedStartIsPromotedByEachTerminalStatus", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(queuedStart("b", "k", lockTTL), queuedStart("c", "k", lockTTL))
		e.finish("a", provider.StatusCanceled)
		e.wantHolder("k", "b")
		e.runStart("b")
		e.finish("b", provider.StatusFailed)
		e.wantHolder("k", "c")
		e.runStart("c")
	}},
	{name: "PromotedDelayedStartKeepsItsDelay", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		m := queuedStart("b", "k", lockTTL)
		due := e.clock.Now().Add(30 * time.Minute)
		m.VisibleAt = due
		e.enqueue(m)
		e.clock.Advance(time.Minute)
		e.finish("a", provider.StatusCompleted)
		e.wantHolder("k", "b")
		e.fetchNone()
		e.clock.Advance(due.Sub(e.clock.Now()) - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(time.Millisecond)
		e.runStart("b")
	}},
	{name: "CanceledQueuedStartLeavesQueue", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(queuedStart("b", "k", lockTTL), queuedStart("c", "k", lockTTL))
		e.enqueue(cancelMsg("b"))
		it := e.fetchFor("b")
		mustEqual(e.t, "messages of the queued instance", kinds(it.Messages), []history.WorkItemKind{history.WorkCancelInstance})
		meta := runningMeta()
		meta.Status, meta.Error = provider.StatusCanceled, errDetails(history.ErrorCanceled, "boom")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, Metadata: meta, History: []history.Event{
			e.startedEvent("in"),
			{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: errDetails(history.ErrorCanceled, "boom")},
		}})
		e.wantStatus("b", provider.StatusCanceled)
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 1))
		e.fetchNone()
		e.finish("a", provider.StatusCompleted)
		e.wantHolder("k", "c")
		e.runStart("c")
		e.fetchNone() // b's start never comes
		e.finish("c", provider.StatusCompleted)
		e.wantNoLock("k")
		e.fetchNone()
	}},
	{name: "ReleaseDeletesLiveLock", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		if !e.releaseLock("k") {
			e.t.Fatal("ReleaseExecutionLock(k) = false, want true")
		}
		e.wantNoLock("k")
		e.wantStatus("a", provider.StatusRunning)
		if e.releaseLock("k") {
			e.t.Fatal("second ReleaseExecutionLock(k) = true, want false")
		}
		e.clock.Advance(time.Minute)
		e.enqueue(lockedStart("b", "k"))
		tb := e.clock.Now()
		e.runStart("b")
		e.finish("a", provider.StatusCompleted) // the released holder's end leaves b's lock alone
		e.wantLock(liveLock("k", "b", provider.StatusRunning, tb, tb, lockTTL, 0))
	}},
	{name: "ReleaseUnknownKeyReportsFalse", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		if e.releaseLock("other") {
			e.t.Fatal("ReleaseExecutionLock(other) = true, want false")
		}
		e.wantHolder("k", "a")
	}},
	{name: "ReleaseHandsLockToOldestQueuedStart", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("b", "k", 2*time.Hour))
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("c", "k", lockTTL))
		e.clock.Advance(time.Minute)
		if !e.releaseLock("k") {
			e.t.Fatal("ReleaseExecutionLock(k) = false, want true")
		}
		now := e.clock.Now()
		e.wantLock(liveLock("k", "b", provider.StatusPending, now, now, 2*time.Hour, 1))
		e.runStart("b")
		e.fetchNone()
		e.finish("a", provider.StatusCompleted) // the released holder's end hands nothing on
		e.wantLock(liveLock("k", "b", provider.StatusRunning, now, now, 2*time.Hour, 1))
		e.fetchNone()
	}},
	{name: "ReleaseOfExpiredLockReportsTrue", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.clock.Advance(2 * lockTTL)
		if !e.releaseLock("k") {
			e.t.Fatal("ReleaseExecutionLock of an expired lock = false, want true")
		}
		e.wantNoLock("k")
	}},
	{name: "CleanupDeletesExpiredLocksOnly", run: func(e *env) {
		e.enqueue(lockedStart("a", "k1"))
		e.clock.Advance(30 * time.Minute)
		e.enqueue(lockedStart("b", "k2"))
		tb := e.clock.Now()
		e.clock.Advance(30 * time.Minute) // k1 expires exactly now
		mustEqual(e.t, "cleanup", e.cleanupLocks(), provider.LockCleanup{Locks: 1})
		e.wantNoLock("k1")
		e.wantLock(liveLock("k2", "b", provider.StatusPending, tb, tb, lockTTL, 0))
		mustEqual(e.t, "second cleanup", e.cleanupLocks(), provider.LockCleanup{})
		e.wantStatus("a", provider.StatusPending)
	}},
	{name: "CleanupPromotesQueuedStarts", run: func(e *env) {
		e.enqueue(lockedStart("a", "k1"), lockedStart("b", "k2"))
		e.runStart("a")
		e.runStart("b")
		e.enqueue(queuedStart("qa", "k1", lockTTL), queuedStart("qb", "k2", lockTTL), queuedStart("qb2", "k2", lockTTL))
		e.clock.Advance(lockTTL)
		mustEqual(e.t, "cleanup", e.cleanupLocks(), provider.LockCleanup{Locks: 2, Promoted: 2})
		now := e.clock.Now()
		e.wantLock(liveLock("k1", "qa", provider.StatusPending, now, now, lockTTL, 0))
		e.wantLock(liveLock("k2", "qb", provider.StatusPending, now, now, lockTTL, 1))
		got := e.fetchEach()
		if got["qa"] == nil || got["qb"] == nil || len(got) != 2 {
			e.t.Fatalf("fetched %d instances, want the promoted qa and qb", len(got))
		}
		mustEqual(e.t, "cleanup of live locks", e.cleanupLocks(), provider.LockCleanup{})
	}},
	{name: "PurgeOfHolderDeletesItsLock", run: func(e *env) {
		e.admin()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.mustPurge(true, "a")
		e.wantNoLock("k")
		e.enqueue(lockedStart("b", "k"))
		e.wantHolder("k", "b")
	}},
	{name: "PurgeOfHolderHandsLockToOldestQueuedStart", run: func(e *env) {
		e.admin()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("b", "k", lockTTL))
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("c", "k", lockTTL))
		e.clock.Advance(time.Minute)
		e.mustPurge(true, "a")
		now := e.clock.Now()
		e.wantLock(liveLock("k", "b", provider.StatusPending, now, now, lockTTL, 1))
		e.runStart("b")
		e.fetchNone()
	}},
	{name: "PurgeOfQueuedStartRemovesItFromQueue", run: func(e *env) {
		e.admin()
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.enqueue(queuedStart("b", "k", lockTTL))
		e.clock.Advance(time.Second)
		e.enqueue(queuedStart("c", "k", lockTTL))
		e.mustPurge(true, "b")
		e.absent("b")
		e.wantLock(liveLock("k", "a", provider.StatusRunning, t0, t0, lockTTL, 1))
		e.finish("a", provider.StatusCompleted)
		e.wantHolder("k", "c")
		e.runStart("c")
		e.fetchNone()
	}},
	{name: "ConcurrentStartsOneWinner", run: func(e *env) {
		const n = 8
		errs := make([]error, n)
		parallel(n, func(i int) {
			errs[i] = retryErr(func() error { return errOf(e.p.Enqueue(e.ctx, lockedStart(fmt.Sprintf("s%d", i), "k"))) })
		})
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					e.t.Fatalf("starts s%d and s%d both took lock k", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			e.t.Fatalf("no start took lock k; first error: %v", errs[0])
		}
		w := fmt.Sprintf("s%d", winner)
		l := e.wantHolder("k", w)
		for i, err := range errs {
			if i != winner {
				e.wantLockedErr(err, "k", w, l.LockedAt, l.ExpiresAt)
				e.absent(fmt.Sprintf("s%d", i))
			}
		}
		e.runStart(w)
		e.fetchNone()
	}},
	{name: "ConcurrentQueuedStartsAllQueue", run: func(e *env) {
		const n = 8
		var errs goErrors
		parallel(n, func(i int) {
			errs.add(retryErr(func() error { return errOf(e.p.Enqueue(e.ctx, queuedStart(fmt.Sprintf("s%d", i), "k", lockTTL))) }))
		})
		errs.check(e)
		l := e.getLock("k")
		mustEqual(e.t, "queued", l.Queued, n-1)
		seen := map[string]bool{}
		for range n {
			e.runStart(l.InstanceID)
			seen[l.InstanceID] = true
			e.fetchNone()
			e.finish(l.InstanceID, provider.StatusCompleted)
			if len(seen) == n {
				break
			}
			l = e.getLock("k")
			if seen[l.InstanceID] {
				e.t.Fatalf("lock handed to %q twice", l.InstanceID)
			}
		}
		mustEqual(e.t, "instances that held the lock", len(seen), n)
		e.wantNoLock("k")
	}},
}

// idempotencyCases cover idempotency keys: a repeat within retention writes
// nothing and names the first instance, the key is checked before the lock,
// expires, is cleaned up, and outlives the purge of its instance.
var idempotencyCases = []testCase{
	{name: "RepeatKeySameInstanceIsDuplicate", run: func(e *env) {
		e.enqueue(idemStart("a", "i", idemRetention))
		_, err := e.p.Enqueue(e.ctx, idemStart("a", "i", idemRetention))
		e.wantDupErr(err, "i", "a")
	}},
	{name: "RepeatKeyOtherInstanceIsDuplicateAndWritesNothing", run: func(e *env) {
		e.enqueue(idemStart("a", "i", idemRetention))
		e.clock.Advance(time.Hour)
		before := e.snapshot("a", "b")
		_, err := e.p.Enqueue(e.ctx, idemStart("b", "i", 2*idemRetention))
		e.wantDupErr(err, "i", "a")
		e.unchanged(before)
		e.absent("b")
		e.runStart("a")
		e.fetchNone()
		e.enqueue(idemStart("c", "j", idemRetention)) // another key is free
		e.runStart("c")
	}},
	{name: "KeyRetainedAfterInstanceEnds", run: func(e *env) {
		e.enqueue(idemStart("a", "i", idemRetention))
		e.runStart("a")
		e.finish("a", provider.StatusCompleted)
		e.clock.Advance(idemRetention - time.Minute)
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("b", "i", idemRetention))), "i", "a")
		e.absent("b")
	}},
	{name: "KeyReusableAfterRetention", run: func(e *env) {
		e.enqueue(idemStart("a", "i", time.Hour))
		e.clock.Advance(time.Hour - time.Millisecond)
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("b", "i", time.Hour))), "i", "a")
		e.clock.Advance(2 * time.Millisecond)
		e.enqueue(idemStart("b", "i", 2*time.Hour))
		e.wantStatus("b", provider.StatusPending)
		e.clock.Advance(time.Hour + time.Minute) // b's retention (2h) applies now
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("c", "i", time.Hour))), "i", "b")
		e.absent("c")
	}},
	{name: "KeyCheckedBeforeLock", run: func(e *env) {
		m := lockedStart("a", "k")
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", idemRetention
		e.enqueue(m)
		e.runStart("a")
		again := lockedStart("b", "k")
		again.Create.IdempotencyKey, again.Create.IdempotencyTTL = "i", idemRetention
		before := e.snapshot("a", "b")
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, again)), "i", "a")
		e.unchanged(before)
		queued := queuedStart("c", "k", lockTTL)
		queued.Create.IdempotencyKey, queued.Create.IdempotencyTTL = "i", idemRetention
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, queued)), "i", "a")
		mustEqual(e.t, "queued starts", e.wantHolder("k", "a").Queued, 0)
		e.absent("c")
	}},
	{name: "KeyCheckedBeforeInstanceID", run: func(e *env) {
		e.enqueue(idemStart("a", "i", idemRetention))
		e.enqueue(startMsg("x"))
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("x", "i", idemRetention))), "i", "a")
	}},
	{name: "DuplicateInMultiMessageEnqueueRollsBackAll", run: func(e *env) {
		e.enqueue(idemStart("a", "i", idemRetention))
		before := e.snapshot("a", "b", "c", "d")
		_, err := e.p.Enqueue(e.ctx, startMsg("c"), idemStart("d", "j", idemRetention), eventMsg("a", "x", 1), idemStart("b", "i", idemRetention))
		e.wantDupErr(err, "i", "a")
		e.unchanged(before)
		e.absent("c")
		e.absent("d")
		e.runStart("a")
		e.fetchNone()
		e.enqueue(idemStart("e", "j", idemRetention)) // j was not recorded
	}},
	{name: "SameKeyTwiceInOneEnqueueIsDuplicate", run: func(e *env) {
		_, err := e.p.Enqueue(e.ctx, idemStart("a", "i", idemRetention), idemStart("b", "i", idemRetention))
		e.wantDupErr(err, "i", "a")
		e.absent("a")
		e.absent("b")
		e.fetchNone()
		e.enqueue(idemStart("c", "i", idemRetention))
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("d", "i", idemRetention))), "i", "c")
	}},
	{name: "RefusedLockedStartRecordsNoKey", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(lockedStart("a", "k"))
		m := lockedStart("b", "k")
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", idemRetention
		e.wantLockedErr(errOf(e.p.Enqueue(e.ctx, m)), "k", "a", t0, t0.Add(lockTTL))
		e.enqueue(idemStart("c", "i", idemRetention))
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("d", "i", idemRetention))), "i", "c")
	}},
	{name: "InstanceIDCollisionRecordsNoKey", run: func(e *env) {
		e.createInstance("a")
		_, err := e.p.Enqueue(e.ctx, idemStart("a", "i", idemRetention))
		e.wantErr(err, provider.ErrInstanceExists, "start with a key on a taken ID")
		var de *provider.DuplicateStartError
		if errors.As(err, &de) {
			e.t.Fatalf("got %v, want plain ErrInstanceExists: key i was never recorded", err)
		}
		e.enqueue(idemStart("b", "i", idemRetention))
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("c", "i", idemRetention))), "i", "b")
	}},
	{name: "QueuedStartKeyIsRecorded", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		m := queuedStart("q", "k", lockTTL)
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", idemRetention
		e.enqueue(m)
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("b", "i", idemRetention))), "i", "q")
		mustEqual(e.t, "queued starts", e.wantHolder("k", "a").Queued, 1)
	}},
	{name: "PurgeKeepsKeyForItsRetention", run: func(e *env) {
		e.admin()
		e.enqueue(idemStart("a", "i", idemRetention), idemStart("b", "j", idemRetention))
		e.clock.Advance(time.Minute)
		purgedAt := e.clock.Now()
		e.mustPurge(true, "a")
		e.clock.Advance(idemRetention - time.Minute - time.Millisecond)
		before := e.snapshot("a", "c")
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("c", "i", idemRetention))), "i", "a", purgedAt)
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("a", "i", idemRetention))), "i", "a", purgedAt)
		e.unchanged(before)
		e.absent("a")
		e.absent("c")
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("c", "j", idemRetention))), "j", "b", time.Time{})
		mustEqual(e.t, "cleanup within retention", e.cleanupLocks(), provider.LockCleanup{})
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("c", "i", idemRetention))), "i", "a", purgedAt)
	}},
	{name: "PurgedKeyReusableAfterRetention", run: func(e *env) {
		e.admin()
		e.enqueue(idemStart("a", "i", time.Hour), idemStart("b", "j", time.Hour))
		e.mustPurge(true, "a", "b")
		e.clock.Advance(time.Hour)
		e.enqueue(idemStart("c", "i", time.Hour))
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("d", "i", time.Hour))), "i", "c", time.Time{})
		mustEqual(e.t, "cleanup after retention", e.cleanupLocks(), provider.LockCleanup{IdempotencyKeys: 1})
		e.enqueue(idemStart("d", "j", time.Hour))
	}},
	{name: "ReusedIDAfterPurgeKeepsKeysApart", run: func(e *env) {
		e.admin()
		e.enqueue(idemStart("a", "i", idemRetention))
		e.clock.Advance(time.Minute)
		first := e.clock.Now()
		e.mustPurge(true, "a")
		e.clock.Advance(time.Minute)
		e.enqueue(idemStart("a", "j", idemRetention)) // the purged ID, a new key
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("b", "i", idemRetention))), "i", "a", first)
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("b", "j", idemRetention))), "j", "a", time.Time{})
		e.clock.Advance(time.Minute)
		second := e.clock.Now()
		e.mustPurge(true, "a")
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("b", "i", idemRetention))), "i", "a", first)
		e.wantDupPurged(errOf(e.p.Enqueue(e.ctx, idemStart("b", "j", idemRetention))), "j", "a", second)
		e.absent("a")
		e.absent("b")
	}},
	{name: "InvalidRetentionWritesNothing", run: func(e *env) {
		for _, ttl := range []time.Duration{0, -time.Second} {
			_, err := e.p.Enqueue(e.ctx, startMsg("ok"), idemStart("a", "i", ttl))
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("start with key retention %v", ttl))
			e.absent("a")
			e.absent("ok")
			e.fetchNone()
		}
		e.enqueue(idemStart("b", "i", idemRetention)) // i was not recorded
	}},
	{name: "CleanupDeletesKeysPastRetention", run: func(e *env) {
		e.enqueue(idemStart("a", "i1", time.Hour), idemStart("b", "i2", 3*time.Hour), idemStart("c", "i3", 30*time.Minute))
		e.clock.Advance(2 * time.Hour)
		mustEqual(e.t, "cleanup", e.cleanupLocks(), provider.LockCleanup{IdempotencyKeys: 2})
		mustEqual(e.t, "second cleanup", e.cleanupLocks(), provider.LockCleanup{})
		e.wantDupErr(errOf(e.p.Enqueue(e.ctx, idemStart("d", "i2", time.Hour))), "i2", "b")
		e.enqueue(idemStart("d", "i1", time.Hour))
		e.wantStatus("a", provider.StatusPending) // cleanup deletes keys, not instances
	}},
}

// terminalReleasesLockCase is a case that ends the holder of a lock with status and
// checks the lock is gone in the same ack and the key can be taken again.
func terminalReleasesLockCase(status provider.Status) testCase {
	return testCase{name: "TerminalAck" + string(status) + "ReleasesLock", run: func(e *env) {
		e.enqueue(lockedStart("a", "k"))
		e.runStart("a")
		e.clock.Advance(time.Minute)
		e.finish("a", status)
		e.wantNoLock("k")
		mustEqual(e.t, "locks", len(e.listLocks()), 0)
		e.wantStatus("a", status)
		e.clock.Advance(time.Minute)
		e.enqueue(lockedStart("b", "k"))
		now := e.clock.Now()
		e.wantLock(liveLock("k", "b", provider.StatusPending, now, now, lockTTL, 0))
		e.runStart("b")
	}}
}

// wantDupPurged is wantDupErr that also wants the error's PurgedAt to be
// purgedAt (zero: the instance was not purged).
func (e *env) wantDupPurged(err error, idem, first string, purgedAt time.Time) {
	e.t.Helper()
	e.wantDupErr(err, idem, first)
	var de *provider.DuplicateStartError
	errors.As(err, &de)
	if !de.PurgedAt.Equal(purgedAt) {
		e.t.Fatalf("DuplicateStartError for %q: PurgedAt = %v, want %v", idem, de.PurgedAt, purgedAt)
	}
}
