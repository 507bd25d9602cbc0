package providertest

import (
	"github.com/duroxide/duroxide-go/provider"
)

// poisonCases cover attempt counting, which the runtime's poison detection
// relies on: every fetch counts, per message, and IgnoreAttempt undoes it.
var poisonCases = []testCase{
	{name: "orchestration_attempt_starts_at_one", run: func(e *env) {
		e.enqueue(startMsg("p1"))
		e.wantCount("first fetch attempt count", e.fetch().AttemptCount, 1)
	}},

	{name: "orchestration_attempt_increments_on_abandon_and_refetch", run: func(e *env) {
		e.enqueue(startMsg("p2"))
		for want := 1; want <= 4; want++ {
			it := e.fetch()
			e.wantCount("fetch attempt count", it.AttemptCount, want)
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "AbandonOrchestrationItem")
		}
	}},

	{name: "orchestration_attempt_increments_on_lock_expiry", run: func(e *env) {
		e.enqueue(startMsg("p3"))
		for want := 1; want <= 3; want++ {
			e.wantCount("fetch attempt count", e.fetch().AttemptCount, want)
			e.expireLocks()
		}
	}},

	{name: "orchestration_attempts_counted_per_instance", run: func(e *env) {
		e.enqueue(startMsg("hot"))
		for range 3 {
			it := e.fetchFor("hot")
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "AbandonOrchestrationItem")
		}
		hot := e.fetchFor("hot") // 4th delivery, now locked
		e.wantCount("hot attempt count", hot.AttemptCount, 4)
		e.enqueue(startMsg("cold"))
		e.wantCount("cold attempt count", e.fetchFor("cold").AttemptCount, 1)
	}},

	{name: "orchestration_batch_reports_max_over_old_and_new_messages", run: func(e *env) {
		e.createInstance("mx")
		e.enqueue(eventMsg("mx", "old", 1))
		for range 2 {
			it := e.fetchFor("mx")
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "AbandonOrchestrationItem")
		}
		e.enqueue(eventMsg("mx", "new", 2))
		it := e.fetchFor("mx")
		e.wantCount("messages", len(it.Messages), 2)
		e.wantCount("batch of old (3rd) and new (1st) attempt count", it.AttemptCount, 3)
	}},

	{name: "message_arriving_during_turn_starts_at_one", run: func(e *env) {
		e.createInstance("late")
		e.enqueue(eventMsg("late", "a", 1))
		it := e.fetchFor("late")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "AbandonOrchestrationItem")
		it = e.fetchFor("late")
		e.wantCount("second delivery attempt count", it.AttemptCount, 2)
		e.enqueue(eventMsg("late", "b", 2)) // not tagged by the turn in progress
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
		it = e.fetchFor("late")
		e.wantCount("untagged message attempt count", it.AttemptCount, 1)
	}},

	{name: "orchestration_ignore_attempt_undoes_increment", run: func(e *env) {
		e.enqueue(startMsg("ig"))
		it := e.fetch()
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")
		it = e.fetch()
		e.wantCount("second fetch attempt count", it.AttemptCount, 2)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "abandon ignoring attempt")
		e.wantCount("after ignored abandon attempt count", e.fetch().AttemptCount, 2)
	}},

	{name: "orchestration_ignore_attempt_never_goes_below_first_delivery", run: func(e *env) {
		e.enqueue(startMsg("ign"))
		for range 4 {
			it := e.fetch()
			e.wantCount("fetch after ignored abandons attempt count", it.AttemptCount, 1)
			e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "abandon")
		}
	}},

	{name: "worker_attempt_starts_at_one", run: func(e *env) {
		e.enqueueWork(activityMsg("w1", 1, ""))
		e.wantCount("first fetch attempt count", e.fetchWork().AttemptCount, 1)
	}},

	{name: "worker_attempt_increments_on_lock_expiry", run: func(e *env) {
		e.enqueueWork(activityMsg("w2", 1, ""))
		for want := 1; want <= 3; want++ {
			e.wantCount("fetch attempt count", e.fetchWork().AttemptCount, want)
			e.expireLocks()
		}
	}},

	{name: "worker_attempt_increments_on_abandon_and_refetch", run: func(e *env) {
		e.enqueueWork(activityMsg("w3", 1, ""))
		for want := 1; want <= 3; want++ {
			w := e.fetchWork()
			e.wantCount("fetch attempt count", w.AttemptCount, want)
			e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), "AbandonWorkItem")
		}
	}},

	{name: "worker_attempts_counted_per_row", run: func(e *env) {
		e.enqueueWork(activityMsg("w4", 1, ""))
		w := e.fetchWork()
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), "AbandonWorkItem")
		e.enqueueWork(activityMsg("w4", 2, ""))
		ls := e.fetchWorkN(workOpts(), 2)
		mustEqual(e.t, "activities", activityIDs(ls), []int64{1, 2})
		mustEqual(e.t, "attempts", []int{ls[0].AttemptCount, ls[1].AttemptCount}, []int{2, 1})
	}},

	{name: "worker_ignore_attempt_undoes_increment", run: func(e *env) {
		e.enqueueWork(activityMsg("w5", 1, ""))
		w := e.fetchWork()
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), "abandon")
		w = e.fetchWork()
		e.wantCount("second fetch attempt count", w.AttemptCount, 2)
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "abandon ignoring attempt")
		e.wantCount("after ignored abandon attempt count", e.fetchWork().AttemptCount, 2)
	}},

	{name: "worker_ignore_attempt_never_goes_below_first_delivery", run: func(e *env) {
		e.enqueueWork(activityMsg("w6", 1, ""))
		for range 4 {
			w := e.fetchWork()
			e.wantCount("fetch after ignored abandons attempt count", w.AttemptCount, 1)
			e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "abandon")
		}
	}},
}
