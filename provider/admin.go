package provider

import (
	"context"
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Admin is the management side of a provider, part of Provider: listing,
// inspection, purging and queue statistics. The Client and the HTTP API
// read instances through it.
type Admin interface {
	// ListInstances returns one page of instances, newest first, filtered by
	// opts. Pages are keyset-paginated: pass the returned NextCursor back as
	// opts.Cursor; an empty NextCursor means the last page. A malformed cursor
	// returns ErrInvalidArgument.
	ListInstances(ctx context.Context, opts ListInstancesOptions) (*InstancePage, error)

	// GetInstance returns one instance, or ErrNotFound.
	GetInstance(ctx context.Context, instanceID string) (*InstanceInfo, error)

	// ListExecutions returns an instance's executions in ascending order, or
	// ErrNotFound for an unknown instance.
	ListExecutions(ctx context.Context, instanceID string) ([]ExecutionInfo, error)

	// GetExecution returns one execution, or ErrNotFound.
	GetExecution(ctx context.Context, instanceID string, executionID int64) (*ExecutionInfo, error)

	// ListChildren returns the IDs of the instance's direct sub-orchestrations,
	// or ErrNotFound for an unknown instance.
	ListChildren(ctx context.Context, instanceID string) ([]string, error)

	// PurgeInstances deletes the named instances and, recursively, all their
	// sub-orchestrations: instance and execution rows, history, queued
	// messages of both queues, instance locks, the execution locks they hold
	// (each handed to its oldest queued start) and their queued starts, in
	// one transaction, all or nothing. The idempotency keys naming them are
	// kept for their full retention, marked purged at the time of the purge
	// (the first purge, if an ID is reused and purged again): a repeat start
	// is still a duplicate, reporting DuplicateStartError.PurgedAt. It fails
	// with ErrNotFound if any named instance is unknown,
	// with ErrChildInstance if one is a sub-orchestration whose parent exists
	// and is not purged with it, and, unless opts.Force, with ErrStillRunning
	// if any instance to delete is Pending or Running. A purged ID can be
	// reused; the lock tokens of purged instances become invalid.
	PurgeInstances(ctx context.Context, instanceIDs []string, opts PurgeOptions) (*PurgeResult, error)

	// ListValues returns the values of an instance (TurnAck.Values), in
	// key order, or ErrNotFound for an unknown instance.
	ListValues(ctx context.Context, instanceID string) ([]Value, error)

	// GetValue returns one value of an instance, or ErrNotFound for an
	// unknown instance or a key it does not hold.
	GetValue(ctx context.Context, instanceID, key string) (*Value, error)

	// QueueDepths counts the messages waiting in both queues.
	QueueDepths(ctx context.Context) (*QueueDepths, error)

	// Counts returns store-wide totals.
	Counts(ctx context.Context) (*Counts, error)

	// ListDeadLetters returns messages that could not be decoded and were
	// moved out of the queues, newest first, at most limit (0 means 100).
	ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)

	// InstanceQueue returns the queue state of one instance, read in one
	// consistent snapshot: its orchestrator-queue messages, its worker-queue
	// rows, its instance lock, its execution locks and its place in an
	// execution lock's queue, and when it last progressed. It is a read:
	// it locks and changes nothing. Its cost must grow with the instance's
	// own rows only (index lookups by instance ID), never with other
	// instances' rows, except that a queue position counts the starts
	// ahead of the instance on its lock key. ErrNotFound for an unknown
	// instance; ErrInvalidArgument for an empty ID.
	InstanceQueue(ctx context.Context, instanceID string) (*InstanceQueueState, error)

	// StalledInstances returns the IDs of live instances (Pending, Running,
	// or between ContinueAsNew executions) that are stalled by the rules
	// below, newest instance first, at most opts.Limit, and whether there
	// were more. With cutoff = now - opts.After, an instance is stalled
	// when its LastProgressAt (see InstanceQueueState) is at or before
	// cutoff and at least one of these holds:
	//   - its LastErrorSince is at or before cutoff (parked after
	//     nondeterminism, orchestration not registered, history unreadable);
	//   - one of its worker rows has ErrorSince at or before cutoff
	//     (activity not registered);
	//   - one of its worker rows has Attempts >= opts.MinAttempts;
	//   - it has orchestrator messages it could be fetched for since cutoff:
	//     the earliest time a fetch could take it (its earliest message's
	//     visibility, or its instance lock's expiry if later) is at or
	//     before cutoff;
	//   - one of its worker rows is fetchable since cutoff (visible and
	//     unlocked, or its lock expired, at or before cutoff).
	// Each rule must be answered from an index range of the rows that
	// match it (such rows are rare in a healthy store), not from a scan of
	// all instances, histories or queued rows.
	StalledInstances(ctx context.Context, opts StalledOptions) (*StalledPage, error)
}

// InstanceQueueState is what the queues hold for one instance
// (Admin.InstanceQueue). Times are from the provider's clock.
type InstanceQueueState struct {
	// Now is the provider clock's time of the read.
	Now time.Time
	// LastProgressAt is when the instance last progressed: the store time
	// of the newest history event of its current execution, or the
	// instance's creation time when that execution has no history yet.
	LastProgressAt time.Time
	// LastErrorSince is when the instance's LastError was first recorded
	// by a run of abandons that gave one (AbandonOptions.Error): an
	// abandon with an error keeps the time of the previous one while
	// LastError is set; a committed turn clears both. Zero when LastError
	// is nil.
	LastErrorSince time.Time
	// Messages are the instance's orchestrator-queue messages in enqueue
	// order, delayed ones (timers, delayed starts) included.
	Messages []QueuedMessage
	// Activities are the instance's worker-queue rows, of every execution,
	// in enqueue order.
	Activities []QueuedActivity
	// InstanceLock is the instance lock, while a turn holds it (expired
	// locks included, flagged by LockedUntil <= Now); nil when none.
	InstanceLock *InstanceLockState
	// HeldLocks are the keys of the execution locks the instance holds,
	// in key order.
	HeldLocks []string
	// QueuedStart is the instance's start waiting for an execution lock
	// (LockRequest.Queue); nil when it is not queued.
	QueuedStart *QueuedStart
	// OrchestrationUnserved reports, for a store that keeps routes
	// (Router), that no live runtime registers the instance's
	// orchestration (WorkerRoutes.Orchestrations; for an instance pinned to
	// a version, that version: WorkerRoutes.OrchestrationVersions) while
	// some runtime's announcement is live, so its messages wait for a
	// runtime that does.
	// Announcements without an orchestration list serve every name; with
	// no live announcement nothing is known and it is false.
	OrchestrationUnserved bool
}

// QueuedMessage is one orchestrator-queue message of an instance.
type QueuedMessage struct {
	// Item is the message. Its Kind is empty when the row cannot be
	// decoded (DecodeError says why); such rows are still listed.
	Item        history.WorkItem
	DecodeError string
	// EnqueuedAt is when the message was enqueued.
	EnqueuedAt time.Time
	// VisibleAt is when it becomes (or became) fetchable; an abandon with
	// a delay moves it.
	VisibleAt time.Time
	// Attempts counts the fetches that delivered it.
	Attempts int
	// Locked reports that a turn in progress holds it (it carries that
	// turn's lock token).
	Locked bool
}

// QueuedActivity is one worker-queue row of an instance.
type QueuedActivity struct {
	ExecutionID int64
	ActivityID  int64
	// Name is the activity name, from the work item ("" when the row
	// cannot be decoded).
	Name      string
	SessionID string
	// EnqueuedAt is when the row was enqueued.
	EnqueuedAt time.Time
	// VisibleAt is when the row is next fetchable: its visibility while
	// unlocked, its lock expiry while locked.
	VisibleAt time.Time
	// Attempts counts the fetches (deliveries) of the row.
	Attempts int
	// LockedUntil is the expiry of a worker's lock on the row, while one
	// is held (possibly expired: LockedUntil <= now); zero when unlocked.
	LockedUntil time.Time
	// Error is the error the last AbandonWorkItem with AbandonOptions.Error
	// recorded on the row (an activity not registered), or nil.
	Error *history.ErrorDetails
	// ErrorSince is when a run of such abandons began: an abandon with an
	// error keeps the time of the previous one while Error is set, and one
	// without an error clears both. Zero when Error is nil.
	ErrorSince time.Time
	// Queue is the queue the row is routed to ("" is the default queue).
	Queue string
	// HeartbeatAt is the time of the latest heartbeat of a running (or
	// crashed) attempt, and HeartbeatDetails what it reported; zero and
	// nil without one.
	HeartbeatAt      time.Time
	HeartbeatDetails json.RawMessage
	// Unserved reports, for a store that keeps routes (Router), that no
	// live runtime has announced that it serves this activity in this
	// queue, while some runtime is live: the row waits for a deploy that
	// brings one.
	Unserved bool
}

// InstanceLockState is the instance lock held by a turn in progress.
type InstanceLockState struct {
	LockedAt    time.Time
	LockedUntil time.Time
}

// QueuedStart is a start waiting for an execution lock.
type QueuedStart struct {
	LockKey string
	// Holder is the instance holding the lock ("" when no lock row
	// exists: the start is handed the key by the next start, release or
	// cleanup).
	Holder string
	// Position is the place in the key's queue: 1 is next.
	Position int
	// QueuedAt is when the start was queued.
	QueuedAt time.Time
	// StartAt is the visibility the start asked for (zero = at once).
	StartAt time.Time
}

// StalledOptions tunes Admin.StalledInstances.
type StalledOptions struct {
	// After is the stall threshold. Required (> 0).
	After time.Duration
	// MinAttempts is the delivery count of a worker row from which its
	// instance counts as stalled. Required (>= 2).
	MinAttempts int
	// Limit is the most IDs to return: 0 means 100; at most 1000.
	Limit int
}

// StalledPage is the answer of Admin.StalledInstances.
type StalledPage struct {
	InstanceIDs []string
	// More reports that more instances are stalled than were returned.
	More bool
}

// ListInstancesOptions filters ListInstances. Zero fields do not filter.
type ListInstancesOptions struct {
	// Statuses keeps instances in any of these states.
	Statuses []Status
	// Orchestration keeps instances of this orchestration name.
	Orchestration string
	// ParentInstanceID keeps direct children of this instance.
	ParentInstanceID string
	// IDPrefix keeps instances whose ID starts with this string, compared
	// byte by byte (case-sensitive; no wildcards: '%' and '_' are plain
	// characters). Stores answer it from the index of instance IDs.
	IDPrefix string
	// Version keeps instances of this orchestration version.
	Version string
	// CreatedAfter and CreatedBefore keep instances created at or after,
	// and before, these times (zero: no bound).
	CreatedAfter, CreatedBefore time.Time
	// FinishedAfter and FinishedBefore keep instances that are Completed,
	// Failed or Canceled and were last updated (when they finished) at or
	// after, and before, these times (zero: no bound; either bound set
	// keeps finished instances only).
	FinishedAfter, FinishedBefore time.Time
	// RootsOnly keeps instances that are not sub-orchestrations.
	RootsOnly bool
	// Limit is the page size: 0 means 100; at most 1000.
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
}

// InstancePage is one page of ListInstances.
type InstancePage struct {
	Instances  []InstanceInfo
	NextCursor string
}

// InstanceInfo describes an instance and its current execution.
type InstanceInfo struct {
	InstanceID           string
	OrchestrationName    string
	OrchestrationVersion string
	Status               Status
	// CurrentExecutionID is 0 while the instance is Pending.
	CurrentExecutionID int64
	Input              json.RawMessage
	Output             json.RawMessage
	Error              *history.ErrorDetails
	CustomStatus       json.RawMessage
	// CustomStatusVersion counts custom-status updates (0 = never set).
	CustomStatusVersion int64
	ParentInstanceID    string
	ParentExecutionID   int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	// LastError is why a live instance is not progressing, as recorded by
	// the last AbandonOrchestrationItem with AbandonOptions.Error; nil once
	// a turn commits.
	LastError *history.ErrorDetails
	// ValuesVersion counts the acks that changed the instance's values
	// (TurnAck.Values; 0 = never).
	ValuesVersion int64
}

// Value is one value of an instance (TurnAck.Values).
type Value struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
}

// ExecutionInfo describes one execution of an instance.
type ExecutionInfo struct {
	ExecutionID int64
	Status      Status
	Input       json.RawMessage
	Output      json.RawMessage
	Error       *history.ErrorDetails
	StartedAt   time.Time
	// CompletedAt is zero while the execution runs.
	CompletedAt time.Time
	EventCount  int64
}

// PurgeOptions tunes PurgeInstances.
type PurgeOptions struct {
	// Force deletes Pending and Running instances too.
	Force bool
}

// PurgeResult counts what a purge deleted.
type PurgeResult struct {
	Instances  int64
	Executions int64
	Events     int64
	Messages   int64
}

// QueueDepths counts queued messages.
type QueueDepths struct {
	// OrchestratorReady: visible messages that no turn in progress holds,
	// including late arrivals waiting for their instance's lock to be released.
	OrchestratorReady int64
	// OrchestratorDelayed: messages not yet visible (pending timers, delayed starts).
	OrchestratorDelayed int64
	// OrchestratorLocked: messages tagged by a turn in progress.
	OrchestratorLocked int64
	// WorkerReady: visible, unlocked activities.
	WorkerReady int64
	// WorkerDelayed: activities not yet visible.
	WorkerDelayed int64
	// WorkerLocked: activities being executed.
	WorkerLocked int64
	// WorkerUnserved: the WorkerReady activities that no live runtime
	// serves (see Router), for a store that keeps routes; they wait for
	// a runtime that does.
	WorkerUnserved int64
	// OrchestratorUnserved: the OrchestratorReady messages of instances
	// whose orchestration no live runtime registers (see Router and
	// InstanceQueueState.OrchestrationUnserved); they wait for a runtime
	// that does.
	OrchestratorUnserved int64
}

// Counts holds store-wide totals.
type Counts struct {
	Instances     int64
	Executions    int64
	HistoryEvents int64
	// ExecutionLocks counts execution locks, stale and expired ones included.
	ExecutionLocks int64
	// ByStatus counts instances per state.
	ByStatus map[Status]int64
}

// DeadLetter is a queue message that could not be decoded.
type DeadLetter struct {
	ID int64
	// Queue is "orchestrator" or "worker".
	Queue      string
	InstanceID string
	Payload    []byte
	Error      string
	DeadAt     time.Time
}
