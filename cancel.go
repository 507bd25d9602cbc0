package duroxide

import "time"

// DefaultCancelGracePeriod is RuntimeOptions.CancelGracePeriod's default.
const DefaultCancelGracePeriod = 30 * time.Second

// Canceled reports whether the instance has been canceled (by
// Client.CancelInstance, by its parent, or by StartOptions.Timeout) and is
// in its grace period: the code should clean up and return. Once true it
// stays true for the rest of the execution. It is deterministic: the
// request's place in history decides when it turns true, on every replay.
//
// When the cancellation is applied every task the code has not finished
// waiting on (activities, timers, event waits, sub-orchestrations, which
// are canceled in turn) completes with an error matching ErrCanceled. What
// the code schedules afterwards runs normally, so it can run compensating
// activities. The instance ends Canceled (Failed with kind "timeout" for a
// timeout) as soon as the code returns, whatever it returns, or at the end
// of RuntimeOptions.CancelGracePeriod, whichever comes first; work still
// running then is canceled.
func (c *OrchestrationContext) Canceled() bool { return c.c.Canceled() }

// CancelRequested returns a task that completes when the instance is
// canceled (see Canceled); its Await returns an error matching
// ErrCanceled. Use it in Select to react to cancellation while waiting on
// other work. It records nothing in the history.
func (c *OrchestrationContext) CancelRequested() *Task {
	return &Task{ctx: c, t: c.c.CancelRequested()}
}
