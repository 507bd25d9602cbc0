package providertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// execLockCases cover execution locks (DESIGN §4, provider/locks.go): taken
// by the Enqueue that creates the holder, extended by its acks, released by
// its terminal ack, taken over when expired, queued starts handed the lock in
// arrival order, force release, cleanup and purge.
var execLockCases = []testCase{
	{name: "StartWithLockAcquiresIt", run: func(e *env) {
		e.clock.Advance(time.Second)
		e.enqueue(xlStart("a", "k"))
		now := e.clock.Now()
		e.xlWantLock(xlLive("k", "a", provider.StatusPending, now, now, xlTTL, 0))
		e.xlStatus("a", provider.StatusPending)
		e.xlRun("a")
	}},
	{name: "UnknownKeyNotFound", run: func(e *env) {
		e.xlNoLock("nope")
		mustEqual(e.t, "locks of an empty store", len(e.xlList()), 0)
		e.enqueue(xlStart("a", "k"))
		e.xlNoLock("K")
		e.xlNoLock("k2")
	}},
	{name: "ListOrderedByKey", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("c", "kc"))
		e.clock.Advance(time.Second)
		e.enqueue(xlStartWith("a", &provider.LockRequest{Key: "ka", TTL: 2 * time.Hour}))
		e.clock.Advance(time.Second)
		e.enqueue(xlStart("b", "kb"), xlQueued("q", "kb", xlTTL))
		t2 := e.clock.Now()
		mustEqual(e.t, "locks", e.xlList(), []provider.ExecutionLock{
			xlNorm(xlLive("ka", "a", provider.StatusPending, t0.Add(time.Second), t0.Add(time.Second), 2*time.Hour, 0)),
			xlNorm(xlLive("kb", "b", provider.StatusPending, t2, t2, xlTTL, 1)),
			xlNorm(xlLive("kc", "c", provider.StatusPending, t0, t0, xlTTL, 0)),
		})
		if a, ok := e.p.(provider.Admin); ok {
			c, err := a.Counts(e.ctx)
			e.noErr(err, "Counts")
			mustEqual(e.t, "Counts.ExecutionLocks", c.ExecutionLocks, int64(3))
		}
	}},
	{name: "HeldKeyRefusesSecondStartAndWritesNothing", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(time.Minute)
		before := e.p1Snapshot("a", "b")
		err := e.p.Enqueue(e.ctx, xlStart("b", "k"))
		e.xlWantLocked(err, "k", "a", t0, t0.Add(xlTTL))
		if errors.Is(err, provider.ErrInstanceExists) {
			e.t.Fatalf("LockedError %v matches ErrInstanceExists", err)
		}
		e.p1Unchanged(before)
		e.xlAbsent("b")
		e.fetchNone() // b's start was not queued
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 0))
	}},
	{name: "RefusedStartRollsBackWholeEnqueue", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		t0 := e.clock.Now()
		before := e.p1Snapshot("a", "b", "c")
		err := e.p.Enqueue(e.ctx, startMsg("c"), eventMsg("a", "x", 1), xlStart("d", "free"), xlStart("b", "k"))
		e.xlWantLocked(err, "k", "a", t0, t0.Add(xlTTL))
		e.p1Unchanged(before)
		e.xlAbsent("b")
		e.xlAbsent("c")
		e.xlAbsent("d")
		e.xlNoLock("free")
		it := e.fetchFor("a")
		mustEqual(e.t, "messages of a", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.fetchNone()
		e.xlWantLock(xlLive("k", "a", provider.StatusPending, t0, t0, xlTTL, 0))
	}},
	{name: "SameKeyTwiceInOneEnqueueFails", run: func(e *env) {
		t0 := e.clock.Now()
		err := e.p.Enqueue(e.ctx, xlStart("a", "k"), xlStart("b", "k"))
		e.xlWantLocked(err, "k", "a", t0, t0.Add(xlTTL))
		e.xlAbsent("a")
		e.xlAbsent("b")
		e.xlNoLock("k")
		e.fetchNone()
	}},
	{name: "SameKeyInOneEnqueueQueuesSecond", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"), xlQueued("b", "k", xlTTL))
		e.xlWantLock(xlLive("k", "a", provider.StatusPending, t0, t0, xlTTL, 1))
		e.xlStatus("b", provider.StatusPending)
		e.xlRun("a")
		e.fetchNone()
	}},
	{name: "DifferentKeysDoNotInterfere", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k1"), xlStart("b", "k2"))
		got := e.p1FetchEach()
		mustEqual(e.t, "fetched", p2sorted([]string{got["a"].InstanceID, got["b"].InstanceID}), []string{"a", "b"})
		e.p1AckStart(got["a"])
		e.p1AckStart(got["b"])
		e.p2finish("a", provider.StatusCompleted)
		e.xlNoLock("k1")
		e.xlWantLock(xlLive("k2", "b", provider.StatusRunning, t0, t0, xlTTL, 0))
	}},
	{name: "LockCheckedBeforeInstanceID", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"), startMsg("x"))
		err := e.p.Enqueue(e.ctx, xlStart("x", "k"))
		e.xlWantLocked(err, "k", "a", t0, t0.Add(xlTTL))
	}},
	{name: "InstanceIDCollisionDoesNotTakeFreeLock", run: func(e *env) {
		e.createInstance("a")
		before := e.p1Snapshot("a")
		err := e.p.Enqueue(e.ctx, xlStart("a", "k"))
		e.wantErr(err, provider.ErrInstanceExists, "locked start on a taken ID")
		if errors.Is(err, provider.ErrLocked) {
			e.t.Fatalf("error %v matches ErrLocked", err)
		}
		e.p1Unchanged(before)
		e.xlNoLock("k")
		e.enqueue(xlStart("b", "k"))
		e.xlHolder("k", "b")
	}},
	{name: "InvalidLockRequestWritesNothing", run: func(e *env) {
		for i, lr := range []*provider.LockRequest{
			{Key: "", TTL: xlTTL},
			{Key: "k", TTL: 0},
			{Key: "k", TTL: -time.Second},
			{Key: "", TTL: xlTTL, Queue: true},
			{Key: "k", TTL: 0, Queue: true},
		} {
			err := e.p.Enqueue(e.ctx, startMsg("ok"), xlStartWith("a", lr))
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("start with lock request %d %+v", i, *lr))
			e.xlAbsent("a")
			e.xlAbsent("ok")
			e.xlNoLock("k")
			mustEqual(e.t, "locks", len(e.xlList()), 0)
			e.fetchNone()
		}
	}},
	{name: "AckCreatingInstanceWithLockOrKeyIsInvalid", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		for i, child := range []*provider.OrchestratorMessage{
			xlStart("child", "other"),
			func() *provider.OrchestratorMessage {
				m := startMsg("child")
				m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "key", time.Hour
				return m
			}(),
		} {
			e.enqueue(eventMsg("a", "go", nil))
			it := e.fetchFor("a")
			err := e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
				History: []history.Event{e.p1ExternalEvent(p2next(it), "go")}, Metadata: runningMeta(),
				OrchestratorItems: []*provider.OrchestratorMessage{child}})
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("ack %d creating a child with a lock or key", i))
			e.xlAbsent("child")
			e.xlNoLock("other")
			e.abandonWith(it, nil)
		}
	}},
	{name: "AcksOfHolderExtendLockToNowPlusTTL", run: func(e *env) {
		const ttl = 5 * time.Minute
		t0 := e.clock.Now()
		e.enqueue(xlStartWith("a", &provider.LockRequest{Key: "k", TTL: ttl}))
		e.clock.Advance(2 * time.Minute)
		e.xlRun("a")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), ttl, 0))
		for range 3 { // each turn comes after the previous expiry would have hit
			e.clock.Advance(4 * time.Minute)
			e.xlTurn("a")
			e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), ttl, 0))
		}
	}},
	{name: "AbandonDoesNotExtendLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(10 * time.Minute)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 0))
		it = e.fetchFor("a")
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 0))
	}},
	{name: "HolderAckRevivesItsExpiredLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(xlTTL + time.Minute)
		e.xlTurn("a")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), xlTTL, 0))
	}},
	{name: "ContinueAsNewKeepsAndExtendsLock", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(10 * time.Minute)
		e.p2turn("a", func(_ *provider.OrchestrationItem, next int64) *provider.TurnAck {
			return &provider.TurnAck{
				History:           []history.Event{{EventID: next, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js("again")}},
				Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
				OrchestratorItems: []*provider.OrchestratorMessage{p1ContinueAsNewMsg("a", 2, "again")},
			}
		})
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), xlTTL, 0))
		e.clock.Advance(10 * time.Minute)
		it := e.fetchFor("a")
		mustEqual(e.t, "continue-as-new turn", kinds(it.Messages), []history.WorkItemKind{history.WorkContinueAsNew})
		meta := runningMeta()
		meta.Input = js("again")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 2, History: []history.Event{e.p1StartedEvent("again")}, Metadata: meta})
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), xlTTL, 0))
		e.p2finish("a", provider.StatusCompleted)
		e.xlNoLock("k")
	}},
	xlTerminalCase(provider.StatusCompleted),
	xlTerminalCase(provider.StatusFailed),
	xlTerminalCase(provider.StatusCanceled),
	{name: "TerminalAckOnFirstTurnReleasesLock", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		it := e.fetchFor("a")
		meta := runningMeta()
		meta.Status, meta.Output = provider.StatusCompleted, js("done")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent(), e.completedEvent(2, "done")}, Metadata: meta})
		e.xlNoLock("k")
	}},
	{name: "DuplicateEventAckLeavesLockUntouched", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(10 * time.Minute)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		err := e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(1, "dup")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("dup")}})
		e.wantErr(err, provider.ErrDuplicateEvent, "terminal ack with a duplicate event")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 0))
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(2, "ok")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("ok")}})
		e.xlNoLock("k")
	}},
	{name: "StaleTokenAckLeavesLockUntouched", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(eventMsg("a", "go", 1))
		old := e.fetchFor("a")
		e.expireLocks()
		cur := e.fetchFor("a")
		err := e.ackErr(&provider.TurnAck{LockToken: old.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(2, "stale")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("stale")}})
		e.lockLost(err, "terminal ack with a stale token")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 0))
		e.ack(&provider.TurnAck{LockToken: cur.LockToken, ExecutionID: 1,
			History: []history.Event{e.p1ExternalEvent(2, "go")}, Metadata: runningMeta()})
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, e.clock.Now(), xlTTL, 0))
	}},
	{name: "ExpiredLockIsReported", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.clock.Advance(xlTTL - time.Millisecond)
		e.xlWantLock(xlLive("k", "a", provider.StatusPending, t0, t0, xlTTL, 0))
		e.clock.Advance(time.Millisecond) // ExpiresAt <= now
		want := xlLive("k", "a", provider.StatusPending, t0, t0, xlTTL, 0)
		want.Expired = true
		e.xlWantLock(want)
		mustEqual(e.t, "listed", e.xlList(), []provider.ExecutionLock{xlNorm(want)})
	}},
	{name: "ExpiredLockTakenOverByNewStart", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.clock.Advance(xlTTL + time.Second)
		e.enqueue(xlStart("b", "k"))
		now := e.clock.Now()
		e.xlWantLock(xlLive("k", "b", provider.StatusPending, now, now, xlTTL, 0))
		e.xlStatus("a", provider.StatusPending) // the old holder is not touched
		got := e.p1FetchEach()
		if got["a"] == nil || got["b"] == nil || len(got) != 2 {
			e.t.Fatalf("fetched %d instances, want a and b", len(got))
		}
	}},
	{name: "OldHolderAcksDoNotTouchNewHoldersLock", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(xlTTL + time.Second)
		e.enqueue(xlStart("b", "k"))
		tb := e.clock.Now()
		e.xlRun("b")
		e.clock.Advance(time.Minute)
		e.xlTurn("a")
		e.xlWantLock(xlLive("k", "b", provider.StatusRunning, tb, tb, xlTTL, 0))
		e.p2finish("a", provider.StatusCompleted)
		e.xlWantLock(xlLive("k", "b", provider.StatusRunning, tb, tb, xlTTL, 0))
		e.clock.Advance(time.Minute)
		e.xlTurn("b")
		e.xlWantLock(xlLive("k", "b", provider.StatusRunning, tb, e.clock.Now(), xlTTL, 0))
	}},
	{name: "ExpiredLockGoesToQueuedStartBeforeNewStart", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(xlQueued("q", "k", xlTTL))
		e.clock.Advance(xlTTL + time.Second)
		now := e.clock.Now()
		err := e.p.Enqueue(e.ctx, xlStart("b", "k"))
		e.xlWantLocked(err, "k", "q", now, now.Add(xlTTL))
		e.xlAbsent("b")
		// The failed Enqueue wrote nothing, its hand-over included: cleanup
		// (or the next start) hands the lock to q.
		mustEqual(e.t, "cleanup", e.xlCleanup(), provider.LockCleanup{Locks: 1, Promoted: 1})
		e.xlWantLock(xlLive("k", "q", provider.StatusPending, now, now, xlTTL, 0))
		e.xlRun("q")
		e.fetchNone()
	}},
	{name: "ExpiredLockGoesToQueuedStartAndNewStartQueuesBehind", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(xlQueued("q", "k", xlTTL))
		e.clock.Advance(xlTTL + time.Second)
		now := e.clock.Now()
		e.enqueue(xlQueued("b", "k", xlTTL))
		e.xlWantLock(xlLive("k", "q", provider.StatusPending, now, now, xlTTL, 1))
		e.xlRun("q")
		e.fetchNone()
		e.p2finish("q", provider.StatusCompleted)
		e.xlHolder("k", "b")
		e.xlRun("b")
	}},
	{name: "QueuedStartWhileHeldIsPendingAndHeldBack", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("b", "k", xlTTL))
		e.xlStatus("b", provider.StatusPending)
		mustEqual(e.t, "history of b", len(e.readHistory("b", 0)), 0)
		e.fetchNone()
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 1))
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("c", "k", xlTTL))
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 2))
		e.clock.Advance(2 * xlTTL / 3) // the holder's turn still extends, queued starts wait
		e.xlTurn("a")
		e.fetchNone()
	}},
	{name: "QueuedStartWhenFreeAcquiresAtOnce", run: func(e *env) {
		now := e.clock.Now()
		e.enqueue(xlQueued("a", "k", 2*time.Hour))
		e.xlWantLock(xlLive("k", "a", provider.StatusPending, now, now, 2*time.Hour, 0))
		e.xlRun("a")
	}},
	{name: "QueuedStartsPromotedInArrivalOrder", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		ttls := map[string]time.Duration{"b": 2 * time.Hour, "c": 3 * time.Hour, "d": 4 * time.Hour}
		for _, id := range []string{"b", "c", "d"} {
			e.clock.Advance(time.Second)
			e.enqueue(xlQueued(id, "k", ttls[id]))
		}
		e.fetchNone()
		prev := "a"
		for i, id := range []string{"b", "c", "d"} {
			e.clock.Advance(time.Minute)
			e.p2finish(prev, provider.StatusCompleted)
			now := e.clock.Now()
			e.xlWantLock(xlLive("k", id, provider.StatusPending, now, now, ttls[id], 2-i))
			e.xlRun(id) // its start became fetchable in the same ack
			e.fetchNone()
			e.xlWantLock(xlLive("k", id, provider.StatusRunning, now, now, ttls[id], 2-i))
			prev = id
		}
		e.p2finish("d", provider.StatusFailed)
		e.xlNoLock("k")
		e.fetchNone()
	}},
	{name: "QueuedStartIsPromotedByEachTerminalStatus", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(xlQueued("b", "k", xlTTL), xlQueued("c", "k", xlTTL))
		e.p2finish("a", provider.StatusCanceled)
		e.xlHolder("k", "b")
		e.xlRun("b")
		e.p2finish("b", provider.StatusFailed)
		e.xlHolder("k", "c")
		e.xlRun("c")
	}},
	{name: "PromotedDelayedStartKeepsItsDelay", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		m := xlQueued("b", "k", xlTTL)
		due := e.clock.Now().Add(30 * time.Minute)
		m.VisibleAt = due
		e.enqueue(m)
		e.clock.Advance(time.Minute)
		e.p2finish("a", provider.StatusCompleted)
		e.xlHolder("k", "b")
		e.fetchNone()
		e.clock.Advance(due.Sub(e.clock.Now()) - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(time.Millisecond)
		e.xlRun("b")
	}},
	{name: "CanceledQueuedStartLeavesQueue", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(xlQueued("b", "k", xlTTL), xlQueued("c", "k", xlTTL))
		e.enqueue(xlCancelMsg("b"))
		it := e.fetchFor("b")
		mustEqual(e.t, "messages of the queued instance", kinds(it.Messages), []history.WorkItemKind{history.WorkCancelInstance})
		meta := runningMeta()
		meta.Status, meta.Error = provider.StatusCanceled, p2failure(history.ErrorCanceled)
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, Metadata: meta, History: []history.Event{
			e.startedEvent(),
			{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: p2failure(history.ErrorCanceled)},
		}})
		e.xlStatus("b", provider.StatusCanceled)
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 1))
		e.fetchNone()
		e.p2finish("a", provider.StatusCompleted)
		e.xlHolder("k", "c")
		e.xlRun("c")
		e.fetchNone() // b's start never comes
		e.p2finish("c", provider.StatusCompleted)
		e.xlNoLock("k")
		e.fetchNone()
	}},
	{name: "ReleaseDeletesLiveLock", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		if !e.xlRelease("k") {
			e.t.Fatal("ReleaseExecutionLock(k) = false, want true")
		}
		e.xlNoLock("k")
		e.xlStatus("a", provider.StatusRunning)
		if e.xlRelease("k") {
			e.t.Fatal("second ReleaseExecutionLock(k) = true, want false")
		}
		e.clock.Advance(time.Minute)
		e.enqueue(xlStart("b", "k"))
		tb := e.clock.Now()
		e.xlRun("b")
		e.p2finish("a", provider.StatusCompleted) // the released holder's end leaves b's lock alone
		e.xlWantLock(xlLive("k", "b", provider.StatusRunning, tb, tb, xlTTL, 0))
	}},
	{name: "ReleaseUnknownKeyReportsFalse", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		if e.xlRelease("other") {
			e.t.Fatal("ReleaseExecutionLock(other) = true, want false")
		}
		e.xlHolder("k", "a")
	}},
	{name: "ReleaseHandsLockToOldestQueuedStart", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("b", "k", 2*time.Hour))
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("c", "k", xlTTL))
		e.clock.Advance(time.Minute)
		if !e.xlRelease("k") {
			e.t.Fatal("ReleaseExecutionLock(k) = false, want true")
		}
		now := e.clock.Now()
		e.xlWantLock(xlLive("k", "b", provider.StatusPending, now, now, 2*time.Hour, 1))
		e.xlRun("b")
		e.fetchNone()
		e.p2finish("a", provider.StatusCompleted) // the released holder's end hands nothing on
		e.xlWantLock(xlLive("k", "b", provider.StatusRunning, now, now, 2*time.Hour, 1))
		e.fetchNone()
	}},
	{name: "ReleaseOfExpiredLockReportsTrue", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		e.clock.Advance(2 * xlTTL)
		if !e.xlRelease("k") {
			e.t.Fatal("ReleaseExecutionLock of an expired lock = false, want true")
		}
		e.xlNoLock("k")
	}},
	{name: "CleanupDeletesExpiredLocksOnly", run: func(e *env) {
		e.enqueue(xlStart("a", "k1"))
		e.clock.Advance(30 * time.Minute)
		e.enqueue(xlStart("b", "k2"))
		tb := e.clock.Now()
		e.clock.Advance(30 * time.Minute) // k1 expires exactly now
		mustEqual(e.t, "cleanup", e.xlCleanup(), provider.LockCleanup{Locks: 1})
		e.xlNoLock("k1")
		e.xlWantLock(xlLive("k2", "b", provider.StatusPending, tb, tb, xlTTL, 0))
		mustEqual(e.t, "second cleanup", e.xlCleanup(), provider.LockCleanup{})
		e.xlStatus("a", provider.StatusPending)
	}},
	{name: "CleanupPromotesQueuedStarts", run: func(e *env) {
		e.enqueue(xlStart("a", "k1"), xlStart("b", "k2"))
		e.xlRun("a")
		e.xlRun("b")
		e.enqueue(xlQueued("qa", "k1", xlTTL), xlQueued("qb", "k2", xlTTL), xlQueued("qb2", "k2", xlTTL))
		e.clock.Advance(xlTTL)
		mustEqual(e.t, "cleanup", e.xlCleanup(), provider.LockCleanup{Locks: 2, Promoted: 2})
		now := e.clock.Now()
		e.xlWantLock(xlLive("k1", "qa", provider.StatusPending, now, now, xlTTL, 0))
		e.xlWantLock(xlLive("k2", "qb", provider.StatusPending, now, now, xlTTL, 1))
		got := e.p1FetchEach()
		if got["qa"] == nil || got["qb"] == nil || len(got) != 2 {
			e.t.Fatalf("fetched %d instances, want the promoted qa and qb", len(got))
		}
		mustEqual(e.t, "cleanup of live locks", e.xlCleanup(), provider.LockCleanup{})
	}},
	{name: "PurgeOfHolderDeletesItsLock", run: func(e *env) {
		e.admin()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.p2mustPurge(true, "a")
		e.xlNoLock("k")
		e.enqueue(xlStart("b", "k"))
		e.xlHolder("k", "b")
	}},
	{name: "PurgeOfHolderHandsLockToOldestQueuedStart", run: func(e *env) {
		e.admin()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("b", "k", xlTTL))
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("c", "k", xlTTL))
		e.clock.Advance(time.Minute)
		e.p2mustPurge(true, "a")
		now := e.clock.Now()
		e.xlWantLock(xlLive("k", "b", provider.StatusPending, now, now, xlTTL, 1))
		e.xlRun("b")
		e.fetchNone()
	}},
	{name: "PurgeOfQueuedStartRemovesItFromQueue", run: func(e *env) {
		e.admin()
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		e.xlRun("a")
		e.enqueue(xlQueued("b", "k", xlTTL))
		e.clock.Advance(time.Second)
		e.enqueue(xlQueued("c", "k", xlTTL))
		e.p2mustPurge(true, "b")
		e.xlAbsent("b")
		e.xlWantLock(xlLive("k", "a", provider.StatusRunning, t0, t0, xlTTL, 1))
		e.p2finish("a", provider.StatusCompleted)
		e.xlHolder("k", "c")
		e.xlRun("c")
		e.fetchNone()
	}},
	{name: "ConcurrentStartsOneWinner", run: func(e *env) {
		const n = 8
		errs := make([]error, n)
		p1Parallel(n, func(i int) {
			errs[i] = retryErr(func() error { return e.p.Enqueue(e.ctx, xlStart(fmt.Sprintf("s%d", i), "k")) })
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
		l := e.xlHolder("k", w)
		for i, err := range errs {
			if i != winner {
				e.xlWantLocked(err, "k", w, l.LockedAt, l.ExpiresAt)
				e.xlAbsent(fmt.Sprintf("s%d", i))
			}
		}
		e.xlRun(w)
		e.fetchNone()
	}},
	{name: "ConcurrentQueuedStartsAllQueue", run: func(e *env) {
		const n = 8
		var errs p1Errors
		p1Parallel(n, func(i int) {
			errs.add(retryErr(func() error { return e.p.Enqueue(e.ctx, xlQueued(fmt.Sprintf("s%d", i), "k", xlTTL)) }))
		})
		errs.check(e)
		l := e.xlLock("k")
		mustEqual(e.t, "queued", l.Queued, n-1)
		seen := map[string]bool{}
		for range n {
			e.xlRun(l.InstanceID)
			seen[l.InstanceID] = true
			e.fetchNone()
			e.p2finish(l.InstanceID, provider.StatusCompleted)
			if len(seen) == n {
				break
			}
			l = e.xlLock("k")
			if seen[l.InstanceID] {
				e.t.Fatalf("lock handed to %q twice", l.InstanceID)
			}
		}
		mustEqual(e.t, "instances that held the lock", len(seen), n)
		e.xlNoLock("k")
	}},
}

// idempotencyCases cover idempotency keys (DESIGN §4): a repeat within
// retention writes nothing and names the first instance, the key is checked
// before the lock, expires, is cleaned up and is deleted with its instance.
var idempotencyCases = []testCase{
	{name: "RepeatKeySameInstanceIsDuplicate", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", xlRetention))
		err := e.p.Enqueue(e.ctx, xlIdem("a", "i", xlRetention))
		e.xlWantDup(err, "i", "a")
	}},
	{name: "RepeatKeyOtherInstanceIsDuplicateAndWritesNothing", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", xlRetention))
		e.clock.Advance(time.Hour)
		before := e.p1Snapshot("a", "b")
		err := e.p.Enqueue(e.ctx, xlIdem("b", "i", 2*xlRetention))
		e.xlWantDup(err, "i", "a")
		e.p1Unchanged(before)
		e.xlAbsent("b")
		e.xlRun("a")
		e.fetchNone()
		e.enqueue(xlIdem("c", "j", xlRetention)) // another key is free
		e.xlRun("c")
	}},
	{name: "KeyRetainedAfterInstanceEnds", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", xlRetention))
		e.xlRun("a")
		e.p2finish("a", provider.StatusCompleted)
		e.clock.Advance(xlRetention - time.Minute)
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("b", "i", xlRetention)), "i", "a")
		e.xlAbsent("b")
	}},
	{name: "KeyReusableAfterRetention", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", time.Hour))
		e.clock.Advance(time.Hour - time.Millisecond)
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("b", "i", time.Hour)), "i", "a")
		e.clock.Advance(2 * time.Millisecond)
		e.enqueue(xlIdem("b", "i", 2*time.Hour))
		e.xlStatus("b", provider.StatusPending)
		e.clock.Advance(time.Hour + time.Minute) // b's retention (2h) applies now
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("c", "i", time.Hour)), "i", "b")
		e.xlAbsent("c")
	}},
	{name: "KeyCheckedBeforeLock", run: func(e *env) {
		m := xlStart("a", "k")
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", xlRetention
		e.enqueue(m)
		e.xlRun("a")
		again := xlStart("b", "k")
		again.Create.IdempotencyKey, again.Create.IdempotencyTTL = "i", xlRetention
		before := e.p1Snapshot("a", "b")
		e.xlWantDup(e.p.Enqueue(e.ctx, again), "i", "a")
		e.p1Unchanged(before)
		queued := xlQueued("c", "k", xlTTL)
		queued.Create.IdempotencyKey, queued.Create.IdempotencyTTL = "i", xlRetention
		e.xlWantDup(e.p.Enqueue(e.ctx, queued), "i", "a")
		mustEqual(e.t, "queued starts", e.xlHolder("k", "a").Queued, 0)
		e.xlAbsent("c")
	}},
	{name: "KeyCheckedBeforeInstanceID", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", xlRetention))
		e.enqueue(startMsg("x"))
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("x", "i", xlRetention)), "i", "a")
	}},
	{name: "DuplicateInMultiMessageEnqueueRollsBackAll", run: func(e *env) {
		e.enqueue(xlIdem("a", "i", xlRetention))
		before := e.p1Snapshot("a", "b", "c", "d")
		err := e.p.Enqueue(e.ctx, startMsg("c"), xlIdem("d", "j", xlRetention), eventMsg("a", "x", 1), xlIdem("b", "i", xlRetention))
		e.xlWantDup(err, "i", "a")
		e.p1Unchanged(before)
		e.xlAbsent("c")
		e.xlAbsent("d")
		e.xlRun("a")
		e.fetchNone()
		e.enqueue(xlIdem("e", "j", xlRetention)) // j was not recorded
	}},
	{name: "SameKeyTwiceInOneEnqueueIsDuplicate", run: func(e *env) {
		err := e.p.Enqueue(e.ctx, xlIdem("a", "i", xlRetention), xlIdem("b", "i", xlRetention))
		e.xlWantDup(err, "i", "a")
		e.xlAbsent("a")
		e.xlAbsent("b")
		e.fetchNone()
		e.enqueue(xlIdem("c", "i", xlRetention))
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("d", "i", xlRetention)), "i", "c")
	}},
	{name: "RefusedLockedStartRecordsNoKey", run: func(e *env) {
		t0 := e.clock.Now()
		e.enqueue(xlStart("a", "k"))
		m := xlStart("b", "k")
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", xlRetention
		e.xlWantLocked(e.p.Enqueue(e.ctx, m), "k", "a", t0, t0.Add(xlTTL))
		e.enqueue(xlIdem("c", "i", xlRetention))
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("d", "i", xlRetention)), "i", "c")
	}},
	{name: "InstanceIDCollisionRecordsNoKey", run: func(e *env) {
		e.createInstance("a")
		err := e.p.Enqueue(e.ctx, xlIdem("a", "i", xlRetention))
		e.wantErr(err, provider.ErrInstanceExists, "start with a key on a taken ID")
		var de *provider.DuplicateStartError
		if errors.As(err, &de) {
			e.t.Fatalf("got %v, want plain ErrInstanceExists: key i was never recorded", err)
		}
		e.enqueue(xlIdem("b", "i", xlRetention))
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("c", "i", xlRetention)), "i", "b")
	}},
	{name: "QueuedStartKeyIsRecorded", run: func(e *env) {
		e.enqueue(xlStart("a", "k"))
		m := xlQueued("q", "k", xlTTL)
		m.Create.IdempotencyKey, m.Create.IdempotencyTTL = "i", xlRetention
		e.enqueue(m)
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("b", "i", xlRetention)), "i", "q")
		mustEqual(e.t, "queued starts", e.xlHolder("k", "a").Queued, 1)
	}},
	{name: "PurgeDeletesKeyOfInstance", run: func(e *env) {
		e.admin()
		e.enqueue(xlIdem("a", "i", xlRetention), xlIdem("b", "j", xlRetention))
		e.p2mustPurge(true, "a")
		e.enqueue(xlIdem("c", "i", xlRetention))
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("d", "i", xlRetention)), "i", "c")
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("d", "j", xlRetention)), "j", "b")
	}},
	{name: "InvalidRetentionWritesNothing", run: func(e *env) {
		for _, ttl := range []time.Duration{0, -time.Second} {
			err := e.p.Enqueue(e.ctx, startMsg("ok"), xlIdem("a", "i", ttl))
			e.wantErr(err, provider.ErrInvalidArgument, fmt.Sprintf("start with key retention %v", ttl))
			e.xlAbsent("a")
			e.xlAbsent("ok")
			e.fetchNone()
		}
		e.enqueue(xlIdem("b", "i", xlRetention)) // i was not recorded
	}},
	{name: "CleanupDeletesKeysPastRetention", run: func(e *env) {
		e.enqueue(xlIdem("a", "i1", time.Hour), xlIdem("b", "i2", 3*time.Hour), xlIdem("c", "i3", 30*time.Minute))
		e.clock.Advance(2 * time.Hour)
		mustEqual(e.t, "cleanup", e.xlCleanup(), provider.LockCleanup{IdempotencyKeys: 2})
		mustEqual(e.t, "second cleanup", e.xlCleanup(), provider.LockCleanup{})
		e.xlWantDup(e.p.Enqueue(e.ctx, xlIdem("d", "i2", time.Hour)), "i2", "b")
		e.enqueue(xlIdem("d", "i1", time.Hour))
		e.xlStatus("a", provider.StatusPending) // cleanup deletes keys, not instances
	}},
}
