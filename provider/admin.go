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

	// QueueDepths counts the messages waiting in both queues.
	QueueDepths(ctx context.Context) (*QueueDepths, error)

	// Counts returns store-wide totals.
	Counts(ctx context.Context) (*Counts, error)

	// ListDeadLetters returns messages that could not be decoded and were
	// moved out of the queues, newest first, at most limit (0 means 100).
	ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
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
