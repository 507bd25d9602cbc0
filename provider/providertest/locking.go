package providertest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// lockingCases check the instance lock: one holder at a time, message
// tagging, late arrivals, and fetches racing on real goroutines.
var lockingCases = []testCase{
	{name: "ExclusiveInstanceLock", run: func(e *env) {
		e.enqueue(startMsg("a"))
		first := e.fetchFor("a")
		e.fetchNone()
		e.enqueue(eventMsg("a", "more", 1))
		e.fetchNone()
		e.expireLocks()
		second := e.fetchFor("a")
		if second.LockToken == first.LockToken {
			e.t.Fatal("a fetch after expiry reused the expired token")
		}
	}},
	{name: "LockTokensAreUnique", run: func(e *env) {
		const n = 20
		for i := range n {
			e.enqueue(startMsg(fmt.Sprintf("i%02d", i)))
		}
		seen := map[string]bool{}
		var items []*provider.OrchestrationItem
		for range n {
			it := e.fetch()
			items = append(items, it)
			seen[it.LockToken] = true
		}
		e.fetchNone()
		for _, it := range items { // refetching after abandon must mint new tokens
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
			again := e.fetchFor(it.InstanceID)
			seen[again.LockToken] = true
		}
		mustEqual(e.t, "distinct tokens", len(seen), 2*n)
	}},
	{name: "BogusTokensDoNotDisturbTheRealLock", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.lockLost(e.ackErr(turnAck(&provider.OrchestrationItem{LockToken: "bogus"}, 1, e.externalEvent(2, "bogus"))), "ack with a bogus token")
		e.lockLost(e.p.AbandonOrchestrationItem(e.ctx, "bogus", provider.AbandonOptions{}), "abandon with a bogus token")
		e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, "bogus", lockTimeout), "renew with a bogus token")
		e.fetchNone()
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
		mustEqual(e.t, "history", eventIDs(e.readHistory("a", 0)), []int64{1, 2})
	}},
	{name: "CrossInstanceLockIsolation", run: func(e *env) {
		e.enqueue(startMsg("a"), startMsg("b"))
		a := e.fetchFor("a")
		b := e.fetchFor("b")
		e.ackStart(b)
		e.enqueue(eventMsg("b", "next", 1))
		e.fetchFor("b") // acking b released b only: a is still locked
		e.fetchNone()
		e.ackStart(a)
	}},
	{name: "AckDeletesOnlyTheFetchedMessages", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		e.enqueue(eventMsg("a", "two", 2), eventMsg("a", "three", 3))
		e.ackStart(it)
		next := e.fetchFor("a")
		mustEqual(e.t, "late arrivals", itemNames(next.Messages), []string{"two", "three"})
		mustEqual(e.t, "attempt count of late arrivals", next.AttemptCount, 1)
		e.ack(turnAck(next, 1, e.externalEvent(2, "two"), e.externalEvent(3, "three")))
		e.fetchNone()
	}},
	{name: "CompletionsDuringLockDeliveredAsOneBatchAfterExpiry", run: func(e *env) {
		e.enqueue(startMsg("a"))
		e.fetchFor("a")
		e.enqueue(completionMsg("a", 2, 2), completionMsg("a", 3, 3), completionMsg("a", 4, 4))
		e.fetchNone()
		e.expireLocks()
		it := e.fetchFor("a")
		mustEqual(e.t, "batch", kinds(it.Messages), []history.WorkItemKind{
			history.WorkStartOrchestration, history.WorkActivityCompleted, history.WorkActivityCompleted, history.WorkActivityCompleted,
		})
		mustEqual(e.t, "completion ids", []int64{it.Messages[1].ID, it.Messages[2].ID, it.Messages[3].ID}, []int64{2, 3, 4})
	}},
	{name: "FetchTagsOnlyMessagesVisibleAtFetchTime", run: func(e *env) {
		e.enqueue(startMsg("a"), timerMsg("a", 2, e.clock.Now().Add(5*time.Second)))
		it := e.fetchFor("a")
		mustEqual(e.t, "batch", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.clock.Advance(10 * time.Second) // the timer comes due while the lock is held
		e.ackStart(it)
		next := e.fetchFor("a")
		mustEqual(e.t, "next batch", kinds(next.Messages), []history.WorkItemKind{history.WorkTimerFired})
	}},
	{name: "FetchSkipsLockedInstanceToReachAnEligibleOne", run: func(e *env) {
		e.enqueue(eventMsg("a", "0", 0))
		e.fetchFor("a")
		for i := range 5 {
			e.enqueue(eventMsg("a", fmt.Sprint(i+1), i))
		}
		e.enqueue(eventMsg("b", "b", 0))
		items := e.fetchMax(5)
		if len(items) != 1 || items[0].InstanceID != "b" {
			e.t.Fatalf("fetch behind a locked instance returned %d items, want b alone", len(items))
		}
	}},
	{name: "BatchFetchLocksDistinctInstancesOldestFirst", run: func(e *env) {
		e.enqueue(eventMsg("b", "b1", 1))
		e.clock.Advance(time.Millisecond)
		e.enqueue(eventMsg("a", "a1", 1))
		e.clock.Advance(time.Millisecond)
		e.enqueue(eventMsg("c", "c1", 1), eventMsg("b", "b2", 2), eventMsg("d", "d1", 1))
		items := e.fetchMax(3)
		ids := make([]string, len(items))
		tokens := map[string]bool{}
		for i, it := range items {
			ids[i] = it.InstanceID
			tokens[it.LockToken] = true
			if !it.LockedUntil.Equal(e.clock.Now().Add(lockTimeout)) {
				e.t.Fatalf("%s LockedUntil = %v, want %v", it.InstanceID, it.LockedUntil, e.clock.Now().Add(lockTimeout))
			}
		}
		mustEqual(e.t, "instances, oldest message first", ids, []string{"b", "a", "c"})
		mustEqual(e.t, "distinct tokens", len(tokens), 3)
		mustEqual(e.t, "messages of b", itemNames(items[0].Messages), []string{"b1", "b2"})
		e.fetchFor("d") // b, a and c are locked
		e.fetchNone()
		for _, it := range items {
			e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta()})
		}
	}},
	{name: "ConcurrentFetchSameInstance", run: func(e *env) {
		// Two workers select the same instance at once; the lock insert lets
		// one win, and the other gets nothing (not an error). Repeated to
		// give the race many chances.
		e.createInstance("foo")
		for round := range 20 {
			e.enqueue(eventMsg("foo", fmt.Sprint(round), round))
			got := make([][]*provider.OrchestrationItem, 2)
			var errs goErrors
			parallel(2, func(i int) {
				items, err := e.fetchMaxRetry(1)
				errs.add(err)
				got[i] = items
			})
			errs.check(e)
			if len(got[0])+len(got[1]) != 1 {
				e.t.Fatalf("round %d: workers got %d and %d items, want exactly one winner", round, len(got[0]), len(got[1]))
			}
			win := append(got[0], got[1]...)[0]
			mustEqual(e.t, "winner's messages", itemNames(win.Messages), []string{fmt.Sprint(round)})
			e.fetchNone()
			e.ack(turnAck(win, 1, e.externalEvent(int64(round)+2, fmt.Sprint(round))))
		}
		mustEqual(e.t, "events", len(e.readHistory("foo", 0)), 21)
	}},
	{name: "NewMessagesDuringLock", run: func(e *env) {
		e.enqueue(startMsg("foo"))
		a := e.fetchFor("foo") // worker A
		e.enqueue(completionMsg("foo", 2, "r"))
		e.fetchNone() // worker B: foo is locked
		e.ack(&provider.TurnAck{
			LockToken: a.LockToken, ExecutionID: 1,
			History:     []history.Event{e.startedEvent("in"), e.scheduledEvent(2)},
			Metadata:    runningMeta(),
			WorkerItems: []*provider.WorkerMessage{activityMsg("foo", 2, "")},
		})
		b := e.fetchFor("foo") // worker B again
		mustEqual(e.t, "B's batch", kinds(b.Messages), []history.WorkItemKind{history.WorkActivityCompleted})
		mustEqual(e.t, "history B sees", eventIDs(b.History), []int64{1, 2})
	}},
	{name: "TimeoutValidationOnAck", run: func(e *env) {
		e.createInstance("foo")
		e.enqueue(eventMsg("foo", "go", 1))
		a := e.fetchFor("foo")
		e.clock.Advance(lockTimeout + 2*time.Second) // A is slow
		b := e.fetchFor("foo")                       // B takes the expired lock
		mustEqual(e.t, "B's batch", itemNames(b.Messages), []string{"go"})
		e.lockLost(e.ackErr(turnAck(a, 1, e.externalEvent(2, "from A"))), "A's ack after expiry")
		mustEqual(e.t, "history after A's stale ack", eventIDs(e.readHistory("foo", 0)), []int64{1})
		e.ack(turnAck(b, 1, e.externalEvent(2, "from B")))
		h := e.readHistory("foo", 0)
		mustEqual(e.t, "event 2", h[len(h)-1].Name, "from B")
		e.fetchNone()
	}},
	{name: "CompletionFlood", run: func(e *env) {
		e.enqueue(startMsg("foo"))
		a := e.fetchFor("foo")
		var errs goErrors
		parallel(10, func(i int) {
			errs.add(retryErr(func() error { return errOf(e.p.Enqueue(e.ctx, completionMsg("foo", int64(i)+2, i))) }))
		})
		errs.check(e)
		e.fetchNone() // worker B: foo is locked
		e.ackStart(a)
		b := e.fetchFor("foo")
		ids := map[int64]bool{}
		for _, m := range b.Messages {
			if m.Kind != history.WorkActivityCompleted {
				e.t.Fatalf("flood batch has a %s message", m.Kind)
			}
			ids[m.ID] = true
		}
		if len(b.Messages) != 10 || len(ids) != 10 {
			e.t.Fatalf("flood batch has %d messages (%d distinct), want all 10 completions", len(b.Messages), len(ids))
		}
		e.ack(turnAck(b, 1))
		e.fetchNone()
	}},
	{name: "ConcurrentFetchersEachGetADistinctInstance", run: func(e *env) {
		// As many fetchers as ready instances: losing the race for one
		// candidate must move on to the next, never return empty.
		const n = 10
		for i := range n {
			e.enqueue(startMsg(fmt.Sprintf("i%d", i)))
		}
		got := make([]string, n)
		var errs goErrors
		parallel(n, func(i int) {
			items, err := e.fetchMaxRetry(1)
			errs.add(err)
			if len(items) == 1 {
				got[i] = items[0].InstanceID
			}
		})
		errs.check(e)
		slices.Sort(got)
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("i%d", i)
		}
		mustEqual(e.t, "instances fetched by the concurrent fetchers", got, want)
	}},
	{name: "ConcurrentFetchersDeliverEveryMessageExactlyOnce", run: func(e *env) {
		const instances, events, fetchers = 30, 3, 16
		for i := range instances {
			id := fmt.Sprintf("i%02d", i)
			e.enqueue(startMsg(id))
			for j := range events {
				e.enqueue(eventMsg(id, fmt.Sprint(j), j))
			}
		}
		var mu sync.Mutex
		turns := map[string]int{}
		delivered := map[string]int{}
		var errs goErrors
		parallel(fetchers, func(w int) {
			for {
				items, err := e.fetchMaxRetry(1 + w%3)
				if err != nil || len(items) == 0 {
					errs.add(err)
					return
				}
				for _, it := range items {
					mu.Lock()
					turns[it.InstanceID]++
					for _, m := range it.Messages {
						delivered[it.InstanceID+"/"+string(m.Kind)+"/"+m.Name]++
					}
					mu.Unlock()
					errs.add(retryErr(func() error { return e.ackErr(turnAck(it, 1, e.startedEvent("in"))) }))
				}
			}
		})
		errs.check(e)
		e.fetchNone()
		mustEqual(e.t, "instances served", len(turns), instances)
		for id, n := range turns {
			if n != 1 {
				e.t.Fatalf("instance %s served in %d turns, want 1", id, n)
			}
		}
		mustEqual(e.t, "distinct messages delivered", len(delivered), instances*(events+1))
		for k, n := range delivered {
			if n != 1 {
				e.t.Fatalf("message %s delivered %d times", k, n)
			}
		}
	}},
	{name: "TenGoroutinesRaceOneInstanceExactlyOneWins", run: func(e *env) {
		e.enqueue(startMsg("solo"))
		var wins int
		var mu sync.Mutex
		var errs goErrors
		parallel(10, func(int) {
			items, err := e.fetchMaxRetry(1)
			errs.add(err)
			mu.Lock()
			wins += len(items)
			mu.Unlock()
		})
		errs.check(e)
		mustEqual(e.t, "winners", wins, 1)
		e.fetchNone()
	}},
	{name: "MessagesEnqueuedDuringAckNeitherLostNorDuplicated", run: func(e *env) {
		// Enqueuers race with the ack that deletes the tagged batch: every
		// message must survive exactly once, in its producer's order.
		const producers, each = 4, 10
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		var errs goErrors
		parallel(producers+1, func(i int) {
			if i == producers {
				errs.add(retryErr(func() error { return e.ackErr(turnAck(it, 1, e.startedEvent("in"))) }))
				return
			}
			for j := range each {
				m := eventMsg("a", fmt.Sprintf("%d/%02d", i, j), j)
				errs.add(retryErr(func() error { return errOf(e.p.Enqueue(e.ctx, m)) }))
			}
		})
		errs.check(e)
		var got []string
		for {
			next, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
			e.noErr(err, "fetch")
			if next == nil {
				break
			}
			got = append(got, itemNames(next.Messages)...)
			e.ack(turnAck(next, 1))
		}
		mustEqual(e.t, "messages delivered", len(got), producers*each)
		last := map[string]string{}
		seen := map[string]bool{}
		for _, name := range got {
			if seen[name] {
				e.t.Fatalf("message %s delivered twice", name)
			}
			seen[name] = true
			producer := name[:1]
			if name <= last[producer] {
				e.t.Fatalf("message %s delivered after %s of the same producer", name, last[producer])
			}
			last[producer] = name
		}
	}},
}
