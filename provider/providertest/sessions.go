package providertest

import (
	"fmt"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// Session owners and sessions of the session cases.
const (
	ownerA = "worker-a"
	ownerB = "worker-b"
	ownerC = "worker-c"
)

// enqueueSession enqueues activities ids of instance "si" on session.
func (e *env) enqueueSession(session string, ids ...int64) {
	e.t.Helper()
	for _, id := range ids {
		e.enqueueWork(activityMsg("si", id, session))
	}
}

// pastSessionLease advances the clock just past a session lease taken now.
func (e *env) pastSessionLease() { e.clock.Advance(sessionLease + time.Millisecond) }

// renewSessions renews the sessions of owners, failing on error.
func (e *env) renewSessions(owners []string, extendFor, idle time.Duration) int {
	e.t.Helper()
	n, err := e.p.RenewSessionLocks(e.ctx, owners, extendFor, idle)
	e.noErr(err, "RenewSessionLocks")
	return n
}

// cleanupSessions sweeps orphaned sessions, failing on error.
func (e *env) cleanupSessions() int {
	e.t.Helper()
	n, err := e.p.CleanupOrphanedSessions(e.ctx)
	e.noErr(err, "CleanupOrphanedSessions")
	return n
}

// sessionCases cover session affinity: claiming, affinity,
// leases, their renewal and expiry, last-activity tracking and the sweep of
// orphaned sessions.
var sessionCases = []testCase{
	{name: "non_session_items_served_with_and_without_session_config", run: func(e *env) {
		e.enqueueSession("", 1, 2)
		mustEqual(e.t, "without session", e.fetchWorkWith(workOpts()).ActivityID, 1)
		mustEqual(e.t, "with session", e.fetchWorkWith(sessionOpts(ownerA)).ActivityID, 2)
	}},

	{name: "nil_session_config_skips_session_items", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.enqueueSession("", 2)
		mustEqual(e.t, "served", e.fetchWork().ActivityID, 2)
		e.fetchWorkNone(workOpts())
	}},

	{name: "unclaimed_session_item_claimed_by_first_owner", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		mustEqual(e.t, "lease", []any{w.ActivityID, w.SessionID, w.Item.SessionID}, []any{1, "S1", "S1"})
	}},

	{name: "session_config_returns_session_and_non_session_items", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.enqueueSession("", 2)
		mustEqual(e.t, "served", activityIDs(e.fetchWorkN(sessionOpts(ownerA), 5)), []int64{1, 2})
	}},

	{name: "owner_keeps_getting_items_of_its_session", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		mustEqual(e.t, "next item", e.fetchWorkWith(sessionOpts(ownerA)).ActivityID, 2)
	}},

	{name: "other_owner_blocked_while_lease_valid", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.fetchWorkNone(sessionOpts(ownerB))
		e.clock.Advance(sessionLease - time.Millisecond)
		e.fetchWorkNone(sessionOpts(ownerB))
	}},

	{name: "two_sessions_owned_by_two_owners", run: func(e *env) {
		e.enqueueSession("S1", 1, 3)
		e.enqueueSession("S2", 2, 4)
		mustEqual(e.t, "A claims S1", e.fetchWorkWith(sessionOpts(ownerA)).ActivityID, 1)
		mustEqual(e.t, "B claims S2", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
		mustEqual(e.t, "A gets only S1", activityIDs(e.fetchWorkN(sessionOpts(ownerA), 5)), []int64{3})
		mustEqual(e.t, "B gets only S2", activityIDs(e.fetchWorkN(sessionOpts(ownerB), 5)), []int64{4})
	}},

	{name: "other_owner_skips_owned_session_but_gets_non_session_items", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.enqueueSession("", 2)
		e.enqueueSession("S1", 3)
		e.enqueueSession("", 4)
		mustEqual(e.t, "A claims", e.fetchWorkWith(sessionOpts(ownerA)).ActivityID, 1)
		mustEqual(e.t, "B", activityIDs(e.fetchWorkN(sessionOpts(ownerB), 5)), []int64{2, 4})
		mustEqual(e.t, "A", activityIDs(e.fetchWorkN(sessionOpts(ownerA), 5)), []int64{3})
	}},

	{name: "session_shared_by_instances", run: func(e *env) {
		e.enqueueWork(activityMsg("x", 1, "S1"), activityMsg("y", 1, "S1"))
		mustEqual(e.t, "A claims via x", e.fetchWorkWith(sessionOpts(ownerA)).InstanceID, "x")
		e.fetchWorkNone(sessionOpts(ownerB))
		mustEqual(e.t, "A gets y", e.fetchWorkWith(sessionOpts(ownerA)).InstanceID, "y")
	}},

	{name: "session_items_served_in_order", run: func(e *env) {
		e.enqueueSession("S1", 1, 2, 3, 4)
		var got []int64
		for range 4 {
			got = append(got, e.fetchWorkWith(sessionOpts(ownerA)).ActivityID)
		}
		mustEqual(e.t, "order", got, []int64{1, 2, 3, 4})
	}},

	{name: "callers_sharing_owner_id_all_serve_the_session", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		slot1 := sessionOpts("node-1")
		slot2 := provider.WorkFetchOptions{LockTimeout: time.Minute, Session: &provider.SessionOptions{OwnerID: "node-1", LockTimeout: sessionLease}}
		w1 := e.fetchWorkWith(slot1)
		w2 := e.fetchWorkWith(slot2)
		mustEqual(e.t, "served", []int64{w1.ActivityID, w2.ActivityID}, []int64{1, 2})
		e.ackWork(&provider.WorkAck{LockToken: w1.LockToken})
		e.ackWork(&provider.WorkAck{LockToken: w2.LockToken})
	}},

	{name: "takeover_by_other_owner_after_lease_expiry", run: func(e *env) {
		e.enqueueSession("S1", 1, 2, 3)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.pastSessionLease()
		mustEqual(e.t, "B takes over", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
		e.fetchWorkNone(sessionOpts(ownerA))
	}},

	{name: "original_owner_reclaims_expired_session", run: func(e *env) {
		e.enqueueSession("S1", 1, 2, 3)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.pastSessionLease()
		mustEqual(e.t, "A reclaims", e.fetchWorkWith(sessionOpts(ownerA)).ActivityID, 2)
		e.fetchWorkNone(sessionOpts(ownerB))
	}},

	{name: "fetch_refreshes_session_lease", run: func(e *env) {
		e.enqueueSession("S1", 1, 2, 3)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.clock.Advance(8 * time.Second)
		e.fetchWorkWith(sessionOpts(ownerA)) // lease now runs to 18s
		e.clock.Advance(4 * time.Second)     // 12s: past the first lease
		e.fetchWorkNone(sessionOpts(ownerB))
		e.clock.Advance(7 * time.Second) // 19s
		mustEqual(e.t, "B after refreshed lease lapsed", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 3)
	}},

	{name: "concurrent_claims_have_a_single_winner", run: func(e *env) {
		const owners = 8
		e.enqueueSession("S1", 1, 2, 3, 4, 5)
		got := make([][]int64, owners)
		var wg sync.WaitGroup
		for g := range owners {
			wg.Go(func() {
				opts := withMax(sessionOpts(fmt.Sprintf("racer-%d", g)), 5)
				ls, err := retry(func() ([]*provider.WorkItemLease, error) { return e.p.FetchWorkItems(e.ctx, opts) })
				if err != nil {
					e.t.Errorf("owner %d: FetchWorkItems: %v", g, err)
					return
				}
				got[g] = activityIDs(ls)
			})
		}
		wg.Wait()
		winners, seen := 0, map[int64]bool{}
		for _, ids := range got {
			if len(ids) > 0 {
				winners++
			}
			for _, id := range ids {
				if seen[id] {
					e.t.Fatalf("activity %d delivered twice", id)
				}
				seen[id] = true
			}
		}
		if winners != 1 {
			e.t.Fatalf("%d owners got items of one session, want exactly 1 (%v)", winners, got)
		}
	}},

	{name: "abandon_keeps_session_affinity", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{}), "AbandonWorkItem")
		e.fetchWorkNone(sessionOpts(ownerB))
		again := e.fetchWorkWith(sessionOpts(ownerA))
		mustEqual(e.t, "redelivery", []any{again.ActivityID, again.AttemptCount}, []any{1, 2})
	}},

	{name: "abandon_ignore_attempt_on_session_item_keeps_count", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.noErr(e.p.AbandonWorkItem(e.ctx, w.LockToken, provider.AbandonOptions{IgnoreAttempt: true}), "AbandonWorkItem")
		e.wantCount("redelivery attempt count", e.fetchWorkWith(sessionOpts(ownerA)).AttemptCount, 1)
	}},

	{name: "activity_lock_expiry_redelivers_to_session_owner", run: func(e *env) {
		e.enqueueSession("S1", 1)
		opts := sessionOpts(ownerA)
		opts.LockTimeout = 5 * time.Second
		opts.Session.LockTimeout = time.Minute
		e.fetchWorkWith(opts)
		e.clock.Advance(6 * time.Second) // activity lock expired, lease valid
		bOpts := sessionOpts(ownerB)
		e.fetchWorkNone(bOpts)
		again := e.fetchWorkWith(opts)
		mustEqual(e.t, "redelivery", []any{again.ActivityID, again.AttemptCount}, []any{1, 2})
	}},

	{name: "both_locks_expired_new_owner_gets_redelivery", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.expireLocks() // activity lock and session lease both expired
		again := e.fetchWorkWith(sessionOpts(ownerB))
		mustEqual(e.t, "redelivery", []any{again.ActivityID, again.AttemptCount}, []any{1, 2})
		e.fetchWorkNone(sessionOpts(ownerA))
	}},

	{name: "expired_session_lease_does_not_gate_activity_ack", run: func(e *env) {
		e.createInstance("si")
		e.enqueueSession("S1", 2)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.pastSessionLease() // lease gone, activity lock (30s) still held
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "RenewWorkItemLock")
		done := completionMsg("si", 2, "ok")
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken, Completion: done})
		mustEqual(e.t, "completion", e.fetchFor("si").Messages[0].ID, 2)
	}},

	{name: "renew_session_locks_renews_active_session", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.wantCount("renewed", e.renewSessions([]string{ownerA}, sessionLease, time.Minute), 1)
	}},

	{name: "renew_session_locks_extends_past_original_lease", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.clock.Advance(8 * time.Second)
		e.wantCount("renewed", e.renewSessions([]string{ownerA}, sessionLease, time.Minute), 1)
		e.clock.Advance(4 * time.Second) // 12s: the original lease has lapsed
		e.fetchWorkNone(sessionOpts(ownerB))
		e.clock.Advance(7 * time.Second) // 19s: the renewed one too
		mustEqual(e.t, "B after renewed lease lapsed", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
	}},

	{name: "renew_session_locks_skips_idle_session", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.clock.Advance(5 * time.Second)
		e.wantCount("renewed", e.renewSessions([]string{ownerA}, sessionLease, 2*time.Second), 0)
		e.clock.Advance(6 * time.Second) // 11s: the unrenewed lease lapsed
		mustEqual(e.t, "B claims idle session", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
	}},

	{name: "renew_session_locks_without_sessions_returns_zero", run: func(e *env) {
		e.wantCount("renewed on empty store", e.renewSessions([]string{ownerA}, sessionLease, time.Minute), 0)
		e.enqueueSession("S1", 1)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.wantCount("renewed for another owner", e.renewSessions([]string{ownerB}, sessionLease, time.Minute), 0)
	}},

	{name: "renew_session_locks_counts_only_listed_owners", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.enqueueSession("S2", 2)
		e.enqueueSession("S3", 3)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.fetchWorkWith(sessionOpts(ownerB))
		e.fetchWorkWith(sessionOpts(ownerC))
		e.wantCount("renewed", e.renewSessions([]string{ownerA, ownerB}, sessionLease, time.Minute), 2)
	}},

	{name: "renew_session_locks_after_expiry_returns_zero_and_does_not_reacquire", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		e.fetchWorkWith(sessionOpts(ownerA))
		e.pastSessionLease()
		e.wantCount("renewed", e.renewSessions([]string{ownerA}, sessionLease, time.Minute), 0)
		mustEqual(e.t, "B claims", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
	}},

	{name: "ack_refreshes_session_last_activity", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA)) // last activity 0s
		e.clock.Advance(4 * time.Second)
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken}) // last activity 4s
		e.clock.Advance(2 * time.Second)
		e.wantCount("renewed with 3s idle timeout at 6s", e.renewSessions([]string{ownerA}, sessionLease, 3*time.Second), 1)
	}},

	{name: "work_item_renewal_refreshes_session_last_activity", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.clock.Advance(4 * time.Second)
		e.noErr(e.p.RenewWorkItemLock(e.ctx, w.LockToken, lockTimeout), "RenewWorkItemLock")
		e.clock.Advance(2 * time.Second)
		e.wantCount("renewed with 3s idle timeout at 6s", e.renewSessions([]string{ownerA}, sessionLease, 3*time.Second), 1)
	}},

	{name: "cleanup_removes_expired_session_without_items", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.pastSessionLease()
		e.wantCount("cleaned", e.cleanupSessions(), 1)
		e.wantCount("cleaned again", e.cleanupSessions(), 0)
	}},

	{name: "cleanup_keeps_expired_session_with_queued_items", run: func(e *env) {
		e.enqueueSession("S1", 1, 2)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.pastSessionLease()
		e.wantCount("cleaned", e.cleanupSessions(), 0)
		mustEqual(e.t, "B claims the kept session", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
	}},

	{name: "cleanup_keeps_expired_session_with_running_item", run: func(e *env) {
		e.enqueueSession("S1", 1)
		e.fetchWorkWith(sessionOpts(ownerA)) // activity lock 30s outlives the 10s lease
		e.pastSessionLease()
		e.wantCount("cleaned", e.cleanupSessions(), 0)
	}},

	{name: "cleanup_keeps_session_with_valid_lease", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.wantCount("cleaned", e.cleanupSessions(), 0)
		e.wantCount("still renewable", e.renewSessions([]string{ownerA}, sessionLease, time.Minute), 1)
	}},

	{name: "new_item_after_cleanup_recreates_session", run: func(e *env) {
		e.enqueueSession("S1", 1)
		w := e.fetchWorkWith(sessionOpts(ownerA))
		e.ackWork(&provider.WorkAck{LockToken: w.LockToken})
		e.pastSessionLease()
		e.wantCount("cleaned", e.cleanupSessions(), 1)
		e.enqueueSession("S1", 2, 3)
		mustEqual(e.t, "B claims anew", e.fetchWorkWith(sessionOpts(ownerB)).ActivityID, 2)
		e.fetchWorkNone(sessionOpts(ownerA))
		e.wantCount("renewed for B", e.renewSessions([]string{ownerB}, sessionLease, time.Minute), 1)
	}},
}
