package duroxide

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/internal/dispatch"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// NondeterminismPolicy says what the runtime does with an instance whose
// code no longer replays its history.
type NondeterminismPolicy int

const (
	// Park (the default) leaves the instance Running with its LastError
	// set, retrying it with backoff, so a deploy that restores the old code
	// path resumes it where it stopped.
	Park NondeterminismPolicy = iota
	// Fail ends the instance Failed with kind "nondeterminism".
	Fail
)

// RuntimeOptions configures StartRuntime. A nil pointer or a zero field
// means the documented default.
type RuntimeOptions struct {
	// OrchestrationConcurrency is how many orchestration turns run at once
	// (default 64). Turns are short, but many at once let a fetch take a
	// whole batch and their commits share one transaction (group commit):
	// a burst of due timers fires within milliseconds instead of queueing
	// behind a few turn slots.
	OrchestrationConcurrency int
	// WorkerConcurrency is how many activities run at once (default 512).
	// Each running activity is a goroutine; lower it for activities that
	// each need much memory or CPU. Many at once let their acks share
	// commits (group commit).
	WorkerConcurrency int
	// FetchBatch is the most instances or activities taken per store fetch
	// (default 32).
	FetchBatch int
	// OrchestratorLockTimeout is how long a turn holds its instance lock
	// (default 10s). The lock is renewed every third of it while the turn
	// runs; a crashed node's turns are retried elsewhere once it lapses.
	OrchestratorLockTimeout time.Duration
	// WorkerLockTimeout is how long an activity holds its lock (default
	// 30s), renewed every third of it while the activity runs. If renewal
	// finds the lock gone, the activity's context is canceled.
	WorkerLockTimeout time.Duration
	// MaxAttempts bounds the deliveries of a message (default 10). A
	// message delivered more than MaxAttempts times without completing is
	// poisoned: the orchestration or activity fails with kind "poison". A
	// delivery of an activity is a start of its function (see
	// ActivityContext.Attempt): runs cut short by a crash, a lost lock or a
	// Shutdown whose deadline passed count. Orchestrations and activities
	// are never delivered to a runtime that does not register them, nor an
	// instance pinned to an orchestration version to a runtime that does
	// not register that version: it waits for one that does (see Queues
	// and UnservedTimeout). An instance not pinned yet (started without a
	// version) goes to any runtime that registers its name, whose first
	// turn pins the version that runtime starts. Only with a store that
	// does not route turns by name and version
	// (provider.FetchOptions.Orchestrations and OrchestrationVersions)
	// is an unregistered orchestration or version delivered: it is looked
	// up on each delivery, with backoff in between (a rolling deploy may
	// bring it), and if it is still unknown at delivery MaxAttempts, it
	// fails with kind "configuration".
	MaxAttempts int
	// BackoffBase and BackoffMax bound the delay before retrying an
	// unregistered orchestration or activity and a parked instance:
	// base·2^(n−1), capped (defaults 1s and 1m).
	BackoffBase, BackoffMax time.Duration
	// CacheSize is how many live orchestrations are kept in memory so their
	// next turn need not replay history (default 1024). Negative disables
	// the cache: every turn replays from history.
	CacheSize int
	// PollInterval bounds how long an idle dispatcher sleeps without being
	// notified (default 5s). The store notifies dispatchers when work may
	// be ready (provider.Notifier) and timers wake them when due; the
	// interval is only a fallback for a notification the store failed to
	// deliver.
	PollInterval time.Duration
	// OnNondeterminism chooses between parking (default) and failing.
	OnNondeterminism NondeterminismPolicy
	// WorkerID identifies this runtime as the owner of activity sessions.
	// Give each node a stable ID to let a restarted node reclaim its
	// sessions (default: host-pid-start time).
	WorkerID string
	// SessionLockTimeout is the lease of a session this runtime owns,
	// renewed while it is in use (default 30s). SessionIdleTimeout releases
	// a session with no activity for that long (default 5m).
	SessionLockTimeout, SessionIdleTimeout time.Duration
	// LockCleanupInterval is how often this runtime frees execution locks
	// whose TTL passed or whose holder is gone, handing each to the next
	// queued start, and drops idempotency keys past their retention
	// (default 1m; negative disables it: see Client.CleanupExpiredLocks).
	LockCleanupInterval time.Duration
	// ShutdownGrace is how long Shutdown, once its context has ended and
	// the contexts of running activities are canceled, waits for them to
	// return before it gives their work back to the queue and stops
	// waiting (default 1s; negative: no wait). It is measured in real
	// time, even under a fake Clock.
	ShutdownGrace time.Duration
	// CancelGracePeriod is how long a canceled instance (Client.CancelInstance,
	// a canceled parent, StartOptions.Timeout) may run cleanup code before it
	// ends (default DefaultCancelGracePeriod, 30s). The orchestration sees
	// the request (OrchestrationContext.Canceled, CancelRequested), the tasks
	// it waits on complete with ErrCanceled, and what it schedules then runs
	// normally; the instance ends when the code returns or when the period
	// is over, whichever comes first. The deadline is recorded in the
	// history with the request, so it survives restarts and replays without
	// this option. Negative: no grace, the instance ends at once without
	// running its code again (the behaviour of earlier releases).
	CancelGracePeriod time.Duration
	// Clock is the runtime's time source (default: the real clock). Tests
	// pass a fake clock (duroxidetest does) so timers fire without waiting;
	// the store must use the same clock.
	Clock clockwork.Clock
	// DisableSchedules keeps this runtime from firing schedules (default:
	// it fires the store's schedules when the store keeps them,
	// provider.ScheduleStore; any number of runtimes may, see
	// Client.CreateSchedule).
	DisableSchedules bool
	// Logger receives the runtime's logs (default: warnings and errors to
	// standard error). Orchestrations log through OrchestrationContext.Logger.
	Logger *slog.Logger

	// Limits. An orchestration that goes over one fails with kind
	// "configuration" and code "limit_exceeded", and a message naming the
	// limit and the value (see LimitError); nothing of the turn that went
	// over is committed. Zero means the default, negative no limit. An
	// execution whose stored history is already over a limit (the limit
	// was lowered) fails at its next turn.

	// MaxActionsPerTurn bounds what an orchestration records in one turn:
	// activities, timers, event waits, sub-orchestrations, custom status
	// updates, Now and NewGUID calls (default DefaultMaxActionsPerTurn,
	// 10,000). They are counted as the code records them: the code is
	// stopped at the first one over.
	MaxActionsPerTurn int
	// MaxHistoryEvents bounds the events of one execution's history
	// (default DefaultMaxHistoryEvents, 50,000). Long-lived orchestrations
	// use ContinueAsNew, which starts an empty history.
	MaxHistoryEvents int
	// MaxHistoryBytes bounds the size of one execution's history, as
	// Status.HistoryBytes measures it (default DefaultMaxHistoryBytes,
	// 32 MiB).
	MaxHistoryBytes int64
	// MaxPayloadBytes bounds one JSON payload an orchestration records or
	// receives: its input and output, the input of an activity or a
	// sub-orchestration, a custom status, the data of an event, the input
	// of the next execution; and the result of an activity, which fails
	// instead of completing when it is larger (default
	// DefaultMaxPayloadBytes, 2 MiB). Clients refuse larger starts and
	// events before storing them (ClientOptions.MaxPayloadBytes).
	MaxPayloadBytes int
	// MaxValues bounds the values (OrchestrationContext.SetValue keys) one
	// instance holds (default DefaultMaxValues, 100); MaxValueBytes the
	// size of one value's JSON (default DefaultMaxValueBytes, 64 KiB).
	// Setting a new key beyond MaxValues, or a larger value, fails the
	// orchestration as the other limits do.
	MaxValues     int
	MaxValueBytes int
	// Tracer, when set, receives a span per orchestration turn and per
	// activity attempt (default: none). See Tracer; the otel module has an
	// OpenTelemetry implementation.
	Tracer Tracer

	// Retention, when set, makes the runtime purge old finished instances
	// and prune long ContinueAsNew chains periodically (see
	// RetentionOptions). Nil: never.
	Retention *RetentionOptions
	// BulkJobInterval is how often the runtime looks for unfinished bulk
	// jobs (Client.BulkAction) to run or to continue after their runner
	// stopped (0 = DefaultBulkJobInterval; negative: this runtime runs
	// none). It looks once when it starts.
	BulkJobInterval time.Duration
	// Queues are the activity queues this runtime serves
	// (ActivityOptions.Queue; default nil: only the default queue ""). A
	// runtime fetches only the activities it registers, in the queues it
	// serves: work it cannot run is never delivered to it, so a rolling
	// deploy or runtimes specialised by capability share a store safely.
	// List "" to serve the default queue besides named ones.
	Queues []string
	// UnservedTimeout is how long an activity may wait, counted from when
	// it was scheduled, while no live runtime serves its name and queue,
	// before it fails with kind "configuration" and a message saying no
	// runtime serves it (default 0: it waits until one does). Likewise an
	// instance whose orchestration no live runtime registers, or, for an
	// instance pinned to a version, registers in that version (runtimes
	// fetch only the turns of the orchestrations and versions they
	// register) fails with kind "configuration", "no runtime registers
	// orchestration X for …" ("… orchestration X version 2.0.0 for …"),
	// once its messages have waited that long; it was never delivered.
	// Runtimes announce what they serve (orchestrations,
	// activities, queues) in the store and renew the announcement every
	// third of WorkerLockTimeout; one that stops renewing (it shut down or
	// crashed) no longer counts after WorkerLockTimeout. Any runtime with
	// the option set fails such work; Client.Inspect reports it as
	// unserved either way.
	//
	// Work that a runtime of an earlier release queued is routed by its
	// name too (the store reads it from the queued item), so after an
	// upgrade an activity whose name no runtime registers any more waits,
	// as above, instead of being fetched, retried with backoff and failed
	// after MaxAttempts deliveries as earlier releases did.
	UnservedTimeout time.Duration
}

// Runtime runs orchestrations and activities from a store until Shutdown.
// Any number of runtimes, in one or many processes, may share a store.
type Runtime struct {
	d     *dispatch.Runtime
	sched *scheduler // nil: none
	m     *maintainer
}

// StartRuntime starts dispatching the orchestrations and activities of reg
// from store. It returns at once; call Shutdown to stop. It returns an error
// for registration mistakes and invalid options.
func StartRuntime(ctx context.Context, store provider.Provider, reg *Registry, opts *RuntimeOptions) (*Runtime, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: nil registry", ErrInvalidArgument)
	}
	if err := reg.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if opts == nil {
		opts = &RuntimeOptions{}
	}
	o := dispatch.Options{
		OrchestrationConcurrency: opts.OrchestrationConcurrency,
		WorkerConcurrency:        opts.WorkerConcurrency,
		FetchBatch:               opts.FetchBatch,
		OrchestratorLockTimeout:  opts.OrchestratorLockTimeout,
		WorkerLockTimeout:        opts.WorkerLockTimeout,
		MaxAttempts:              opts.MaxAttempts,
		BackoffBase:              opts.BackoffBase,
		BackoffMax:               opts.BackoffMax,
		CacheSize:                opts.CacheSize,
		PollInterval:             opts.PollInterval,
		FailOnNondeterminism:     opts.OnNondeterminism == Fail,
		WorkerID:                 opts.WorkerID,
		SessionLockTimeout:       opts.SessionLockTimeout,
		SessionIdleTimeout:       opts.SessionIdleTimeout,
		LockCleanupInterval:      opts.LockCleanupInterval,
		ShutdownGrace:            opts.ShutdownGrace,
		Clock:                    opts.Clock,
		Logger:                   opts.Logger,
		Limits:                   opts.limits(),
		Tracer:                   opts.Tracer,
		CancelGrace:              opts.CancelGracePeriod,
		Queues:                   opts.Queues,
		UnservedTimeout:          opts.UnservedTimeout,
	}
	for _, q := range opts.Queues {
		if len(q) > maxQueueName {
			return nil, fmt.Errorf("%w: RuntimeOptions.Queues: a queue name is %d bytes long (at most %d)", ErrInvalidArgument, len(q), maxQueueName)
		}
	}
	switch {
	case o.CancelGrace == 0:
		o.CancelGrace = DefaultCancelGracePeriod
	case o.CancelGrace < 0:
		o.CancelGrace = 0 // none: end at once
	}
	switch {
	case o.LockCleanupInterval == 0:
		o.LockCleanupInterval = time.Minute
	case o.LockCleanupInterval < 0:
		o.LockCleanupInterval = 0 // disabled
	}
	switch {
	case o.CacheSize == 0:
		o.CacheSize = 1024
	case o.CacheSize < 0:
		o.CacheSize = 0
	}
	if err := opts.checkMaintenance(); err != nil {
		return nil, err
	}
	d, err := dispatch.Start(store, registryAdapter{r: reg, maxPayload: o.Limits.MaxPayload}, o)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{d: d, m: startMaintainer(store, opts)}
	if !opts.DisableSchedules {
		clock := opts.Clock
		if clock == nil {
			clock = clockwork.NewRealClock()
		}
		log := opts.Logger
		if log == nil {
			log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		rt.sched = startScheduler(store, clock, log)
	}
	return rt, nil
}

// Shutdown stops taking new work and waits for turns and activities in
// flight to finish. If ctx ends first, the contexts of running activities
// are canceled with cause ErrRuntimeStopped and their work goes back to the
// queue (another runtime, or this one after a restart, runs it again; the
// interrupted run counts as an attempt): when they return, or after
// RuntimeOptions.ShutdownGrace for those that do not. Shutdown then waits
// only for turns in flight and returns ctx's error. It does not wait
// longer for activities that ignore their context: no goroutine of the
// runtime outlives Shutdown except the ones running such functions, and
// when one of them returns its result is discarded without touching the
// store, which may have been closed meanwhile.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.sched.stop()
	r.m.stop()
	return r.d.Shutdown(ctx)
}

// registryAdapter exposes a Registry to the dispatcher. Activity results
// over maxPayload bytes (0: no limit) fail the activity with a
// *LimitError.
type registryAdapter struct {
	r          *Registry
	maxPayload int
}

func (a registryAdapter) Orchestration(name, version string) (replay.Func, string, bool) {
	fn, v, ok := a.r.orchestration(name, version)
	if !ok {
		return nil, "", false
	}
	return func(c *replay.Context, input json.RawMessage) (json.RawMessage, error) {
		return fn(&OrchestrationContext{c: c}, input)
	}, v, true
}

// ActivityNames lists the registered activities: the runtime fetches
// only those.
func (a registryAdapter) ActivityNames() []string { return a.r.Activities() }

// OrchestrationNames lists the registered orchestrations: the runtime
// fetches only their turns.
func (a registryAdapter) OrchestrationNames() []string { return a.r.Orchestrations() }

// OrchestrationVersions lists the registered versions of each
// orchestration: the runtime fetches only the instances pinned to one of
// those (and those not pinned yet).
func (a registryAdapter) OrchestrationVersions() map[string][]string {
	return a.r.orchestrationVersions()
}

func (a registryAdapter) Activity(name string) (dispatch.ActivityFunc, bool) {
	fn, ok := a.r.activity(name)
	if !ok {
		return nil, false
	}
	if a.maxPayload <= 0 {
		return dispatch.ActivityFunc(fn), true
	}
	return func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
		out, err := fn(ctx, input)
		if err == nil {
			err = checkPayload("result of activity "+name, out, a.maxPayload)
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}, true
}

// ActivityContext describes the activity call a context.Context belongs to.
type ActivityContext struct {
	InstanceID  string
	ExecutionID int64
	// ActivityID is the activity's scheduling event in the orchestration's history.
	ActivityID int64
	Name       string
	SessionID  string
	// Attempt counts deliveries of this activity, from 1. Every start of
	// the function is a delivery, including a run cut short by a crash, a
	// lost lock or a Shutdown whose deadline passed (it may have had side
	// effects), so the run after one is attempt 2. A delivery given back
	// before the function started does not count. Retries by a RetryPolicy
	// are new activities, each from attempt 1.
	Attempt int
	// WorkerID is the runtime that runs it.
	WorkerID string
	// Queue is the queue the activity was routed to (ActivityOptions.Queue;
	// "" is the default queue).
	Queue string `json:",omitempty"`

	info *dispatch.ActivityInfo
}

// ActivityContextFrom returns the description of the activity whose context
// ctx is, or nil outside an activity.
func ActivityContextFrom(ctx context.Context) *ActivityContext {
	info := dispatch.ActivityInfoFrom(ctx)
	if info == nil {
		return nil
	}
	return &ActivityContext{InstanceID: info.InstanceID, ExecutionID: info.ExecutionID, ActivityID: info.ActivityID,
		Name: info.Name, SessionID: info.SessionID, Attempt: info.Attempt, WorkerID: info.WorkerID, Queue: info.Queue, info: info}
}

// Heartbeat reports that the activity is alive and, with details (any
// JSON-encodable value; nil keeps the details reported before), how far it
// got. It renews the attempt's lock and records the time and details on
// the activity's row in the store, durably: Client.Inspect shows them, and
// the next attempt reads them with HeartbeatDetails, whether it is a
// retry (RetryPolicy) or a redelivery after a crash. With
// ActivityOptions.HeartbeatTimeout it also restarts that timeout. Each
// call writes to the store: heartbeat at a fraction of the timeout (say a
// third), not for every item processed. It fails with ErrNotSupported on
// a store that keeps no heartbeats, and when the attempt's lock was lost
// (the activity was canceled or timed out; its context is canceled).
func (a *ActivityContext) Heartbeat(ctx context.Context, details any) error {
	if a == nil || a.info == nil {
		return fmt.Errorf("%w: Heartbeat outside a running activity", ErrInvalidArgument)
	}
	var raw json.RawMessage
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return fmt.Errorf("%w: heartbeat details: %v", ErrInvalidArgument, err)
		}
		raw = b
	}
	return a.info.Heartbeat(ctx, raw)
}

// HeartbeatDetails decodes into out the latest heartbeat details of this
// activity call: those this attempt reported, else those an earlier
// delivery of the same attempt recorded before its runtime crashed, else
// the latest ones of the previous attempt (a retry after a failure or a
// missed heartbeat). It reports false, leaving out alone, when there are
// none: the call starts from scratch.
func (a *ActivityContext) HeartbeatDetails(out any) (bool, error) {
	if a == nil || a.info == nil {
		return false, nil
	}
	raw, err := a.info.HeartbeatDetails(context.Background())
	if err != nil || len(raw) == 0 {
		return false, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("decoding heartbeat details: %w", err)
	}
	return true, nil
}
