// Package postgres is the scale-out store of duroxide-go: a
// provider.Provider (with the optional provider.Waker and
// provider.ScheduleStore, and provider.Leaser, provider.ExecutionPruner and
// provider.BulkJobStore for retention and bulk actions) kept in a PostgreSQL
// database, so that many runtime nodes can share one set of orchestrations.
// It uses pgx v5 and its connection pool.
//
//	store, err := postgres.Open(ctx, "postgres://app@db:5432/app", &postgres.Options{Schema: "orders"})
//	if err != nil { ... }
//	defer store.Close()
//
// It passes the same conformance suite (package providertest) as the
// embedded SQLite store, and behaves the same way: everything the provider
// contract promises, with every call one transaction.
//
// # Schema
//
// All tables live in one PostgreSQL schema (Options.Schema, default
// "duroxide"), which Open creates if it is missing (unless
// Options.NoCreateSchema: then Open fails with ErrSchemaNotFound); every pooled connection
// has its search_path set to it. Several deployments, or every test of a
// suite, can therefore share one database. The tables mirror the SQLite
// store's: instances, executions, history (primary key instance, execution,
// event: a duplicate event is rejected by the key, and a turn's history load
// is one range read), orchestrator_queue and worker_queue, instance_locks,
// sessions, dead_letters, execution_locks, lock_queue, idempotency_keys and
// the scheduling table orchestrator_ready (below). Times are BIGINT epoch milliseconds from Options.Clock,
// never the server's clock (the nodes must keep their clocks in sync), and
// JSON documents are TEXT holding the exact bytes the runtime encoded.
//
// # Claiming work
//
// A worker fetch selects its rows with FOR UPDATE SKIP LOCKED: rows another
// node is claiming are skipped, never waited for, and a fetch that loses
// rows to another node takes the next ones. It takes them oldest first (by
// ID), reading for each queue and activity name it serves one range of an
// index in that order (migration 0015) and stopping at its limit, and
// locks them in the same statement; with a session option, the rows of
// sessions it finds are leased once their sessions are claimed.
//
// An orchestration fetch reads the instances that have visible messages and
// a free (or expired) instance lock, in the order they became ready (from
// the scheduling table, below), and
// claims each with a transaction-scoped advisory lock tried without waiting
// (pg_try_advisory_xact_lock, keyed by a hash of schema and instance ID):
// an instance another transaction works on is skipped like a SKIP LOCKED
// row, and the fetch keeps looking until it has its batch or no candidate
// is left. Holding that advisory lock it inserts (or steals, when expired)
// the instance_locks row and tags the instance's visible messages in one
// statement, then loads the instance rows, the histories (only the events
// the caller does not hold, FetchOptions.Cached) and pending starts in one
// pipelined round trip, which carries the COMMIT of a fetch run alone. If
// the clock passed the new locks' expiry while the fetch ran, it re-dates
// them (after that COMMIT, token-checked, leaving out an instance whose
// lock another fetch took over meanwhile): a fetch never hands out a lease
// that is already expired.
//
// Candidates come from a small per-instance scheduling table
// (orchestrator_ready, kept exact by triggers: migrations 0002 and 0014)
// holding, for each instance with queued messages, the time it becomes
// ready (the later of its earliest message and its lock's expiry), its
// earliest message's visibility and its oldest message. A change of the
// instance's lock sets the ready time from that row alone; only changes
// of its messages read them. The fetch reads it by index in that order and stops at its
// limit, so its cost does not grow with the backlog, with timers due
// later, or with late arrivals for instances whose turn is in progress;
// NextVisible is the low end of the same index.
//
// # Advisory locks
//
// Every transaction that changes an instance's lock (ack, abandon) first
// takes the instance's advisory lock exclusively; fetches only try it.
// Every transaction that enqueues messages for instances takes their
// advisory locks shared (sorted, so enqueuers never wait for each other).
// This serializes an enqueue with the ack of a turn of the same instance,
// closing a lost wake-up: without it a message committed between an ack's
// check for waiting messages and its commit would be seen by neither the
// ack nor the fetch its notification triggers. A fetch that skips an
// instance counts on the holder of its lock to notify when it ends: a
// commit notifies what it changed, and a write of this store that took
// an instance's lock and then rolled back (a refused rewind, pause or
// resume, a failed enqueue or ack) wakes this process's orchestration
// dispatchers, which look again; other nodes' look again after a short
// back-off. Row upserts that race
// (instance locks, execution locks, idempotency keys) happen under these
// locks, so concurrent children completing into one parent only share its
// lock and never deadlock on it. Execution lock keys and idempotency keys
// have advisory locks of their own, so two starts with one key on two
// nodes are serialized: the second sees the first's lock or key. A key's
// advisory lock always comes before its execution_locks row: a start takes
// the key's lock and then reads the row FOR UPDATE, so a terminal ack,
// a purge, a cleanup or a force release takes the advisory locks of the
// keys it is about to free (in key order) before it deletes their rows.
// Deleting first and taking the key after would wait for a start that
// waits for the deleted row, a deadlock the server breaks by aborting
// one of them (40P01). A start that replaces the holder takes the
// holder's instance lock before the key's and reads the holder without
// locking its row; a live turn ack, which extends its lock rows holding
// its instance's lock only, then never waits for a transaction that
// waits for it; cleanup, which settles several keys at once, waits for
// no key or row and leaves a busy one to its next run (see "Lock order"
// in execlocks.go).
//
// Writes are set-based and pipelined (pgx batches: many statements, one
// round trip). A transaction's BEGIN rides at the head of its first batch,
// and a transaction's notification rides with its COMMIT (a group's calls
// share one). A turn fetch finds its candidates and tries their advisory
// locks in one statement, then locks and tags them and loads their
// instance rows and histories in one batch, which carries the COMMIT of a
// fetch run alone; a worker fetch is one statement, with its COMMIT. A plain start creates its instance and
// queues its message in one statement. A turn ack is
// two round trips: one batch with the advisory lock, the lock check, the
// instance, execution and history writes (one statement, the events a
// multi-row insert from arrays), the worker items (those leased to the
// caller inserted already locked), the cancellations, the messages, the
// release and the notification; then COMMIT. The lock check fails the
// batch (duroxide_check, migration 0011) before any write of it runs, so
// an ack whose lock was lost writes nothing. Starts of new
// sub-orchestrations and execution-lock hand-overs add one round trip
// each. An activity's ack is one batch and COMMIT; a lock renewal is one
// statement. An activity's ack that carries the turn its result causes
// (WorkAck.Then) sends the instance's advisory lock, the check that the
// instance is quiet, the worker row's deletion and the turn's writes in
// one batch; an instance that is not quiet fails the check before any
// write, and the ack runs again without the turn, enqueueing the
// completion.
//
// # Group commit
//
// The runtime's dispatchers fetch, ack, enqueue and abandon concurrently,
// and a commit (the WAL flush) costs more than the statements of such a
// small transaction. These calls go through a group-commit leader
// (sqlstore.GroupCommit, shared with the SQLite store): a call that finds
// no group running runs at once in a transaction of its own; calls that
// arrive while one runs queue up, and the next group runs them (up to
// Options.GroupCommitMax, default 32) in one transaction on one connection
// and commits once. Unless it holds two fetches of one kind, the group
// runs its calls pipelined: all at once, each on a goroutine of its own,
// their statements sent together in one round trip per round (a call of
// one batch, such as an ack or an enqueue, takes one round; a turn fetch
// two, a worker fetch one unless it claims a session; fetches run last),
// so that the server runs them exactly as one after
// another; a call that fails after writing rolls the group back and every
// call runs again alone, and a call that needs a further round after calls
// behind it ran theirs makes the group run again call after call. In that
// serial mode each call runs in turn in a savepoint of its own: a call
// that fails rolls back to it, releasing what it locked. Either way only a failed call's caller sees its error,
// and results and the group's one notification follow the commit. Up to
// Options.GroupCommitLanes groups (default 2, at most MaxConns) run at once, a further one
// opening only while a quarter of GroupCommitMax calls wait, so groups stay
// big unless the load needs parallel transactions. Each call declares the
// instance advisory locks it takes, and a group takes all of them first,
// in one statement, in instance order, so two groups, here or on other
// nodes, never wait for each other in a cycle. A group broken outside the
// calls' savepoints (its locks timed out) rolls back and runs each call
// alone; a failed commit or a dropped connection fails every call of the
// group, as it fails a lone call (the outcome is unknown). Other writes
// (purge, import, execution-lock and session maintenance) run alone.
//
// The admin reads that explain why an instance waits (InstanceQueue,
// StalledInstances) are index lookups: InstanceQueue reads the instance's
// own rows in one snapshot and one batch, and each rule of
// StalledInstances reads an index range of the rows that match it
// (migration 0003 adds partial indexes for recorded errors and
// redelivered activities, which are rare in a healthy store). An ID
// prefix of ListInstances is a range of an index on the IDs in byte order
// (COLLATE "C"), so '%' and '_' are plain characters.
//
// # Notifications
//
// Each committed transaction that changed something calls pg_notify on
// the schema's channel right after its COMMIT, in the COMMIT's round trip,
// so the other nodes hear of it only once it is visible; the JSON payload
// names the sending node, the queues that may have work and the instances
// that changed.
// Every Provider listens on a dedicated connection (not from the pool),
// ignores its own notifications (its subscribers were woken in-process,
// through an embedded notify.Hub) and wakes its subscribers and watchers
// for the others'. When the listening connection breaks it reconnects with
// capped exponential backoff (Options.ListenRetryMax) and then wakes
// everyone, since notifications may have been lost meanwhile. Together with
// NextVisible (provider.Waker: the earliest visible message or lock expiry,
// one index lookup), dispatchers sleep until work can exist instead of
// polling.
//
// A turn that ends its execution (Completed, Failed, Canceled) of an
// instance that a client of this process waits for
// (provider.EndStatusWatcher, which Client.WaitForOrchestration uses) also
// reads the instance's row right after its COMMIT, in the same round trip,
// and hands it to the waiter, which returns it without reading the status
// itself: one round trip and one wake-up less between the end and the
// wait's return. The commit waited for the WAL flush, so the row is
// durable. Waiters on other nodes are told by the notification and read.
//
// # Warm connections
//
// Every pooled connection runs, before it serves a call, the store's
// triggers and PL/pgSQL functions once, in a transaction that is rolled
// back, so the server compiles them then rather than during the
// connection's first calls (warm.go). The pool keeps Options.MinConns
// connections open, opened in the background once Open has migrated the
// schema, each joining the pool warm; see docs/postgres.md, "Warm
// connections".
//
// # Migrations
//
// Schema migrations are numbered SQL files embedded from migrations/. Open
// (unless Options.NoMigrate) and Provider.Migrate apply the pending ones in
// one transaction holding an advisory lock keyed by the schema, so nodes
// starting together never race: one applies them, the others wait and find
// nothing to do. A schema migrated by a newer release is refused with a
// clear error, and Provider.CheckWritable (the readiness probe of "duroxide
// serve") reports a schema behind or ahead of this release.
//
// # Time limits
//
// Every wait on the server is bounded, so that a node whose connection went
// silent in the middle of a transaction holds its instance's lock for
// seconds, not forever: Options.ConnectTimeout (default 10s) bounds
// connecting, Options.LockTimeout (lock_timeout, 5s) each lock wait,
// Options.StatementTimeout (statement_timeout, 30s) each statement and, on
// this side, how long a call holds a connection,
// Options.IdleInTransactionTimeout (idle_in_transaction_session_timeout,
// 10s) how long the server keeps a silent client's transaction, and TCP
// keep-alives (Options.KeepAlive, 15s) notice a vanished server. A call
// also ends when its context does, in the middle of a transaction too: its
// connection is then closed, never returned to the pool, and the server
// rolls the transaction back. A call queued for a group withdraws when its
// context ends; once its group began it waits for the group, which
// Options.StatementTimeout bounds. Migrations and exports run without
// these limits.
//
// # Errors
//
// Server and driver errors are translated to the sentinels of package
// provider in one place (interpretError). Retryable: serialization failures
// (40001), deadlocks (40P01), lock timeouts (55P03), statement timeouts,
// "cached plan must not change result type" (0A000, after a migration)
// and insufficient resources (53xxx) become provider.ErrBusy; dropped
// connections, connection failures, an administrator's shutdown (57P01)
// and read-only transactions on a standby become provider.ErrUnavailable.
// Permanent: a duplicate history event is provider.ErrDuplicateEvent; other
// unique violations, data errors (a NUL byte in a text column) and
// integrity violations are provider.ErrInvalidArgument. The driver's error
// stays reachable with errors.As.
//
// # Testing
//
// The tests need a PostgreSQL server: set DUROXIDE_TEST_POSTGRES to a DSN,
// for example
//
//	DUROXIDE_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go test ./provider/postgres/
//
// Without it they skip, saying so. Every test works in a fresh schema of
// that database and drops it when it ends.
package postgres
