package provider

import (
	"context"
	"encoding/json"
	"iter"
	"time"
)

// Copying a store.
//
// Exporter and Importer are optional capabilities that let a whole store
// move to another one (duroxide copy, e.g. from SQLite to PostgreSQL)
// without losing running work. An export is a consistent snapshot streamed
// as typed records, one per stored row, in dependency order (Tables); an
// import writes batches of them, each batch in one transaction. The records
// are store-neutral: times are time.Time, payloads are the stored JSON
// documents, passed through unparsed.
//
// What is copied: instances, executions, history events, instance values,
// both queues (timers are orchestrator messages), pauses, execution locks
// with their queued starts, idempotency keys (those of purged instances
// included), dead letters and schedules (with their last and next fire, so
// the target fires from where the source stopped). What is not: bulk jobs
// (operations in progress of the process that runs them), instance locks,
// worker-row locks and session leases. They belong to the processes serving the source; every message
// and activity they held is exported unlocked and visible at once (as if
// its holder had crashed and its lease expired), so the target's runtimes
// pick the work up. Attempt counts are kept. Execution locks are copied as
// they are, with their expiry: they guard which instance may run under a
// key, not which process runs it.
//
// The order of rows that have one (instances, newest last; messages and
// queued starts, oldest first) is kept by exporting and importing them in
// that order.

// Table names one kind of copied row.
type Table string

// The copied tables, in the order an export streams them.
const (
	TableInstances       Table = "instances"
	TableExecutions      Table = "executions"
	TableHistory         Table = "history"
	TableValues          Table = "instance_values"
	TableOrchestratorQ   Table = "orchestrator_queue"
	TableWorkerQ         Table = "worker_queue"
	TableExecutionLocks  Table = "execution_locks"
	TableQueuedStarts    Table = "queued_starts"
	TableIdempotencyKeys Table = "idempotency_keys"
	TableDeadLetters     Table = "dead_letters"
	TablePauses          Table = "pauses"
	TableSchedules       Table = "schedules"
)

// Tables lists the copied tables in export order.
var Tables = []Table{
	TableInstances, TableExecutions, TableHistory, TableValues, TableOrchestratorQ, TableWorkerQ,
	TableExecutionLocks, TableQueuedStarts, TableIdempotencyKeys, TableDeadLetters, TablePauses, TableSchedules,
}

// Exporter is an optional capability of a store that can be copied from.
type Exporter interface {
	// BeginExport opens a consistent snapshot of the whole store. The
	// caller must Close it. Writes committed after BeginExport (by other
	// processes) are not part of it: a store being copied should not be
	// served (see Snapshot.Leases).
	BeginExport(ctx context.Context) (Snapshot, error)
}

// Snapshot is one consistent view of a store being exported.
type Snapshot interface {
	// Counts returns the number of rows of each table in the snapshot:
	// what a verified copy must find in its target.
	Counts() TableCounts
	// Leases counts the leases live in the snapshot at the time it was
	// taken. Any of them means a runtime probably serves the store.
	Leases() LiveLeases
	// Records streams every record of the snapshot, table by table in
	// Tables order. Each record is a pointer to one of the *Record types
	// of this package. The iteration stops at the first error, which it
	// yields with a nil record.
	Records(ctx context.Context) iter.Seq2[Record, error]
	// Close releases the snapshot.
	Close() error
}

// Importer is an optional capability of a store that can be copied to.
type Importer interface {
	// CopyCounts returns the number of rows of each table: all zero for an
	// empty store (the only kind a copy may target).
	CopyCounts(ctx context.Context) (TableCounts, error)
	// Import writes records in one transaction: all or none. Records must
	// come in an order where a row's instance precedes its executions and
	// history (as an export streams them); rows keep their relative order.
	// A record that collides with an existing row (an instance ID or a
	// history event already present) fails the whole batch with
	// ErrInstanceExists or ErrDuplicateEvent.
	Import(ctx context.Context, records []Record) error
}

// TableCounts counts the rows of each copied table.
type TableCounts struct {
	Instances       int64 `json:"instances"`
	Executions      int64 `json:"executions"`
	HistoryEvents   int64 `json:"historyEvents"`
	OrchestratorQ   int64 `json:"orchestratorMessages"`
	WorkerQ         int64 `json:"workerMessages"`
	ExecutionLocks  int64 `json:"executionLocks"`
	QueuedStarts    int64 `json:"queuedStarts"`
	IdempotencyKeys int64 `json:"idempotencyKeys"`
	DeadLetters     int64 `json:"deadLetters"`
	Values          int64 `json:"values"`
	Pauses          int64 `json:"pauses"`
	Schedules       int64 `json:"schedules"`
}

// Of returns the count of table t.
func (c TableCounts) Of(t Table) int64 {
	switch t {
	case TableInstances:
		return c.Instances
	case TableExecutions:
		return c.Executions
	case TableHistory:
		return c.HistoryEvents
	case TableOrchestratorQ:
		return c.OrchestratorQ
	case TableWorkerQ:
		return c.WorkerQ
	case TableExecutionLocks:
		return c.ExecutionLocks
	case TableQueuedStarts:
		return c.QueuedStarts
	case TableIdempotencyKeys:
		return c.IdempotencyKeys
	case TableDeadLetters:
		return c.DeadLetters
	case TableValues:
		return c.Values
	case TablePauses:
		return c.Pauses
	case TableSchedules:
		return c.Schedules
	}
	return 0
}

// Total is the sum of every table's count.
func (c TableCounts) Total() int64 {
	var n int64
	for _, t := range Tables {
		n += c.Of(t)
	}
	return n
}

// LiveLeases counts unexpired leases: signs that a process serves a store.
type LiveLeases struct {
	// InstanceLocks are instance locks held by turns in progress.
	InstanceLocks int64 `json:"instanceLocks"`
	// WorkerLeases are activities being executed.
	WorkerLeases int64 `json:"workerLeases"`
	// Sessions are session affinity leases.
	Sessions int64 `json:"sessions"`
}

// Any reports whether any lease is live.
func (l LiveLeases) Any() bool { return l.InstanceLocks+l.WorkerLeases+l.Sessions > 0 }

// Record is one exported row: *InstanceRecord, *ExecutionRecord,
// *EventRecord, *OrchestratorMessageRecord, *WorkerMessageRecord,
// *ExecutionLockRecord, *QueuedStartRecord, *IdempotencyKeyRecord,
// *DeadLetterRecord, *ValueRecord, *PauseRecord or *ScheduleRecord.
type Record interface {
	// Table is the table the record belongs to.
	Table() Table
}

// InstanceRecord is an instance row.
type InstanceRecord struct {
	InstanceID           string
	OrchestrationName    string
	OrchestrationVersion string
	Status               Status
	CurrentExecutionID   int64
	Input                json.RawMessage // nil: none
	Output               json.RawMessage // nil: none
	// Error and LastError are history.ErrorDetails documents; nil: none.
	Error               json.RawMessage
	CustomStatus        json.RawMessage // nil: none
	CustomStatusVersion int64
	ParentInstanceID    string // "": a root instance
	ParentExecutionID   int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	LastError           json.RawMessage
	// ValuesVersion counts the turns that changed the instance's values.
	ValuesVersion int64
}

// ExecutionRecord is an execution row.
type ExecutionRecord struct {
	InstanceID  string
	ExecutionID int64
	Status      Status
	Input       json.RawMessage
	Output      json.RawMessage
	Error       json.RawMessage // a history.ErrorDetails document; nil: none
	StartedAt   time.Time
	CompletedAt time.Time // zero: still running
}

// EventRecord is one history event, as stored.
type EventRecord struct {
	InstanceID  string
	ExecutionID int64
	EventID     int64
	EventType   string
	Data        json.RawMessage // the history.Event document
	CreatedAt   time.Time
}

// OrchestratorMessageRecord is an orchestrator-queue message (timers and
// delayed starts included), exported unlocked.
type OrchestratorMessageRecord struct {
	InstanceID   string
	Item         json.RawMessage // the history.WorkItem document
	VisibleAt    time.Time
	AttemptCount int
	CreatedAt    time.Time
}

// WorkerMessageRecord is a worker-queue row, exported unlocked: a row
// locked in the source is visible at once.
type WorkerMessageRecord struct {
	InstanceID   string
	ExecutionID  int64
	ActivityID   int64
	SessionID    string // "": none
	Item         json.RawMessage
	VisibleAt    time.Time
	AttemptCount int
	CreatedAt    time.Time
}

// ExecutionLockRecord is a held execution lock.
type ExecutionLockRecord struct {
	Key        string
	InstanceID string
	LockedAt   time.Time
	ExpiresAt  time.Time
	TTL        time.Duration
}

// QueuedStartRecord is a start waiting for an execution lock key.
type QueuedStartRecord struct {
	Key        string
	InstanceID string
	Item       json.RawMessage // the start message, enqueued when the key is handed over
	VisibleAt  time.Time
	TTL        time.Duration
	CreatedAt  time.Time
}

// IdempotencyKeyRecord is a retained idempotency key.
type IdempotencyKeyRecord struct {
	Key        string
	InstanceID string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	PurgedAt   time.Time // zero: the instance was not purged
}

// DeadLetterRecord is a dead-lettered message.
type DeadLetterRecord struct {
	Queue      string
	InstanceID string
	Payload    []byte
	Error      string
	DeadAt     time.Time
}

// ValueRecord is one instance value (OrchestrationContext.SetValue).
type ValueRecord struct {
	InstanceID string
	Key        string
	Value      json.RawMessage
	UpdatedAt  time.Time
}

// PauseRecord holds an instance paused (Pauser): who paused it, why and
// when. Its held activities come as worker messages visible at
// PausedUntil.
type PauseRecord struct {
	InstanceID string
	PauseInfo
}

// ScheduleRecord is a schedule (ScheduleStore), with its fire state.
type ScheduleRecord struct {
	Schedule
}

// Table implementations.

func (*InstanceRecord) Table() Table            { return TableInstances }
func (*ExecutionRecord) Table() Table           { return TableExecutions }
func (*EventRecord) Table() Table               { return TableHistory }
func (*OrchestratorMessageRecord) Table() Table { return TableOrchestratorQ }
func (*WorkerMessageRecord) Table() Table       { return TableWorkerQ }
func (*ExecutionLockRecord) Table() Table       { return TableExecutionLocks }
func (*QueuedStartRecord) Table() Table         { return TableQueuedStarts }
func (*IdempotencyKeyRecord) Table() Table      { return TableIdempotencyKeys }
func (*DeadLetterRecord) Table() Table          { return TableDeadLetters }
func (*ValueRecord) Table() Table               { return TableValues }
func (*PauseRecord) Table() Table               { return TablePauses }
func (*ScheduleRecord) Table() Table            { return TableSchedules }
