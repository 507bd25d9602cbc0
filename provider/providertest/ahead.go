package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// aheadCases cover FetchOptions.Ahead: a fetch may take delayed messages
// shortly before they are due, and then says when (OrchestrationItem.DueAt),
// so the caller can hold the turn until that time.
var aheadCases = []testCase{
	{name: "ahead_takes_a_timer_before_it_is_due_and_says_when", run: func(e *env) {
		e.createInstance("t")
		fireAt := e.clock.Now().Add(10 * time.Second)
		e.enqueue(timerMsg("t", 2, fireAt))
		e.fetchNone()
		if items := e.fetchAhead(9 * time.Second); len(items) != 0 {
			e.t.Fatalf("a fetch 9s ahead took %q, due in 10s", items[0].InstanceID)
		}
		items := e.fetchAhead(10 * time.Second)
		if len(items) != 1 || items[0].InstanceID != "t" {
			e.t.Fatalf("a fetch 10s ahead took %d items, want the timer of t", len(items))
		}
		it := items[0]
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkTimerFired})
		e.sameTime("DueAt", it.DueAt, fireAt)
		// The lock covers the wait for the due time.
		e.sameTime("LockedUntil", it.LockedUntil, e.clock.Now().Add(lockTimeout+10*time.Second))
		// Held: no other fetch takes it, even once it is due.
		e.clock.Advance(10 * time.Second)
		e.fetchNone()
	}},

	{name: "ahead_takes_a_delayed_start_and_says_when", run: func(e *env) {
		m := startMsg("s")
		m.VisibleAt = e.clock.Now().Add(time.Minute)
		e.enqueue(m)
		e.fetchNone()
		items := e.fetchAhead(time.Minute + time.Second)
		if len(items) != 1 || items[0].InstanceID != "s" {
			e.t.Fatalf("a fetch ahead took %d items, want the start of s", len(items))
		}
		mustEqual(e.t, "messages", kinds(items[0].Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.sameTime("DueAt", items[0].DueAt, m.VisibleAt)
	}},

	{name: "ahead_dates_an_item_by_its_latest_message", run: func(e *env) {
		e.createInstance("m")
		cancelAt := e.clock.Now().Add(3 * time.Second)
		cancel := cancelMsg("m")
		cancel.VisibleAt = cancelAt
		e.enqueue(eventMsg("m", "now", 1), timerMsg("m", 2, e.clock.Now().Add(time.Second)), cancel)
		items := e.fetchAhead(5 * time.Second)
		if len(items) != 1 {
			e.t.Fatalf("a fetch ahead took %d items, want 1", len(items))
		}
		mustEqual(e.t, "messages", kinds(items[0].Messages),
			[]history.WorkItemKind{history.WorkExternalRaised, history.WorkTimerFired, history.WorkCancelInstance})
		e.sameTime("DueAt", items[0].DueAt, cancelAt)
	}},

	{name: "ahead_leaves_due_items_undated", run: func(e *env) {
		e.createInstance("v")
		e.enqueue(eventMsg("v", "now", 1), timerMsg("v", 2, e.clock.Now()))
		items := e.fetchAhead(time.Minute)
		if len(items) != 1 {
			e.t.Fatalf("a fetch ahead took %d items, want 1", len(items))
		}
		if !items[0].DueAt.IsZero() {
			e.t.Fatalf("DueAt %v for messages all due, want zero", items[0].DueAt)
		}
		e.sameTime("LockedUntil", items[0].LockedUntil, e.clock.Now().Add(lockTimeout+time.Minute))
	}},
}

// fetchAhead fetches up to 10 items with FetchOptions.Ahead set to ahead.
func (e *env) fetchAhead(ahead time.Duration) []*provider.OrchestrationItem {
	e.t.Helper()
	items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: 10, Ahead: ahead})
	e.noErr(err, "FetchOrchestrationItems with Ahead")
	return items
}
