// Package sqlstore is the implementation of provider.Provider shared by
// the SQL stores (provider/sqlite, provider/postgres): everything that
// does not depend on the SQL dialect, written once.
//
// Core, embedded in each store's Provider (NewCore), implements the
// provider calls: Reads (the calls that only read), Writes (the calls
// that write) and Notifications (provider.Notifier over the store's hub).
// They run over small seams each store implements for its dialect:
//
//   - ReadDB and WriteDB: the store's transaction runners, its error
//     translation (Fail), its clock and its logger. Both stores commit
//     concurrent writes together on GroupCommit, the group-commit leader
//     written here (SQLite on its single writer, one lane; PostgreSQL on
//     pooled connections, several lanes); the calls that may share a
//     transaction go through WriteGrouped, declaring the instance locks
//     they take (Lock), which PostgreSQL takes first, in instance order.
//     A call whose one step is a single statement atomic on its own (the
//     lock renewals, RenewTurn and RenewWork) goes through WriteAlone,
//     which PostgreSQL runs without an explicit transaction: one round
//     trip.
//   - Querier: the shared read statements (Query), each mapped to the
//     store's SQL text, run one at a time or as a Batch (pipelined by
//     PostgreSQL).
//   - Tx: the steps of one write transaction (CheckTurnLock, ApplyTurn,
//     FetchTurns, AckWorkThen, PurgeDelete, ...), each one statement or a
//     few, batched where the store can, in the store's SQL. The
//     per-instance lock lives in these steps: none under SQLite's single
//     writer, a transaction-scoped advisory lock in PostgreSQL.
//
// The flows between the steps that are the same in every dialect
// (InsertMessage over MessageTx, NewTurn, CleanupExecutionLocks over
// LockCleaner, CheckPurge, pause, resume and rewind over PauseTx, the
// schedules), the listing (ListQuery over a dialect's
// ListSQL, ReadInstancePage), the copy mapping (ExportTables, ExportSQL, ImportArgs,
// Records), the decoding of stored rows (ScanInstanceRow, DecodeEvents,
// DecodeHistories), the listing cursor and page sizes, the reading of the
// numbered migration files, and the part of error translation that does
// not look at a driver's errors (Classified, Translated) live here too.
//
// Rows come in through Row, which both drivers' rows satisfy: a nullable
// column scans into a pointer (nil for NULL), so the same scanning code
// reads either store. Errors from the seams come back as the driver
// returned them (no rows as ErrNoRows); the store translates them once, at
// the end of the call.
package sqlstore
