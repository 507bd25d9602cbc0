// Package provider defines the storage contract of duroxide-go: the Provider
// interface every store implements (with its LockStore, Admin and Notifier
// parts, and the optional Waker), their parameter and result types, and the
// sentinel errors. It holds no implementation; see the stores
// provider/sqlite and provider/postgres, the in-process notification
// helper provider/notify, and
// provider/providertest for the conformance suite every store passes.
//
// # Guarantees a provider gives
//
//   - Nothing accepted is lost: an enqueue, an ack or a purge is one
//     transaction; it either happened completely or not at all.
//   - One worker per instance: an orchestration fetch takes an instance lock
//     (insert, or steal only when expired) and is the only way to get the
//     instance's messages. A lock that is not renewed expires, so a crashed
//     worker's turn is retried elsewhere; its late ack is rejected with
//     ErrLockLost and writes nothing.
//   - Late arrivals survive: a fetch tags the messages it delivers with its
//     lock token, and the ack deletes exactly those. Messages enqueued while
//     the instance is locked wait for the next turn.
//   - Activity completion is atomic: deleting the worker row and enqueueing
//     its completion happen in one transaction, so an activity result is
//     neither lost nor delivered twice by the store.
//   - Timers are messages with delayed visibility (VisibleAt); there is no
//     timer queue.
//   - Every fetch increments the attempt count of what it delivers, so the
//     runtime can detect poison messages that crash or time out repeatedly.
//   - No head-of-line blocking: a message that cannot be decoded is moved to
//     the dead-letter list; a message for an unknown instance is delivered
//     with Instance == nil so the runtime can consume it.
//
// # Envelopes, not parsing
//
// The runtime computes how every message is routed (which queue, instance,
// execution, activity, session, visibility time) and whether it creates an
// instance, and passes that as an OrchestratorMessage or WorkerMessage. The
// provider stores payloads opaquely and never inspects events or work items
// to decide what to do. Likewise the instance's status, output and custom
// status come from TurnAck.Metadata, never from scanning history.
//
// The other way, a call returns what it did and never writes into its
// arguments: AckOrchestrationItem its TurnResult, AckWorkItem its
// WorkResult, Enqueue one EnqueueResult per message (a message skipped
// for its DedupKey, a start-if-absent that found its instance, the lock
// holder a Replace canceled), and a schedule fire passes its start's
// EnqueueResult to ScheduleStart.Settle.
//
// # Batching and group commit
//
// A fetch locks several ready instances or activities in one call. An ack
// commits one turn or one activity; a store may commit concurrent acks in
// one transaction (group commit), but each succeeds or fails on its own.
// The FetchOrchestrationItem and FetchWorkItem helpers fetch one item.
//
// # Reloading less
//
// The runtime keeps live executions in memory between turns. Through
// FetchOptions.Cached it tells the store how much of an instance's history
// it holds, and the store loads only the newer events, so the cost of a
// turn does not grow with the length of the history.
//
// # Wake-ups
//
// Stores notify (Notifier) when work may be ready and when an instance may
// have changed, so dispatchers and WaitForOrchestration sleep instead of
// polling; Waker tells an idle dispatcher how long it may sleep when only
// delayed work (timers, retries) is queued.
//
// # Routing
//
// A fetch takes only the work its caller can run: the orchestrations
// named in FetchOptions.Orchestrations (by the instance's name, so starts,
// sub-orchestrations and ContinueAsNew alike) and, for an instance pinned
// to a version, the versions in FetchOptions.OrchestrationVersions; the
// activities and queues
// in WorkFetchOptions.Activities and Queues; nil takes everything. Work a
// fetch skips is neither locked nor counted. Router (optional) keeps what
// each live runtime announces it serves, so the work no runtime serves
// can be reported (InstanceQueueState.OrchestrationUnserved,
// QueuedActivity.Unserved) and fetched, without counting a delivery, to be
// failed.
//
// # Copying a store
//
// Exporter and Importer are optional capabilities for moving a whole store
// (duroxide copy): an export streams a consistent snapshot as typed
// records, an import writes batches of them, each in one transaction.
// Instance values, pauses and schedules are copied with the instances;
// leases and bulk jobs are not; what leases held is fetchable at once in
// the target.
//
// # Schedules
//
// ScheduleStore is the optional capability of a store that keeps
// schedules: rows holding a runtime-encoded definition and the next fire
// time. Runtimes sharing a store agree on each fire through
// FireSchedules, which claims each schedule's fire time (a conditional
// update of the next fire time, refused once paused) and starts the
// fires' instances, for every schedule due at once, in one transaction,
// and learn of changes by watching ScheduleWatchKey. Exporter and Importer
// copy schedules with their fire state.
//
// # The SQL stores
//
// The SQLite and PostgreSQL stores are one implementation of Provider over
// two dialects. provider/internal/sqlenc validates and encodes each call
// before its transaction begins (so both stores accept and refuse exactly
// the same calls), and provider/internal/sqlstore holds the calls
// themselves: the order of the protocol steps, the results, the decoding
// of rows, the listing and copy mappings, the notifier. Each store embeds
// that core and gives it a dialect: its SQL text (one statement per
// shared query and per step), its transaction runner (SQLite's
// single-writer group commit; PostgreSQL's pooled transactions with
// pipelined batches), the steps of one write transaction written over its
// driver, its per-instance lock (none under SQLite's single writer; an
// advisory lock in PostgreSQL), its error mapping, its notification
// transport, and Open, Options and migrations. A lease is dated from when
// its rows are locked, never from the start of the transaction, and one
// that lapsed before the commit returned is not handed out.
// docs/architecture.md lists the steps to add a third SQL store (a dialect
// and migrations); the conformance suite (providertest) is what it must
// pass.
//
// # Errors
//
// Errors wrap the sentinels in errors.go; IsRetryable tells transient
// failures (ErrBusy, ErrUnavailable) from permanent ones. Providers translate
// driver errors into these sentinels at their boundary, so callers never
// match error strings.
package provider
