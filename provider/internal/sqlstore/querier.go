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
}
