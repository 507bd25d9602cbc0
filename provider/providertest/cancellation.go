package providertest

import (
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// serveActivity fetches the next activity, checks it is id, renews its lock
// and acks it with a completion: what a worker does, whatever the state of
// the orchestration.
func (e *env) serveActivity(instanceID string, id int64) {
	e.t.Helper()
	w := e.fetchWork()
	mustEqual(e.t, "activity", []any{w.InstanceID, w.ActivityID}, []any{instanceID, id})
	e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "RenewWorkItemLock")
	e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg(instanceID, id, "late")})
}

// cancellationCases cover activity cancellation by deleting worker rows, and
// that the provider never filters activities on orchestration status.
var cancellationCases = []testCase{
	{name: "activity_of_running_instance_served", run: func(e *env) {
		e.createInstance("run")
		ids := e.schedule("run", 1)
		e.serveActivity("run", ids[0])
	}},

	{name: "activity_of_completed_instance_still_served_and_renewable", run: func(e *env) {
		e.createInstance("done")
		ids := e.schedule("done", 1)
		e.finish("done", provider.StatusCompleted)
		e.serveActivity("done", ids[0])
	}},

	{name: "activity_of_failed_instance_still_served_and_renewable", run: func(e *env) {
		e.createInstance("fail")
		ids := e.schedule("fail", 1)
		e.finish("fail", provider.StatusFailed)
		e.serveActivity("fail", ids[0])
	}},

	{name: "activity_of_continued_as_new_execution_still_served", run: func(e *env) {
		e.createInstance("can")
		ids := e.schedule("can", 1)
		e.continueAsNew("can", "next", 0)
		w := e.fetchWork()
		mustEqual(e.t, "activity", []any{w.ActivityID, w.ExecutionID}, []any{ids[0], 1})
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "RenewWorkItemLock")
	}},

	{name: "activity_of_purged_instance_served", run: func(e *env) {
		e.createFinished("gone", provider.StatusCompleted)
		e.mustPurge(false, "gone")
		e.enqueueWork(activityMsg("gone", 5, ""))
		e.serveActivity("gone", 5)
	}},

	{name: "activity_of_never_created_instance_served", run: func(e *env) {
		e.enqueueWork(activityMsg("never", 3, ""))
		e.serveActivity("never", 3)
	}},

	{name: "canceled_activity_deleted_by_turn_ack", run: func(e *env) {
		e.createInstance("c1")
		ids := e.schedule("c1", 2)
		e.cancelTurn("c1", provider.ActivityRef{InstanceID: "c1", ExecutionID: 1, ActivityID: ids[0]})
		mustEqual(e.t, "remaining", e.fetchWork().ActivityID, ids[1])
		e.fetchWorkNone(workOpts())
	}},

	{name: "batch_cancellation_deletes_every_named_activity", run: func(e *env) {
		e.createInstance("c2")
		ids := e.schedule("c2", 4)
		e.cancelTurn("c2",
			provider.ActivityRef{InstanceID: "c2", ExecutionID: 1, ActivityID: ids[0]},
			provider.ActivityRef{InstanceID: "c2", ExecutionID: 1, ActivityID: ids[2]},
			provider.ActivityRef{InstanceID: "c2", ExecutionID: 1, ActivityID: ids[3]},
		)
		mustEqual(e.t, "remaining", activityIDs(e.fetchWorkN(workOpts(), 10)), []int64{ids[1]})
	}},

	{name: "cancelling_unknown_activities_is_ignored", run: func(e *env) {
		e.createInstance("c3")
		ids := e.schedule("c3", 1)
		e.cancelTurn("c3",
			provider.ActivityRef{InstanceID: "c3", ExecutionID: 1, ActivityID: 99},
			provider.ActivityRef{InstanceID: "nobody", ExecutionID: 1, ActivityID: ids[0]},
		)
		mustEqual(e.t, "still queued", e.fetchWork().ActivityID, ids[0])
	}},

	{name: "cancellation_matches_instance_execution_and_activity", run: func(e *env) {
		e.createInstance("c4")
		exec2 := activityMsg("c4", 2, "")
		exec2.ExecutionID, exec2.Item.ExecutionID = 2, 2
		e.enqueueWork(activityMsg("c4", 2, ""), exec2, activityMsg("other", 2, ""))
		e.cancelTurn("c4", provider.ActivityRef{InstanceID: "c4", ExecutionID: 2, ActivityID: 2})
		ls := e.fetchWorkN(workOpts(), 10)
		var got [][]any
		for _, l := range ls {
			got = append(got, []any{l.InstanceID, l.ExecutionID, l.ActivityID})
		}
		mustEqual(e.t, "remaining", got, [][]any{{"c4", 1, 2}, {"other", 1, 2}})
	}},

	{name: "activity_scheduled_and_canceled_in_same_ack_not_queued", run: func(e *env) {
		e.createInstance("c5")
		e.runTurn("c5", func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
			return &provider.TurnAck{
				History: []history.Event{e.scheduledEvent(next), {
					EventID: next + 1, Kind: history.ActivityCancelRequested, TimestampMs: ms(e.clock.Now()), SourceEventID: next,
				}},
				WorkerItems:        []*provider.WorkerMessage{activityMsg("c5", next, "")},
				CanceledActivities: []provider.ActivityRef{{InstanceID: "c5", ExecutionID: 1, ActivityID: next}},
			}
		})
		e.fetchWorkNone(workOpts())
		{
			a := e.p
			d, err := a.QueueDepths(e.ctx)
			e.noErr(err, "QueueDepths")
			mustEqual(e.t, "worker depths", []int64{d.WorkerReady, d.WorkerDelayed, d.WorkerLocked}, []int64{0, 0, 0})
		}
	}},

	{name: "worker_ack_after_cancellation_lock_lost_permanent_no_completion", run: func(e *env) {
		e.createInstance("c6")
		ids := e.schedule("c6", 1)
		w := e.fetchWork()
		e.cancelTurn("c6", provider.ActivityRef{InstanceID: "c6", ExecutionID: 1, ActivityID: ids[0]})
		err := e.ackWorkErr(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("c6", ids[0], "r")})
		e.lockLost(err, "ack of canceled activity")
		e.fetchNone()
		e.expireLocks()
		e.fetchWorkNone(workOpts())
	}},

	{name: "worker_renew_after_cancellation_lock_lost_permanent", run: func(e *env) {
		e.createInstance("c7")
		ids := e.schedule("c7", 1)
		w := e.fetchWork()
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "renew before cancellation")
		e.cancelTurn("c7", provider.ActivityRef{InstanceID: "c7", ExecutionID: 1, ActivityID: ids[0]})
		e.lockLost(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "renew of canceled activity")
	}},

	{name: "worker_abandon_after_cancellation_lock_lost_and_not_requeued", run: func(e *env) {
		e.createInstance("c8")
		ids := e.schedule("c8", 1)
		w := e.fetchWork()
		e.cancelTurn("c8", provider.ActivityRef{InstanceID: "c8", ExecutionID: 1, ActivityID: ids[0]})
		e.wantErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), provider.ErrLockLost, "abandon of canceled activity")
		e.fetchWorkNone(workOpts())
	}},
}
