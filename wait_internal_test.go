package duroxide

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// TestDeriveWaits checks the derivation from history and queue state to
// waits, without a store: one case per kind, and each stall rule on and
// just off its threshold.
func TestDeriveWaits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ts := func(d time.Duration) int64 { return at(d).UnixMilli() }
	started := history.Event{EventID: 1, Kind: history.OrchestrationStarted, Name: "Order", TimestampMs: ts(0)}
	sched := func(id int64, name string, d time.Duration) history.Event {
		return history.Event{EventID: id, Kind: history.ActivityScheduled, Name: name, TimestampMs: ts(d)}
	}
	failed := func(id, src int64, d time.Duration) history.Event {
		return history.Event{EventID: id, Kind: history.ActivityFailed, SourceEventID: src, TimestampMs: ts(d),
			Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "card declined"}}
	}
	running := &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Order", Status: provider.StatusRunning, CurrentExecutionID: 1}
	pending := &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Order", Status: provider.StatusPending}
	queue := func(now, progress time.Duration) *provider.InstanceQueueState {
		return &provider.InstanceQueueState{Now: at(now), LastProgressAt: at(progress)}
	}
	row := func(id int64, attempts int, visible time.Duration) provider.QueuedActivity {
		return provider.QueuedActivity{ExecutionID: 1, ActivityID: id, Name: "Charge", Attempts: attempts, VisibleAt: at(visible), EnqueuedAt: at(0)}
	}
	msg := func(kind history.WorkItemKind, visible time.Duration) provider.QueuedMessage {
		return provider.QueuedMessage{Item: history.WorkItem{Kind: kind, InstanceID: "i", ExecutionID: 1, Name: "Order"}, VisibleAt: at(visible), EnqueuedAt: at(0)}
	}
	with := func(q *provider.InstanceQueueState, f func(*provider.InstanceQueueState)) *provider.InstanceQueueState {
		f(q)
		return q
	}

	cases := []struct {
		name     string
		info     *provider.InstanceInfo
		hist     []history.Event
		q        *provider.InstanceQueueState
		children map[string]State
		want     []Wait
	}{
		{
			name: "terminal waits for nothing",
			info: &provider.InstanceInfo{Status: provider.StatusCompleted, CurrentExecutionID: 1},
			hist: []history.Event{started}, q: queue(time.Hour, 0),
		},
		{
			name: "activity queued",
			info: running, hist: []history.Event{started, sched(2, "Charge", time.Second)},
			q:    with(queue(time.Minute, time.Second), func(q *provider.InstanceQueueState) { q.Activities = []provider.QueuedActivity{row(2, 0, time.Second)} }),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, ActivityState: ActivityQueued, Since: at(time.Second)}},
		},
		{
			name: "activity running with its lock expiry",
			info: running, hist: []history.Event{started, sched(2, "Charge", time.Second)},
			q: with(queue(time.Minute, time.Second), func(q *provider.InstanceQueueState) {
				r := row(2, 1, 2*time.Minute)
				r.LockedUntil = at(2 * time.Minute)
				q.Activities = []provider.QueuedActivity{r}
			}),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, Deliveries: 1, ActivityState: ActivityRunning,
				Since: at(time.Second), LockedUntil: at(2 * time.Minute)}},
		},
		{
			name: "activity result queued for the next turn",
			info: running, hist: []history.Event{started, sched(2, "Charge", time.Second)},
			q: with(queue(2*time.Second, time.Second), func(q *provider.InstanceQueueState) {
				m := msg(history.WorkActivityCompleted, time.Second)
				m.Item.ID = 2
				q.Messages = []provider.QueuedMessage{m}
			}),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, ActivityState: ActivityDone, Since: at(time.Second)},
				{Kind: WaitTurn, Messages: 1, Since: at(time.Second)}},
		},
		{
			name: "durable retry: a failed attempt and its timer",
			info: running,
			hist: []history.Event{started, sched(2, "Charge", 0), failed(3, 2, time.Second),
				{EventID: 4, Kind: history.TimerCreated, FireAtMs: ts(time.Minute), TimestampMs: ts(time.Second)}},
			q:    queue(2*time.Second, time.Second),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 2, ActivityState: ActivityRetrying, RetryAt: at(time.Minute), Since: at(time.Second)}},
		},
		{
			name: "durable retry: the third attempt counts two before it",
			info: running,
			hist: []history.Event{started, sched(2, "Charge", 0), failed(3, 2, time.Second),
				{EventID: 4, Kind: history.TimerCreated, FireAtMs: ts(time.Minute), TimestampMs: ts(time.Second)},
				{EventID: 5, Kind: history.TimerFired, SourceEventID: 4, FireAtMs: ts(time.Minute), TimestampMs: ts(time.Minute)},
				sched(6, "Charge", time.Minute), failed(7, 6, 2*time.Minute),
				{EventID: 8, Kind: history.TimerCreated, FireAtMs: ts(3 * time.Minute), TimestampMs: ts(2 * time.Minute)},
				{EventID: 9, Kind: history.TimerFired, SourceEventID: 8, FireAtMs: ts(3 * time.Minute), TimestampMs: ts(3 * time.Minute)},
				sched(10, "Charge", 3*time.Minute)},
			q: with(queue(4*time.Minute, 3*time.Minute), func(q *provider.InstanceQueueState) {
				q.Activities = []provider.QueuedActivity{row(10, 0, 3*time.Minute)}
			}),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 10, Attempt: 3, ActivityState: ActivityQueued, Since: at(3 * time.Minute)}},
		},
		{
			name: "timer",
			info: running,
			hist: []history.Event{started, {EventID: 2, Kind: history.TimerCreated, FireAtMs: ts(time.Hour), TimestampMs: ts(0)}},
			q: with(queue(time.Minute, 0), func(q *provider.InstanceQueueState) {
				q.Messages = []provider.QueuedMessage{msg(history.WorkTimerFired, time.Hour)}
			}),
			want: []Wait{{Kind: WaitTimer, FiresAt: at(time.Hour), Since: at(0)}},
		},
		{
			name: "event, and one already received",
			info: running,
			hist: []history.Event{started,
				{EventID: 2, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ts(0)},
				{EventID: 3, Kind: history.ExternalEvent, Name: "approval", TimestampMs: ts(time.Second)},
				{EventID: 4, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ts(2 * time.Second)}},
			q:    queue(time.Hour, 2*time.Second),
			want: []Wait{{Kind: WaitEvent, Name: "approval", Since: at(2 * time.Second)}},
		},
		{
			name: "event raised before the subscription is not awaited",
			info: running,
			hist: []history.Event{started,
				{EventID: 2, Kind: history.ExternalEvent, Name: "go", TimestampMs: ts(0)},
				{EventID: 3, Kind: history.ExternalSubscribed, Name: "go", TimestampMs: ts(time.Second)}},
			q: queue(time.Hour, time.Second),
		},
		{
			name:     "child with its state",
			info:     running,
			hist:     []history.Event{started, {EventID: 2, Kind: history.SubOrchestrationScheduled, Name: "Ship", ChildInstanceID: "i::2", TimestampMs: ts(0)}},
			q:        queue(time.Minute, 0),
			children: map[string]State{"i::2": StateRunning},
			want:     []Wait{{Kind: WaitChild, Name: "Ship", InstanceID: "i::2", ChildState: StateRunning, Since: at(0)}},
		},
		{
			name: "queued behind an execution lock",
			info: pending,
			q: with(queue(time.Hour, 0), func(q *provider.InstanceQueueState) {
				q.QueuedStart = &provider.QueuedStart{LockKey: "wf", Holder: "other", Position: 2, QueuedAt: at(0)}
			}),
			want: []Wait{{Kind: WaitLock, Name: "Order", LockKey: "wf", Holder: "other", QueuePosition: 2, Since: at(0)}},
		},
		{
			name: "delayed start",
			info: pending,
			q: with(queue(time.Hour, 0), func(q *provider.InstanceQueueState) {
				q.Messages = []provider.QueuedMessage{msg(history.WorkStartOrchestration, 24*time.Hour)}
			}),
			want: []Wait{{Kind: WaitDelayedStart, Name: "Order", At: at(24 * time.Hour)}},
		},
		{
			name: "unregistered orchestration, stalled past the threshold",
			info: &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Order", Status: provider.StatusPending,
				LastError: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: "orchestration Order is not registered on this runtime"}},
			q: with(queue(10*time.Minute, 0), func(q *provider.InstanceQueueState) {
				m := msg(history.WorkStartOrchestration, 11*time.Minute)
				m.Attempts = 4
				q.Messages = []provider.QueuedMessage{m}
				q.LastErrorSince = at(time.Second)
			}),
			want: []Wait{{Kind: WaitUnregisteredOrchestration, Name: "Order", Attempt: 4, RetryAt: at(11 * time.Minute), Since: at(time.Second),
				Message: "orchestration Order is not registered on this runtime", Stalled: true,
				StalledReason: "no progress for 10m0s: every turn since 2026-03-01T10:00:01Z was given back (orchestration Order is not registered on this runtime)"}},
		},
		{
			name: "unregistered orchestration, just under the threshold",
			info: &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Order", Status: provider.StatusPending,
				LastError: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: "not registered"}},
			q: with(queue(5*time.Minute, 0), func(q *provider.InstanceQueueState) {
				q.Messages = []provider.QueuedMessage{msg(history.WorkStartOrchestration, 6*time.Minute)}
				q.LastErrorSince = at(time.Millisecond)
			}),
			want: []Wait{{Kind: WaitUnregisteredOrchestration, Name: "Order", RetryAt: at(6 * time.Minute), Since: at(time.Millisecond), Message: "not registered"}},
		},
		{
			name: "unregistered activity",
			info: running, hist: []history.Event{started, sched(2, "Charge", 0)},
			q: with(queue(time.Minute, 0), func(q *provider.InstanceQueueState) {
				r := row(2, 2, 2*time.Minute)
				r.Error = &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: "activity Charge is not registered on this runtime"}
				r.ErrorSince = at(time.Second)
				q.Activities = []provider.QueuedActivity{r}
			}),
			want: []Wait{{Kind: WaitUnregisteredActivity, Name: "Charge", ActivityID: 2, Attempt: 2, Deliveries: 2, ActivityState: ActivityQueued,
				RetryAt: at(2 * time.Minute), Since: at(time.Second), Message: "activity Charge is not registered on this runtime"}},
		},
		{
			name: "parked after nondeterminism",
			info: &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Order", Status: provider.StatusRunning, CurrentExecutionID: 1,
				LastError: &history.ErrorDetails{Kind: history.ErrorNondeterminism, Message: "nondeterministic",
					Divergence: &history.Divergence{EventID: 2, Expected: "ActivityScheduled Charge", Got: "scheduled activity Refund"}}},
			hist: []history.Event{started, sched(2, "Charge", 0)},
			q: with(queue(time.Minute, 0), func(q *provider.InstanceQueueState) {
				q.LastErrorSince = at(30 * time.Second)
				q.Activities = []provider.QueuedActivity{row(2, 1, 0)}
				q.Activities[0].LockedUntil = at(2 * time.Minute)
				q.Activities[0].VisibleAt = at(2 * time.Minute)
			}),
			want: []Wait{
				{Kind: WaitParked, EventID: 2, Expected: "ActivityScheduled Charge", Found: "scheduled activity Refund", Message: "nondeterministic", Since: at(30 * time.Second)},
				{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, Deliveries: 1, ActivityState: ActivityRunning, LockedUntil: at(2 * time.Minute), Since: at(0)},
			},
		},
		{
			name: "activity delivered three times is stalled",
			info: running, hist: []history.Event{started, sched(2, "Charge", 0)},
			q: with(queue(time.Hour, 0), func(q *provider.InstanceQueueState) {
				r := row(2, 3, 2*time.Hour)
				r.LockedUntil = at(2 * time.Hour)
				q.Activities = []provider.QueuedActivity{r}
			}),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, Deliveries: 3, ActivityState: ActivityRunning,
				LockedUntil: at(2 * time.Hour), Since: at(0), Stalled: true,
				StalledReason: "no progress for 1h0m0s: activity Charge delivered 3 times without completing"}},
		},
		{
			name: "activity twice delivered and running is not stalled",
			info: running, hist: []history.Event{started, sched(2, "Charge", 0)},
			q: with(queue(time.Hour, 0), func(q *provider.InstanceQueueState) {
				r := row(2, 2, 2*time.Hour)
				r.LockedUntil = at(2 * time.Hour)
				q.Activities = []provider.QueuedActivity{r}
			}),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, Deliveries: 2, ActivityState: ActivityRunning,
				LockedUntil: at(2 * time.Hour), Since: at(0)}},
		},
		{
			name: "activity no worker takes is stalled",
			info: running, hist: []history.Event{started, sched(2, "Charge", 0)},
			q: with(queue(5*time.Minute, 0), func(q *provider.InstanceQueueState) { q.Activities = []provider.QueuedActivity{row(2, 0, 0)} }),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, ActivityState: ActivityQueued, Since: at(0), Stalled: true,
				StalledReason: "no progress for 5m0s: activity Charge due since 2026-03-01T10:00:00Z and no worker took it"}},
		},
		{
			name: "activity no worker takes, recent progress: not stalled",
			info: running, hist: []history.Event{started, sched(2, "Charge", 0)},
			q:    with(queue(5*time.Minute, time.Millisecond), func(q *provider.InstanceQueueState) { q.Activities = []provider.QueuedActivity{row(2, 0, 0)} }),
			want: []Wait{{Kind: WaitActivity, Name: "Charge", ActivityID: 2, Attempt: 1, ActivityState: ActivityQueued, Since: at(0)}},
		},
		{
			name: "a fired timer no runtime takes is stalled; the event wait is not",
			info: running,
			hist: []history.Event{started, {EventID: 2, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ts(0)},
				{EventID: 3, Kind: history.TimerCreated, FireAtMs: ts(time.Hour), TimestampMs: ts(0)}},
			q: with(queue(time.Hour+10*time.Minute, 0), func(q *provider.InstanceQueueState) {
				q.Messages = []provider.QueuedMessage{msg(history.WorkTimerFired, time.Hour)}
			}),
			want: []Wait{
				{Kind: WaitEvent, Name: "approval", Since: at(0)},
				{Kind: WaitTimer, FiresAt: at(time.Hour), Since: at(0)},
				{Kind: WaitTurn, Messages: 1, Since: at(time.Hour), Stalled: true,
					StalledReason: "no progress for 1h10m0s: messages due since 2026-03-01T11:00:00Z and no runtime took them"},
			},
		},
		{
			name: "waiting a day on an event is not stalled",
			info: running, hist: []history.Event{started, {EventID: 2, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ts(0)}},
			q:    queue(24*time.Hour, 0),
			want: []Wait{{Kind: WaitEvent, Name: "approval", Since: at(0)}},
		},
		{
			name: "a turn in progress is not a due turn",
			info: running, hist: []history.Event{started},
			q: with(queue(time.Minute, 0), func(q *provider.InstanceQueueState) {
				m := msg(history.WorkExternalRaised, 0)
				m.Locked, m.Attempts = true, 1
				q.Messages = []provider.QueuedMessage{m, msg(history.WorkExternalRaised, 30*time.Second)}
				q.InstanceLock = &provider.InstanceLockState{LockedAt: at(50 * time.Second), LockedUntil: at(90 * time.Second)}
			}),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := deriveWaits(waitInput{Info: c.info, History: c.hist, Queue: c.q, Children: c.children, StalledAfter: DefaultStalledAfter})
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(c.want, "", " ")
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if string(g) != string(w) {
				t.Fatalf("waits:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// TestInstanceDeadline checks where Status.Deadline comes from: the queued
// timeout (the deadline its execution's start recorded, else the
// message's time), a timeout cancel the execution consumed (its grace
// period), and nothing else: not a plain cancel, not a start whose
// timeout a rewind dropped.
func TestInstanceDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	deadline := t0.Add(time.Hour)
	started := history.Event{EventID: 1, Kind: history.OrchestrationStarted, Name: "Order", TimestampMs: t0.UnixMilli(),
		FireAtMs: deadline.UnixMilli()}
	plainStart := started
	plainStart.FireAtMs = 0
	timeoutErr := &history.ErrorDetails{Kind: history.ErrorTimeout, Message: "instance timed out after 1h0m0s"}
	cancelMsg := func(e *history.ErrorDetails, visible time.Time) provider.QueuedMessage {
		return provider.QueuedMessage{Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Error: e}, VisibleAt: visible}
	}
	subscribed := history.Event{EventID: 2, Kind: history.ExternalSubscribed, Name: "go", TimestampMs: t0.UnixMilli()}
	requested := func(e *history.ErrorDetails) history.Event {
		return history.Event{EventID: 3, Kind: history.OrchestrationCancelRequested, TimestampMs: deadline.Add(time.Second).UnixMilli(),
			FireAtMs: deadline.Add(31 * time.Second).UnixMilli(), Error: e}
	}
	for _, c := range []struct {
		name string
		hist []history.Event
		msgs []provider.QueuedMessage
		want time.Time
	}{
		{name: "no timeout", hist: []history.Event{plainStart, subscribed}},
		{name: "queued", hist: []history.Event{started, subscribed}, msgs: []provider.QueuedMessage{cancelMsg(timeoutErr, deadline)}, want: deadline},
		{name: "queued, moved by a give-back", hist: []history.Event{started, subscribed},
			msgs: []provider.QueuedMessage{cancelMsg(timeoutErr, deadline.Add(time.Minute))}, want: deadline},
		{name: "queued, no recorded deadline", hist: nil, msgs: []provider.QueuedMessage{cancelMsg(timeoutErr, deadline)}, want: deadline},
		{name: "a plain cancel is no deadline", hist: []history.Event{plainStart, subscribed},
			msgs: []provider.QueuedMessage{cancelMsg(nil, t0), cancelMsg(&history.ErrorDetails{Kind: history.ErrorCanceled}, t0)}},
		{name: "rewound: recorded, not queued", hist: []history.Event{started, subscribed}},
		{name: "timed out, in its grace period", hist: []history.Event{started, subscribed, requested(timeoutErr)}, want: deadline},
		{name: "canceled, in its grace period", hist: []history.Event{plainStart, subscribed, requested(nil)}},
	} {
		got := instanceDeadline(c.hist, &provider.InstanceQueueState{Now: t0, Messages: c.msgs})
		switch {
		case c.want.IsZero() && got != nil:
			t.Errorf("%s: deadline %v, want none", c.name, *got)
		case !c.want.IsZero() && (got == nil || !got.Equal(c.want) || got.Location() != time.UTC):
			t.Errorf("%s: deadline %v, want %v", c.name, got, c.want)
		}
	}
}
