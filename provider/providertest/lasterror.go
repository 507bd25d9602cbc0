package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// lastErrorCases cover why a live instance is not progressing: an
// orchestration abandon with AbandonOptions.Error records it on the
// instance (Admin's InstanceInfo.LastError) in the same step as the
// abandon, and the next committed turn clears it.
var lastErrorCases = []testCase{
	{name: "abandon_with_error_records_last_error", run: func(e *env) {
		e.admin()
		e.createInstance("a")
		e.wantLastError("a", nil)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		why := errDetails(history.ErrorNondeterminism, "replay mismatch at event 2")
		e.abandonWith(it, why)
		e.wantLastError("a", why)
		info := e.instance("a")
		mustEqual(e.t, "status and error of a parked instance", []any{info.Status, info.Error}, []any{provider.StatusRunning, nil})
	}},

	{name: "abandon_with_error_on_pending_instance", run: func(e *env) {
		e.admin()
		e.enqueue(startMsg("a"))
		why := errDetails(history.ErrorConfiguration, "orchestration TestOrch is not registered")
		e.abandonWith(e.fetchFor("a"), why)
		e.wantLastError("a", why)
		mustEqual(e.t, "status", e.instance("a").Status, provider.StatusPending)
		// Registered after a deploy: the first turn commits and clears it.
		e.ack(&provider.TurnAck{LockToken: e.fetchFor("a").LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in")}, Metadata: runningMeta()})
		e.wantLastError("a", nil)
	}},

	{name: "abandon_without_error_keeps_last_error_and_a_new_error_replaces_it", run: func(e *env) {
		e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		first := errDetails(history.ErrorNondeterminism, "first")
		e.abandonWith(e.fetchFor("a"), first)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, e.fetchFor("a").LockToken, provider.AbandonOptions{}), "abandon without Error")
		e.wantLastError("a", first)
		second := errDetails(history.ErrorConfiguration, "second")
		e.abandonWith(e.fetchFor("a"), second)
		e.wantLastError("a", second)
	}},

	{name: "committed_ack_clears_last_error", run: func(e *env) {
		e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		e.abandonWith(e.fetchFor("a"), errDetails(history.ErrorNondeterminism, "mismatch"))
		e.ack(&provider.TurnAck{LockToken: e.fetchFor("a").LockToken, ExecutionID: 1})
		e.wantLastError("a", nil)
	}},

	{name: "failed_ack_keeps_last_error", run: func(e *env) {
		e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		why := errDetails(history.ErrorNondeterminism, "mismatch")
		e.abandonWith(e.fetchFor("a"), why)
		it := e.fetchFor("a")
		e.expireLocks()
		e.lockLost(e.ackErr(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}), "ack after lock expiry")
		e.wantLastError("a", why)
	}},

	{name: "abandon_with_lost_lock_records_nothing", run: func(e *env) {
		e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.expireLocks()
		err := e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Error: errDetails(history.ErrorNondeterminism, "late")})
		e.lockLost(err, "abandon after lock expiry")
		e.wantLastError("a", nil)
	}},

	{name: "abandon_with_error_for_unknown_instance_creates_nothing", run: func(e *env) {
		a := e.admin()
		e.enqueue(startMsgNoCreate("ghost"))
		it := e.fetchFor("ghost")
		if it.Instance != nil {
			e.t.Fatalf("instance row of a message without Create: %+v, want none", it.Instance)
		}
		e.abandonWith(it, errDetails(history.ErrorConfiguration, "unknown instance"))
		_, err := a.GetInstance(e.ctx, "ghost")
		e.wantErr(err, provider.ErrNotFound, "GetInstance(ghost)")
		mustEqual(e.t, "instances listed", len(e.listAll(provider.ListInstancesOptions{})), 0)
		// The abandon still released the lock and kept the message.
		mustEqual(e.t, "refetched", e.fetch().InstanceID, "ghost")
	}},
}

// abandonWith abandons it with a one-second delay, recording why; the
// clock is moved past the delay so the instance can be fetched again.
func (e *env) abandonWith(it *provider.OrchestrationItem, why *history.ErrorDetails) {
	e.t.Helper()
	e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Second, Error: why}),
		"abandon with Error")
	e.clock.Advance(time.Second)
}

// wantLastError fails unless the instance's LastError is want (nil: none),
// as read by both GetInstance and ListInstances.
func (e *env) wantLastError(instanceID string, want *history.ErrorDetails) {
	e.t.Helper()
	mustEqual(e.t, "GetInstance("+instanceID+").LastError", e.instance(instanceID).LastError, want)
	page, err := e.admin().ListInstances(e.ctx, provider.ListInstancesOptions{})
	e.noErr(err, "ListInstances")
	for _, in := range page.Instances {
		if in.InstanceID == instanceID {
			mustEqual(e.t, "ListInstances: "+instanceID+".LastError", in.LastError, want)
			return
		}
	}
	e.t.Fatalf("ListInstances does not list %q", instanceID)
}
