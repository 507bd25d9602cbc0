// Package replay is the pure replay engine of duroxide-go: history and new
// messages in, history delta and turn result out. It performs no I/O, reads
// no clock (the caller passes the turn's time) and knows nothing of stores
// or queues; internal/turn turns its output into a store ack.
//
// It is the only code that creates history events: the engine appends what
// the code does and what the world did, and Started, FailUnrun and
// CancelUnstarted build the events of the endings and starts the runtime
// decides without running the code.
//
// # The model
//
// An orchestration is a Go function. Each execution of an instance has an
// append-only history of events with IDs 1, 2, 3... in order. Two kinds of
// event matter to replay:
//
//   - Schedules are what the code did: ActivityScheduled, TimerCreated,
//     ExternalSubscribed, SubOrchestrationScheduled, and the recorded
//     values CustomStatusUpdated, NowRecorded, GUIDRecorded (breadcrumbs
//     and PatchRecorded markers are written by the code too, but are not
//     matched; see below). The code
//     produces them; on replay it must produce them again, in the same
//     order, with the same arguments.
//   - Completions are what the world did: ActivityCompleted/Failed,
//     TimerFired, SubOrchestrationCompleted/Failed, ExternalEvent,
//     OrchestrationCancelRequested. They come from queue messages and are
//     appended in the order the turn received them; that order is then the
//     durable truth.
//
// # The coroutine
//
// The function runs as a coroutine (iter.Pull): it runs on its own
// goroutine, but only while the engine has handed control to it, and it
// hands control back whenever it awaits a task that is not complete. So
// the engine decides exactly when the code runs, and the code and the
// engine never run at the same time: no locks, and deterministic
// interleaving.
//
// # A turn
//
//  1. Prepare: each message becomes a completion event at the end of
//     history. Completions for another execution (older, before a
//     ContinueAsNew) and duplicates (at-least-once delivery) are dropped; a
//     completion naming a schedule that does not exist, or one of another
//     kind, is nondeterminism.
//  2. Run, the interleaved loop: for each event not yet applied, in history
//     order, first let the code run if the previous event completed
//     something, then apply the event. Applying a completion completes its
//     task. Applying a schedule only checks that the code has already
//     produced it. The code runs after each completion, one at a time, so
//     Select sees completions in history order: the first completion in
//     history wins, on the first run and on every replay.
//  3. Emit: when the code schedules something, the engine matches it
//     against the next recorded schedule not yet matched. If there is one,
//     it must be equal (kind, name, input, session; timers match by kind,
//     recorded values by kind) and the task is bound to that event's ID.
//     If history has no more schedules, the action is new: it gets the next
//     event ID and is appended. Matching at emission means a task knows its
//     event ID at once (child instance IDs derive from it) and recorded
//     values (Now, NewGUID) are returned synchronously, without a round
//     trip.
//  4. Finalize, in this order of precedence: a cancel request ends the
//     execution Canceled without running the code further (when it has no
//     grace period, once its grace period is over, or when the code has
//     returned; see "Cancellation with a grace period"); a
//     ContinueAsNewError returned by the code ends it ContinuedAsNew; a
//     return ends it Completed or Failed (a panic is a failure); otherwise
//     it is still Running. An ending execution appends breadcrumbs for
//     activities and children still in flight (ActivityCancelRequested,
//     SubOrchestrationCancelRequested), then the terminal event, last.
//
// # Nondeterminism
//
// The engine reports a *NondeterminismError, and the caller must not
// commit the turn, when: an action differs from the recorded schedule at
// its position; history records a schedule the code did not produce by
// the time the loop reaches it (or at all, when the code returned early); or
// a completion names a missing schedule or one of another kind. Timer
// durations and custom-status values are not compared, so they may change
// between deploys.
//
// # External events
//
// Arrivals are buffered per name. WaitForEvent takes the oldest arrival not
// yet consumed, including one that arrived before the wait; otherwise it
// waits, and the next arrival of that name goes to the oldest open wait.
// A wait that lost a Select is idle: arrivals skip it until the code awaits
// or selects it again (it then takes the oldest buffered arrival). Idleness
// follows the code's own calls, so it too is the same on every replay. The
// buffer is rebuilt from history on replay, so delivery is deterministic. Arrivals still unconsumed at ContinueAsNew are returned in
// TurnOutput.Carried for the next execution.
//
// # Retries and timeouts
//
// ScheduleActivityOptions (and ScheduleActivityWithRetry) with a retry
// policy or a timeout is a composite task driven by the engine, not by the
// code: when an attempt fails, the engine schedules the backoff timer (and,
// when it fires, the next attempt) while applying the completion. A
// start-to-close timeout is a timer scheduled right after each attempt, a
// schedule-to-close timeout one timer after the first attempt; whichever
// of an attempt and its timers completes first in history decides. Retries
// and deadlines therefore progress even while the code awaits other
// tasks, and every step is ordinary history. Backoff jitter is a hash of
// the instance, the attempt's event ID and the attempt number, so it needs
// no recorded randomness.
//
// # Giving up on tasks mid-execution
//
// Context.Cancel and the timeouts give up on a task before the execution
// ends. The task completes at once (kind "canceled" or "timeout") and the
// engine appends a breadcrumb: ActivityCancelRequested,
// SubOrchestrationCancelRequested, TimerCanceled or
// ExternalSubscribedCanceled. Activities and children so abandoned are
// reported in TurnOutput.CanceledActivities / CanceledChildren, so the
// caller cancels them as it does at the end of an execution. Breadcrumbs
// are not schedules: nothing matches them. On replay the engine finds the
// breadcrumb it wrote (or the completion that made one unnecessary) in
// history and writes nothing, so the decision is the same without being
// matched; a completion that arrives after its task was abandoned
// completes nothing.
//
// # Cancellation with a grace period
//
// With Config.CancelGrace set, a new cancel request records its deadline
// (OrchestrationCancelRequested.FireAtMs) and the caller queues a timer
// message naming that event. The request is applied in history order like
// a completion: Context.Canceled turns true, CancelRequested tasks
// complete (and win a Select tie against the tasks the cancellation
// completed), and every pending task is given up as by Context.Cancel,
// calls with retries first so their backoff starts nothing. The code then
// runs on; its new schedules are ordinary history. The execution ends
// Canceled (Failed with the request's Error, for an instance timeout) when
// the code returns, whatever it returns, or when TimerFired for the
// request's event is in history; the latter is applied without running
// the code. A request without FireAtMs, as all earlier histories hold,
// keeps the old meaning: the code never runs after it. Everything the
// decision needs is in history, so replay does not depend on the setting.
//
// # Patches
//
// Context.Patched(id) answers true when history holds a PatchRecorded
// event named id, or when no recorded schedule remains ahead of the code
// (it runs past what history records), in which case it appends that
// marker; otherwise (the call falls inside a history recorded before the
// change) false. Markers are not schedules either, so code that no longer
// asks about a patch replays past its marker.
//
// # Live executions and replay
//
// An Execution keeps its suspended coroutine between turns. The dispatcher
// caches it per instance; the next turn feeds only the new messages, and
// Turn checks that the stored history is still the one it holds (ErrStale
// otherwise). A cache miss builds a fresh Execution and replays the stored
// history: during replay the code sees IsReplaying true and its logger is
// silent. Live and replayed executions run the same loop, which is what
// the fuzz test checks: at every turn, a replay from scratch must produce
// exactly the delta the live execution produced.
package replay
