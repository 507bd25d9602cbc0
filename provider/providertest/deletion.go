package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// deletionCases cover PurgeInstances: what it deletes, what it refuses, the
// cascade over sub-orchestrations, atomicity, and what happens to turns and
// activities in flight.
var deletionCases = []testCase{
	{name: "purge_completed_removes_history_executions_queues_with_counts", run: func(e *env) {
		e.admin()
		e.createInstance("pc")
		e.schedule("pc", 1)                      // events 1-2, one worker row
		e.finish("pc", provider.StatusCompleted) // event 3
		e.enqueue(timerMsg("pc", 9, e.clock.Now().Add(time.Hour)), eventMsg("pc", "late", 1))
		res := e.mustPurge(false, "pc")
		mustEqual(e.t, "purge result", res, provider.PurgeResult{Instances: 1, Executions: 1, Events: 3, Messages: 3})
		e.absent("pc")
		c := e.counts()
		mustEqual(e.t, "totals", []int64{c.Instances, c.Executions, c.HistoryEvents}, []int64{0, 0, 0})
		mustEqual(e.t, "depths", e.depths(), provider.QueueDepths{})
		e.clock.Advance(time.Hour)
		e.fetchNone()
		e.fetchWorkNone(workOpts())
	}},

	{name: "purge_failed_and_canceled_instances_in_one_call", run: func(e *env) {
		e.admin()
		e.createFinished("pf", provider.StatusFailed)
		e.createFinished("px", provider.StatusCanceled)
		e.createInstance("keep")
		res := e.mustPurge(false, "pf", "px")
		mustEqual(e.t, "purge result", res, provider.PurgeResult{Instances: 2, Executions: 2, Events: 4})
		e.absent("pf")
		e.absent("px")
		mustEqual(e.t, "untouched", eventIDs(e.readHistory("keep", 0)), []int64{1})
	}},

	{name: "purge_running_without_force_still_running_nothing_deleted", run: func(e *env) {
		e.admin()
		e.createInstance("pr")
		e.schedule("pr", 1)
		_, err := e.purge(false, "pr")
		e.wantErr(err, provider.ErrStillRunning, "purge Running")
		mustEqual(e.t, "status", e.instance("pr").Status, provider.StatusRunning)
		mustEqual(e.t, "history", eventIDs(e.readHistory("pr", 0)), []int64{1, 2})
		mustEqual(e.t, "activity", e.fetchWork().ActivityID, 2)
	}},

	{name: "purge_pending_without_force_still_running", run: func(e *env) {
		e.admin()
		e.enqueue(startMsg("pp"))
		_, err := e.purge(false, "pp")
		e.wantErr(err, provider.ErrStillRunning, "purge Pending")
		it := e.fetchFor("pp")
		mustEqual(e.t, "kinds", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
	}},

	{name: "purge_running_with_force_deletes_it", run: func(e *env) {
		e.admin()
		e.createInstance("pfr")
		e.schedule("pfr", 1)
		res := e.mustPurge(true, "pfr")
		mustEqual(e.t, "purge result", res, provider.PurgeResult{Instances: 1, Executions: 1, Events: 2, Messages: 1})
		e.absent("pfr")
		e.fetchWorkNone(workOpts())
	}},

	{name: "purge_unknown_instance_not_found", run: func(e *env) {
		e.admin()
		_, err := e.purge(true, "nope")
		e.wantErr(err, provider.ErrNotFound, "purge unknown")
	}},

	{name: "purged_id_reusable_with_fresh_history", run: func(e *env) {
		e.admin()
		e.createFinished("ru", provider.StatusCompleted)
		e.mustPurge(false, "ru")
		e.enqueue(startMsg("ru"))
		it := e.fetchFor("ru")
		if it.Instance == nil {
			e.t.Fatal("recreated instance has no row")
		}
		mustEqual(e.t, "instance", []any{it.Instance.Status, it.Instance.CurrentExecutionID, len(it.History)}, []any{provider.StatusPending, 0, 0})
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta()})
		mustEqual(e.t, "history", eventIDs(e.readHistory("ru", 0)), []int64{1})
		mustEqual(e.t, "status", e.instance("ru").Status, provider.StatusRunning)
	}},

	{name: "purge_root_cascades_to_three_level_tree", run: func(e *env) {
		e.admin()
		e.createInstance("root")
		e.createChild("root", "mid")
		e.createChild("mid", "leaf")
		for _, id := range []string{"leaf", "mid", "root"} {
			e.finish(id, provider.StatusCompleted)
		}
		res := e.mustPurge(false, "root")
		mustEqual(e.t, "purge result", res, provider.PurgeResult{Instances: 3, Executions: 3, Events: 6})
		for _, id := range []string{"root", "mid", "leaf"} {
			e.absent(id)
		}
	}},

	{name: "purge_root_with_running_descendant_needs_force", run: func(e *env) {
		e.admin()
		e.createInstance("r2")
		e.createChild("r2", "kid")
		e.finish("r2", provider.StatusCompleted)
		_, err := e.purge(false, "r2")
		e.wantErr(err, provider.ErrStillRunning, "purge root with running child")
		e.instance("r2")
		e.instance("kid")
		res := e.mustPurge(true, "r2")
		mustEqual(e.t, "instances purged", res.Instances, 2)
		e.absent("kid")
	}},

	{name: "purge_child_with_existing_parent_rejected_even_forced", run: func(e *env) {
		e.admin()
		e.createInstance("par")
		e.createChild("par", "kid")
		e.finish("kid", provider.StatusCompleted)
		for _, force := range []bool{false, true} {
			_, err := e.purge(force, "kid")
			e.wantErr(err, provider.ErrChildInstance, "purge child")
		}
		mustEqual(e.t, "child status", e.instance("kid").Status, provider.StatusCompleted)
	}},

	{name: "purge_child_with_its_parent_in_same_batch_counts_once", run: func(e *env) {
		e.admin()
		e.createFinished("par", provider.StatusCompleted)
		e.createChild("par", "kid")
		e.finish("kid", provider.StatusCompleted)
		res := e.mustPurge(false, "kid", "par")
		mustEqual(e.t, "purge result", res, provider.PurgeResult{Instances: 2, Executions: 2, Events: 4})
		e.absent("par")
		e.absent("kid")
	}},

	{name: "purge_child_whose_parent_never_existed_allowed", run: func(e *env) {
		e.admin()
		e.createChild("ghost-parent", "orphan")
		e.finish("orphan", provider.StatusCompleted)
		e.mustPurge(false, "orphan")
		e.absent("orphan")
	}},

	{name: "purge_batch_with_unknown_id_deletes_nothing", run: func(e *env) {
		e.admin()
		e.createFinished("ba", provider.StatusCompleted)
		_, err := e.purge(true, "ba", "nope")
		e.wantErr(err, provider.ErrNotFound, "purge batch with unknown id")
		mustEqual(e.t, "history kept", eventIDs(e.readHistory("ba", 0)), []int64{1, 2})
	}},

	{name: "purge_batch_with_running_instance_deletes_nothing", run: func(e *env) {
		e.admin()
		e.createFinished("bc", provider.StatusCompleted)
		e.createInstance("br")
		_, err := e.purge(false, "bc", "br")
		e.wantErr(err, provider.ErrStillRunning, "purge batch with running instance")
		mustEqual(e.t, "terminal kept", e.instance("bc").Status, provider.StatusCompleted)
		mustEqual(e.t, "running kept", e.instance("br").Status, provider.StatusRunning)
	}},

	{name: "purge_during_turn_ack_lock_lost_and_not_recreated", run: func(e *env) {
		e.admin()
		e.createInstance("pl")
		e.enqueue(eventMsg("pl", "go", 1))
		it := e.fetchFor("pl")
		e.mustPurge(true, "pl")
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:           []history.Event{e.scheduledEvent(2)},
			Metadata:          runningMeta(),
			WorkerItems:       []*provider.WorkerMessage{activityMsg("pl", 2, "")},
			OrchestratorItems: []*provider.OrchestratorMessage{eventMsg("pl", "self", 1)},
		})
		e.wantErr(err, provider.ErrLockLost, "ack after purge")
		e.absent("pl")
		e.fetchWorkNone(workOpts())
		e.fetchNone()
		mustEqual(e.t, "instances", e.counts().Instances, 0)
	}},

	{name: "purge_invalidates_turn_lock_for_renew_and_abandon", run: func(e *env) {
		e.admin()
		e.createInstance("pi")
		e.enqueue(eventMsg("pi", "go", 1))
		it := e.fetchFor("pi")
		e.mustPurge(true, "pi")
		e.wantErr(e.p.RenewOrchestrationItemLock(e.ctx, it.LockToken, lockTimeout), provider.ErrLockLost, "renew after purge")
		e.wantErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), provider.ErrLockLost, "abandon after purge")
		e.fetchNone()
	}},

	{name: "purge_deletes_worker_rows_so_stale_completion_never_reaches_new_instance", run: func(e *env) {
		e.admin()
		e.createInstance("pw")
		ids := e.schedule("pw", 1)
		w := e.fetchWork()
		e.mustPurge(true, "pw")
		e.enqueue(startMsg("pw"))
		err := e.ackWorkErr(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("pw", ids[0], "stale")})
		e.wantErr(err, provider.ErrLockLost, "old worker's ack after purge")
		it := e.fetchFor("pw")
		mustEqual(e.t, "kinds", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		mustEqual(e.t, "fresh instance", []any{it.Instance.Status, len(it.History)}, []any{provider.StatusPending, 0})
	}},
}
