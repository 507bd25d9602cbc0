package providertest

import (
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// expiryCases check how an orchestration lock ends: expiry, abandon (with
// and without delay), renewal, ack, and theft of an expired lock
// (orchestration side).
var expiryCases = []testCase{
	{name: "LockedUntilIsNowPlusLockTimeout", run: func(e *env) {
		e.enqueue(startMsg("a"), startMsg("b"))
		it := e.fetchFor("a")
		if want := e.clock.Now().Add(lockTimeout); !it.LockedUntil.Equal(want) {
			e.t.Fatalf("LockedUntil = %v, want %v", it.LockedUntil, want)
		}
		e.clock.Advance(time.Minute)
		items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: 7 * time.Second})
		e.noErr(err, "fetch with a 7s lock")
		if len(items) != 1 {
			e.t.Fatalf("fetched %d items, want 1", len(items))
		}
		if want := e.clock.Now().Add(7 * time.Second); !items[0].LockedUntil.Equal(want) {
			e.t.Fatalf("LockedUntil = %v, want %v", items[0].LockedUntil, want)
		}
	}},
	{name: "LockExpiresAfterTimeout", run: func(e *env) {
		e.enqueue(startMsg("a"))
		first := e.fetchFor("a")
		e.clock.Advance(lockTimeout - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(2 * time.Millisecond)
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", kinds(again.Messages), kinds(first.Messages))
		mustEqual(e.t, "attempt count", again.AttemptCount, 2)
	}},
	{name: "LockTimeoutIsPerFetch", run: func(e *env) {
		e.enqueue(startMsg("a"))
		_, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: 5 * time.Second})
		e.noErr(err, "fetch with a 5s lock")
		e.clock.Advance(5*time.Second - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(2 * time.Millisecond)
		e.fetchFor("a")
	}},
	{name: "AbandonReleasesLockImmediately", run: func(e *env) {
		e.enqueue(startMsg("a"))
		first := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, first.LockToken, provider.AbandonOptions{}), "abandon")
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", again.Messages, first.Messages)
		if again.LockToken == first.LockToken {
			e.t.Fatal("refetch after abandon reused the abandoned token")
		}
	}},
	{name: "AbandonWithDelayHidesMessagesUntilDue", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: 10 * time.Second}), "abandon with delay")
		e.fetchNone()
		e.clock.Advance(10*time.Second - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(time.Millisecond)
		e.fetchFor("a")
	}},
	{name: "AbandonDelayLeavesLateArrivalsVisible", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.enqueue(eventMsg("a", "late", 1)) // untagged: keeps its own visibility
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Minute}), "abandon with delay")
		late := e.fetchFor("a")
		mustEqual(e.t, "batch right after abandon", itemNames(late.Messages), []string{"late"})
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, late.LockToken, provider.AbandonOptions{}), "abandon")
		e.clock.Advance(time.Minute)
		all := e.fetchFor("a")
		mustEqual(e.t, "batch after the delay", kinds(all.Messages), []history.WorkItemKind{history.WorkStartOrchestration, history.WorkExternalRaised})
	}},
	{name: "AbandonAfterExpiryLockLostAndDelayIgnored", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.expireLocks()
		err := e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Hour})
		e.lockLost(err, "abandon after expiry")
		e.fetchFor("a") // not hidden by the rejected delay
	}},
	{name: "RenewExtendsPastOriginalExpiry", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.clock.Advance(20 * time.Second)
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew")
		e.clock.Advance(lockTimeout - 20*time.Second + time.Second) // 1s past the original expiry
		e.fetchNone()
		e.noErr(e.ackErr(turnAck(it, 1, e.externalEvent(2, "go"))), "ack of a renewed lock after its original expiry")
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
		e.enqueue(eventMsg("a", "next", 2))
		e.fetchFor("a")
	}},
	{name: "RenewedLockExpiresAtItsNewDeadline", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		start := e.clock.Now()
		e.clock.Advance(20 * time.Second)
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew")
		newDeadline := start.Add(20*time.Second + lockTimeout)
		e.clock.Advance(newDeadline.Add(-time.Millisecond).Sub(e.clock.Now()))
		e.fetchNone()
		e.clock.Advance(2 * time.Millisecond)
		stolen := e.fetchFor("a")
		if stolen.LockToken == it.LockToken {
			e.t.Fatal("fetch after the renewed lock expired reused its token")
		}
	}},
	{name: "AckAfterRenewedLockExpiredLockLost", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.clock.Advance(20 * time.Second)
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew")
		e.clock.Advance(lockTimeout + time.Millisecond)
		before := e.snapshot("a")
		late := turnAck(it, 1, e.externalEvent(2, "go"))
		late.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		e.lockLost(e.ackErr(late), "ack after the renewed lock expired")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		again := e.fetchFor("a")
		mustEqual(e.t, "redelivered messages", itemNames(again.Messages), []string{"go"})
	}},
	{name: "RenewSetsExpiryToNowPlusExtendFor", run: func(e *env) {
		// Renewal sets the deadline to now+extendFor, even when that is
		// earlier than the current one.
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.clock.Advance(5 * time.Second)
		e.noErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, 10*time.Second), "renew for 10s")
		e.clock.Advance(10*time.Second - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(2 * time.Millisecond)
		e.fetchFor("a")
	}},
	{name: "RenewAfterExpiryLockLost", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.expireLocks()
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew after expiry")
		e.fetchFor("a") // the failed renewal did not revive the lock
	}},
	{name: "RenewAfterAckLockLost", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.ackStart(it)
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), "renew after ack")
		e.enqueue(eventMsg("a", "next", 1))
		e.fetchFor("a") // the failed renewal did not lock the instance
	}},
	{name: "AckReleasesLockSoNewMessagesAreFetchableAtOnce", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.ackStart(it)
		e.fetchNone()
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "next turn", itemNames(next.Messages), []string{"next"})
	}},
	{name: "StolenLockOldHolderAckRenewAbandonAllFail", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		old := e.fetchFor("a")
		e.expireLocks()
		thief := e.fetchFor("a")
		mustEqual(e.t, "thief's batch", itemNames(thief.Messages), []string{"go"})
		stale := turnAck(old, 1, e.externalEvent(2, "old"))
		stale.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		e.lockLost(e.ackErr(stale), "old holder's ack")
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, old.LockToken, lockTimeout), "old holder's renew")
		e.lockLost(e.p.AbandonOrchestrationItem(e.ctx, old.LockToken, provider.AbandonOptions{}), "old holder's abandon")
		e.fetchNone() // the old holder's abandon did not release the thief's lock
		e.fetchWorkNone(workOpts())
		e.ack(turnAck(thief, 1, e.externalEvent(2, "thief")))
		h := e.readHistory("a", 0)
		mustEqual(e.t, "history", eventIDs(h), []int64{1, 2})
		mustEqual(e.t, "event 2", h[1].Name, "thief")
		e.fetchNone()
	}},
	{name: "ConcurrentFetchersRespectExpiration", run: func(e *env) {
		e.enqueue(startMsg("a"))
		e.fetchFor("a")
		count := func() int {
			var mu sync.Mutex
			var n int
			var errs goErrors
			parallel(8, func(int) {
				items, err := e.fetchMaxRetry(1)
				errs.add(err)
				mu.Lock()
				n += len(items)
				mu.Unlock()
			})
			errs.check(e)
			return n
		}
		e.clock.Advance(lockTimeout - time.Millisecond)
		mustEqual(e.t, "fetches before expiry", count(), 0)
		e.clock.Advance(2 * time.Millisecond)
		mustEqual(e.t, "fetches after expiry", count(), 1)
	}},
}
