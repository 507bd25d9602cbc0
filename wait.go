package duroxide

import (
	"context"
	"errors"
	"time"
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
	// far), RetryAt, Since (first failed delivery), Message.
	WaitUnregisteredOrchestration WaitKind = "unregisteredOrchestration"
	// WaitUnregisteredActivity: an activity that no runtime which fetched
	// it has registered; deliveries are retried with backoff. Name,
	// ActivityID, Attempt, RetryAt, Since (first failed delivery),
	// Message.
	WaitUnregisteredActivity WaitKind = "unregisteredActivity"
	// WaitParked: the orchestration code no longer replays its history
	// (nondeterminism); the instance is parked until a deploy with
	// matching code replays it. EventID, Expected (what history records),
	// Found (what the code did), Message, Since, RetryAt.
	WaitParked WaitKind = "parked"
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

// Wait is one thing a live instance waits for, with its times. Which
// fields are set depends on Kind (see the WaitKind constants); unset fields
// are omitted from JSON. Times come from the store's clock.
type Wait struct {
	Kind WaitKind `json:"kind"`
	// Name is the activity, event, child or orchestration name.
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
	// Message is the recorded error text, when there is one.
	Message string `json:"message,omitempty"`

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
// activity, timer, event, child, queued start, or reason it cannot make
// progress, in the order they began. It is derived from the current
// execution's history and the instance's queue state
// (provider.Admin.InstanceQueue). A terminal instance waits for nothing
// (nil). ErrNotFound if the instance does not exist.
func (c *Client) WaitingFor(ctx context.Context, instanceID string, opts *WaitOptions) ([]Wait, error) {
	st, err := c.Inspect(ctx, instanceID, opts)
	if err != nil {
		return nil, err
	}
	return st.WaitingFor, nil
}

// Inspect is GetStatus with Status.WaitingFor and Status.Stalled filled.
func (c *Client) Inspect(ctx context.Context, instanceID string, opts *WaitOptions) (*Status, error) {
	return nil, errors.New("not implemented yet")
}
