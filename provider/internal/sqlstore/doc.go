// Package sqlstore is the part of the SQL stores (provider/sqlite,
// provider/postgres) that does not depend on the SQL dialect: the
// decoding of stored rows into the provider types, the listing cursor,
// the page sizes, the reading of the numbered migration files, and the
// part of error translation that does not look at a driver's errors
// (Classified, Translated). What a store keeps to itself is how it talks to its
// database: Open and its Options, its migrations, its SQL text, its
// transaction runner (SQLite's single-writer group commit; PostgreSQL's
// pooled transactions and batches), its per-instance lock (none under
// SQLite's single writer; an advisory lock in PostgreSQL), the mapping of
// its driver's errors to the provider sentinels and its notification
// transport (data_version watcher; LISTEN/NOTIFY).
//
// Rows come in through Row, which both drivers' rows satisfy: a nullable
// column scans into a pointer (nil for NULL), so the same scanning code
// reads either store.
//
// The calls that read the same way in every dialect (ReadHistory,
// InstanceQueue, GetInstance, GetExecution, ListExecutions, ListChildren,
// GetExecutionLock, ListExecutionLocks) are written here once over
// Querier: each store maps the shared statements (Query) to its own SQL
// text and runs them in its own transactions. Write steps with a dialect
// difference inside run over a narrower seam of the store's write
// transaction (LockCleaner for CleanupExecutionLocks).
package sqlstore
