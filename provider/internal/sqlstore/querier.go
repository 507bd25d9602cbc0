package sqlstore

import (
	"context"
	"errors"
)

// Query names one statement the shared store code runs. Each store maps
// it to its own SQL text (or its prepared statement for that text); the
// arguments are the same in every dialect and are given in the order the
// comment of each constant lists.
type Query int

// The statements of the shared code.
const (
	// QInstanceCurrent (instance_id) returns the instance's
	// current_execution_id; no row when the instance does not exist.
	QInstanceCurrent Query = iota
	// QExecutionExists (instance_id, execution_id) returns one boolean
	// (or 0/1) column: whether the execution exists.
	QExecutionExists
	// QHistory (instance_id, execution_id) returns the event_data of the
	// execution's events in event_id order.
	QHistory

	// The InstanceQueue statements, each (instance_id), each an index
	// lookup by instance.
	//
	// QQueueInstance (instance_id, now) returns current_execution_id,
	// created_at, last_error_at, the created_at of the newest event of the
	// current execution (NULL when it has none), and whether no route live
	// at now registers the instance's orchestration (see
	// provider.InstanceQueueState.OrchestrationUnserved); no row when the
	// instance does not exist.
	QQueueInstance
	// QQueueMessages returns the instance's orchestrator_queue rows in id
	// order: work_item, created_at, visible_at, attempt_count, whether it
	// is locked.
	QQueueMessages
	// QQueueWork (instance_id, now) returns the instance's worker_queue
	// rows in id order: execution_id, activity_id, session_id (empty for
	// none), work_item, created_at, visible_at, attempt_count, locked_until
	// (NULL unless locked), last_error, last_error_at, queue, heartbeat_at,
	// heartbeat_details, and whether no route live at now serves the row.
	QQueueWork
	// QQueueLock returns the instance lock's locked_at, locked_until.
	QQueueLock
	// QQueueHeldLocks returns the keys of the execution locks the
	// instance holds, in key order.
	QQueueHeldLocks
	// QQueueStart returns the instance's first queued start: lock_key,
	// the holder's instance ID (empty for none), created_at, visible_at, and
	// its position in the key's queue (1 is next).
	QQueueStart

	// QLockGet (lock_key) and QLockList () return execution locks as
	// ScanExecutionLock reads them; QLockList in key order.
	QLockGet
	QLockList

	// QGetInstance (instance_id) returns the instance as ScanInstanceInfo
	// reads it; QInstanceExists (instance_id) one boolean (or 0/1)
	// column: whether it exists.
	QGetInstance
	QInstanceExists
	// QListExecutions (instance_id) returns the instance's executions as
	// ScanExecutionInfo reads them, in execution order; QGetExecution
	// (instance_id, execution_id) the one execution.
	QListExecutions
	QGetExecution
	// QListChildren (instance_id) returns the instance IDs of the
	// instance's direct sub-orchestrations, oldest first.
	QListChildren

	// QNextVisibleOrch () and QNextVisibleWork () return one nullable
	// integer: the earliest time (Unix ms) a fetch of that queue may find
	// work it cannot find now (see provider.Waker), NULL for an empty
	// queue.
	QNextVisibleOrch
	QNextVisibleWork
	// QStalled (cutoff ms, min attempts, limit, candidates per rule)
	// returns the IDs of stalled instances, newest first (see
	// provider.Admin.StalledInstances).
	QStalled
	// QQueueDepths (now ms) returns the orchestrator queue's ready,
	// delayed and locked counts, then the worker queue's.
	QQueueDepths
	// QCounts () returns the numbers of instances, executions, history
	// events and execution locks; QCountsByStatus () status, count rows.
	QCounts
	QCountsByStatus
	// QDeadLetters (limit) returns dead letters newest first: id, queue,
	// instance_id, payload, error, dead_at.
	QDeadLetters
	// QValues (instance_id) returns the instance's values in key order:
	// value_key, value, updated_at. QValue (instance_id, value_key) the
	// one value: value, updated_at; no row when the key is not set.
	QValues
	QValue
	// QWorkHeartbeat (id, lock_token, now) returns the heartbeat_at and
	// heartbeat_details of the worker row while the token holds its
	// unexpired lock; no row otherwise.
	QWorkHeartbeat

	// NumQueries is the number of statements: the size of a store's table.
	NumQueries
)

// ErrNoRows is what a Querier's row returns from Scan when the statement
// found no row (each driver has its own no-rows error).
var ErrNoRows = errors.New("no rows in result set")

// Querier runs the shared code's statements in one transaction of a store
// (its read or write transaction, wrapped: database/sql's *sql.Tx and
// pgx.Tx have different methods). Errors come back as the driver returned
// them, except no rows (ErrNoRows); the store's own wrapping (Fail)
// translates them once, at the end of the call.
type Querier interface {
	// QueryRow runs q and returns its first row.
	QueryRow(ctx context.Context, q Query, args ...any) Row
	// Each runs q and calls scan for each row it returns, stopping at the
	// first error.
	Each(ctx context.Context, q Query, scan func(Row) error, args ...any) error
	// Batch runs stmts in order, as Each runs one, in as few round trips
	// as the store can, stopping at the first error.
	Batch(ctx context.Context, stmts []Stmt) error
}

// Stmt is one statement of a Querier's Batch: Scan is called for each
// row it returns.
type Stmt struct {
	Query Query
	Args  []any
	Scan  func(Row) error
}

// MapNoRows returns r with its driver's no-rows error (none) reported as
// ErrNoRows, for a Querier's QueryRow.
func MapNoRows(r Row, none error) Row { return noRows{r, none} }

type noRows struct {
	r    Row
	none error
}

func (n noRows) Scan(dest ...any) error {
	err := n.r.Scan(dest...)
	if errors.Is(err, n.none) {
		return ErrNoRows
	}
	return err
}
