package provider

import (
	"context"
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Provider is a durable store for orchestration state: histories, the
// orchestrator queue, the worker queue, instance locks and sessions.
//
// All methods are safe for concurrent use by many goroutines and, for stores
// that support it, many processes. All times are taken from the provider's
// own clock (an option of each implementation), never mixed with a database
// server's clock. Errors wrap the sentinels of this package.
//
// A lock token is handed out by a fetch and stays valid until it is acked,
// abandoned, or expires (its LockedUntil passes without renewal). Once a
// fetch has returned a lease, the caller must ack or abandon it; a fetch that
// returns an error holds no lock.
//
// The interface is not yet stable for implementations outside this module:
// methods may still be added or reshaped between minor versions. The
// conformance suite in provider/providertest is the executable definition
// of the contract.
type Provider interface {
	// FetchOrchestrationItems locks up to opts.Max instances that have visible
	// messages (VisibleAt <= now) and whose instance lock is free or expired,
	// in the order they became ready (then oldest message first). Its cost
	// must not grow with messages waiting for other or locked instances. For
	// each it tags every currently visible message of the instance with a
	// fresh lock token, increments each tagged message's attempt count, and
	// loads the instance row and the current execution's history. Messages
	// enqueued after the fetch are not part of the batch; they stay queued
	// for the next turn.
	//
	// History the caller already holds is not loaded again: when
	// opts.Cached reports that the caller holds the instance's current
	// execution up to event N, the item carries only the events after N
	// (HistoryAfter = N); otherwise it carries the whole current history
	// (HistoryAfter = 0).
	//
	// It returns an empty slice only when no instance is eligible: losing a
	// race for one candidate moves on to the next. Stored history that cannot
	// be decoded does not fail the fetch: the item carries HistoryError and no
	// history, so the caller can count attempts and poison it. A message row
	// that cannot be decoded is moved to the dead-letter list in the same
	// transaction and never blocks the messages behind it.
	FetchOrchestrationItems(ctx context.Context, opts FetchOptions) ([]*OrchestrationItem, error)

	// AckOrchestrationItem commits one turn atomically and returns what the
	// commit handed to the caller (TurnResult), or an error (for example ErrLockLost, ErrDuplicateEvent,
	// ErrInstanceExists, ErrInvalidArgument, or a store failure); a failed
	// ack writes nothing and leaves its lock as it was. Stores may commit
	// concurrent acks together (group commit), but each succeeds or fails on
	// its own.
	//
	// One ack, in one atomic step: (a) check that LockToken holds an unexpired
	// instance lock, else ErrLockLost; (b) create the instance row if it is
	// missing, from Metadata; update its name and version when given (an ack
	// for an instance that has no row and no Metadata.OrchestrationName only
	// consumes the turn's messages, steps (j) and (k): it creates nothing, and
	// fails with ErrInvalidArgument if it carries history, items, or
	// metadata); (c)
	// insert the execution row ExecutionID if missing, with status Running;
	// (d) make ExecutionID the current execution if it is newer; (e) append
	// History as given, insert only, rejecting event IDs the execution already
	// has (ErrDuplicateEvent); (f) apply Metadata (status, input, output,
	// error, custom status); (g) insert WorkerItems, leasing those marked Lease
	// when LeaseFor > 0; (h) then delete the worker
	// rows named in CanceledActivities (unknown ones are ignored, and an item
	// both inserted and canceled is gone); (i) insert OrchestratorItems,
	// creating instances they ask for (such a NewInstance must not carry a
	// Lock or an IdempotencyKey: ErrInvalidArgument); (j) delete exactly the messages tagged
	// with LockToken; (k) release the instance lock. If the instance was
	// purged while locked, the lock is gone: the ack fails with ErrLockLost
	// and recreates nothing. The store does not modify ack.
	AckOrchestrationItem(ctx context.Context, ack *TurnAck) (TurnResult, error)

	// AbandonOrchestrationItem releases the instance lock without committing
	// anything. The tagged messages become fetchable again at now+opts.Delay
	// (untagged messages keep their own visibility). With opts.IgnoreAttempt
	// their attempt counts are decremented (never below 0). An unknown or
	// expired token returns ErrLockLost.
	AbandonOrchestrationItem(ctx context.Context, lockToken string, opts AbandonOptions) error

	// RenewOrchestrationItemLock extends a valid instance lock to
	// now+extendFor. An unknown or expired token returns ErrLockLost.
	RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error

	// Enqueue inserts orchestrator-queue messages atomically: all or none.
	// A message with Create set also creates its instance row (state
	// Pending); if the ID is taken, its OnExists message is inserted instead,
	// or, when OnExists is nil, the whole call fails with ErrInstanceExists
	// and writes nothing. Enqueue never checks instance locks: messages for a
	// locked instance wait for the next turn.
	//
	// A Create may also carry an idempotency key and an execution lock
	// (see LockStore for their life cycle), handled in this order in the
	// same transaction: (1) a retained IdempotencyKey fails the call with
	// *DuplicateStartError naming the instance it started (an expired one is
	// deleted and reused); (2) a Lock whose key is held by a live,
	// unexpired lock fails the call with *LockedError, or, with Lock.Queue,
	// queues the start (the instance row is created Pending; its message is
	// held back until the lock is handed to it); a stale or expired lock is
	// deleted first, handing it to its oldest queued start, and the key
	// checked again; (3) a taken instance ID is handled as above; (4) the
	// instance row, the lock row and the key row are written. A Create with
	// IfAbsent checks the instance ID right after the key, and skips (2)
	// and (4) when it is taken (see NewInstance.IfAbsent). A message with a
	// DedupKey its instance already recorded is skipped, the rest of the
	// call going on (see OrchestratorMessage.DedupKey).
	//
	// A committed call reports what it did with each message in results,
	// one EnqueueResult per message in msgs order, whenever one of them
	// asks for it: a DedupKey, a Create with IfAbsent, or a Create whose
	// Lock has Replace. When none does, results may be nil (the SQL stores
	// return nil, allocating nothing). A failed call returns nil results.
	// The store does not modify msgs.
	Enqueue(ctx context.Context, msgs ...*OrchestratorMessage) (results []EnqueueResult, err error)

	// FetchWorkItems locks up to opts.Max worker-queue rows that are visible
	// and unlocked (or whose lock expired), oldest first, each with its own
	// token, and increments their attempt counts. With opts.Session nil only
	// rows without a session are eligible. With a session config, rows without
	// a session are eligible, and so are rows whose session is owned by
	// opts.Session.OwnerID or is claimable (no session row with an unexpired
	// lease); fetching such a row claims or refreshes the session lease for
	// the owner in the same transaction. Rows that cannot be decoded are
	// dead-lettered, never returned and never blocking. The provider does not
	// look at orchestration status: activities of finished or purged
	// instances are served like any other.
	FetchWorkItems(ctx context.Context, opts WorkFetchOptions) ([]*WorkItemLease, error)

	// AckWorkItem completes one activity atomically: delete the worker row,
	// which must still be locked by LockToken with an unexpired lock, and,
	// when Completion is set, enqueue the completion on the orchestrator
	// queue, in one transaction. It also refreshes the session's last
	// activity time where the session lease is valid. ErrLockLost for a
	// missing, expired or stolen row (that is how a worker learns its
	// activity was canceled); a failed ack writes nothing. A committed ack
	// returns what it handed to the caller (WorkResult: the turn it took
	// or the Then it applied); the store does not modify ack.
	AckWorkItem(ctx context.Context, ack *WorkAck) (WorkResult, error)

	// AbandonWorkItem unlocks a worker row, making it visible at
	// now+opts.Delay; with opts.IgnoreAttempt the attempt count is
	// decremented (never below 0); opts.Error is recorded on the row (see
	// AbandonOptions.Error). An unknown or expired token returns ErrLockLost.
	AbandonWorkItem(ctx context.Context, lockToken string, opts AbandonOptions) error

	// RenewWorkItemLock extends a valid worker lock to now+extendFor and
	// refreshes its session's last activity time. An unknown, expired or
	// deleted row returns ErrLockLost: the worker must treat it as
	// cancellation of the activity.
	RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error

	// RenewSessionLocks extends to now+extendFor the leases of the sessions
	// owned by any of ownerIDs whose lease is still valid and which saw
	// activity within idleTimeout. Idle sessions are left to lapse so their
	// affinity is released. It returns how many were renewed.
	RenewSessionLocks(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error)

	// CleanupOrphanedSessions deletes sessions whose lease has expired and
	// which no worker row references. It returns how many were deleted.
	CleanupOrphanedSessions(ctx context.Context) (int, error)

	// ReadHistory returns the events of one execution ordered by event ID;
	// executionID 0 means the current execution. An unknown instance or
	// execution returns ErrNotFound; an instance whose first execution has not
	// started yet returns an empty slice. Undecodable rows return
	// ErrCorruptData, never a partial history.
	ReadHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error)

	// LockStore manages execution locks and idempotency keys.
	LockStore

	// Admin lists, inspects and purges instances (what a Client reads).
	Admin

	// Notifier wakes dispatchers and waiters when the store changes.
	Notifier

	// Close releases the store's resources. Calls after Close return ErrClosed.
	Close() error
}

// Status is the state of an instance or of one of its executions.
type Status string

const (
	// StatusPending: the instance exists but its first execution has not run a turn.
	StatusPending Status = "Pending"
	// StatusRunning: the current execution is live.
	StatusRunning Status = "Running"
	// StatusCompleted: finished with an output.
	StatusCompleted Status = "Completed"
	// StatusFailed: finished with an error.
	StatusFailed Status = "Failed"
	// StatusCanceled: finished by cancellation.
	StatusCanceled Status = "Canceled"
	// StatusContinuedAsNew: an execution (never an instance) that handed over
	// to the next one. An instance whose current execution continued as new is
	// Running.
	StatusContinuedAsNew Status = "ContinuedAsNew"
)

// IsTerminal reports whether s ends an instance.
func (s Status) IsTerminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCanceled
}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusCanceled, StatusContinuedAsNew:
		return true
	}
	return false
}

// FetchOptions tunes FetchOrchestrationItems.
type FetchOptions struct {
	// LockTimeout is how long the instance locks are held. Required (> 0).
	LockTimeout time.Duration
	// Max is the most instances to lock in one call. 0 means 1.
	Max int
	// Cached, when set, reports what the caller already holds of an
	// instance's history: the execution and the ID of its last event (ok
	// false: nothing). When that execution is still the instance's current
	// one, the fetch loads only the events after lastEventID. It is called
	// once for each instance the fetch locks, possibly while the store holds
	// a transaction open, so it must be fast and must not call the store.
	Cached func(instanceID string) (executionID, lastEventID int64, ok bool)
	// Orchestrations, when not nil, limits the fetch to instances of these
	// orchestration names (the instance's name, set by the message that
	// created it: a start, a sub-orchestration, a ContinueAsNew keeps it):
	// a runtime fetches only the orchestrations it registers, so an
	// instance it cannot run is never locked by it and no delivery is
	// counted against it. An instance the store knows no name of (messages
	// for an unknown instance) is eligible to every fetch, so they can be
	// consumed. An empty, non-nil list fetches only those. nil: every name.
	Orchestrations []string
	// OrchestrationVersions narrows Orchestrations to the versions a
	// runtime registers, so a rolling deploy never hands an instance to a
	// runtime that has its name but not its version. For a name with an
	// entry, an instance pinned to a version (its OrchestrationVersion is
	// set: by StartOptions.Version, by a sub-orchestration's version, by
	// its first turn, which pins the version it chose, or by a
	// ContinueAsNew) is fetched only when the entry lists that version; an
	// instance not pinned yet (started without a version, before its first
	// turn) is fetched by every runtime that registers the name. A name
	// without an entry, and every name when OrchestrationVersions is nil,
	// is fetched in every version. Names must not contain the character
	// U+001F. Ignored when Orchestrations is nil.
	OrchestrationVersions map[string][]string
	// Prompt says the caller fetches because work came due just now (a
	// timer fired, a delayed message became visible), or comes due within
	// moments and is fetched only after this fetch, and whatever delays
	// the fetch makes that work late: a store that commits concurrent
	// writes together (group commit) runs a prompt fetch at once, in a
	// transaction of its own, instead of queueing it behind a group's
	// commit. Other stores ignore it.
	Prompt bool
	// Ahead, when > 0, lets the fetch take messages before they are due:
	// those visible within Ahead of the fetch's time (a timer about to
	// fire, a delayed start), with the instance's other visible messages.
	// Such an item's DueAt says when the last of its messages comes due;
	// the caller holds it until then, so a fetch that takes a while is
	// done before the work is due instead of making it late. The instance
	// locks last LockTimeout plus Ahead. A store may ignore Ahead (and
	// take only visible messages, leaving DueAt zero).
	Ahead time.Duration
}

// WorkFetchOptions tunes FetchWorkItems.
type WorkFetchOptions struct {
	// LockTimeout is how long each row lock is held. Required (> 0).
	LockTimeout time.Duration
	// Max is the most rows to lock in one call. 0 means 1.
	Max int
	// Session enables session-bound rows; nil serves only rows without a session.
	Session *SessionOptions
	// Activities, when not nil, limits the fetch to rows of these activity
	// names: a runtime fetches only what it registers, so work it cannot
	// run is never delivered to it (no attempt is counted). Rows whose
	// name the store could not read (undecodable) are eligible to every
	// fetch, to be dead-lettered. nil: every name.
	Activities []string
	// Queues lists the queues served (WorkItem.Queue); nil serves only
	// the default queue "".
	Queues []string
}

// SessionOptions identifies the session owner fetching work.
type SessionOptions struct {
	// OwnerID identifies the worker (process or slot) that owns claimed sessions.
	OwnerID string
	// LockTimeout is the lease given to a claimed or refreshed session. Required (> 0).
	LockTimeout time.Duration
}

// AbandonOptions tunes the abandon calls.
type AbandonOptions struct {
	// Delay postpones the messages' visibility; 0 makes them visible at once.
	Delay time.Duration
	// IgnoreAttempt undoes the attempt-count increment of the fetch.
	IgnoreAttempt bool
	// Error, when set on an orchestration abandon, is recorded on the
	// instance as its LastError (why it is not progressing: parked after
	// nondeterminism, orchestration not registered), and the time of the
	// first of a run of such abandons as its LastErrorSince (see
	// InstanceQueueState). The next committed turn of the instance clears
	// both. Ignored for instances that have no row.
	//
	// On AbandonWorkItem it is recorded on the worker row (an activity not
	// registered): QueuedActivity.Error and ErrorSince, kept from the first
	// of a run of abandons with an error; an abandon without an error
	// clears both.
	Error *history.ErrorDetails
	// UntilStart, on an orchestration abandon, marks messages put off
	// until the instance's first execution can start (its start message
	// is delayed, or queued behind an execution lock): they become
	// visible after Delay, or with the instance's earliest other
	// unlocked message if that one is visible sooner: a start promoted
	// from its lock's queue while the turn ran brings them along.
	UntilStart bool
}

// Queue names one of the two queues.
type Queue int

const (
	// QueueOrchestrator is the orchestrator queue (turns, timers).
	QueueOrchestrator Queue = iota + 1
	// QueueWorker is the worker queue (activities).
	QueueWorker
)

// Waker is an optional capability that lets dispatchers sleep exactly
// until work can appear instead of polling.
type Waker interface {
	// NextVisible returns the earliest time at which a fetch of queue q may
	// find something it cannot find now: the earliest visibility of a
	// queued message, or the expiry of a lock that holds queued work. A time
	// at or before now means work may be fetchable now. The zero time means
	// the queue is empty. It is a read: it locks nothing.
	NextVisible(ctx context.Context, q Queue) (time.Time, error)
}

// Notifier tells the runtime and clients of a process when a store changed,
// so they need not poll. Every channel is coalescing (a buffer of one, never
// blocking the sender): a value means "look again", not "one change".
//
// A store notifies for the commits made through it in this process once
// they are committed and before the committing call returns: an enqueue,
// an ack that queues work or leaves messages waiting for the instance it
// unlocks, an abandon, a purge, a lock release. A call that fails notifies
// nobody. Except: a store whose writes run in one order (SQLite's single
// writer) may wake an enqueue's queue subscribers as soon as the enqueue
// is queued for that order, instead of after its commit, when every
// write started after the notification (a fetch) runs after the enqueue
// and so sees its messages; a subscriber must then look with such a
// write, not with a read (which may run before the commit).
// It should also notice commits made by other processes sharing the
// database (SQLite: PRAGMA data_version; PostgreSQL: LISTEN/NOTIFY) and
// notify for those, at least on both queues. Notifications may be spurious
// and may be lost (a dropped connection): the runtime still polls, slowly,
// as a fallback, and sleeps until Waker.NextVisible for delayed work.
type Notifier interface {
	// Subscribe returns a channel that receives a value whenever work may
	// have become fetchable on queue q, and a function that ends the
	// subscription.
	Subscribe(q Queue) (<-chan struct{}, func())

	// WatchInstance returns a channel that receives a value whenever the
	// instance may have changed (a turn committed, it was purged, another
	// process changed the store), and a function that ends the watch.
	WatchInstance(instanceID string) (<-chan struct{}, func())
}

// EndWatcher is implemented by a Notifier that can tell, of some changes,
// that they left the instance live. Client.WaitForOrchestration watches
// with it when the store has it, and so reads the instance's status only
// when it may have ended.
type EndWatcher interface {
	// WatchInstanceEnd is WatchInstance, except that the channel may stay
	// silent for changes the store knows left the instance live (neither
	// Completed, Failed nor Canceled once committed), such as a turn of
	// this process that ended in Running. Any other change signals it,
	// as WatchInstance's.
	WatchInstanceEnd(instanceID string) (<-chan struct{}, func())
}

// EndStatusWatcher is implemented by a Notifier that can hand a watcher
// the row of an instance that a commit of this process ended, so that
// Client.WaitForOrchestration need not read it. The SQL stores implement
// it; the PostgreSQL store hands rows over, the SQLite store does not
// (its channel only ever carries nil).
type EndStatusWatcher interface {
	// WatchInstanceEndStatus is WatchInstanceEnd whose channel carries,
	// instead of a bare signal, either nil ("the instance may have
	// changed: read it") or the instance's row as a commit of this
	// process that ended it left it: Completed, Failed or Canceled,
	// committed durably, read once that commit returned. A value
	// replaces a pending nil, so a watcher that reads its channel sees
	// the row rather than the signal before it.
	WatchInstanceEndStatus(instanceID string) (<-chan *InstanceInfo, func())
}

// InstanceMeta is the stored row of an instance, as seen by a fetch.
type InstanceMeta struct {
	OrchestrationName    string
	OrchestrationVersion string
	Status               Status
	// CurrentExecutionID is 0 while no execution has been acked.
	CurrentExecutionID int64
	ParentInstanceID   string
	ParentExecutionID  int64
	// StartAt is, for an instance whose first execution has not started,
	// when its queued start message becomes visible (a delayed start); the
	// zero time when the start is visible now, or when there is none.
	StartAt time.Time
}

// OrchestrationItem is one locked instance with the messages of its turn.
type OrchestrationItem struct {
	InstanceID  string
	LockToken   string
	LockedUntil time.Time
	// AttemptCount is the highest attempt count among the batch's messages
	// (1 on a first delivery).
	AttemptCount int
	// Instance is the stored instance row, or nil if none exists (a message
	// for an unknown instance; the runtime decides what to do with it).
	Instance *InstanceMeta
	// History is the current execution's history ordered by event ID: all
	// of it, or only the events after HistoryAfter.
	History []history.Event
	// HistoryAfter is 0 when History is the whole current history, or the
	// event ID (as reported by FetchOptions.Cached) after which History
	// starts: the caller holds the events up to it.
	HistoryAfter int64
	// HistoryError is set (wrapping ErrCorruptData) when the stored history
	// cannot be decoded; History is then nil.
	HistoryError error
	// Messages are the tagged messages in enqueue order.
	Messages []history.WorkItem
	// DueAt, when not zero, is when the last of Messages comes due (its
	// visible time): a fetch with FetchOptions.Ahead took it early. The
	// turn must not be decided before then: a timer's firing, a delayed
	// start or a cancellation delivered before its due time would run
	// early. Zero when every message was visible at the fetch.
	DueAt time.Time
}

// TurnAck is the result of one orchestration turn. The runtime computes
// everything in it, including how each queued message is routed, so the
// provider never inspects events or work items to decide what to store.
type TurnAck struct {
	LockToken string
	// ExecutionID is the execution the History belongs to. A ContinueAsNew
	// start turn acks ExecutionID N+1, creating that execution.
	ExecutionID int64
	// History is appended as given; event IDs must be new to the execution.
	History []history.Event
	// Metadata updates the instance and execution rows.
	Metadata ExecutionMetadata
	// WorkerItems are enqueued on the worker queue.
	WorkerItems []*WorkerMessage
	// LeaseFor, when > 0, leases the WorkerItems marked Lease to the
	// caller in the same transaction, as a FetchWorkItems would, with locks
	// of this duration: a runtime that will run the activities it schedules
	// saves the fetch. The leases are in TurnResult.Leased once the ack
	// committed; leased items wake no worker subscriber.
	LeaseFor time.Duration
	// CanceledActivities are deleted from the worker queue after WorkerItems
	// are inserted.
	CanceledActivities []ActivityRef
	// OrchestratorItems are enqueued on the orchestrator queue (timers,
	// sub-orchestration starts, completions to parents, continue-as-new).
	OrchestratorItems []*OrchestratorMessage
	// Values are the changes of the instance's values (history.ValueSet),
	// applied in order with the Metadata (step f): each sets or clears one
	// key of the instance, kept across executions until the instance is
	// purged. An ack with Values increments the instance's ValuesVersion.
	Values []ValueUpdate
}

// ValueUpdate sets (Value non-nil, JSON) or clears (Value nil) one value of
// an instance.
type ValueUpdate struct {
	Key   string
	Value json.RawMessage
}

// TurnResult is what a committed turn ack hands back to its caller.
type TurnResult struct {
	// Leased holds one lease (attempt 1) for each WorkerItem marked Lease
	// that the ack did not also cancel, in WorkerItems order, when
	// TurnAck.LeaseFor > 0; nil otherwise. A lease that expired before the
	// call returned is left out (its row is fetchable again). A crashed
	// caller's leases expire like a fetch's.
	Leased []*WorkItemLease
}

// ExecutionMetadata describes the instance and execution after a turn.
// Zero fields leave the stored value unchanged.
type ExecutionMetadata struct {
	OrchestrationName    string
	OrchestrationVersion string
	// Status of the execution after this turn: Running, or a terminal status
	// (Completed, Failed, Canceled, ContinuedAsNew). Terminal statuses set the
	// execution's completion time. Empty leaves it unchanged (a new execution
	// starts Running).
	Status Status
	// Input is the execution's input, recorded when it starts.
	Input json.RawMessage
	// Output is the orchestration's result (Completed).
	Output json.RawMessage
	// Error describes a failure (Failed, Canceled).
	Error *history.ErrorDetails
	// ParentInstanceID and ParentExecutionID link a sub-orchestration to the
	// execution of its parent; used when the instance row is created.
	ParentInstanceID  string
	ParentExecutionID int64
	// CustomStatus, when non-nil, replaces the instance's custom status and
	// increments its version.
	CustomStatus *CustomStatusUpdate
}

// CustomStatusUpdate sets (Value non-nil) or clears (Value nil) the custom status.
type CustomStatusUpdate struct {
	Value json.RawMessage
}

// ActivityRef identifies one scheduled activity.
type ActivityRef struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
}

// OrchestratorMessage is a message for the orchestrator queue with its
// routing computed by the runtime.
type OrchestratorMessage struct {
	// InstanceID is the instance the message is for.
	InstanceID string
	// VisibleAt delays visibility (timers, delayed starts); zero means now.
	VisibleAt time.Time
	// Item is the payload, stored opaquely.
	Item history.WorkItem
	// Create, when set, creates InstanceID (state Pending) with the message.
	Create *NewInstance
	// DedupKey, when set, makes the message once-only for its instance:
	// Enqueue records the key with the message, in the same transaction,
	// and skips (inserting nothing, failing nothing) a later message for
	// the same InstanceID with a key already recorded. Keys are kept until
	// the instance is purged. At most 512 bytes; not with Create
	// (ErrInvalidArgument). A committed Enqueue reports a skipped message
	// as EnqueueResult.Duplicate.
	DedupKey string
}

// EnqueueResult is what a committed Enqueue reports about one of its
// messages. The zero value says the message was inserted as given.
// (Earlier releases had the store write these into the call's arguments,
// as OrchestratorMessage.Duplicate, NewInstance.Existed and
// NewInstance.Replaced; those fields are gone.)
type EnqueueResult struct {
	// Duplicate: the message's DedupKey was already recorded for its
	// instance, so the message was skipped (see
	// OrchestratorMessage.DedupKey).
	Duplicate bool
	// Existed: the message's Create had IfAbsent and found the ID taken,
	// so nothing was inserted for it but its idempotency key (see
	// NewInstance.IfAbsent).
	Existed bool
	// Replaced names the live holder of the execution lock that the
	// message's Create.Lock.Replace canceled; "" when the key was free
	// (see LockRequest.Replace).
	Replaced string
}

// NewInstance describes an instance created by a message.
type NewInstance struct {
	OrchestrationName    string
	OrchestrationVersion string
	Input                json.RawMessage
	ParentInstanceID     string
	ParentExecutionID    int64
	// IdempotencyKey, when set, makes the start idempotent for
	// IdempotencyTTL (required > 0 with a key): see Enqueue.
	IdempotencyKey string
	IdempotencyTTL time.Duration
	// Lock, when set, makes the start take an execution lock: see Enqueue.
	Lock *LockRequest
	// OnExists, if non-nil, is enqueued instead of the message when the
	// instance ID is already taken (a parent uses it to fail its own task on a
	// child-ID collision). If nil, a taken ID fails the call with ErrInstanceExists.
	OnExists *OrchestratorMessage
	// IfAbsent makes this a start-if-absent (signal-with-start: a start and
	// an event in one Enqueue call): the instance's existence is checked
	// first, and when the ID is taken (by an instance in any state, or by
	// a concurrent call that committed first) the message is not inserted,
	// the Lock is not checked, and the call goes on with its other messages;
	// but an instance that has ended (Completed, Failed, Canceled) fails the
	// call with ErrInstanceEnded, writing nothing.
	// An IdempotencyKey is checked first as usual and, once the call
	// commits, names the instance whether it was created or found. With
	// IfAbsent, OnExists must be nil (ErrInvalidArgument). A committed
	// Enqueue reports a taken ID as EnqueueResult.Existed.
	IfAbsent bool
}

// WorkerMessage is a message for the worker queue with its identity and
// routing computed by the runtime.
type WorkerMessage struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
	// SessionID pins the activity to the worker owning that session; "" for none.
	SessionID string
	// VisibleAt delays visibility; zero means now.
	VisibleAt time.Time
	Item      history.WorkItem
	// Lease, in a TurnAck with LeaseFor > 0, inserts the item already
	// leased to the caller (see TurnResult.Leased). A leased item has no
	// SessionID and no VisibleAt (ErrInvalidArgument otherwise).
	Lease bool
}

// WorkItemLease is one locked worker-queue row.
type WorkItemLease struct {
	LockToken    string
	LockedUntil  time.Time
	AttemptCount int
	InstanceID   string
	ExecutionID  int64
	ActivityID   int64
	SessionID    string
	Item         history.WorkItem
}

// WorkAck completes one activity.
type WorkAck struct {
	LockToken string
	// Completion is enqueued on the orchestrator queue in the same
	// transaction as the deletion; nil deletes without enqueueing.
	Completion *OrchestratorMessage
	// TakeTurn, when set with a Completion, also takes the turn of the
	// instance the completion is for, in the same transaction, if that
	// instance's lock is free and it has no other activity in the worker
	// queue (whose results should reach one turn together): as
	// FetchOrchestrationItems with these options would for that instance
	// alone (Max is ignored). A runtime that will run the turn saves the
	// fetch. A taken turn wakes no orchestrator subscriber: it is the
	// caller's (WorkResult.Turn). TakeTurn.Orchestrations applies: an
	// instance of another orchestration is left to a fetch.
	TakeTurn *FetchOptions
	// Then, when set with a Completion, is the next turn of the
	// completion's instance, computed by the caller from the execution it
	// holds, with the Completion as the turn's only message: one commit
	// records the activity's result and the turn it causes. The store
	// applies Then as AckOrchestrationItem would, in the same transaction
	// and without enqueueing the Completion, only if nothing else happened
	// to the instance since the caller's copy: its lock is free,
	// Then.ExecutionID is its current execution, the last event of that
	// execution is ThenAfter, and it has no visible message in the
	// orchestrator queue and no other row in the worker queue. Otherwise
	// the ack goes on as if Then were not set (the Completion is enqueued
	// and TakeTurn applies). Then.LockToken must be empty.
	Then *TurnAck
	// ThenAfter is the ID of the last event of the execution the caller
	// computed Then from (required > 0 with Then).
	ThenAfter int64
}

// WorkResult is what a committed AckWorkItem hands back to its caller. At
// most one of its fields is set: an applied Then takes no turn.
type WorkResult struct {
	// Turn is the turn the ack took (WorkAck.TakeTurn) when it locked the
	// completion's instance: the completion and every other visible message
	// of the instance. The caller must ack or abandon it.
	Turn *OrchestrationItem
	// Then is set when the ack applied WorkAck.Then: the result of that
	// turn, as AckOrchestrationItem returns it. Nil when Then was not set
	// or not applied (the Completion was enqueued instead).
	Then *TurnResult
}
