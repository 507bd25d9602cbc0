// Package duroxide runs durable orchestrations: plain Go functions whose
// every step is recorded in an event history and replayed
// deterministically, so they survive crashes, restarts and deploys.
//
// # Pieces
//
//   - A Registry maps names to orchestration functions (versioned) and
//     activity functions.
//   - A store keeps histories and queues: provider/sqlite (embedded, zero
//     set-up, the processes of one machine) or provider/postgres (many
//     nodes on one PostgreSQL database).
//   - A Runtime (StartRuntime) runs orchestrations and activities from the
//     store; any number of runtimes may share a store.
//   - A Client starts orchestrations, raises events, cancels, reads status
//     and history, and purges, from any process.
//
// # Writing orchestrations
//
// Registration returns typed references, and orchestrations call them
// through the typed form, so a misspelled name or a wrong input type is a
// compile error rather than a failing instance:
//
//	reg := duroxide.NewRegistry()
//	hello := duroxide.RegisterActivity(reg, "Hello", func(ctx context.Context, name string) (string, error) {
//		return "Hello, " + name + "!", nil
//	})
//	greet := duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
//		return duroxide.CallActivity(ctx, hello, name, &duroxide.ActivityOptions{
//			Retry:               &duroxide.RetryPolicy{MaxAttempts: 3},
//			StartToCloseTimeout: time.Minute,
//		}).Get()
//	})
//	// ... StartRuntime(ctx, store, reg, nil), then from any process:
//	msg, err := duroxide.RunTyped(ctx, client, greet, "greet-ada", "Ada", nil)
//
// An orchestration receives an *OrchestrationContext and schedules work
// through it: activities (CallActivity; the only place for I/O), durable
// timers (ScheduleTimer), external events (WaitForEvent), sub-orchestrations
// (CallSubOrchestration). Typed calls return a *Future whose Get blocks
// until the work completes; the other calls return a *Task (Await). Select
// waits for the first of several tasks (a future takes part through
// Future.Task), and Cancel gives up on a task or future (a canceled
// activity's context is canceled, a canceled child receives a cancel
// request). Work runs concurrently: schedule many, then wait for them
// (fan-out/fan-in). NewActivityRef and NewOrchestrationRef declare
// references to code registered in another binary. The by-name forms
// (ScheduleActivity, ScheduleActivityWithOptions, ScheduleSubOrchestration,
// Client.StartOrchestration) remain for dynamic use; both forms record the
// same history, so switching between them replays.
//
// ActivityOptions gathers everything about one activity call: Retry
// (durable backoff with Jitter, and NonRetryable failures; an activity
// ends its retries itself by returning NonRetryable(err)), Session (worker
// affinity), and StartToCloseTimeout (per attempt) and
// ScheduleToCloseTimeout (the whole call), durable timers that fail the
// call with kind "timeout" (errors.Is(err, ErrTimeout)) and cancel the
// running attempt.
//
// StartDetached (by name: OrchestrationContext.StartOrchestration) starts
// an independent instance, fire-and-forget: the start is recorded in the
// starter's history and happens once, in the same atomic commit as the
// turn that recorded it, so replays and restarts never repeat it. The
// started instance has no parent: it is not canceled with its starter,
// and the starter never waits for it to finish. An empty instance ID is
// derived from the starter as for sub-orchestrations. The returned task
// completes when the start is committed, or fails with a
// *DetachedStartError matching ErrInstanceExists when the ID is taken (then
// nothing is started); awaiting it is optional.
//
// The runtime runs the function again from the start whenever it must
// rebuild its state (after a restart, on another node), feeding recorded
// results back instead of redoing the work. So the function must be
// deterministic: the same scheduling calls, in the same order, with the
// same inputs, every time. Use ctx.Now and ctx.NewGUID instead of time.Now
// and random IDs, activities for anything that touches the world, and no
// goroutines. Code that diverges from its history is reported as a
// *NondeterminismError; by default the instance is parked (it stays Running,
// with Status.LastError explaining why, and is retried with backoff) so
// that deploying the fixed code resumes it. Check a change before deploying
// it with ReplayHistory against saved histories, or with ReplayCheck (the
// replaycheck package makes it a command of your binary) against the
// stored histories of live instances. To change code that running
// instances are part-way through, branch on ctx.Patched(id): instances whose
// history was recorded before the change replay the old branch, every other
// execution takes the new one (and records that it did).
//
// Live orchestrations are cached in memory between turns, so a turn
// normally resumes the suspended function instead of replaying its whole
// history; RuntimeOptions.CacheSize tunes or disables the cache.
//
// # Guarantees
//
//   - An activity's result is recorded exactly once: the worker's ack
//     deletes the activity and enqueues its result in one transaction. An
//     activity itself runs at least once (again after a crash before its
//     ack), so make activities idempotent.
//   - A turn (new history, new messages, consumed messages) commits
//     atomically; a crash at any point loses nothing accepted and completes
//     no orchestration twice.
//   - Timers are queue messages with delayed visibility: they survive
//     restarts and fire once.
//   - The store wakes the runtime when a commit may have made work
//     fetchable (at once for this process's commits; the SQLite store
//     notices other processes' within milliseconds); idle dispatchers
//     sleep until the next timer is due. RuntimeOptions.PollInterval is
//     only a fallback for lost notifications.
//   - Shutdown drains: it waits for running turns and activities. If its
//     context ends first, running activities go back to the queue and
//     Shutdown returns without waiting for those that ignore their context.
//
// # Failures
//
// An activity error or panic reaches the orchestration as *ActivityError; a
// child's failure as *SubOrchestrationError; cancellation matches
// ErrCanceled, and a timed-out activity or instance matches ErrTimeout.
// ActivityOptions.Retry retries with durable backoff. A
// message delivered more than RuntimeOptions.MaxAttempts times (its worker
// kept crashing, losing its lock or being shut down) is poisoned: the activity or the
// orchestration fails with kind "poison" instead of looping forever. An
// orchestration or activity that no runtime has registered waits, with
// backoff, for one that has (rolling deploys), and fails with kind
// "configuration" if it is still unknown at delivery MaxAttempts.
//
// # Limits
//
// A runaway or hostile orchestration must not take the server down, so the
// runtime bounds what one execution records (RuntimeOptions; zero means
// the default, negative no limit):
//
//   - MaxActionsPerTurn (10,000): activities, timers, event waits,
//     sub-orchestrations, custom status updates, Now and NewGUID calls
//     recorded in one turn. They are counted as the code records them,
//     and the code is stopped at the first one over: a fan-out to ten
//     million activities fails after ten thousand, in kilobytes.
//   - MaxHistoryEvents (50,000) and MaxHistoryBytes (32 MiB): one
//     execution's history; ContinueAsNew starts an empty one.
//     Status.HistoryEvents and HistoryBytes (from Client.Inspect) measure
//     an instance's current execution the same way.
//   - MaxPayloadBytes (2 MiB): one JSON payload (an input, an output, an
//     activity's result, an event's data, a custom status).
//   - MaxValues (100) and MaxValueBytes (64 KiB): the values one instance
//     holds (OrchestrationContext.SetValue), and the size of one.
//
// An execution that goes over a limit fails with kind "configuration" and
// code "limit_exceeded" (ErrorInfo.Code), with a message naming the limit
// and the value, for example "actions recorded in one turn: 10001, over the
// limit MaxActionsPerTurn = 10000"; nothing of the turn that went over is
// committed, so the store keeps only the history before it. Status.Decode,
// *ActivityError (an activity whose result is too large) and
// *SubOrchestrationError match ErrLimitExceeded. A Client refuses a start
// or an event whose payload is over ClientOptions.MaxPayloadBytes (default
// the same 2 MiB) before storing anything, with a *LimitError.
//
// # Text rules
//
// Instance IDs, names, versions and keys are valid UTF-8 without control
// characters, bidirectional controls (which make text display in another
// order than it is stored) or U+FFFD (what invalid text decodes to), and
// within their lengths (MaxInstanceIDLength, MaxNameLength, MaxKeyLength).
// The Client, the HTTP API, the CLI and the dashboard apply the same rules:
// ValidateInstanceID, ValidateName, ValidateKey, ValidateText. Lookups are
// looser (ValidateLookupID) so that existing instances stay reachable.
//
// # Cancellation and instance timeouts
//
// Client.CancelInstance (and the cancellation of a parent, which cascades
// to its children) does not stop the code abruptly. The orchestration sees
// it: OrchestrationContext.Canceled turns true, the task of
// CancelRequested completes (use it in Select), and every task it has not
// finished waiting on completes with an error matching ErrCanceled (running
// activities are told to stop, children are canceled in turn, timers and
// event waits are abandoned). What the code schedules afterwards runs
// normally, so it can run compensating activities. The instance ends
// Canceled when the code returns, whatever it returns, or when
// RuntimeOptions.CancelGracePeriod (default 30s) has passed since the
// request, whichever comes first; work still running then is canceled.
// Code that ignores cancellation therefore ends at once if it returns the
// ErrCanceled of the task it awaited, and at the grace deadline otherwise.
// The deadline is recorded with the request in the history (and queued as
// a timer), so it survives restarts, and replay (ReplayHistory included)
// needs no option. A negative CancelGracePeriod ends canceled instances at
// once without running their code again, as earlier releases did;
// histories recorded by those releases replay unchanged.
//
// StartOptions.Timeout gives the whole instance a deadline, recorded when
// it first runs and kept across ContinueAsNew. When it passes the instance
// is canceled in the same way, with the same grace period, and ends Failed
// with kind "timeout" (Status.Decode's error matches ErrTimeout).
//
// # Execution locks and idempotent starts
//
// StartOptions.LockKey (a "workflow id") lets only one instance under that
// key run at a time. The lock is written in the transaction that creates
// the instance and deleted in the one that makes it Completed, Failed or
// Canceled; ContinueAsNew keeps it, and every committed turn extends it to
// now+LockTTL (default 1h), so a live instance keeps it and an instance that
// makes no progress for LockTTL loses it. While a live instance holds the
// key, another start returns *WorkflowLockedError naming it, or, with
// QueueIfLocked, is stored Pending and begins when the lock is freed, in
// arrival order, surviving restarts. A lock whose holder ended or is gone,
// or whose TTL passed, is taken over by the next start; each runtime also
// sweeps such locks every RuntimeOptions.LockCleanupInterval.
// Client.GetLock, ListLocks, ReleaseLock (force) and CleanupExpiredLocks
// manage them.
//
// StartOptions.IdempotencyKey makes a start idempotent: a repeat of the key
// within IdempotencyRetention (default 24h) starts nothing and returns
// *DuplicateStartError naming the instance the key started. The key is
// checked before the lock, so a retried request whose first attempt holds
// the lock learns its instance instead of a conflict. The key outlives a
// purge of its instance: a repeat within the retention is still a duplicate,
// and DuplicateStartError.PurgedAt tells when the instance was purged.
//
// Package httpapi exposes both through webhook triggers with the
// concurrency policies exclusive, parallel, queue and replace.
//
// # Signal-with-start
//
// Client.SignalWithStart delivers an event to an instance, or, when the
// instance does not exist, starts it with the event queued behind its
// start, in one store transaction (provider.NewInstance.IfAbsent): any
// number of concurrent calls for a new instance ID, from any number of
// processes on one store, start one instance and deliver every event once.
// The start's options apply only when the instance is absent (an existing
// instance takes the event whatever holds the lock); the idempotency key
// names the whole delivery; an instance that has ended refuses the event
// (*InstanceTerminalError). Webhook triggers with "deliver": "event" do the
// same per call, keyed from the payload.
//
// # Instance values and waiting for a change
//
// OrchestrationContext.SetValue(key, v) publishes a small piece of state:
// it is recorded in history as a ValueSet event (so a replay sets the same
// values, and replaying a SetValue of another key is nondeterminism), and
// the turn's ack writes it to the store in the same transaction as the
// rest of the turn. Clients read the values without replaying anything
// (Client.GetValue, Client.ListValues); ContinueAsNew keeps them (the next
// execution's OrchestrationStarted carries them, so GetValue in its code
// sees them), and a purge deletes them with the instance. ClearValue
// removes a key.
//
// Client.WaitForStatusChange(ctx, id, etag) blocks until what a client sees
// of an instance (its state and execution, its custom status, its values:
// Status.ETag) differs from the status the caller last read, sleeping on
// the store's notifications rather than polling; bound it with ctx. The
// HTTP API has the same long poll as GET /api/instances/{id}?waitForChange=.
//
// # Why an instance waits
//
// Client.Inspect (and Client.WaitingFor) says what a live instance waits
// for, as a list of Wait: an activity (queued, running, retrying at a
// time), a timer, an event, a child, a place in an execution lock's queue,
// a delayed start, an orchestration or activity no runtime has registered,
// parked after nondeterminism (with the expected and found events), or due
// messages no runtime has taken. Each has its times. An instance that makes
// no progress for a threshold (DefaultStalledAfter) while it should is
// stalled, and its waits say why; ListOptions.Stalled lists such
// instances. docs/waiting.md has the kinds and the stall rules.
//
// # Tracing
//
// RuntimeOptions.Tracer receives a span per orchestration turn and per
// activity attempt, linked across processes through the history
// (StartOptions.TraceParent); the module github.com/duroxide/duroxide-go/otel
// implements it with OpenTelemetry. docs/operations.md describes the spans.
//
// # Testing
//
// Package duroxidetest runs orchestrations against a real in-memory store
// with a fake clock, so a test of a one-day timer takes milliseconds.
package duroxide
