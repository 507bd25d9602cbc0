package providertest

import (
	"slices"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// queueCases cover the two queues' delivery rules: FIFO, peek-lock, delayed
// visibility, the atomic worker ack, lost tokens and no head-of-line blocking.
var queueCases = []testCase{
	{name: "worker_items_fetched_in_enqueue_order", run: func(e *env) {
		for i := int64(1); i <= 5; i++ {
			e.enqueueWork(activityMsg("fifo", i, ""))
		}
		var got []int64
		for range 5 {
			got = append(got, e.fetchWork().ActivityID)
		}
		mustEqual(e.t, "activity order", got, []int64{1, 2, 3, 4, 5})
	}},

	{name: "worker_lease_carries_identity_and_payload", run: func(e *env) {
		m := activityMsg("lease", 7, "")
		m.ExecutionID, m.Item.ExecutionID = 3, 3
		e.enqueueWork(m)
		w := e.fetchWork()
		mustEqual(e.t, "identity", []any{w.InstanceID, w.ExecutionID, w.ActivityID, w.SessionID}, []any{"lease", 3, 7, ""})
		mustEqual(e.t, "item", w.Item, m.Item)
		if w.LockToken == "" {
			e.t.Fatal("lease has an empty lock token")
		}
		e.sameTime("LockedUntil", w.LockedUntil, e.clock.Now().Add(lockTimeout))
	}},

	{name: "fetched_worker_item_stays_locked_until_acked", run: func(e *env) {
		e.enqueueWork(activityMsg("peek", 1, ""))
		w := e.fetchWork()
		e.fetchWorkNone(workOpts())
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.fetchWorkNone(workOpts())
		e.expireLocks()
		e.fetchWorkNone(workOpts()) // deleted, not merely locked
	}},

	{name: "queue_depths_show_fetched_worker_item_as_locked", run: func(e *env) {
		e.enqueueWork(activityMsg("peekd", 1, ""))
		w := e.fetchWork()
		d := e.depths()
		mustEqual(e.t, "worker ready/locked while leased", []int64{d.WorkerReady, d.WorkerLocked}, []int64{0, 1})
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		d = e.depths()
		mustEqual(e.t, "worker ready/locked after ack", []int64{d.WorkerReady, d.WorkerLocked}, []int64{0, 0})
	}},

	{name: "worker_ack_deletes_row_and_enqueues_exact_completion", run: func(e *env) {
		e.createInstance("wa")
		e.enqueueWork(activityMsg("wa", 2, ""))
		w := e.fetchWork()
		done := completionMsg("wa", 2, map[string]any{"sum": 42, "note": "ok"})
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: done})
		it := e.fetchFor("wa")
		mustEqual(e.t, "delivered messages", it.Messages, []history.WorkItem{done.Item})
		e.expireLocks()
		e.fetchWorkNone(workOpts())
	}},

	{name: "worker_ack_failure_completion_delivered", run: func(e *env) {
		e.createInstance("wf")
		e.enqueueWork(activityMsg("wf", 2, ""))
		w := e.fetchWork()
		failed := &provider.OrchestratorMessage{InstanceID: "wf", Item: history.WorkItem{
			Kind: history.WorkActivityFailed, InstanceID: "wf", ExecutionID: 1, ID: 2, Error: errDetails(history.ErrorApplication, "boom"),
		}}
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: failed})
		mustEqual(e.t, "delivered messages", e.fetchFor("wf").Messages, []history.WorkItem{failed.Item})
	}},

	{name: "worker_ack_without_completion_enqueues_nothing", run: func(e *env) {
		e.createInstance("wn")
		e.enqueueWork(activityMsg("wn", 2, ""))
		w := e.fetchWork()
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.fetchNone()
		e.expireLocks()
		e.fetchWorkNone(workOpts())
		e.fetchNone()
	}},

	{name: "timer_message_invisible_until_due", run: func(e *env) {
		e.createInstance("tm")
		fire := e.clock.Now().Add(10 * time.Second)
		e.enqueue(timerMsg("tm", 2, fire))
		e.fetchNone()
		e.clock.Advance(10*time.Second - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(time.Millisecond)
		it := e.fetchFor("tm")
		mustEqual(e.t, "kinds", kinds(it.Messages), []history.WorkItemKind{history.WorkTimerFired})
		mustEqual(e.t, "timer id", it.Messages[0].ID, 2)
	}},

	{name: "pending_timer_not_tagged_or_deleted_by_earlier_turn", run: func(e *env) {
		e.createInstance("tt")
		fire := e.clock.Now().Add(time.Minute)
		e.enqueue(timerMsg("tt", 2, fire))
		e.enqueue(eventMsg("tt", "ev", 1))
		it := e.fetchFor("tt")
		mustEqual(e.t, "kinds", kinds(it.Messages), []history.WorkItemKind{history.WorkExternalRaised})
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
		e.fetchNone()
		e.clock.Advance(time.Minute)
		mustEqual(e.t, "kinds when due", kinds(e.fetchFor("tt").Messages), []history.WorkItemKind{history.WorkTimerFired})
	}},

	{name: "message_with_past_visible_at_delivered_at_once", run: func(e *env) {
		e.createInstance("past")
		e.enqueue(timerMsg("past", 2, e.clock.Now().Add(-time.Hour)))
		mustEqual(e.t, "kinds", kinds(e.fetchFor("past").Messages), []history.WorkItemKind{history.WorkTimerFired})
	}},

	{name: "worker_item_visible_immediately", run: func(e *env) {
		e.enqueueWork(activityMsg("now", 1, ""))
		mustEqual(e.t, "activity", e.fetchWork().ActivityID, 1)
	}},

	{name: "worker_item_with_future_visible_at_skipped_until_due", run: func(e *env) {
		later := activityMsg("wd", 1, "")
		later.VisibleAt = e.clock.Now().Add(time.Minute)
		e.enqueueWork(later)
		e.enqueueWork(activityMsg("wd", 2, ""))
		w := e.fetchWork()
		mustEqual(e.t, "first served", w.ActivityID, 2)
		e.fetchWorkNone(workOpts())
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.clock.Advance(time.Minute - time.Millisecond)
		e.fetchWorkNone(workOpts())
		e.clock.Advance(time.Millisecond)
		mustEqual(e.t, "served when due", e.fetchWork().ActivityID, 1)
	}},

	{name: "lost_worker_token_item_redelivered_after_expiry", run: func(e *env) {
		e.enqueueWork(activityMsg("lost", 1, ""))
		w1 := e.fetchWork()
		e.wantCount("first delivery attempt count", w1.AttemptCount, 1)
		e.clock.Advance(lockTimeout - time.Millisecond)
		e.fetchWorkNone(workOpts())
		e.clock.Advance(2 * time.Millisecond)
		w2 := e.fetchWork()
		mustEqual(e.t, "activity", w2.ActivityID, 1)
		e.wantCount("redelivery attempt count", w2.AttemptCount, 2)
		if w2.LockToken == w1.LockToken {
			e.t.Fatal("redelivery reused the lost lock token")
		}
		e.wantErr(e.ackWorkErr(&provider.WorkAck{LockToken: w1.LockToken}), provider.ErrLockLost, "ack with lost token")
		e.ackWork(&provider.WorkAck{LockToken: w2.LockToken})
	}},

	{name: "orchestrator_messages_delivered_in_enqueue_order", run: func(e *env) {
		e.createInstance("ord")
		msgs := []*provider.OrchestratorMessage{
			eventMsg("ord", "a", 1), completionMsg("ord", 2, "r"), eventMsg("ord", "b", 2), eventMsg("ord", "c", 3),
		}
		for _, m := range msgs {
			e.enqueue(m)
		}
		want := make([]history.WorkItem, len(msgs))
		for i, m := range msgs {
			want[i] = m.Item
		}
		mustEqual(e.t, "messages", e.fetchFor("ord").Messages, want)
	}},

	{name: "message_for_unknown_instance_delivered_with_nil_instance_and_consumed", run: func(e *env) {
		ghost := eventMsg("ghost", "typo", 1)
		e.enqueue(ghost)
		it := e.fetchFor("ghost")
		if it.Instance != nil {
			e.t.Fatalf("Instance = %+v, want nil for an unknown instance", it.Instance)
		}
		mustEqual(e.t, "messages", it.Messages, []history.WorkItem{ghost.Item})
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
		e.expireLocks()
		e.fetchNone()
		_, err := e.p.ReadHistory(e.ctx, "ghost", 0)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory after consuming an orphan message")
		{
			a := e.p
			_, err := a.GetInstance(e.ctx, "ghost")
			e.wantErr(err, provider.ErrNotFound, "GetInstance after consuming an orphan message")
		}
	}},

	{name: "orphan_ack_without_orchestration_name_may_not_write_history", run: func(e *env) {
		e.enqueue(eventMsg("ghost", "typo", 1))
		it := e.fetchFor("ghost")
		err := e.ackErr(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")},
		})
		e.wantErr(err, provider.ErrInvalidArgument, "ack writing history for an unknown instance without a name")
		_, err = e.p.ReadHistory(e.ctx, "ghost", 0)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory after the rejected ack")
		// The lock is still held: the rejected ack changed nothing.
		e.fetchNone()
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
	}},

	{name: "message_for_unknown_instance_does_not_block_later_instances", run: func(e *env) {
		e.enqueue(eventMsg("ghost", "typo", 1))
		e.enqueue(startMsg("real"))
		first := e.fetchFor("ghost")
		second := e.fetchFor("real")
		e.ack(&provider.TurnAck{LockToken: first.LockToken, ExecutionID: 1})
		e.ack(&provider.TurnAck{LockToken: second.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta()})
		e.fetchNone()
	}},

	{name: "worker_fetch_max_returns_distinct_rows_oldest_first", run: func(e *env) {
		for i := int64(1); i <= 5; i++ {
			e.enqueueWork(activityMsg("mx", i, ""))
		}
		first := e.fetchWorkN(workOpts(), 3)
		mustEqual(e.t, "first batch", activityIDs(first), []int64{1, 2, 3})
		tokens := map[string]bool{}
		for _, l := range first {
			tokens[l.LockToken] = true
		}
		e.wantCount("distinct tokens", len(tokens), 3)
		mustEqual(e.t, "second batch", activityIDs(e.fetchWorkN(workOpts(), 3)), []int64{4, 5})
	}},

	{name: "worker_abandon_releases_item_at_once", run: func(e *env) {
		e.enqueueWork(activityMsg("ab", 1, ""))
		w := e.fetchWork()
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), "AbandonWorkItem")
		again := e.fetchWork()
		mustEqual(e.t, "activity", again.ActivityID, 1)
		e.wantErr(e.ackWorkErr(&provider.WorkAck{LockToken: w.LockToken}), provider.ErrLockLost, "ack with abandoned token")
	}},

	{name: "worker_abandon_with_delay_hides_item_until_due", run: func(e *env) {
		e.enqueueWork(activityMsg("abd", 1, ""))
		w := e.fetchWork()
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{Delay: 5 * time.Second}), "AbandonWorkItem")
		e.fetchWorkNone(workOpts())
		e.clock.Advance(5*time.Second - time.Millisecond)
		e.fetchWorkNone(workOpts())
		e.clock.Advance(time.Millisecond)
		mustEqual(e.t, "activity", e.fetchWork().ActivityID, 1)
	}},

	{name: "worker_abandon_unknown_or_used_token_lock_lost", run: func(e *env) {
		e.wantErr(e.p.AbandonWorkItem(e.ctx, "no-such-token", provider.AbandonOptions{}), provider.ErrLockLost, "abandon unknown token")
		e.enqueueWork(activityMsg("abu", 1, ""))
		w := e.fetchWork()
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.wantErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), provider.ErrLockLost, "abandon after ack")
	}},

	{name: "worker_renew_extends_lock_past_original_expiry", run: func(e *env) {
		e.enqueueWork(activityMsg("rn", 1, ""))
		w := e.fetchWork()
		e.clock.Advance(20 * time.Second)
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "RenewWorkItemLock")
		e.clock.Advance(20 * time.Second) // 40s after the fetch, 20s after the renewal
		e.fetchWorkNone(workOpts())
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
	}},

	{name: "worker_renew_unknown_token_lock_lost", run: func(e *env) {
		e.enqueueWork(activityMsg("rnu", 1, ""))
		e.fetchWork()
		e.wantErr(e.p.RenewWorkItemLock(e.ctx, "no-such-token", lockTimeout), provider.ErrLockLost, "renew unknown token")
	}},

	{name: "worker_renew_after_expiry_lock_lost", run: func(e *env) {
		e.enqueueWork(activityMsg("rne", 1, ""))
		w := e.fetchWork()
		e.expireLocks()
		e.wantErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), provider.ErrLockLost, "renew after expiry")
		e.wantCount("redelivery attempt count", e.fetchWork().AttemptCount, 2)
	}},

	{name: "worker_renew_after_ack_lock_lost", run: func(e *env) {
		e.enqueueWork(activityMsg("rna", 1, ""))
		w := e.fetchWork()
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.wantErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), provider.ErrLockLost, "renew after ack")
	}},

	{name: "worker_ack_after_expiry_lock_lost_even_without_refetch", run: func(e *env) {
		e.createInstance("late")
		e.enqueueWork(activityMsg("late", 2, ""))
		w := e.fetchWork()
		e.expireLocks()
		err := e.ackWorkErr(&provider.WorkAck{LockToken: w.LockToken, Completion: completionMsg("late", 2, "r")})
		e.wantErr(err, provider.ErrLockLost, "ack after expiry")
		e.fetchNone() // no completion enqueued
		w2 := e.fetchWork()
		mustEqual(e.t, "row still queued", w2.ActivityID, 2)
		e.wantCount("redelivery attempt count", w2.AttemptCount, 2)
	}},

	{name: "concurrent_worker_acks_with_one_stale_token_commit_the_others", run: func(e *env) {
		e.createInstance("bat")
		for i := int64(2); i <= 4; i++ {
			e.enqueueWork(activityMsg("bat", i, ""))
		}
		ls := e.fetchWorkN(workOpts(), 3)
		e.wantCount("leases", len(ls), 3)
		e.ackWork(&provider.WorkAck{LockToken: ls[1].LockToken}) // its token is now used up
		acks := make([]*provider.WorkAck, 3)
		for i, l := range ls {
			acks[i] = &provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("bat", l.ActivityID, l.ActivityID)}
		}
		errs := e.ackWorkConcurrently(acks...)
		e.noErr(errs[0], "ack 0")
		e.wantErr(errs[1], provider.ErrLockLost, "stale ack 1")
		e.noErr(errs[2], "ack 2")
		it := e.fetchFor("bat")
		ids := []int64{}
		for _, m := range it.Messages {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids) // concurrent acks commit in any order
		mustEqual(e.t, "completions delivered", ids, []int64{ls[0].ActivityID, ls[2].ActivityID})
		e.expireLocks()
		e.fetchWorkNone(workOpts())
	}},

	{name: "concurrent_worker_fetchers_get_each_activity_exactly_once", run: func(e *env) {
		const activities, workers = 200, 16
		msgs := make([]*provider.WorkerMessage, activities)
		for i := range msgs {
			msgs[i] = activityMsg("conc", int64(i+1), "")
		}
		e.enqueueWork(msgs...)
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					ls, err := retry(func() ([]*provider.WorkItemLease, error) {
						return e.p.FetchWorkItems(e.ctx, provider.WorkFetchOptions{LockTimeout: lockTimeout, Max: 3})
					})
					if err != nil {
						e.t.Errorf("FetchWorkItems: %v", err)
						return
					}
					if len(ls) == 0 {
						return
					}
					mu.Lock()
					for _, l := range ls {
						seen[l.ActivityID]++
					}
					mu.Unlock()
					for _, l := range ls {
						_, err := retry(func() (struct{}, error) {
							return struct{}{}, e.ackWorkErr(&provider.WorkAck{LockToken: l.LockToken})
						})
						if err != nil {
							e.t.Errorf("AckWorkItem: %v", err)
						}
					}
				}
			})
		}
		wg.Wait()
		if e.t.Failed() {
			return
		}
		e.wantCount("distinct activities delivered", len(seen), activities)
		for id, n := range seen {
			if n != 1 {
				e.t.Fatalf("activity %d delivered %d times, want once", id, n)
			}
		}
		e.expireLocks()
		e.fetchWorkNone(workOpts())
	}},
}
