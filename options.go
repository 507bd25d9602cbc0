package duroxide

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
)

// ActivityOptions shape one activity call (CallActivity,
// ScheduleActivityWithOptions). A nil *ActivityOptions, like every zero
// field, means the default: one attempt, no timeout, no session.
type ActivityOptions struct {
	// Retry retries failed attempts with durable backoff (default nil: one
	// attempt). It combines with every other option, Session included.
	Retry *RetryPolicy
	// StartToCloseTimeout bounds each attempt (default 0: no bound). It is
	// a durable timer in the orchestration's history: when it fires before
	// the attempt's result, the attempt fails with kind "timeout" (retried
	// per Retry), the running attempt's context is canceled and its late
	// result is ignored.
	StartToCloseTimeout time.Duration
	// ScheduleToCloseTimeout bounds the whole call: every attempt and every
	// retry wait (default 0: no bound). When its durable timer fires, the
	// call fails with an *ActivityError of kind "timeout" (errors.Is(err,
	// ErrTimeout)) and the running attempt is canceled.
	ScheduleToCloseTimeout time.Duration
	// HeartbeatTimeout fails an attempt that has not called
	// ActivityContext.Heartbeat for this long (default 0: no heartbeat
	// timeout); the clock starts when the attempt starts. The runtime
	// running the attempt enforces it on its Clock: it cancels the
	// attempt's context and fails the attempt with kind "timeout"
	// (errors.Is(err, ErrTimeout)), retried per Retry, handing the latest
	// heartbeat details to the next attempt (ActivityContext.
	// HeartbeatDetails). Each heartbeat also renews the attempt's lock and
	// records the time and details on its worker-queue row, where they
	// survive a crash (Client.Inspect shows them); an attempt whose
	// runtime dies is redelivered when its lock lapses (WorkerLockTimeout).
	HeartbeatTimeout time.Duration
	// Session pins the activity to the worker that owns the session (see
	// ScheduleActivityOnSession; default "": any worker).
	Session string
	// Queue routes the activity to the runtimes that serve it
	// (RuntimeOptions.Queues; default "": the default queue, which every
	// runtime serves unless its Queues say otherwise). A runtime fetches
	// only the activities it registers, in the queues it serves; work that
	// no runtime serves waits in the store (see RuntimeOptions.
	// UnservedTimeout) and Client.Inspect says so.
	Queue string
}

// maxQueueName bounds ActivityOptions.Queue and RuntimeOptions.Queues.
const maxQueueName = 256

// engine validates the options and converts them for the replay engine.
func (o *ActivityOptions) engine() (replay.ActivityOptions, error) {
	if o == nil {
		return replay.ActivityOptions{}, nil
	}
	var errs []error
	if o.HeartbeatTimeout < 0 {
		errs = append(errs, fmt.Errorf("HeartbeatTimeout %s is negative", o.HeartbeatTimeout))
	}
	if len(o.Queue) > maxQueueName {
		errs = append(errs, fmt.Errorf("the Queue name is %d bytes long (at most %d)", len(o.Queue), maxQueueName))
	}
	if o.StartToCloseTimeout < 0 {
		errs = append(errs, fmt.Errorf("StartToCloseTimeout %s is negative", o.StartToCloseTimeout))
	}
	if o.ScheduleToCloseTimeout < 0 {
		errs = append(errs, fmt.Errorf("ScheduleToCloseTimeout %s is negative", o.ScheduleToCloseTimeout))
	}
	out := replay.ActivityOptions{SessionID: o.Session, StartToClose: o.StartToCloseTimeout, ScheduleToClose: o.ScheduleToCloseTimeout,
		Queue: o.Queue, HeartbeatTimeout: o.HeartbeatTimeout}
	if p := o.Retry; p != nil {
		// Zero or negative intervals and coefficients mean their defaults,
		// as they always have: rejecting them now would change what
		// running instances schedule.
		if p.Jitter < 0 || p.Jitter > 1 {
			errs = append(errs, fmt.Errorf("RetryPolicy.Jitter %v is outside [0, 1]", p.Jitter))
		}
		rp := replay.RetryPolicy{MaxAttempts: p.MaxAttempts, InitialInterval: p.InitialInterval, MaxInterval: p.MaxInterval,
			BackoffCoefficient: p.BackoffCoefficient, Jitter: p.Jitter, NonRetryable: p.NonRetryable}
		if rp.InitialInterval <= 0 {
			rp.InitialInterval = time.Second
		}
		out.Retry = &rp
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("%w: activity options: %w", ErrInvalidArgument, err)
	}
	return out, nil
}

// ScheduleActivityWithOptions starts the activity name with input
// (JSON-encoded) as opts says (nil: defaults). It is the by-name form of
// CallActivity. Invalid options fail the task with ErrInvalidArgument
// without scheduling anything.
func (c *OrchestrationContext) ScheduleActivityWithOptions(name string, input any, opts *ActivityOptions) *Task {
	o, err := opts.engine()
	if err != nil {
		return &Task{ctx: c, err: fmt.Errorf("activity %s: %w", name, err)}
	}
	raw, err := c.encode("activity "+name, input)
	if err != nil {
		return &Task{ctx: c, err: err}
	}
	return &Task{ctx: c, t: c.c.ScheduleActivityOptions(name, raw, o)}
}

// NonRetryable marks an activity's error as final: returned from an
// activity, it ends the call's retries at once (whatever the RetryPolicy
// says) and reaches the orchestration as an *ActivityError of kind
// "application" whose Type and Message are those of err. nil stays nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryableError{err: err}
}

type nonRetryableError struct{ err error }

func (e *nonRetryableError) Error() string { return e.err.Error() }
func (e *nonRetryableError) Unwrap() error { return e.err }

// ErrorDetails is how the activity worker records the failure.
func (e *nonRetryableError) ErrorDetails() *history.ErrorDetails {
	d := &history.ErrorDetails{Kind: history.ErrorApplication, Message: e.err.Error(), Type: fmt.Sprintf("%T", e.err), Code: history.CodeNonRetryable}
	var inner interface{ ErrorDetails() *history.ErrorDetails }
	if errors.As(e.err, &inner) && inner.ErrorDetails() != nil {
		c := *inner.ErrorDetails()
		c.Code = history.CodeNonRetryable
		d = &c
	}
	return d
}
