package duroxide

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/dispatch"
	"github.com/duroxide/duroxide-go/provider"
)

// WaitKind names what a live instance is waiting for. The values are part
// of the HTTP API (the "kind" of each entry of "waitingFor").
type WaitKind string

// The kinds of Wait. Each lists the Wait fields it sets.
const (
	// WaitActivity: an activity the orchestration awaits. Name,
	// ActivityID (its ActivityScheduled event ID), Attempt, ActivityState,
	// Since (when it was scheduled), RetryAt (when a retry is scheduled:
	// a durable retry of ScheduleActivityWithRetry, or a redelivery after
	// a crash), LockedUntil (while running).
	WaitActivity WaitKind = "activity"
	// WaitTimer: a durable timer. FiresAt, Since (when it was created).
	WaitTimer WaitKind = "timer"
	// WaitEvent: an external event (WaitForEvent). Name, Since (when the
	// orchestration started waiting).
	WaitEvent WaitKind = "event"
	// WaitChild: a sub-orchestration. Name, InstanceID (the child),
	// ChildState, Since (when it was scheduled).
	WaitChild WaitKind = "child"
	// WaitLock: a start queued behind an execution lock
	// (StartOptions.QueueIfLocked). LockKey, Holder (the instance holding
	// the lock), QueuePosition (1 = next), Since (when it was queued).
	WaitLock WaitKind = "lock"
	// WaitDelayedStart: a start delayed by StartOptions.StartAt. At.
	WaitDelayedStart WaitKind = "delayedStart"
	// WaitUnregisteredOrchestration: no runtime that fetched the instance
	// has its orchestration registered; deliveries are retried with
	// backoff. Name (and Version when pinned), Attempt (deliveries so
	// far), RetryAt, Since (first failed delivery), Message. Runtimes of
	// this release fetch only the orchestrations they register (an
	// instance pinned to a version, only in that version), so an instance
	// whose orchestration no live runtime registers is never delivered: it
	// is this wait with Unserved set, Since when its messages became due,
	// and Message "no runtime registers orchestration X" ("…
	// orchestration X version V" for a pinned instance); it fails after
	// RuntimeOptions.UnservedTimeout.
	WaitUnregisteredOrchestration WaitKind = "unregisteredOrchestration"
	// WaitUnregisteredActivity: an activity that no runtime which fetched
	// it has registered; deliveries are retried with backoff. Name,
	// ActivityID, Attempt, RetryAt, Since (first failed delivery),
	// Message. Runtimes of this release fetch only the activities they
	// register, so only runtimes of earlier releases (or a store that
	// does not filter by name) produce it; an activity no live runtime
	// serves is a WaitActivity with Unserved set.
	WaitUnregisteredActivity WaitKind = "unregisteredActivity"
	// WaitParked: the orchestration code no longer replays its history
	// (nondeterminism); the instance is parked until a deploy with
	// matching code replays it. EventID, Expected (what history records),
	// Found (what the code did), Message, Since, RetryAt.
	WaitParked WaitKind = "parked"
	// WaitPaused: the instance is paused (Client.Pause) and takes no turn
	// until resumed. Message (the reason), By (who paused it), Since
	// (when). It is never stalled, and nothing else it waits for counts as
	// stalled while it is paused.
	WaitPaused WaitKind = "paused"
	// WaitTurn: messages for the orchestration (completions, events,
	// timers that fired) are queued and due, but no runtime has taken
	// them yet. Messages (how many), Since (when the oldest became due),
	// Attempt (the most deliveries of one of them). Message, when an
	// earlier attempt recorded why it gave them back (for example an
	// undecodable history).
	WaitTurn WaitKind = "turn"
)

// ActivityState says where an awaited activity is.
type ActivityState string

// Activity states of a WaitActivity.
const (
	// ActivityQueued: in the worker queue, not taken by a worker.
	ActivityQueued ActivityState = "queued"
	// ActivityRunning: a worker holds it (LockedUntil is its lock expiry).
	ActivityRunning ActivityState = "running"
	// ActivityRetrying: an attempt failed and a retry is scheduled at
	// RetryAt (a durable timer of ScheduleActivityWithRetry).
	ActivityRetrying ActivityState = "retrying"
	// ActivityDone: the result is queued for the orchestration's next turn.
	ActivityDone ActivityState = "completed"
)

// CancelGraceWaitName is the Name of the WaitTimer that stands for a
// canceled instance's grace period (RuntimeOptions.CancelGracePeriod): the
// instance ends when it fires, unless its code returns first.
const CancelGraceWaitName = "cancel grace period"

// Wait is one thing a live instance waits for, with its times. Which
// fields are set depends on Kind (see the WaitKind constants); unset fields
// are omitted from JSON. Times come from the store's clock.
type Wait struct {
	Kind WaitKind `json:"kind"`
	// Name is the activity, event, child or orchestration name
	// (CancelGraceWaitName for the grace period of a canceled instance).
	Name string `json:"name,omitempty"`
	// Version is the orchestration version (WaitUnregisteredOrchestration).
	Version string `json:"version,omitempty"`
	// ActivityID is the activity's ActivityScheduled event ID.
	ActivityID int64 `json:"activityId,omitempty"`
	// Attempt is the attempt number (1 = the first): of an activity with a
	// retry policy, its durable retries; of an unregistered orchestration
	// or activity, its deliveries.
	Attempt int `json:"attempt,omitempty"`
	// Deliveries counts how many times a queued or running activity was
	// handed to a worker (its current attempt); above 1 its worker crashed,
	// lost its lock or gave it back.
	Deliveries int `json:"deliveries,omitempty"`
	// ActivityState says where an activity is.
	ActivityState ActivityState `json:"state,omitempty"`
	// InstanceID is the child's instance ID (WaitChild).
	InstanceID string `json:"instanceId,omitempty"`
	// ChildState is the child's state (WaitChild); empty while the child
	// instance is not created yet.
	ChildState State `json:"childState,omitempty"`
	// LockKey is the execution lock key (WaitLock).
	LockKey string `json:"lockKey,omitempty"`
	// Holder is the instance holding the execution lock (WaitLock).
	Holder string `json:"holder,omitempty"`
	// QueuePosition is the place in the lock's queue, 1 = next (WaitLock).
	QueuePosition int `json:"queuePosition,omitempty"`
	// EventID is the history event where replay diverged (WaitParked).
	EventID int64 `json:"eventId,omitempty"`
	// Expected is what history records at EventID (WaitParked).
	Expected string `json:"expected,omitempty"`
	// Found is what the code did instead (WaitParked).
	Found string `json:"found,omitempty"`
	// Messages counts the due messages (WaitTurn).
	Messages int `json:"messages,omitempty"`
	// Message is the recorded error text, when there is one (the reason,
	// for WaitPaused); for an activity no live runtime serves (Unserved),
	// says so.
	Message string `json:"message,omitempty"`
	// By is who paused the instance (WaitPaused).
	By string `json:"by,omitempty"`
	// Queue is the queue an activity is routed to (ActivityOptions.Queue;
	// empty for the default queue).
	Queue string `json:"queue,omitempty"`
	// HeartbeatTimeoutMs is an activity's heartbeat timeout in
	// milliseconds (ActivityOptions.HeartbeatTimeout; 0: none).
	HeartbeatTimeoutMs int64 `json:"heartbeatTimeoutMs,omitempty"`
	// StartToCloseTimeoutMs and ScheduleToCloseTimeoutMs are an activity's
	// timeouts in milliseconds (ActivityOptions.StartToCloseTimeout, per
	// attempt, and ScheduleToCloseTimeout, the whole call; 0: none).
	StartToCloseTimeoutMs    int64 `json:"startToCloseTimeoutMs,omitempty"`
	ScheduleToCloseTimeoutMs int64 `json:"scheduleToCloseTimeoutMs,omitempty"`
	// HeartbeatAt is the time of the latest heartbeat of a running (or
	// crashed) activity attempt (ActivityContext.Heartbeat), and
	// HeartbeatDetails the details it reported.
	HeartbeatAt      time.Time       `json:"heartbeatAt,omitzero"`
	HeartbeatDetails json.RawMessage `json:"heartbeatDetails,omitempty"`
	// Unserved reports a queued activity that no live runtime serves (none
	// registers its name in its queue), or an instance whose
	// orchestration no live runtime registers
	// (WaitUnregisteredOrchestration): it waits for a runtime that does,
	// or fails after RuntimeOptions.UnservedTimeout. Message says which
	// name (and queue).
	Unserved bool `json:"unserved,omitempty"`

	// Since is when the wait began (scheduled, subscribed, queued, first
	// failed delivery).
	Since time.Time `json:"since,omitzero"`
	// FiresAt is when a timer fires (WaitTimer).
	FiresAt time.Time `json:"firesAt,omitzero"`
	// At is when a delayed start begins (WaitDelayedStart).
	At time.Time `json:"at,omitzero"`
	// RetryAt is when the next attempt or delivery is due.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// LockedUntil is when a running activity's worker lock expires unless
	// renewed (ActivityRunning).
	LockedUntil time.Time `json:"lockedUntil,omitzero"`

	// Stalled reports that this wait should progress but has not for
	// longer than the stall threshold (see StalledReason).
	Stalled bool `json:"stalled,omitempty"`
	// StalledReason says, in words, why the wait counts as stalled.
	StalledReason string `json:"stalledReason,omitempty"`
}

// DefaultStalledAfter is the default stall threshold: an instance is
// stalled when it has made no progress (no new history event) for this
// long while waiting on something that should progress.
const DefaultStalledAfter = 5 * time.Minute

// StalledAttempts is the number of deliveries or attempts from which an
// activity that has not completed counts towards a stall.
const StalledAttempts = 3

// WaitOptions tunes Client.WaitingFor. Nil means defaults.
type WaitOptions struct {
	// StalledAfter is the stall threshold (0 = DefaultStalledAfter).
	StalledAfter time.Duration
}

// WaitingFor returns what instanceID waits for: one Wait per pending
// activity, timer, event or child, and per reason it cannot progress
// (queued behind an execution lock, a delayed start, an unregistered
// orchestration or activity, parked, messages no runtime takes), in the
// order they began. It is derived from the current execution's history
// and the instance's queue state (provider.Admin.InstanceQueue), read
// one after the other, so a wait that ends between the two reads may be
// shown as it was. A terminal instance waits for nothing (nil).
// ErrNotFound if the instance does not exist.
func (c *Client) WaitingFor(ctx context.Context, instanceID string, opts *WaitOptions) ([]Wait, error) {
	st, err := c.Inspect(ctx, instanceID, opts)
	if err != nil {
		return nil, err
	}
	return st.WaitingFor, nil
}

// Inspect is GetStatus with Status.WaitingFor and Status.Stalled filled
// (see WaitingFor), and the history's measures: Status.HistoryEvents,
// HistoryBytes, Patches, and Status.Deadline, the instance timeout.
func (c *Client) Inspect(ctx context.Context, instanceID string, opts *WaitOptions) (*Status, error) {
	after := DefaultStalledAfter
	if opts != nil && opts.StalledAfter != 0 {
		after = opts.StalledAfter
	}
	if after < 0 {
		return nil, fmt.Errorf("%w: StalledAfter must not be negative", ErrInvalidArgument)
	}
	info, err := c.instance(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	st := statusOf(info)
	if st.State.IsTerminal() {
		// Nothing to wait for; the size of its last execution is still
		// worth knowing (what it keeps in the store until purged).
		if info.CurrentExecutionID > 0 {
			hist, err := c.p.ReadHistory(ctx, info.InstanceID, 0)
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				return nil, fmt.Errorf("history of %q: %w", info.InstanceID, err)
			}
			st.HistoryEvents, st.HistoryBytes = historySize(hist)
			st.Patches = patchesOf(hist)
		}
		return st, nil
	}
	if st.Paused, err = c.pauseOf(ctx, instanceID); err != nil {
		return nil, err
	}
	if err := c.fillWaits(ctx, st, info, after); err != nil {
		return nil, err
	}
	return st, nil
}

// fillWaits reads what the derivation needs and sets st.WaitingFor and
// st.Stalled.
func (c *Client) fillWaits(ctx context.Context, st *Status, info *provider.InstanceInfo, after time.Duration) error {
	var hist []history.Event
	if info.CurrentExecutionID > 0 {
		var err error
		if hist, err = c.p.ReadHistory(ctx, info.InstanceID, 0); err != nil && !errors.Is(err, provider.ErrNotFound) {
			return fmt.Errorf("history of %q: %w", info.InstanceID, err)
		}
	}
	q, err := c.p.InstanceQueue(ctx, info.InstanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return fmt.Errorf("instance %q: %w", info.InstanceID, ErrNotFound) // purged meanwhile
	}
	if err != nil {
		return fmt.Errorf("queue state of %q: %w", info.InstanceID, err)
	}
	children := map[string]State{}
	for _, ev := range pendingChildren(hist) {
		ci, err := c.p.GetInstance(ctx, ev)
		switch {
		case err == nil:
			children[ev] = stateOf(ci.Status)
		case !errors.Is(err, provider.ErrNotFound):
			return fmt.Errorf("child %q: %w", ev, err)
		}
	}
	st.HistoryEvents, st.HistoryBytes = historySize(hist)
	st.Patches = patchesOf(hist)
	st.Deadline = instanceDeadline(hist, q)
	st.WaitingFor = deriveWaits(waitInput{Info: info, History: hist, Queue: q, Children: children, StalledAfter: after})
	if p := st.Paused; p != nil {
		st.WaitingFor = pausedWaits(st.WaitingFor, p)
	}
	st.Stalled = slices.ContainsFunc(st.WaitingFor, func(w Wait) bool { return w.Stalled })
	return nil
}

// pendingChildren returns the instance IDs of the children the history
// still awaits.
func pendingChildren(hist []history.Event) []string {
	open := map[int64]string{}
	var order []int64
	for i := range hist {
		ev := &hist[i]
		switch ev.Kind {
		case history.SubOrchestrationScheduled:
			open[ev.EventID] = ev.ChildInstanceID
			order = append(order, ev.EventID)
		case history.SubOrchestrationCompleted, history.SubOrchestrationFailed:
			delete(open, ev.SourceEventID)
		}
	}
	var ids []string
	for _, id := range order {
		if c, ok := open[id]; ok {
			ids = append(ids, c)
		}
	}
	return ids
}

// waitInput is everything deriveWaits looks at.
type waitInput struct {
	Info *provider.InstanceInfo
	// History is the current execution's history.
	History []history.Event
	Queue   *provider.InstanceQueueState
	// Children maps the instance IDs of awaited children to their state
	// (absent: not created yet).
	Children     map[string]State
	StalledAfter time.Duration
}

// deriveWaits works out what a live instance waits for, and which of those
// waits are stalled. It is a pure function of its input.
//
// Pending work comes from the history: a scheduling event (activity,
// timer, subscription, child) whose completion is not recorded. The queue
// state then says where each stands (an activity queued, running, given
// back; a completion queued for the next turn), and adds the reasons the
// history cannot show (a queued start, a delayed start, a recorded error,
// due messages nobody takes).
//
// The stall rules are those of provider.Admin.StalledInstances, applied to
// the same data, so an instance listed as stalled shows why.
func deriveWaits(in waitInput) []Wait {
	info, q := in.Info, in.Queue
	if stateOf(info.Status).IsTerminal() {
		return nil
	}
	now := q.Now
	var waits []Wait

	// Why no turn runs: a recorded error, a queued or delayed start.
	if le := info.LastError; le != nil {
		w := Wait{Message: le.Message, Since: q.LastErrorSince, RetryAt: nextDelivery(q.Messages, now),
			Attempt: maxAttempts(q.Messages)}
		switch {
		case le.Kind == history.ErrorNondeterminism:
			w.Kind, w.Attempt = WaitParked, 0
			if d := le.Divergence; d != nil {
				w.EventID, w.Expected, w.Found = d.EventID, d.Expected, d.Got
			}
		case le.Kind == history.ErrorConfiguration:
			w.Kind, w.Name, w.Version = WaitUnregisteredOrchestration, info.OrchestrationName, info.OrchestrationVersion
			if start := startMessage(q.Messages); start != nil {
				w.Name, w.Version = start.Name, start.Version // a ContinueAsNew may name another version
			}
		default:
			w.Kind = WaitTurn
			w.Messages = len(q.Messages)
		}
		waits = append(waits, w)
	}
	if qs := q.QueuedStart; qs != nil {
		waits = append(waits, Wait{Kind: WaitLock, Name: info.OrchestrationName, LockKey: qs.LockKey, Holder: qs.Holder,
			QueuePosition: qs.Position, Since: qs.QueuedAt})
	}
	if len(in.History) == 0 && info.LastError == nil {
		if start := startMessage(q.Messages); start != nil && start.visible.After(now) {
			waits = append(waits, Wait{Kind: WaitDelayedStart, Name: info.OrchestrationName, At: start.visible})
		}
	}

	// Pending work recorded in history.
	waits = append(waits, historyWaits(in.History, info.CurrentExecutionID, q, in.Children)...)

	// Due messages that no turn has taken.
	if info.LastError == nil {
		due, since, attempts := 0, time.Time{}, 0
		for i := range q.Messages {
			m := &q.Messages[i]
			if m.Locked || m.VisibleAt.After(now) {
				continue
			}
			if due == 0 || m.VisibleAt.Before(since) {
				since = m.VisibleAt
			}
			due++
			attempts = max(attempts, m.Attempts)
		}
		turnRunning := q.InstanceLock != nil && q.InstanceLock.LockedUntil.After(now)
		switch {
		case due > 0 && !turnRunning && q.OrchestrationUnserved:
			name, version := unservedName(info, q)
			waits = append(waits, Wait{Kind: WaitUnregisteredOrchestration, Name: name, Version: version, Unserved: true,
				Message: dispatch.UnservedOrchestration(name, version), Since: since, Attempt: attempts})
		case due > 0 && !turnRunning:
			waits = append(waits, Wait{Kind: WaitTurn, Messages: due, Since: since, Attempt: attempts})
		}
	}
	return markStalls(waits, in)
}

// unservedName is the orchestration an unserved instance waits to run:
// the instance's (the name a runtime must register), with the version its
// queued start names, if any.
func unservedName(info *provider.InstanceInfo, q *provider.InstanceQueueState) (name, version string) {
	name, version = info.OrchestrationName, info.OrchestrationVersion
	if start := startMessage(q.Messages); start != nil {
		version = start.Version
	}
	return name, version
}

// queuedStart is the start message of an instance's next execution.
type queuedStart struct {
	Name, Version string
	visible       time.Time
}

func startMessage(msgs []provider.QueuedMessage) *queuedStart {
	for i := range msgs {
		if k := msgs[i].Item.Kind; k == history.WorkStartOrchestration || k == history.WorkContinueAsNew {
			return &queuedStart{Name: msgs[i].Item.Name, Version: msgs[i].Item.Version, visible: msgs[i].VisibleAt}
		}
	}
	return nil
}

// nextDelivery is when given-back messages are next due (zero: now).
func nextDelivery(msgs []provider.QueuedMessage, now time.Time) time.Time {
	var next time.Time
	for i := range msgs {
		if v := msgs[i].VisibleAt; !msgs[i].Locked && v.After(now) && (next.IsZero() || v.Before(next)) {
			next = v
		}
	}
	return next
}

func maxAttempts(msgs []provider.QueuedMessage) int {
	n := 0
	for i := range msgs {
		n = max(n, msgs[i].Attempts)
	}
	return n
}

// completion reports whether m is a scheduling event's completion or a
// breadcrumb appended as a turn consumes its messages (as opposed to an
// event the code emits).
func completion(k history.EventKind) bool {
	switch k {
	case history.ActivityCompleted, history.ActivityFailed, history.TimerFired, history.ExternalEvent,
		history.SubOrchestrationCompleted, history.SubOrchestrationFailed, history.OrchestrationCancelRequested:
		return true
	}
	return false
}

// historyWaits lists the pending scheduling events of one execution.
//
// Durable retries (ScheduleActivityWithRetry) are recognized by their
// shape: a failed attempt's ActivityFailed among the events a turn
// consumed, followed by the timer or the next attempt the code emits. A
// timer so placed is shown as the activity retrying, and the next
// attempt of the same name counts one more.
func historyWaits(hist []history.Event, execID int64, q *provider.InstanceQueueState, children map[string]State) []Wait {
	type pending struct {
		w     Wait
		order int64
	}
	open := map[int64]*pending{}
	attemptOf := map[int64]int{}    // activity ID -> attempt
	nameOf := map[int64]string{}    // activity ID -> name
	retryTimer := map[int64]int64{} // timer ID -> failed activity ID
	claimed := map[int64]bool{}     // failed activities and fired retry timers already followed up
	// Subscriptions and arrivals per event name, matched in order.
	subs := map[string][]int64{}
	arrived := map[string]int{}

	// lastFollowable returns the newest unclaimed failed activity (or fired
	// retry timer) of name among the completions just before index i.
	followUp := func(i int, name string) (attempt int, ok bool) {
		for j := i - 1; j >= 0 && completion(hist[j].Kind); j-- {
			ev := &hist[j]
			var act int64
			switch {
			case ev.Kind == history.ActivityFailed && !claimed[ev.EventID]:
				act = ev.SourceEventID
			case ev.Kind == history.TimerFired && !claimed[ev.EventID]:
				if a, ok := retryTimer[ev.SourceEventID]; ok {
					act = a
				}
			}
			if act != 0 && (name == "" || nameOf[act] == name) {
				claimed[ev.EventID] = true
				return attemptOf[act], true
			}
		}
		return 0, false
	}
	followedActivity := func(i int) (int64, bool) {
		for j := i - 1; j >= 0 && completion(hist[j].Kind); j-- {
			ev := &hist[j]
			if ev.Kind == history.ActivityFailed && !claimed[ev.EventID] && ev.Error != nil && ev.Error.Kind != history.ErrorCanceled {
				claimed[ev.EventID] = true
				return ev.SourceEventID, true
			}
		}
		return 0, false
	}

	for i := range hist {
		ev := &hist[i]
		at := time.UnixMilli(ev.TimestampMs).UTC()
		switch ev.Kind {
		case history.ActivityScheduled:
			attempt := 1
			if prev, ok := followUp(i, ev.Name); ok {
				attempt = prev + 1
			}
			attemptOf[ev.EventID], nameOf[ev.EventID] = attempt, ev.Name
			open[ev.EventID] = &pending{order: ev.EventID, w: Wait{Kind: WaitActivity, Name: ev.Name, ActivityID: ev.EventID,
				Attempt: attempt, Since: at, Queue: ev.Queue, HeartbeatTimeoutMs: ev.HeartbeatTimeoutMs,
				StartToCloseTimeoutMs: ev.StartToCloseTimeoutMs, ScheduleToCloseTimeoutMs: ev.ScheduleToCloseTimeoutMs}}
		case history.TimerCreated:
			fires := time.UnixMilli(ev.FireAtMs).UTC()
			if act, ok := followedActivity(i); ok {
				retryTimer[ev.EventID] = act
				open[ev.EventID] = &pending{order: ev.EventID, w: Wait{Kind: WaitActivity, Name: nameOf[act], ActivityID: act,
					Attempt: attemptOf[act] + 1, ActivityState: ActivityRetrying, RetryAt: fires, Since: at}}
				break
			}
			open[ev.EventID] = &pending{order: ev.EventID, w: Wait{Kind: WaitTimer, FiresAt: fires, Since: at}}
		case history.ExternalSubscribed:
			if arrived[ev.Name] > 0 {
				arrived[ev.Name]--
				break
			}
			subs[ev.Name] = append(subs[ev.Name], ev.EventID)
			open[ev.EventID] = &pending{order: ev.EventID, w: Wait{Kind: WaitEvent, Name: ev.Name, Since: at}}
		case history.ExternalEvent:
			if s := subs[ev.Name]; len(s) > 0 {
				delete(open, s[0])
				subs[ev.Name] = s[1:]
			} else {
				arrived[ev.Name]++
			}
		case history.ExternalSubscribedCanceled:
			if p, ok := open[ev.SourceEventID]; ok && p.w.Kind == WaitEvent {
				subs[p.w.Name] = slices.DeleteFunc(subs[p.w.Name], func(id int64) bool { return id == ev.SourceEventID })
			}
			delete(open, ev.SourceEventID)
		case history.OrchestrationCancelRequested:
			if ev.FireAtMs > 0 {
				// The grace period: the instance ends when it fires.
				open[ev.EventID] = &pending{order: ev.EventID, w: Wait{Kind: WaitTimer, Name: CancelGraceWaitName,
					FiresAt: time.UnixMilli(ev.FireAtMs).UTC(), Since: at}}
			}
		case history.SubOrchestrationScheduled:
			w := Wait{Kind: WaitChild, Name: ev.Name, InstanceID: ev.ChildInstanceID, Since: at}
			w.ChildState = children[ev.ChildInstanceID]
			open[ev.EventID] = &pending{order: ev.EventID, w: w}
		case history.ActivityCompleted, history.ActivityFailed, history.ActivityCancelRequested,
			history.TimerFired, history.TimerCanceled, history.SubOrchestrationCompleted, history.SubOrchestrationFailed:
			delete(open, ev.SourceEventID)
		}
	}

	ps := make([]*pending, 0, len(open))
	for _, p := range open {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *pending) int { return int(a.order - b.order) })
	waits := make([]Wait, 0, len(ps))
	for _, p := range ps {
		w := p.w
		if w.Kind == WaitActivity && w.ActivityState == "" {
			placeActivity(&w, execID, q)
		}
		waits = append(waits, w)
	}
	return waits
}

// placeActivity says where an awaited activity stands, from the queues.
func placeActivity(w *Wait, execID int64, q *provider.InstanceQueueState) {
	for i := range q.Messages {
		it := &q.Messages[i].Item
		if (it.Kind == history.WorkActivityCompleted || it.Kind == history.WorkActivityFailed) && it.ID == w.ActivityID && it.ExecutionID == execID {
			w.ActivityState = ActivityDone
			return
		}
	}
	w.ActivityState = ActivityQueued
	for i := range q.Activities {
		a := &q.Activities[i]
		if a.ActivityID != w.ActivityID || a.ExecutionID != execID {
			continue
		}
		describeRow(w, a, q.Now)
		return
	}
}

// describeRow fills w from the activity's worker row.
func describeRow(w *Wait, a *provider.QueuedActivity, now time.Time) {
	w.Deliveries = a.Attempts
	switch {
	case !a.LockedUntil.IsZero() && a.LockedUntil.After(now):
		w.ActivityState, w.LockedUntil = ActivityRunning, a.LockedUntil
	case a.VisibleAt.After(now):
		w.ActivityState, w.RetryAt = ActivityQueued, a.VisibleAt
	default:
		w.ActivityState = ActivityQueued
	}
	w.Queue, w.HeartbeatAt, w.HeartbeatDetails = a.Queue, a.HeartbeatAt, a.HeartbeatDetails
	if a.Unserved && w.ActivityState != ActivityRunning {
		w.Unserved, w.Message = true, dispatch.Unserved(a.Name, a.Queue)
	}
	if a.Error != nil {
		w.Kind, w.Message, w.Since = WaitUnregisteredActivity, a.Error.Message, a.ErrorSince
		w.Attempt = a.Attempts
	}
}

// markStalls applies the stall rules of provider.Admin.StalledInstances
// to the waits, adding a wait for a stalled worker row the history does
// not show (an activity of an earlier execution, say).
func markStalls(waits []Wait, in waitInput) []Wait {
	q := in.Queue
	cutoff := q.Now.Add(-in.StalledAfter)
	if q.LastProgressAt.After(cutoff) {
		return waits
	}
	stall := func(match func(*Wait) bool, add func() Wait, reason string) {
		for i := range waits {
			if w := &waits[i]; match(w) {
				if !w.Stalled {
					w.Stalled, w.StalledReason = true, reason
				}
				return
			}
		}
		if add != nil {
			w := add()
			w.Stalled, w.StalledReason = true, reason
			waits = append(waits, w)
		}
	}
	idle := q.Now.Sub(q.LastProgressAt).Round(time.Second)
	// The instance and its queue state are read one after the other: a
	// turn may record an error in between, so the queue can report one
	// (LastErrorSince) that the instance read earlier does not carry.
	if le := in.Info.LastError; le != nil && !q.LastErrorSince.IsZero() && !q.LastErrorSince.After(cutoff) {
		stall(func(w *Wait) bool {
			return w.Kind == WaitParked || w.Kind == WaitUnregisteredOrchestration || w.Kind == WaitTurn && w.Message != ""
		}, nil, fmt.Sprintf("no progress for %s: every turn since %s was given back (%s)",
			idle, q.LastErrorSince.Format(time.RFC3339), le.Message))
	}
	for i := range q.Activities {
		a := &q.Activities[i]
		var reason string
		switch {
		case a.Unserved && !a.EnqueuedAt.After(cutoff) && !(a.LockedUntil.After(q.Now)):
			reason = fmt.Sprintf("no progress for %s: %s since %s", idle, dispatch.Unserved(a.Name, a.Queue),
				a.EnqueuedAt.Format(time.RFC3339))
		case !a.ErrorSince.IsZero() && !a.ErrorSince.After(cutoff):
			reason = fmt.Sprintf("no progress for %s: activity %s given back since %s (%s)", idle, a.Name,
				a.ErrorSince.Format(time.RFC3339), a.Error.Message)
		case a.Attempts >= StalledAttempts:
			reason = fmt.Sprintf("no progress for %s: activity %s delivered %d times without completing", idle, a.Name, a.Attempts)
		case !a.VisibleAt.After(cutoff):
			reason = fmt.Sprintf("no progress for %s: activity %s due since %s and no worker took it", idle, a.Name,
				a.VisibleAt.Format(time.RFC3339))
		default:
			continue
		}
		stall(func(w *Wait) bool {
			return (w.Kind == WaitActivity || w.Kind == WaitUnregisteredActivity) && w.ActivityID == a.ActivityID && w.ActivityState != ActivityRetrying
		}, func() Wait {
			w := Wait{Kind: WaitActivity, Name: a.Name, ActivityID: a.ActivityID, Since: a.EnqueuedAt}
			describeRow(&w, a, q.Now)
			return w
		}, reason)
	}
	if len(q.Messages) > 0 {
		ready := q.Messages[0].VisibleAt
		for i := range q.Messages {
			ready = minTime(ready, q.Messages[i].VisibleAt)
		}
		if l := q.InstanceLock; l != nil && l.LockedUntil.After(ready) {
			ready = l.LockedUntil
		}
		switch {
		case ready.After(cutoff):
		case q.OrchestrationUnserved && in.Info.LastError == nil:
			name, version := unservedName(in.Info, q)
			stall(func(w *Wait) bool { return w.Kind == WaitUnregisteredOrchestration && w.Unserved }, func() Wait {
				return Wait{Kind: WaitUnregisteredOrchestration, Name: name, Version: version, Unserved: true,
					Message: dispatch.UnservedOrchestration(name, version), Since: ready, Attempt: maxAttempts(q.Messages)}
			}, fmt.Sprintf("no progress for %s: %s since %s", idle, dispatch.UnservedOrchestration(name, version), ready.Format(time.RFC3339)))
		default:
			stall(func(w *Wait) bool { return w.Kind == WaitTurn }, func() Wait {
				return Wait{Kind: WaitTurn, Messages: len(q.Messages), Since: ready, Attempt: maxAttempts(q.Messages)}
			}, fmt.Sprintf("no progress for %s: messages due since %s and no runtime took them", idle, ready.Format(time.RFC3339)))
		}
	}
	return waits
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// listStalled is ListInstances with ListOptions.Stalled.
func (c *Client) listStalled(ctx context.Context, opts *ListOptions) (*InstancePage, error) {
	if opts.Cursor != "" {
		return nil, fmt.Errorf("%w: a stalled listing has one page, it takes no cursor", ErrInvalidArgument)
	}
	after := cmp.Or(opts.StalledAfter, DefaultStalledAfter)
	if after < 0 || opts.Limit < 0 {
		return nil, fmt.Errorf("%w: StalledAfter and Limit must not be negative", ErrInvalidArgument)
	}
	keep := map[State]bool{}
	for _, s := range opts.States {
		switch s {
		case StatePending, StateRunning:
			keep[s] = true
		case StateCompleted, StateFailed, StateCanceled:
			// Terminal instances are never stalled.
		default:
			return nil, fmt.Errorf("%w: unknown state %q", ErrInvalidArgument, s)
		}
	}
	out := &InstancePage{Instances: []Status{}}
	if len(opts.States) > 0 && len(keep) == 0 {
		return out, nil
	}
	page, err := c.p.StalledInstances(ctx, provider.StalledOptions{After: after, MinAttempts: StalledAttempts,
		Limit: min(cmp.Or(opts.Limit, 100), 1000)})
	if err != nil {
		return nil, fmt.Errorf("listing stalled instances: %w", err)
	}
	for _, id := range page.InstanceIDs {
		st, err := c.Inspect(ctx, id, &WaitOptions{StalledAfter: after})
		if errors.Is(err, ErrNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !st.Stalled || !opts.matchStalled(st) {
			continue
		}
		out.Instances = append(out.Instances, *st)
	}
	return out, nil
}

// CountStalled counts stalled instances under the threshold after
// (0 = DefaultStalledAfter), up to limit (more reports that there are
// more). It asks the store only (provider.Admin.StalledInstances): a
// bounded read of index ranges, cheap enough for every metrics scrape.
func (c *Client) CountStalled(ctx context.Context, after time.Duration, limit int) (n int, more bool, err error) {
	page, err := c.p.StalledInstances(ctx, provider.StalledOptions{After: cmp.Or(after, DefaultStalledAfter),
		MinAttempts: StalledAttempts, Limit: limit})
	if err != nil {
		return 0, false, fmt.Errorf("counting stalled instances: %w", err)
	}
	return len(page.InstanceIDs), page.More, nil
}

// patchesOf lists the patches a history recorded, in order.
func patchesOf(hist []history.Event) []string {
	var out []string
	for i := range hist {
		if hist[i].Kind == history.PatchRecorded {
			out = append(out, hist[i].Name)
		}
	}
	return out
}

// instanceDeadline is the deadline of a live instance's timeout
// (StartOptions.Timeout), or nil. The timeout is armed while its delayed
// cancel (a CancelInstance of kind timeout) is queued, and has fired once
// the current execution recorded that cancel (its grace period runs);
// with neither there is none: never set, or dropped by a rewind, although
// the copied OrchestrationStarted may still record it. The time is the
// deadline the execution's OrchestrationStarted recorded (kept across
// ContinueAsNew), else when the queued cancel becomes due.
func instanceDeadline(hist []history.Event, q *provider.InstanceQueueState) *time.Time {
	var at time.Time
	for i := range q.Messages {
		if it := &q.Messages[i].Item; it.Kind == history.WorkCancelInstance && isTimeout(it.Error) {
			at = q.Messages[i].VisibleAt
			break
		}
	}
	if at.IsZero() {
		for i := range hist {
			if ev := &hist[i]; ev.Kind == history.OrchestrationCancelRequested && isTimeout(ev.Error) {
				at = time.UnixMilli(ev.TimestampMs)
				break
			}
		}
	}
	if at.IsZero() {
		return nil
	}
	if len(hist) > 0 && hist[0].Kind == history.OrchestrationStarted && hist[0].FireAtMs > 0 {
		at = time.UnixMilli(hist[0].FireAtMs)
	}
	at = at.UTC()
	return &at
}

func isTimeout(e *history.ErrorDetails) bool { return e != nil && e.Kind == history.ErrorTimeout }
