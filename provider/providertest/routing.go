package providertest

import (
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// namedActivity is activityMsg for activity name in queue.
func namedActivity(instanceID string, id int64, name, queue string) *provider.WorkerMessage {
	m := activityMsg(instanceID, id, "")
	m.Item.Name, m.Item.Queue = name, queue
	return m
}

// heartbeater returns the store's Heartbeater, skipping the case for a
// store without one.
func (e *env) heartbeater() provider.Heartbeater {
	e.t.Helper()
	hb, ok := e.p.(provider.Heartbeater)
	if !ok {
		e.t.Skip("the store keeps no heartbeats (no provider.Heartbeater)")
	}
	return hb
}

// router returns the store's Router, skipping the case for a store
// without one.
func (e *env) router() provider.Router {
	e.t.Helper()
	r, ok := e.p.(provider.Router)
	if !ok {
		e.t.Skip("the store keeps no routes (no provider.Router)")
	}
	return r
}

// queuedActivity returns the instance's only worker row.
func (e *env) queuedActivity(instanceID string) provider.QueuedActivity {
	e.t.Helper()
	q, err := e.admin().InstanceQueue(e.ctx, instanceID)
	e.noErr(err, "InstanceQueue")
	if len(q.Activities) != 1 {
		e.t.Fatalf("InstanceQueue(%s): %d activities, want 1", instanceID, len(q.Activities))
	}
	return q.Activities[0]
}

// routingCases cover the worker fetch's filter by activity name and
// queue, heartbeats on worker rows, and route announcements.
var routingCases = []testCase{
	{name: "worker_fetch_takes_only_the_named_activities", run: func(e *env) {
		e.enqueueWork(namedActivity("names", 1, "A", ""), namedActivity("names", 2, "B", ""))
		onlyB := workOpts()
		onlyB.Activities = []string{"B", "C"}
		w := e.fetchWorkWith(onlyB)
		mustEqual(e.t, "fetched for B", []any{w.ActivityID, w.AttemptCount}, []any{int64(2), 1})
		e.fetchWorkNone(onlyB)
		none := workOpts()
		none.Activities = []string{}
		e.fetchWorkNone(none)
		w = e.fetchWork() // nil: any name
		mustEqual(e.t, "fetched for any name", []any{w.ActivityID, w.AttemptCount}, []any{int64(1), 1})
	}},

	{name: "worker_fetch_takes_only_the_served_queues", run: func(e *env) {
		e.createInstance("queues")
		e.enqueueWork(namedActivity("queues", 1, "Render", "gpu"), namedActivity("queues", 2, "Render", ""))
		w := e.fetchWork() // nil Queues: the default queue only
		mustEqual(e.t, "default queue", w.ActivityID, int64(2))
		e.fetchWorkNone(workOpts())
		gpu := sessionOpts("owner-1")
		gpu.Queues, gpu.Activities = []string{"gpu"}, []string{"Render"}
		w = e.fetchWorkWith(gpu)
		mustEqual(e.t, "gpu queue", []any{w.ActivityID, w.Item.Queue}, []any{int64(1), "gpu"})
		q, err := e.admin().InstanceQueue(e.ctx, "queues")
		e.noErr(err, "InstanceQueue")
		mustEqual(e.t, "row queues", []string{q.Activities[0].Queue, q.Activities[1].Queue}, []string{"gpu", ""})
	}},

	{name: "heartbeat_renews_lock_and_records_details_on_the_row", run: func(e *env) {
		hb := e.heartbeater()
		e.createInstance("hb")
		e.enqueueWork(activityMsg("hb", 2, ""))
		w := e.fetchWork()
		h, err := hb.WorkItemHeartbeat(e.ctx, w.LockToken)
		e.noErr(err, "WorkItemHeartbeat before any")
		if !h.At.IsZero() || h.Details != nil {
			e.t.Fatalf("heartbeat before any: %+v", h)
		}
		e.clock.Advance(lockTimeout / 2)
		e.noErr(hb.HeartbeatWorkItem(e.ctx, w.LockToken, lockTimeout, json.RawMessage(`{"step":3}`)), "HeartbeatWorkItem")
		e.clock.Advance(lockTimeout * 3 / 4) // past the fetch's lock, within the renewed one
		e.noErr(hb.HeartbeatWorkItem(e.ctx, w.LockToken, lockTimeout, nil), "HeartbeatWorkItem keeping the details")
		h, err = hb.WorkItemHeartbeat(e.ctx, w.LockToken)
		e.noErr(err, "WorkItemHeartbeat")
		e.sameTime("heartbeat time", h.At, e.clock.Now())
		mustEqual(e.t, "details", string(h.Details), `{"step":3}`)
		a := e.queuedActivity("hb")
		e.sameTime("InstanceQueue heartbeat time", a.HeartbeatAt, e.clock.Now())
		mustEqual(e.t, "InstanceQueue details", string(a.HeartbeatDetails), `{"step":3}`)

		e.wantErr(hb.HeartbeatWorkItem(e.ctx, w.LockToken, lockTimeout, json.RawMessage(`{bad`)), provider.ErrInvalidArgument, "details that are not JSON")
		e.wantErr(hb.HeartbeatWorkItem(e.ctx, w.LockToken, 0, nil), provider.ErrInvalidArgument, "no extension")
		e.wantErr(hb.HeartbeatWorkItem(e.ctx, "no-such-token", lockTimeout, nil), provider.ErrLockLost, "unknown token")

		// The worker crashes: its lock lapses, the next delivery reads
		// the details.
		e.expireLocks()
		e.wantErr(hb.HeartbeatWorkItem(e.ctx, w.LockToken, lockTimeout, nil), provider.ErrLockLost, "expired lock")
		w2 := e.fetchWork()
		h, err = hb.WorkItemHeartbeat(e.ctx, w2.LockToken)
		e.noErr(err, "WorkItemHeartbeat of the next delivery")
		mustEqual(e.t, "details after the crash", []any{string(h.Details), w2.AttemptCount}, []any{`{"step":3}`, 2})
		_, err = hb.WorkItemHeartbeat(e.ctx, w.LockToken)
		e.wantErr(err, provider.ErrLockLost, "the crashed delivery's token")
	}},

	{name: "routes_mark_unserved_rows_and_fetch_them_for_failing", run: func(e *env) {
		r := e.router()
		e.createInstance("ghost")
		e.enqueueWork(namedActivity("ghost", 2, "Ghost", "spirits"))
		if e.queuedActivity("ghost").Unserved {
			e.t.Fatal("a row is unserved while no runtime announced anything")
		}
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w1", Activities: []string{"Act"}}, time.Hour), "AnnounceRoutes")
		if !e.queuedActivity("ghost").Unserved {
			e.t.Fatal("Ghost is served although no live runtime registers it")
		}
		mustEqual(e.t, "unserved depth", e.depths().WorkerUnserved, int64(1))
		got, err := r.FetchUnservedWorkItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedWorkItems")
		mustEqual(e.t, "unserved rows younger than a minute", len(got), 0)
		e.clock.Advance(2 * time.Minute)
		got, err = r.FetchUnservedWorkItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedWorkItems")
		if len(got) != 1 || got[0].ActivityID != 2 || got[0].AttemptCount != 0 || got[0].Item.Name != "Ghost" {
			e.t.Fatalf("unserved rows %+v, want Ghost with no delivery counted", got)
		}
		e.ackWork(&provider.WorkAck{LockToken: got[0].LockToken})

		// A second row, served once a runtime announces its name and queue.
		e.enqueueWork(namedActivity("ghost", 3, "Ghost", "spirits"))
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w2", Activities: []string{"Ghost"}, Queues: []string{"spirits"}}, time.Hour), "AnnounceRoutes")
		if e.queuedActivity("ghost").Unserved {
			e.t.Fatal("Ghost is unserved although w2 serves it")
		}
		e.noErr(r.WithdrawRoutes(e.ctx, "w2"), "WithdrawRoutes")
		if !e.queuedActivity("ghost").Unserved {
			e.t.Fatal("Ghost is still served after w2 withdrew")
		}
		e.clock.Advance(2 * time.Hour) // w1's announcement lapses: nothing is known
		if e.queuedActivity("ghost").Unserved {
			e.t.Fatal("a row is unserved while no announcement is live")
		}
		e.wantErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{}, time.Hour), provider.ErrInvalidArgument, "routes without a worker")
		e.wantErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w3"}, 0), provider.ErrInvalidArgument, "routes without a ttl")
	}},
}
