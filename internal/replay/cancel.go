package replay

import (
	"maps"
	"slices"

	"github.com/duroxide/duroxide-go/history"
)

// A cancel request with a grace period (OrchestrationCancelRequested with
// FireAtMs, the grace deadline) does not end the execution at once. When the
// loop applies it, the code sees it: Context.Canceled turns true, tasks from
// Context.CancelRequested complete, and every task still pending is canceled
// (it completes with a "canceled" failure and gets its breadcrumb, as with
// Context.Cancel). The code may then schedule cleanup work, which runs
// normally. The execution ends Canceled (or Failed, when the request carries
// an error such as an instance timeout) when the code returns, whatever it
// returns, or when TimerFired for the cancel request (the grace deadline)
// is in history, whichever comes first. A request without FireAtMs (older
// histories, or a runtime configured without grace) ends the execution
// without running the code further, as before.

// Canceled reports whether the loop has applied a cancel request with a
// grace period: the code is in its grace period and should clean up and
// return.
func (c *Context) Canceled() bool { return c.x.canceling }

// CancelRequested returns a task that completes, with a "canceled" failure,
// when a cancel request with a grace period is applied (at once when it
// already was). It is not recorded in history, so code may call it any
// number of times.
func (c *Context) CancelRequested() *Task {
	x := c.x
	t := &Task{x: x, kind: kindCancelNotice}
	if x.canceling {
		t.complete(x.cancelSeq, nil, x.cancelFailure())
	} else {
		x.cancelNotices = append(x.cancelNotices, t)
	}
	return t
}

// IsCancelNotice reports whether t comes from Context.CancelRequested.
func (t *Task) IsCancelNotice() bool { return t.kind == kindCancelNotice }

// graceful reports whether ev is a cancel request with a grace period.
func graceful(ev *history.Event) bool { return ev != nil && ev.FireAtMs > 0 }

// cancelDue reports whether a cancel request ends the execution without
// running the code: one without grace, or one whose grace has run out.
func (x *Execution) cancelDue() bool {
	return x.cancelReq != nil && (!graceful(x.cancelReq) || x.graceOver)
}

func (x *Execution) cancelFailure() *history.ErrorDetails {
	msg := "canceled"
	if x.cancelReq != nil && x.cancelReq.Reason != "" {
		msg = x.cancelReq.Reason
	}
	return &history.ErrorDetails{Kind: history.ErrorCanceled, Message: msg}
}

// applyCancel applies a graceful cancel request at history position i:
// notify the code and cancel everything it waits on.
func (x *Execution) applyCancel(i int) {
	if x.canceling {
		return
	}
	x.canceling, x.cancelSeq = true, i
	fail := x.cancelFailure()
	for _, t := range x.cancelNotices {
		t.complete(i, nil, fail)
	}
	x.cancelNotices = nil
	// Calls with retries or timeouts first, so their pending backoff does
	// not start another attempt; then every other pending task, in event
	// order.
	for _, comp := range x.composites {
		x.cancelTask(comp, i, fail)
	}
	for _, id := range slices.Sorted(maps.Keys(x.tasks)) {
		x.cancelTask(x.tasks[id], i, fail)
	}
	x.mustPoll = true
}

// cancelTask gives up on t (see Context.Cancel), completing it at seq.
func (x *Execution) cancelTask(t *Task, seq int, fail *history.ErrorDetails) {
	if t == nil || t.done {
		return
	}
	switch t.kind {
	case kindActivity:
		x.cancelActivity(t)
	case kindSubOrchestration:
		x.cancelChild(t)
	case kindTimer:
		x.cancelTimer(t)
	case kindEvent:
		x.cancelWait(t)
	case kindComposite:
		t.complete(seq, nil, fail)
		if t.onCancel != nil {
			t.onCancel(seq, fail)
		}
		return
	}
	t.complete(seq, nil, fail)
}
