package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// cachedCases cover FetchOptions.Cached: a fetch loads only the history the
// caller does not hold, so the cost of a turn does not grow with the
// history; and it falls back to the whole history whenever what the caller
// holds is not a prefix of the current execution.
var cachedCases = []testCase{
	{name: "without_cached_the_whole_history_is_loaded", run: func(e *env) {
		e.createInstance("a")
		e.runningTurn("a")
		e.enqueue(eventMsg("a", "next", 1))
		it := e.fetchFor("a")
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 0)
		mustEqual(e.t, "history", eventIDs(it.History), []int64{1, 2})
	}},

	{name: "cached_prefix_loads_only_newer_events", run: func(e *env) {
		e.createInstance("a")
		e.runningTurn("a") // event 2
		e.runningTurn("a") // event 3
		e.enqueue(eventMsg("a", "next", 1))
		it := e.fetchCached(cachedAt("a", 1, 2))
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 2)
		mustEqual(e.t, "history after the cached event", eventIDs(it.History), []int64{3})
		e.ack(turnAck(it, 1, e.externalEvent(4, "next")))

		e.enqueue(eventMsg("a", "again", 1))
		it = e.fetchCached(cachedAt("a", 1, 4))
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 4)
		mustEqual(e.t, "nothing new", len(it.History), 0)
		mustEqual(e.t, "messages still delivered", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
	}},

	{name: "cached_is_asked_only_about_the_instance_fetched", run: func(e *env) {
		e.createInstance("a")
		e.createInstance("b")
		e.enqueue(eventMsg("b", "go", 1))
		asked := map[string]int{}
		it := e.fetchCached(func(id string) (int64, int64, bool) {
			asked[id]++
			return 1, 1, true
		})
		mustEqual(e.t, "fetched", it.InstanceID, "b")
		if asked["a"] != 0 || asked["b"] > 1 {
			e.t.Fatalf("Cached was asked %v, want at most once about b and never about a", asked)
		}
	}},

	{name: "cached_older_execution_loads_the_whole_current_one", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "two", time.Second)
		e.enqueue(eventMsg("a", "next", 1))
		it := e.fetchCached(cachedAt("a", 1, 5))
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 0)
		e.wantCount("current execution", int(it.Instance.CurrentExecutionID), 2)
		mustEqual(e.t, "history of execution 2", eventIDs(it.History), []int64{1})
	}},

	{name: "cached_position_past_the_stored_history_loads_it_all", run: func(e *env) {
		// What the caller holds is not what the store has (the instance
		// was purged and started again under the same ID).
		e.createInstance("a")
		e.runningTurn("a")
		e.enqueue(eventMsg("a", "next", 1))
		it := e.fetchCached(cachedAt("a", 1, 7))
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 0)
		mustEqual(e.t, "whole history", eventIDs(it.History), []int64{1, 2})
	}},

	{name: "cached_not_held_or_zero_loads_it_all", run: func(e *env) {
		e.createInstance("a")
		e.runningTurn("a")
		for _, c := range []func(string) (int64, int64, bool){
			func(string) (int64, int64, bool) { return 0, 0, false },
			cachedAt("a", 1, 0),
			cachedAt("other", 1, 1),
		} {
			e.enqueue(eventMsg("a", "next", 1))
			it := e.fetchCached(c)
			e.wantCount("HistoryAfter", int(it.HistoryAfter), 0)
			mustEqual(e.t, "whole history", eventIDs(it.History), []int64{1, 2})
			e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}) // consume only
		}
	}},

	{name: "cached_for_an_instance_not_started_changes_nothing", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchCached(cachedAt("a", 1, 3))
		e.wantCount("HistoryAfter", int(it.HistoryAfter), 0)
		mustEqual(e.t, "history", len(it.History), 0)
	}},
}

// cachedAt is a FetchOptions.Cached that holds execution exec of id up to
// event last.
func cachedAt(id string, exec, last int64) func(string) (int64, int64, bool) {
	return func(instanceID string) (int64, int64, bool) {
		if instanceID != id {
			return 0, 0, false
		}
		return exec, last, true
	}
}

// fetchCached fetches one item with FetchOptions.Cached set to cached.
func (e *env) fetchCached(cached func(string) (int64, int64, bool)) *provider.OrchestrationItem {
	e.t.Helper()
	opts := fetchOpts()
	opts.Cached = cached
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, opts)
	if err != nil {
		e.t.Fatalf("FetchOrchestrationItem: %v", err)
	}
	if it == nil {
		e.t.Fatal("FetchOrchestrationItem returned nothing, want an item")
	}
	return it
}

// pendingStartCases cover InstanceMeta.StartAt: messages that reach an
// instance before its start is visible can wait exactly until it is,
// instead of being re-checked on a fixed period.
var pendingStartCases = []testCase{
	{name: "visible_start_has_no_start_at", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		if !it.Instance.StartAt.IsZero() {
			e.t.Fatalf("StartAt = %v, want zero for a start that is visible", it.Instance.StartAt)
		}
	}},

	{name: "delayed_start_reports_when_it_comes_due", run: func(e *env) {
		at := e.clock.Now().Add(time.Hour)
		start := startMsg("a")
		start.VisibleAt = at
		e.enqueue(start)
		e.enqueue(eventMsg("a", "early", 1))
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		e.sameTime("StartAt", it.Instance.StartAt, at)
		// Waiting until then delivers the event with the start.
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken,
			provider.AbandonOptions{Delay: at.Sub(e.clock.Now()), IgnoreAttempt: true}), "abandon until the start")
		e.fetchNone()
		e.clock.Advance(time.Hour)
		it = e.fetchFor("a")
		mustEqual(e.t, "messages at the start", kinds(it.Messages),
			[]history.WorkItemKind{history.WorkStartOrchestration, history.WorkExternalRaised})
	}},

	{name: "start_queued_behind_a_lock_reports_its_expiry_and_brings_waiting_messages", run: func(e *env) {
		it := e.eventBehindLock()
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		lock := e.getLock("k")
		e.sameTime("StartAt", it.Instance.StartAt, lock.ExpiresAt)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken,
			provider.AbandonOptions{Delay: lock.ExpiresAt.Sub(e.clock.Now()), IgnoreAttempt: true}), "abandon until the lock expires")
		e.fetchNone()
		// The holder ends long before its lock would expire: the queued
		// start takes the lock and the event comes with it.
		e.finish("holder", provider.StatusCompleted)
		it = e.fetchFor("next")
		// The start was enqueued when it took the lock, after the event.
		mustEqual(e.t, "messages at the start", kinds(it.Messages),
			[]history.WorkItemKind{history.WorkExternalRaised, history.WorkStartOrchestration})
	}},

	{name: "start_promoted_while_its_waiting_messages_are_fetched_brings_them", run: func(e *env) {
		it := e.eventBehindLock()
		lock := e.getLock("k")
		// The holder ends while the event's turn runs: the start takes
		// the lock, and the turn, which saw no start, puts the event off
		// until the lock's expiry, as the runtime does.
		e.finish("holder", provider.StatusCompleted)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken,
			provider.AbandonOptions{Delay: lock.ExpiresAt.Sub(e.clock.Now()), IgnoreAttempt: true, UntilStart: true}), "abandon until the start")
		it = e.fetchFor("next")
		mustEqual(e.t, "messages at the start", kinds(it.Messages),
			[]history.WorkItemKind{history.WorkExternalRaised, history.WorkStartOrchestration})
	}},
}

// eventBehindLock runs "holder", which holds lock "k", queues the start of
// "next" behind it and an event for "next", and returns the fetch of
// "next": the event without its start.
func (e *env) eventBehindLock() *provider.OrchestrationItem {
	e.t.Helper()
	e.enqueue(lockedStart("holder", "k"))
	e.runStart("holder")
	queued := lockedStart("next", "k")
	queued.Create.Lock.Queue = true
	e.enqueue(queued)
	e.enqueue(eventMsg("next", "early", 1))
	return e.fetchFor("next")
}
