package duroxide

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/replay"
)

// OrchestrationContext is what an orchestration function receives. Its
// methods are deterministic: everything they return comes from the
// instance's history when the code replays, so the code must reach them in
// the same order with the same arguments every time it runs. Orchestration
// code must not do I/O, read the clock, draw random numbers, iterate over
// maps in ways that change what it schedules, or start goroutines: it asks
// the context instead (activities for I/O, Now, NewGUID, timers).
//
// Methods must be called from the orchestration's own goroutine.
type OrchestrationContext struct {
	c *replay.Context
}

// Task is a durable operation started by an orchestration: an activity, a
// timer, an external event, a sub-orchestration. Tasks run concurrently;
// Await one to block until it completes, or pass several to Select.
type Task struct {
	ctx *OrchestrationContext
	t   *replay.Task
	err error // set when the task could not be created (bad input)
}

// RetryPolicy retries a failed activity with durable backoff: the waits are
// durable timers, so retries survive restarts.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first included
	// (minimum and default 1).
	MaxAttempts int
	// InitialInterval is the wait before the first retry (default 1s).
	InitialInterval time.Duration
	// MaxInterval caps the wait (default: no cap).
	MaxInterval time.Duration
	// BackoffCoefficient multiplies the wait after each retry (default 2).
	BackoffCoefficient float64
	// Jitter is the fraction of each wait, from 0 to 1, that is randomized
	// so retries of many instances spread out: a wait d becomes a value in
	// [d*(1-Jitter), d] (default 0: no jitter). The random part is derived
	// from the instance ID, the attempt's activity ID and the attempt
	// number, so replay computes the same wait.
	Jitter float64
	// NonRetryable lists failures that end the retries at once: an error
	// kind ("timeout", "configuration", ...) or the Go type of the
	// activity's error as ActivityError.Type shows it
	// ("*mypkg.ValidationError"). An error the activity wrapped with
	// NonRetryable and a canceled attempt always end them (default: none).
	NonRetryable []string
}

// InstanceID returns the ID of the running instance.
func (c *OrchestrationContext) InstanceID() string { return c.c.InstanceID() }

// ExecutionID returns the number of the running execution (1, then one more
// after every ContinueAsNew).
func (c *OrchestrationContext) ExecutionID() int64 { return c.c.ExecutionID() }

// Name returns the orchestration's registered name.
func (c *OrchestrationContext) Name() string { return c.c.Name() }

// Version returns the orchestration version this execution is pinned to.
func (c *OrchestrationContext) Version() string { return c.c.Version() }

// IsReplaying reports whether the code is re-running steps that history
// already records (use it to skip side effects such as metrics).
func (c *OrchestrationContext) IsReplaying() bool { return c.c.IsReplaying() }

// Logger returns a logger that is silent while the code replays, so each
// line is logged once. It carries the instance and execution IDs.
func (c *OrchestrationContext) Logger() *slog.Logger { return c.c.Logger() }

// ScheduleActivity starts the activity name with input (JSON-encoded).
// It is the by-name form of CallActivity.
func (c *OrchestrationContext) ScheduleActivity(name string, input any) *Task {
	return c.ScheduleActivityWithOptions(name, input, nil)
}

// ScheduleActivityOnSession starts an activity pinned to the worker that
// owns sessionID: every activity of one session runs on the same worker
// while the session is held (see RuntimeOptions.WorkerID). An empty
// sessionID is ScheduleActivity. It is ScheduleActivityWithOptions with
// ActivityOptions.Session.
func (c *OrchestrationContext) ScheduleActivityOnSession(name string, input any, sessionID string) *Task {
	return c.ScheduleActivityWithOptions(name, input, &ActivityOptions{Session: sessionID})
}

// ScheduleActivityWithRetry starts an activity and retries it when it fails
// with an application error, waiting durably between attempts. The task
// completes with the first success or the last failure. A canceled attempt
// is not retried. It is ScheduleActivityWithOptions with
// ActivityOptions.Retry.
func (c *OrchestrationContext) ScheduleActivityWithRetry(name string, input any, policy RetryPolicy) *Task {
	return c.ScheduleActivityWithOptions(name, input, &ActivityOptions{Retry: &policy})
}

// ScheduleTimer starts a durable timer that fires d from now (orchestration
// time). Await it to sleep; Select it against other tasks for a timeout.
func (c *OrchestrationContext) ScheduleTimer(d time.Duration) *Task {
	return &Task{ctx: c, t: c.c.ScheduleTimer(d)}
}

// WaitForEvent waits for the external event name (Client.RaiseEvent).
// Events are buffered: one raised before the wait is delivered to the
// first wait for its name; each event is delivered to one wait, the oldest
// open one. A wait that lost a Select stops taking events until it is
// awaited or selected again, so both loop styles work: a fresh wait per
// round raced against a reminder timer, or one wait selected every round.
func (c *OrchestrationContext) WaitForEvent(name string) *Task {
	return &Task{ctx: c, t: c.c.WaitForEvent(name)}
}

// ScheduleSubOrchestration starts the orchestration name as a child of
// this one. An empty instanceID gives the child a deterministic ID derived
// from the parent ("<parent>::sub::<n>"). If an explicit instanceID is
// taken, the task fails with a *SubOrchestrationError matching
// ErrInstanceExists. The child runs the version its runtime picks for new
// instances.
func (c *OrchestrationContext) ScheduleSubOrchestration(name, instanceID string, input any) *Task {
	return c.ScheduleSubOrchestrationVersion(name, "", instanceID, input)
}

// ScheduleSubOrchestrationVersion is ScheduleSubOrchestration pinned to a
// version of the child ("" = the default for new instances).
func (c *OrchestrationContext) ScheduleSubOrchestrationVersion(name, version, instanceID string, input any) *Task {
	raw, err := c.encode("sub-orchestration "+name, input)
	if err != nil {
		return &Task{ctx: c, err: err}
	}
	return &Task{ctx: c, t: c.c.ScheduleSubOrchestration(name, version, instanceID, raw)}
}

// ContinueAsNew ends this execution and starts a fresh one of the same
// orchestration with input and an empty history. Use it as
// `return zero, ctx.ContinueAsNew(x)`. Events raised and not yet consumed
// are handed to the new execution.
func (c *OrchestrationContext) ContinueAsNew(input any) error {
	return c.ContinueAsNewVersion("", input)
}

// ContinueAsNewVersion is ContinueAsNew that moves the instance to another
// registered version ("" = the same version).
func (c *OrchestrationContext) ContinueAsNewVersion(version string, input any) error {
	raw, err := c.encode("continue-as-new", input)
	if err != nil {
		return err
	}
	return c.c.ContinueAsNew(raw, version)
}

// Select blocks until one of the tasks completes and returns its index:
// the task whose completion comes first in history, so the choice is the
// same on every replay. The other tasks keep running.
func (c *OrchestrationContext) Select(tasks ...*Task) int {
	inner := make([]*replay.Task, len(tasks))
	for i, t := range tasks {
		if t.err != nil {
			return i
		}
		inner[i] = t.t
	}
	return c.c.Select(inner...)
}

// Now returns the orchestration's current time. The first run records it in
// history; replays return the recorded value.
func (c *OrchestrationContext) Now() time.Time { return c.c.Now() }

// NewGUID returns a random UUID. The first run records it in history;
// replays return the recorded value.
func (c *OrchestrationContext) NewGUID() string { return c.c.NewGUID() }

// SetCustomStatus publishes v (JSON-encoded) as the instance's custom
// status, visible in Status.CustomStatus. nil clears it.
func (c *OrchestrationContext) SetCustomStatus(v any) {
	raw, err := encodePayload(v)
	if err != nil {
		c.Logger().Warn("custom status cannot be encoded; ignored", logkey.Error, err)
		return
	}
	c.c.SetCustomStatus(raw)
}

// SetValue sets the instance value key to v (JSON-encoded): a small piece
// of state the instance publishes for clients to read without replaying
// its history (Client.GetValue, Client.ListValues, the HTTP API's
// /api/instances/{id}/values, 'duroxide values'). It is recorded in
// history, so a replay sets the same values; the store keeps them with the
// instance once the turn commits, and ContinueAsNew keeps them for the
// next execution. A nil v clears the key. An invalid key (empty, over
// MaxNameLength bytes, control characters) or a v that cannot be encoded
// returns ErrInvalidArgument and records nothing. Too many keys or too
// large a value (RuntimeOptions.MaxValues, MaxValueBytes) fail the
// orchestration with a *LimitError, as the other limits do.
func (c *OrchestrationContext) SetValue(key string, v any) error {
	if err := checkText("value key", key, MaxNameLength); err != nil {
		return err
	}
	var raw json.RawMessage
	if v != nil {
		var err error
		if raw, err = encodePayload(v); err != nil {
			return fmt.Errorf("%w: value %s: %w", ErrInvalidArgument, key, err)
		}
	}
	c.c.SetValue(key, raw)
	return nil
}

// ClearValue removes the instance value key (SetValue with nil).
func (c *OrchestrationContext) ClearValue(key string) error { return c.SetValue(key, nil) }

// GetValue decodes the instance value key, as this instance last set it
// (or its previous execution left it), into out, and reports whether the
// key is set.
func (c *OrchestrationContext) GetValue(key string, out any) (bool, error) {
	raw, ok := c.c.Value(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("value %s: %w", key, err)
	}
	return true, nil
}

func (c *OrchestrationContext) encode(what string, v any) (json.RawMessage, error) {
	raw, err := encodePayload(v)
	if err != nil {
		return nil, fmt.Errorf("input of %s: %w", what, err)
	}
	return raw, nil
}

// Await blocks until the task completes and decodes its result into out
// (a pointer; nil discards the result). A failed task returns
// *ActivityError or *SubOrchestrationError; a timer or an event never fails.
func (t *Task) Await(out any) error {
	if t.err != nil {
		return t.err
	}
	t.ctx.c.Await(t.t)
	return t.result(out)
}

// Done reports whether the task has completed, without blocking.
func (t *Task) Done() bool { return t.err != nil || t.t.Done() }

// Cancel gives up on the task: it completes at once, and Await returns an
// error matching ErrCanceled. A running activity is asked to stop (its
// context is canceled where it runs, its queued delivery is dropped) and
// its late result is ignored; an activity with retries stops retrying; a
// sub-orchestration receives a cancel request (which cascades to its own
// children); a timer or an event wait is abandoned. The cancellation is
// recorded, so replay makes the same choice. Canceling a completed task
// does nothing.
func (t *Task) Cancel() {
	if t.err != nil || t.t.Done() {
		return
	}
	t.ctx.c.Cancel(t.t)
}

func (t *Task) result(out any) error {
	output, fail := t.t.Result()
	if fail != nil {
		return t.failure(fail)
	}
	if err := decodePayload(output, out); err != nil {
		return fmt.Errorf("decoding result of %s: %w", t.describe(), err)
	}
	return nil
}

func (t *Task) failure(d *history.ErrorDetails) error {
	switch {
	case t.t.IsDetached():
		return &DetachedStartError{Name: t.t.Name(), InstanceID: t.t.ChildInstanceID(), Kind: string(d.Kind), Message: d.Message, Code: string(d.Code)}
	case !t.t.IsActivity() && !t.t.IsSubOrchestration():
		return fmt.Errorf("%s: %w", t.describe(), ErrCanceled) // only a canceled timer or wait fails
	case t.t.IsSubOrchestration():
		return &SubOrchestrationError{Name: t.t.Name(), InstanceID: t.t.ChildInstanceID(), Kind: string(d.Kind), Message: d.Message, Details: d.Details, Code: string(d.Code)}
	default:
		return &ActivityError{Name: t.t.Name(), ActivityID: t.t.EventID(), Kind: string(d.Kind), Message: d.Message, Type: d.Type, Details: d.Details, Code: string(d.Code)}
	}
}

func (t *Task) describe() string {
	switch {
	case t.t.IsSubOrchestration():
		return "sub-orchestration " + t.t.Name()
	case t.t.IsDetached():
		return "detached start of " + t.t.Name()
	case t.t.IsActivity():
		return "activity " + t.t.Name()
	case t.t.IsCancelNotice():
		return "cancel request"
	case t.t.Name() != "":
		return "event " + t.t.Name()
	}
	return "timer"
}
