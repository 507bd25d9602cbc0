package providertest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Cases for failure modes met by stores shared by many nodes: leases that
// are already expired when a fetch returns them, poison messages whose
// leases keep lapsing, many children completing into one parent at once,
// and several stores migrating one fresh database together.

// liveLease fails the case unless a lease handed out now is still valid.
func (e *env) liveLease(what string, lockedUntil time.Time) {
	e.t.Helper()
	if now := e.clock.Now(); !lockedUntil.After(now) {
		e.t.Fatalf("%s: lease locked until %v, already expired at %v", what, lockedUntil, now)
	}
}

// leaseExpiryCases: a fetch never returns a lease that is already expired.
var leaseExpiryCases = []testCase{
	{name: "sub_millisecond_lock_timeout_gives_a_live_turn_lease", run: func(e *env) {
		e.enqueue(startMsg("tiny"))
		for _, d := range []time.Duration{time.Nanosecond, time.Microsecond, 999 * time.Microsecond} {
			it, err := provider.FetchOrchestrationItem(e.ctx, e.p, provider.FetchOptions{LockTimeout: d})
			e.noErr(err, "FetchOrchestrationItem")
			if it == nil {
				e.t.Fatalf("LockTimeout %v: nothing fetched", d)
			}
			e.liveLease(fmt.Sprintf("LockTimeout %v", d), it.LockedUntil)
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon of a live lease")
		}
		it, err := provider.FetchOrchestrationItem(e.ctx, e.p, provider.FetchOptions{LockTimeout: time.Nanosecond})
		e.noErr(err, "FetchOrchestrationItem")
		e.liveLease("last fetch", it.LockedUntil)
		e.ackStart(it)
	}},

	{name: "sub_millisecond_lock_timeout_gives_a_live_work_lease", run: func(e *env) {
		e.enqueueWork(activityMsg("tinyw", 1, ""))
		w := e.fetchWorkWith(provider.WorkFetchOptions{LockTimeout: time.Nanosecond})
		e.liveLease("work lease", w.LockedUntil)
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, time.Nanosecond), "renew of a live work lease")
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("tinyw", 1, "ok")})
	}},

	{name: "clock_passing_the_lease_during_the_fetch_redates_it", run: func(e *env) {
		e.enqueue(startMsg("slow"))
		e.ackStart(e.fetch())
		e.enqueue(eventMsg("slow", "go", 1))
		// The fetch calls Cached while it works: the clock jumps past the
		// lease it is taking, as on a slow transaction.
		cached := func(string) (int64, int64, bool) {
			e.clock.Advance(2 * lockTimeout)
			return 1, 1, true
		}
		it, err := provider.FetchOrchestrationItem(e.ctx, e.p, provider.FetchOptions{LockTimeout: lockTimeout, Cached: cached})
		e.noErr(err, "FetchOrchestrationItem")
		if it == nil {
			return // not handing it out is the other correct answer
		}
		e.liveLease("turn lease", it.LockedUntil)
		e.fetchNone() // the lease holds: nobody else may take the instance
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
	}},

	{name: "clock_passing_the_lease_during_take_turn_redates_it", run: func(e *env) {
		e.enqueue(startMsg("slowt"))
		it := e.fetch()
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, Metadata: runningMeta(),
			History:     []history.Event{e.startedEvent("in"), e.scheduledEvent(2)},
			WorkerItems: []*provider.WorkerMessage{activityMsg("slowt", 2, "")}})
		w := e.fetchWork()
		cached := func(string) (int64, int64, bool) {
			e.clock.Advance(2 * lockTimeout)
			return 1, 2, true
		}
		ack := &provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("slowt", 2, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout, Cached: cached}}
		res := e.ackWork(ack)
		if res.Turn == nil {
			return // not taking it is the other correct answer
		}
		e.liveLease("taken turn lease", res.Turn.LockedUntil)
		e.fetchNone()
		e.ack(turnAck(res.Turn, 1, e.completedEvent(3, "done")))
	}},
}

// lostLeasePoisonCases: a message whose every lease is lost (its worker
// crashes or hangs past the lock) keeps counting attempts, so the
// runtime's MaxAttempts poison path can retire it: no endless redelivery.
var lostLeasePoisonCases = []testCase{
	{name: "turn_attempts_keep_counting_across_lost_leases_and_poison_ack_retires_it", run: func(e *env) {
		e.enqueue(startMsg("pz"))
		var stale []string
		var it *provider.OrchestrationItem
		for want := 1; want <= 5; want++ {
			it = e.fetch()
			e.wantCount("attempt count after lost leases", it.AttemptCount, want)
			if want == 5 {
				break
			}
			stale = append(stale, it.LockToken)
			e.expireLocks()
		}
		// The lost leases are dead: nothing they do counts or writes.
		for _, tok := range stale {
			e.lockLost(e.p.AbandonOrchestrationItem(e.ctx, tok, provider.AbandonOptions{IgnoreAttempt: true}), "abandon with a lost lease")
			e.lockLost(e.p.RenewOrchestrationItemLock(e.ctx, tok, lockTimeout), "renew of a lost lease")
			e.lockLost(e.ackErr(&provider.TurnAck{LockToken: tok, ExecutionID: 1}), "ack with a lost lease")
		}
		// The poison path: fail the instance, consuming the message.
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in"), {EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()),
				Error: errDetails(history.ErrorPoison, "poisoned after 5 attempts")}},
			Metadata: provider.ExecutionMetadata{OrchestrationName: testOrch, OrchestrationVersion: testVersion,
				Status: provider.StatusFailed, Error: errDetails(history.ErrorPoison, "poisoned after 5 attempts")}})
		e.expireLocks()
		e.fetchNone()
		in, err := e.admin().GetInstance(e.ctx, "pz")
		e.noErr(err, "GetInstance")
		if in.Status != provider.StatusFailed {
			e.t.Fatalf("status = %s, want Failed", in.Status)
		}
		d, err := e.admin().QueueDepths(e.ctx)
		e.noErr(err, "QueueDepths")
		mustEqual(e.t, "queue depths", *d, provider.QueueDepths{})
	}},

	{name: "work_attempts_keep_counting_across_lost_leases_and_poison_ack_retires_it", run: func(e *env) {
		e.enqueueWork(activityMsg("pw", 1, ""))
		var stale []string
		var w *provider.WorkItemLease
		for want := 1; want <= 5; want++ {
			w = e.fetchWork()
			e.wantCount("attempt count after lost leases", w.AttemptCount, want)
			if want == 5 {
				break
			}
			stale = append(stale, w.LockToken)
			e.expireLocks()
		}
		for _, tok := range stale {
			e.lockLost(e.p.AbandonWorkItem(e.ctx, tok, provider.AbandonOptions{IgnoreAttempt: true}), "abandon with a lost lease")
			e.lockLost(e.p.RenewWorkItemLock(e.ctx, tok, lockTimeout), "renew of a lost lease")
			e.lockLost(e.ackWorkErr(&provider.WorkAck{LockToken: tok, Completion: completionMsg("pw", 1, "late")}), "ack with a lost lease")
		}
		// The poison path: report the activity failed, retiring the row.
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: &provider.OrchestratorMessage{
			InstanceID: "pw",
			Item: history.WorkItem{Kind: history.WorkActivityFailed, InstanceID: "pw", ExecutionID: 1, ID: 1,
				Error: errDetails(history.ErrorPoison, "poisoned after 5 attempts")},
		}})
		e.expireLocks()
		e.fetchWorkNone(workOpts())
		// Exactly one completion reached the orchestrator queue: the poison one.
		it := e.fetchFor("pw")
		e.wantCount("completions", len(it.Messages), 1)
		if it.Messages[0].Kind != history.WorkActivityFailed {
			e.t.Fatalf("completion kind = %s, want ActivityFailed", it.Messages[0].Kind)
		}
	}},
}

// childFanIn is how many children complete into one parent at once.
const childFanIn = 16

// fanInCases: many children (or activities) completing at once never
// deadlock their parent: every ack succeeds or fails retryably and is
// retried, and the parent ends with every completion exactly once.
var fanInCases = []testCase{
	{name: "children_completing_at_once_into_a_busy_parent", run: func(e *env) {
		e.runFanIn(false)
	}},
	{name: "activities_completing_at_once_with_take_turn_into_a_busy_parent", run: func(e *env) {
		e.runFanIn(true)
	}},
}

// runFanIn starts parent "fan" with childFanIn children (or activities),
// then completes them all concurrently while another goroutine keeps
// running the parent's turns, and checks the parent saw each completion
// exactly once.
func (e *env) runFanIn(activities bool) {
	e.enqueue(startMsg("fan"))
	it := e.fetchFor("fan")
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, Metadata: runningMeta(),
		History: []history.Event{e.startedEvent("in")}}
	for i := range childFanIn {
		id := int64(i + 2)
		child := fmt.Sprintf("fan-c%d", i)
		if activities {
			ack.History = append(ack.History, e.scheduledEvent(id))
			ack.WorkerItems = append(ack.WorkerItems, activityMsg("fan", id, ""))
		} else {
			ack.History = append(ack.History, e.subOrchScheduledEvent(id, child))
			ack.OrchestratorItems = append(ack.OrchestratorItems, childStartMsg("fan", 1, id, child))
		}
	}
	e.ack(ack)

	// Lease what is to complete: the activities, or each child's first turn.
	var workLeases []*provider.WorkItemLease
	childTurns := map[string]*provider.OrchestrationItem{}
	if activities {
		workLeases = e.fetchWorkN(workOpts(), childFanIn)
		e.wantCount("activities leased", len(workLeases), childFanIn)
	} else {
		for len(childTurns) < childFanIn {
			items := e.fetchMax(childFanIn)
			if len(items) == 0 {
				e.t.Fatalf("only %d of %d children fetchable", len(childTurns), childFanIn)
			}
			for _, c := range items {
				if c.InstanceID == "fan" {
					e.t.Fatal("parent fetched with no message for it")
				}
				childTurns[c.InstanceID] = c
			}
		}
	}

	var (
		errs     goErrors
		mu       sync.Mutex
		received []int64 // completion IDs the parent's turns consumed
		done     = make(chan struct{})
		wg       sync.WaitGroup
	)
	// The parent runs its turns while the completions pour in.
	wake, unsubscribe := e.p.Subscribe(provider.QueueOrchestrator)
	defer unsubscribe()
	wg.Go(func() {
		next := int64(childFanIn + 2)
		for {
			mu.Lock()
			n := len(received)
			mu.Unlock()
			if n >= childFanIn {
				return
			}
			items, err := retry(func() ([]*provider.OrchestrationItem, error) {
				return e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: 1})
			})
			if err != nil {
				errs.add(fmt.Errorf("parent fetch: %w", err))
				return
			}
			if len(items) == 0 {
				select {
				case <-done:
					// Every completion is committed: one more look finds the rest.
					items, err = e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout})
					if err != nil || len(items) == 0 {
						errs.add(fmt.Errorf("parent has %d of %d completions and nothing more to fetch (%v)", n, childFanIn, err))
						return
					}
				case <-wake:
					continue
				}
			}
			pit := items[0]
			if pit.InstanceID != "fan" {
				errs.add(fmt.Errorf("fetched %q while children are leased", pit.InstanceID))
				return
			}
			turn := &provider.TurnAck{LockToken: pit.LockToken, ExecutionID: 1, Metadata: runningMeta()}
			var ids []int64
			for _, m := range pit.Messages {
				ids = append(ids, m.ID)
				turn.History = append(turn.History, history.Event{EventID: next, Kind: history.ExternalEvent,
					TimestampMs: ms(e.clock.Now()), Name: "done", Data: js(m.ID)})
				next++
			}
			if err := retryErr(func() error { return e.ackErr(turn) }); err != nil {
				errs.add(fmt.Errorf("parent ack: %w", err))
				return
			}
			mu.Lock()
			received = append(received, ids...)
			mu.Unlock()
		}
	})

	if activities {
		concurrently(childFanIn, func(i int) error {
			l := workLeases[i]
			wa := &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("fan", l.ActivityID, "ok"),
				TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout}}
			var res provider.WorkResult
			if err := retryErr(func() (err error) {
				res, err = e.p.AckWorkItem(e.ctx, wa)
				return err
			}); err != nil {
				errs.add(fmt.Errorf("activity %d ack: %w", l.ActivityID, err))
				return nil
			}
			if res.Turn != nil {
				// A taken turn is the caller's: hand it back.
				errs.add(retryErr(func() error {
					return e.p.AbandonOrchestrationItem(e.ctx, res.Turn.LockToken, provider.AbandonOptions{IgnoreAttempt: true})
				}))
			}
			return nil
		})
	} else {
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range childTurns {
				if !yield(id) {
					return
				}
			}
		})
		concurrently(childFanIn, func(i int) error {
			c := childTurns[ids[i]]
			var k int
			if _, err := fmt.Sscanf(c.InstanceID, "fan-c%d", &k); err != nil {
				errs.add(err)
				return nil
			}
			done := &provider.TurnAck{LockToken: c.LockToken, ExecutionID: 1,
				History: []history.Event{e.startedEvent("child-in"), e.completedEvent(2, "child-out")},
				Metadata: provider.ExecutionMetadata{OrchestrationName: testOrch, OrchestrationVersion: testVersion,
					Status: provider.StatusCompleted, Input: js("child-in"), Output: js("child-out")},
				OrchestratorItems: []*provider.OrchestratorMessage{{
					InstanceID: "fan",
					Item: history.WorkItem{Kind: history.WorkSubOrchCompleted, InstanceID: "fan", ExecutionID: 1,
						ID: int64(k + 2), ChildInstanceID: c.InstanceID, Output: js("child-out")},
				}},
			}
			if err := retryErr(func() error { return e.ackErr(done) }); err != nil {
				errs.add(fmt.Errorf("child %s ack: %w", c.InstanceID, err))
			}
			return nil
		})
	}
	close(done)
	wg.Wait()
	errs.check(e)
	slices.Sort(received)
	want := make([]int64, childFanIn)
	for i := range want {
		want[i] = int64(i + 2)
	}
	mustEqual(e.t, "completions the parent received", received, want)
	e.fetchNone()
}

// concurrentMigrationCases: stores opened at the same moment on one fresh,
// never migrated database all come up, with one schema between them.
var concurrentMigrationCases = []testCase{
	{name: "stores_opened_together_on_a_fresh_database_all_work", run: func(e *env) {
		if e.h.FreshDatabase == nil {
			e.t.Skip("the harness cannot open stores on a fresh database (Harness.FreshDatabase)")
		}
		open := e.h.FreshDatabase(e.t, e.clock)
		if open == nil {
			e.t.Skip("this store has no database to share (for example an in-memory one)")
		}
		const n = 4
		stores := make([]provider.Provider, n)
		errs := concurrently(n, func(i int) error {
			p, err := open()
			stores[i] = p
			return err
		})
		for i, p := range stores {
			if p != nil {
				e.t.Cleanup(func() { _ = p.Close() })
			}
			e.noErr(errs[i], fmt.Sprintf("opening store %d", i))
		}
		// One schema: what one store writes, every other one sees.
		for i, p := range stores {
			e.noErr(errOf(p.Enqueue(e.ctx, startMsg(fmt.Sprintf("m%d", i)))), "Enqueue")
		}
		for i, p := range stores {
			c, err := p.Counts(e.ctx)
			e.noErr(err, "Counts")
			if c.Instances != n {
				e.t.Fatalf("store %d counts %d instances, want %d", i, c.Instances, n)
			}
		}
		seen := map[string]bool{}
		for i := range n {
			it, err := provider.FetchOrchestrationItem(e.ctx, stores[(i+1)%n], fetchOpts())
			e.noErr(err, "FetchOrchestrationItem")
			if it == nil || seen[it.InstanceID] {
				e.t.Fatalf("fetch %d: %+v, already seen %v", i, it, seen)
			}
			seen[it.InstanceID] = true
		}
	}},
}
