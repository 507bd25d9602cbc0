// Package sqlite is the embedded store of duroxide-go: a provider.Provider
// (with the optional provider.Waker and provider.ScheduleStore, and
// provider.Leaser, provider.ExecutionPruner and provider.BulkJobStore for
// retention and bulk actions) kept in one SQLite file, with no server to
// run. It uses the pure-Go driver modernc.org/sqlite, so it needs no cgo.
//
//	store, err := sqlite.Open(ctx, "app.db", nil) // nil options: the defaults below
//	if err != nil { ... }
//	defer store.Close()
//
// # What it guarantees
//
// Everything the provider contract promises (see package provider): every
// enqueue, fetch, ack, abandon, renewal and purge is one transaction, so it
// happens completely or not at all; one worker per instance (instance locks
// that are taken, or stolen only once expired, in the same transaction that
// tags the turn's messages); late messages survive a turn; an activity's
// completion is enqueued in the transaction that deletes the activity; a
// message that cannot be decoded is moved to the dead-letter list instead of
// blocking its queue.
//
// Group commit: all writes go through one writer connection, one
// transaction at a time. Calls that arrive while a transaction runs are
// committed together in the next one, so concurrent callers share the
// cost of a commit; each still succeeds or fails on its own, and none
// returns before its writes are committed. A file store runs the group
// without savepoints: a call that fails having written nothing leaves
// nothing to undo, and one that fails after writing makes the group roll
// back and run again with a savepoint per call.
// The activity results of one group are applied set-based instead: one
// statement deletes their worker rows, one enqueues their completions.
// Callers never see SQLITE_BUSY from contention inside one process: every
// write transaction starts with BEGIN IMMEDIATE on that one connection.
// A file store holds that connection for its whole life and runs its
// statements, prepared once, directly on it (not through a database/sql
// transaction, which would wrap each statement and start a goroutine per
// query). If that connection breaks (database/sql closed it, or the driver
// reports it unusable), the store takes a fresh one, with the same
// settings, before its next transaction: the write that was running when
// it broke returns an error (the store never runs it again), and the
// writes after it succeed. Under synchronous NORMAL its commits never checkpoint the WAL:
// a goroutine does, on a connection of its own, every few dozen commits
// once the writer pauses (PASSIVE checkpoints, so it never waits for the
// writer or the readers), so no caller's commit pays for copying the WAL
// into the database file. Under FULL the writer checkpoints itself, as
// SQLite does by default: every commit syncs the WAL there, and a WAL
// growing between background checkpoints makes those syncs dearer.
// Several processes (or several Providers) may share one file; a write then
// waits up to Options.BusyTimeout for the other's transaction and fails with
// provider.ErrBusy (retryable) only after that. Instance and row locks stay
// exclusive across processes.
//
// A fetch reads a small per-instance scheduling table (orchestrator_ready,
// kept exact by triggers), not the queue itself, so its cost does not grow
// with messages waiting for timers or for instances whose turn is in
// progress. For the same reason an idle dispatcher's question "when is the
// next work due?" (NextVisible, provider.Waker) is one index lookup whatever
// the backlog: the earliest ready_at of that table, which already counts
// instance locks, or the worker queue's earliest visible_at, which a fetch
// moves to the row's lock expiry.
//
// What a commit costs is mostly the pages it appends to the WAL (a frame
// each, written with two pwrite calls) and its statements. The writes
// therefore avoid pages they need not touch: an indexed column is
// assigned only when its value changes (assigning it, even to its old
// value, rewrites its index entry), so the first turn of an instance
// started without a version sets the version alone and leaves the name's
// index out of the commit.
//
// A fetch loads only the history its caller does not already hold
// (provider.FetchOptions.Cached): one range read of the history's primary
// key from the cached event on, so a turn of a long orchestration costs the
// same as a turn of a short one.
//
// # Notifications
//
// The store is the meeting point of the runtimes and clients that share it
// (provider.Notifier). Its own commits notify the subscribers of this
// process before the committing call returns: an enqueue wakes the
// watchers of a created instance, an ack wakes
// the queues it put work on (and the orchestrator queue again when messages
// still wait for the instance it unlocked), an abandon wakes its queue, a
// purge wakes the watchers of every purged instance. A write that rolls
// back notifies nobody. A turn that leaves its instance live (not
// Completed, Failed or Canceled) wakes its watchers but not those of
// WatchInstanceEnd (provider.EndWatcher), so Client.WaitForOrchestration
// reads the status when it starts and once the instance may have ended,
// not after every turn.
//
// An enqueue that finds the writer idle wakes the orchestrator queue's
// subscribers earlier: as soon as it is queued for the writer, before its
// transaction (one that finds it busy waits for its commit, so that the
// fetch it wakes takes what else was enqueued meanwhile). The fetch a
// woken dispatcher starts then queues behind it, so it runs after the
// enqueue and sees its messages, and, when it is queued before the
// writer takes the enqueue's group (its leader yields its processor once
// before it takes a group), in the same transaction: a start and the fetch of its
// first turn share one commit. The commit does not wake them again. An
// enqueue that rolls back (or inserts nothing) has then woken them for
// a fetch that finds nothing.
//
// Commits of other processes sharing the file are noticed through PRAGMA
// data_version on the writer connection, whose value changes exactly when
// another connection committed: the writer reads it at the start of each
// transaction, and while it is idle a watcher reads it every
// Options.ChangeCheckInterval (default 20ms), so a runtime in one process
// picks up work started by a CLI or server in another within milliseconds,
// without fetching on a timer. Such a change wakes everyone (the store
// cannot tell what another process changed).
//
// Every time the store compares or records comes from Options.Clock, never
// from SQLite's clock, and is stored as INTEGER epoch milliseconds.
//
// # Defaults and configuration
//
//   - Journal mode WAL: readers never block the writer or each other.
//   - synchronous=NORMAL (Options.Synchronous "FULL" makes every commit
//     durable against power loss, at several times the cost per commit).
//   - busy_timeout 5s (Options.BusyTimeout), for locks held by other processes.
//   - One writer connection plus a pool of Options.MaxReaders (default 4)
//     read-only connections for ReadHistory, NextVisible and the Admin
//     methods.
//   - Open applies pending schema migrations (numbered files embedded from
//     migrations/, each in its own transaction, recorded in
//     schema_migrations). With Options.NoMigrate it does not; call
//     Provider.Migrate before use, for example from a CLI command.
//   - Provider.CheckWritable tells whether the store can serve: it answers,
//     its schema is migrated, and a write transaction commits (a readiness
//     probe; "duroxide serve" refuses to start without it).
//
// The path "" or ":memory:" opens a private in-memory store, which lives
// until Close. It runs on a single connection (reads and writes are
// serialized), which suits tests and short-lived tools.
//
// Driver errors are translated to the sentinels of package provider in one
// place: SQLITE_BUSY and SQLITE_LOCKED become provider.ErrBusy, I/O errors
// provider.ErrUnavailable, duplicate history events
// provider.ErrDuplicateEvent. The driver's error stays reachable with
// errors.As.
package sqlite
