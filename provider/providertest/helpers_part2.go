package providertest

// Helpers of the Queues, Management, Poison, Cancellation, Deletion, Sessions
// and BadInput groups. Names carry the p2 prefix so they never collide with
// the helpers of the other groups.

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// p2sessionLease is the session lease the session cases use: shorter than
// lockTimeout, so a lease can lapse while an activity lock is still held.
const p2sessionLease = 10 * time.Second

// p2sess are worker fetch options for session owner owner.
func p2sess(owner string) provider.WorkFetchOptions {
	return provider.WorkFetchOptions{
		LockTimeout: lockTimeout,
		Session:     &provider.SessionOptions{OwnerID: owner, LockTimeout: p2sessionLease},
	}
}

// p2withMax returns opts with Max set to n.
func p2withMax(opts provider.WorkFetchOptions, n int) provider.WorkFetchOptions {
	opts.Max = n
	return opts
}

// p2fetchWorkN fetches up to max worker items with opts, failing on error.
func (e *env) p2fetchWorkN(opts provider.WorkFetchOptions, max int) []*provider.WorkItemLease {
	e.t.Helper()
	opts.Max = max
	ls, err := e.p.FetchWorkItems(e.ctx, opts)
	e.noErr(err, "FetchWorkItems")
	return ls
}

// p2next is the first event ID after it's history.
func p2next(it *provider.OrchestrationItem) int64 {
	var last int64
	for _, ev := range it.History {
		last = max(last, ev.EventID)
	}
	return last + 1
}

// p2turn triggers a turn of instanceID with an external event, fetches it and
// acks what build returns. build gets the item and the next free event ID;
// p2turn fills in LockToken, and ExecutionID when build left it 0 (the
// current execution, or 1).
func (e *env) p2turn(instanceID string, build func(it *provider.OrchestrationItem, next int64) *provider.TurnAck) {
	e.t.Helper()
	e.enqueue(eventMsg(instanceID, "go", nil))
	it := e.fetchFor(instanceID)
	a := build(it, p2next(it))
	a.LockToken = it.LockToken
	if a.ExecutionID == 0 {
		a.ExecutionID = 1
		if it.Instance != nil && it.Instance.CurrentExecutionID > 0 {
			a.ExecutionID = it.Instance.CurrentExecutionID
		}
	}
	e.ack(a)
}

// p2schedule runs a turn of instanceID that schedules n activities of
// execution 1 (activity ID = event ID) and returns their IDs.
func (e *env) p2schedule(instanceID string, n int) []int64 {
	e.t.Helper()
	var ids []int64
	e.p2turn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		a := &provider.TurnAck{Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning}}
		for i := range int64(n) {
			id := next + i
			ids = append(ids, id)
			a.History = append(a.History, e.scheduledEvent(id))
			a.WorkerItems = append(a.WorkerItems, activityMsg(instanceID, id, ""))
		}
		return a
	})
	return ids
}

// p2failure is the error the failed and canceled cases record.
func p2failure(kind history.ErrorKind) *history.ErrorDetails {
	return &history.ErrorDetails{Kind: kind, Message: "boom"}
}

// p2finish runs a turn that ends instanceID's current execution with status
// Completed (output "out-<id>"), Failed or Canceled.
func (e *env) p2finish(instanceID string, status provider.Status) {
	e.t.Helper()
	e.p2turn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		meta := provider.ExecutionMetadata{Status: status}
		var ev history.Event
		switch status {
		case provider.StatusCompleted:
			ev = e.completedEvent(next, "out-"+instanceID)
			meta.Output = js("out-" + instanceID)
		case provider.StatusFailed, provider.StatusCanceled:
			kind := history.ErrorApplication
			if status == provider.StatusCanceled {
				kind = history.ErrorCanceled
			}
			ev = history.Event{EventID: next, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: p2failure(kind)}
			meta.Error = p2failure(kind)
		default:
			e.t.Fatalf("p2finish: unsupported status %s", status)
		}
		return &provider.TurnAck{History: []history.Event{ev}, Metadata: meta}
	})
}

// p2createFinished creates instanceID and ends it with status.
func (e *env) p2createFinished(instanceID string, status provider.Status) {
	e.t.Helper()
	e.createInstance(instanceID)
	e.p2finish(instanceID, status)
}

// p2continueAsNew ends instanceID's current execution with ContinueAsNew and
// runs the first turn of the next execution with input.
func (e *env) p2continueAsNew(instanceID string, input json.RawMessage) {
	e.t.Helper()
	var nextExec int64
	e.p2turn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		nextExec = it.Instance.CurrentExecutionID + 1
		return &provider.TurnAck{
			History:  []history.Event{{EventID: next, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: input}},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
			OrchestratorItems: []*provider.OrchestratorMessage{{
				InstanceID: instanceID,
				Item: history.WorkItem{
					Kind: history.WorkContinueAsNew, InstanceID: instanceID, ExecutionID: nextExec,
					Name: testOrch, Version: testVersion, Input: input,
				},
			}},
		}
	})
	it := e.fetchFor(instanceID)
	started := e.startedEvent()
	started.Input = input
	meta := runningMeta()
	meta.Input = input
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: nextExec, History: []history.Event{started}, Metadata: meta})
}

// p2childStart is a start message creating child as a sub-orchestration of
// execution 1 of parent.
func p2childStart(parent, child string) *provider.OrchestratorMessage {
	m := startMsg(child)
	m.Item.Parent = &history.ParentRef{InstanceID: parent, ExecutionID: 1, EventID: 2}
	m.Create.ParentInstanceID = parent
	m.Create.ParentExecutionID = 1
	return m
}

// p2createChild creates child under parent and acks its first turn.
func (e *env) p2createChild(parent, child string) {
	e.t.Helper()
	e.enqueue(p2childStart(parent, child))
	it := e.fetchFor(child)
	meta := runningMeta()
	meta.ParentInstanceID = parent
	meta.ParentExecutionID = 1
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent()}, Metadata: meta})
}

// p2startNamed is a start message creating instanceID of orchestration name.
func p2startNamed(instanceID, name string) *provider.OrchestratorMessage {
	m := startMsg(instanceID)
	m.Item.Name = name
	m.Create.OrchestrationName = name
	return m
}

// p2cancelTurn runs a turn of instanceID whose ack cancels refs.
func (e *env) p2cancelTurn(instanceID string, refs ...provider.ActivityRef) {
	e.t.Helper()
	e.p2turn(instanceID, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		a := &provider.TurnAck{CancelledActivities: refs}
		for i, r := range refs {
			a.History = append(a.History, history.Event{
				EventID: next + int64(i), Kind: history.ActivityCancelRequested,
				TimestampMs: ms(e.clock.Now()), SourceEventID: max(r.ActivityID, 1),
			})
		}
		return a
	})
}

// p2ackWorkErr completes one activity and returns its error.
func (e *env) p2ackWorkErr(a *provider.WorkAck) error {
	return provider.AckWorkItem(e.ctx, e.p, a)
}

// p2depths reads the queue depths, failing on error.
func (e *env) p2depths() provider.QueueDepths {
	e.t.Helper()
	d, err := e.admin().QueueDepths(e.ctx)
	e.noErr(err, "QueueDepths")
	return *d
}

// p2counts reads the store totals, failing on error.
func (e *env) p2counts() provider.Counts {
	e.t.Helper()
	c, err := e.admin().Counts(e.ctx)
	e.noErr(err, "Counts")
	return *c
}

// p2purge purges ids.
func (e *env) p2purge(force bool, ids ...string) (*provider.PurgeResult, error) {
	return e.admin().PurgeInstances(e.ctx, ids, provider.PurgeOptions{Force: force})
}

// p2mustPurge purges ids, failing on error.
func (e *env) p2mustPurge(force bool, ids ...string) provider.PurgeResult {
	e.t.Helper()
	r, err := e.p2purge(force, ids...)
	e.noErr(err, "PurgeInstances")
	return *r
}

// p2instance reads one instance, failing on error.
func (e *env) p2instance(instanceID string) *provider.InstanceInfo {
	e.t.Helper()
	info, err := e.admin().GetInstance(e.ctx, instanceID)
	e.noErr(err, "GetInstance("+instanceID+")")
	return info
}

// p2gone asserts that instanceID and its history no longer exist.
func (e *env) p2gone(instanceID string) {
	e.t.Helper()
	_, err := e.admin().GetInstance(e.ctx, instanceID)
	e.wantErr(err, provider.ErrNotFound, "GetInstance("+instanceID+") after purge")
	_, err = e.p.ReadHistory(e.ctx, instanceID, 0)
	e.wantErr(err, provider.ErrNotFound, "ReadHistory("+instanceID+") after purge")
}

// p2listAll walks every page of ListInstances with opts and returns the IDs in order.
func (e *env) p2listAll(opts provider.ListInstancesOptions) []string {
	e.t.Helper()
	var ids []string
	for range 1000 {
		page, err := e.admin().ListInstances(e.ctx, opts)
		e.noErr(err, "ListInstances")
		for _, in := range page.Instances {
			ids = append(ids, in.InstanceID)
		}
		if page.NextCursor == "" {
			return ids
		}
		opts.Cursor = page.NextCursor
	}
	e.t.Fatal("ListInstances: more than 1000 pages")
	return nil
}

// p2sorted returns a sorted, non-nil copy of ids.
func p2sorted(ids []string) []string {
	s := append([]string{}, ids...)
	slices.Sort(s)
	return s
}

// p2actIDs returns the activity IDs of leases.
func p2actIDs(ls []*provider.WorkItemLease) []int64 {
	ids := make([]int64, len(ls))
	for i, l := range ls {
		ids[i] = l.ActivityID
	}
	return ids
}

// p2sameTime fails unless got and want are the same instant.
func (e *env) p2sameTime(what string, got, want time.Time) {
	e.t.Helper()
	if !got.Equal(want) {
		e.t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// p2attempt fails unless got == want.
func (e *env) p2attempt(what string, got, want int) {
	e.t.Helper()
	if got != want {
		e.t.Fatalf("%s attempt count = %d, want %d", what, got, want)
	}
}

// p2renewSessions renews the sessions of owners, failing on error.
func (e *env) p2renewSessions(owners []string, extendFor, idle time.Duration) int {
	e.t.Helper()
	n, err := e.p.RenewSessionLocks(e.ctx, owners, extendFor, idle)
	e.noErr(err, "RenewSessionLocks")
	return n
}

// p2cleanupSessions sweeps orphaned sessions, failing on error.
func (e *env) p2cleanupSessions() int {
	e.t.Helper()
	n, err := e.p.CleanupOrphanedSessions(e.ctx)
	e.noErr(err, "CleanupOrphanedSessions")
	return n
}

// p2wantCount fails unless got == want.
func (e *env) p2wantCount(what string, got, want int) {
	e.t.Helper()
	if got != want {
		e.t.Fatalf("%s = %d, want %d", what, got, want)
	}
}
