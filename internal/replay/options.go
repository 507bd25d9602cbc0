package replay

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// RetryPolicy retries a failed activity with durable backoff.
type RetryPolicy struct {
	MaxAttempts        int
	InitialInterval    time.Duration
	MaxInterval        time.Duration
	BackoffCoefficient float64
	// Jitter is the fraction (0 to 1) of each wait that is randomized: a
	// wait d becomes a value in [d*(1-Jitter), d]. The random part is a
	// hash of the instance, the attempt's activity ID and the attempt
	// number, so replay computes the same wait.
	Jitter float64
	// NonRetryable lists failure kinds ("timeout", "configuration"), codes
	// or Go error types ("*mypkg.ValidationError") that end the retries.
	NonRetryable []string
}

// Delay returns the wait before retry number k (k = 1 is the first retry).
func (p RetryPolicy) Delay(k int) time.Duration {
	coef := p.BackoffCoefficient
	if coef <= 0 {
		coef = 2
	}
	d := float64(p.InitialInterval) * math.Pow(coef, float64(k-1))
	if p.MaxInterval > 0 && d > float64(p.MaxInterval) {
		d = float64(p.MaxInterval)
	}
	if d > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// JitteredDelay is Delay(k) with the policy's jitter applied, drawn
// deterministically from the instance, the failed attempt's activity ID
// and k.
func (p RetryPolicy) JitteredDelay(k int, instanceID string, activityID int64) time.Duration {
	d := p.Delay(k)
	j := min(max(p.Jitter, 0), 1)
	if j == 0 || d <= 0 {
		return d
	}
	h := fnv.New64a()
	h.Write([]byte(instanceID))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(activityID))
	binary.BigEndian.PutUint64(b[8:], uint64(k))
	h.Write(b[:])
	u := float64(h.Sum64()>>11) / (1 << 53) // in [0, 1)
	return time.Duration(float64(d) * (1 - j*u))
}

// final reports whether a failure ends the retries regardless of attempts.
func (p RetryPolicy) final(f *history.ErrorDetails) bool {
	if f.Kind == history.ErrorCanceled || f.Code == history.CodeNonRetryable {
		return true
	}
	return slices.ContainsFunc(p.NonRetryable, func(s string) bool {
		return s != "" && (s == string(f.Kind) || s == string(f.Code) || s == f.Type)
	})
}

// ActivityOptions shape one activity call.
type ActivityOptions struct {
	SessionID string
	// Retry, when set, retries failed attempts.
	Retry *RetryPolicy
	// StartToClose bounds each attempt; ScheduleToClose bounds the whole
	// call, retries and waits included. Both are durable timers.
	StartToClose, ScheduleToClose time.Duration
	// Queue routes the activity ("" is the default queue); HeartbeatTimeout
	// fails an attempt that has not heartbeated for that long (enforced by
	// the worker). Neither is compared on replay; nor are the timeouts
	// recorded on ActivityScheduled for status tools.
	Queue            string
	HeartbeatTimeout time.Duration
}

// scheduled is the ActivityScheduled event of one attempt.
func (o ActivityOptions) scheduled(name string, input, details json.RawMessage) history.Event {
	return history.Event{Kind: history.ActivityScheduled, Name: name, Input: input, SessionID: o.SessionID,
		Queue: o.Queue, HeartbeatTimeoutMs: o.HeartbeatTimeout.Milliseconds(), Data: details,
		StartToCloseTimeoutMs: o.StartToClose.Milliseconds(), ScheduleToCloseTimeoutMs: o.ScheduleToClose.Milliseconds()}
}

// ScheduleActivityOptions schedules an activity with retries and
// timeouts. Without either it is ScheduleActivity. Otherwise every attempt,
// retry wait and deadline is an ordinary history event (ActivityScheduled,
// TimerCreated), emitted as the previous step completes, so the call
// progresses while the code awaits something else. A deadline that passes
// first fails the call (or the attempt) with kind "timeout", records a
// cancel breadcrumb for the running attempt and reports it in
// TurnOutput.CanceledActivities; its late result is ignored.
func (c *Context) ScheduleActivityOptions(name string, input json.RawMessage, o ActivityOptions) *Task {
	if o.Retry == nil && o.StartToClose <= 0 && o.ScheduleToClose <= 0 {
		x := c.x
		ev := x.emit(o.scheduled(name, input, nil))
		x.abortIfBroken()
		return x.bind(ev.EventID, kindActivity, name, "")
	}
	return c.scheduleComposite(name, input, o)
}

func (c *Context) scheduleComposite(name string, input json.RawMessage, o ActivityOptions) *Task {
	x := c.x
	p := RetryPolicy{MaxAttempts: 1}
	if o.Retry != nil {
		p = *o.Retry
	}
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	comp := &Task{x: x, kind: kindComposite, name: name}
	x.composites = append(x.composites, comp)
	// timers are the call's own timers (backoffs, deadlines); those still
	// pending when the call ends are abandoned.
	var timers []*Task
	comp.onDone = func() {
		for _, tm := range timers {
			if !tm.done {
				x.cancelTimer(tm)
			}
		}
	}
	attempt := 0
	var cur *Task               // the latest attempt
	var details json.RawMessage // the latest heartbeat details of a failed attempt
	var try func()
	try = func() {
		attempt++
		n := attempt
		ev := x.emit(o.scheduled(name, input, details))
		if x.nondet != nil {
			return
		}
		t := x.bind(ev.EventID, kindActivity, name, "")
		comp.eventID = t.eventID
		cur = t
		var deadline *Task // the attempt's start-to-close timer
		t.onDone = func() {
			if deadline != nil && !deadline.done {
				x.cancelTimer(deadline)
			}
			if comp.done {
				return
			}
			if t.failure == nil || n >= p.MaxAttempts || p.final(t.failure) {
				comp.complete(t.seq, t.output, t.failure)
				return
			}
			if d := x.hist[t.seq].Data; len(d) > 0 && x.hist[t.seq].Kind == history.ActivityFailed {
				details = d
			}
			d := p.JitteredDelay(n, x.cfg.InstanceID, t.eventID)
			if d <= 0 {
				try()
				return
			}
			tev := x.emit(history.Event{Kind: history.TimerCreated, FireAtMs: x.now.Add(d).UnixMilli()})
			if x.nondet != nil {
				return
			}
			timer := x.bind(tev.EventID, kindTimer, "", "")
			timers = append(timers, timer)
			timer.onDone = func() {
				if !comp.done {
					try()
				}
			}
		}
		if o.StartToClose > 0 {
			tev := x.emit(history.Event{Kind: history.TimerCreated, FireAtMs: x.now.Add(o.StartToClose).UnixMilli()})
			if x.nondet != nil {
				return
			}
			timer := x.bind(tev.EventID, kindTimer, "", "")
			deadline = timer
			timer.onDone = func() {
				if t.done || comp.done {
					return
				}
				x.cancelActivity(t)
				t.complete(timer.seq, nil, &history.ErrorDetails{Kind: history.ErrorTimeout,
					Message: fmt.Sprintf("attempt %d of activity %s timed out after %s (start-to-close timeout)", n, name, o.StartToClose)})
			}
		}
	}
	try()
	if o.ScheduleToClose > 0 && x.nondet == nil {
		tev := x.emit(history.Event{Kind: history.TimerCreated, FireAtMs: x.now.Add(o.ScheduleToClose).UnixMilli()})
		if x.nondet == nil {
			timer := x.bind(tev.EventID, kindTimer, "", "")
			timers = append(timers, timer)
			timer.onDone = func() {
				if comp.done {
					return
				}
				fail := &history.ErrorDetails{Kind: history.ErrorTimeout,
					Message: fmt.Sprintf("activity %s timed out after %s (schedule-to-close timeout)", name, o.ScheduleToClose)}
				comp.complete(timer.seq, nil, fail)
				if cur != nil && !cur.done {
					x.cancelActivity(cur)
					cur.complete(timer.seq, nil, fail)
				}
			}
		}
	}
	comp.onCancel = func(seq int, fail *history.ErrorDetails) {
		if cur != nil && !cur.done {
			x.cancelActivity(cur)
			cur.complete(seq, nil, fail)
		}
	}
	x.abortIfBroken()
	return comp
}

// cancelActivity records that the code gave up on a running activity: a
// breadcrumb in history and, in this turn's output, a request to cancel it.
// An activity whose completion or breadcrumb is already in history needs
// neither; on replay the breadcrumb recorded by the first run is found.
func (x *Execution) cancelActivity(t *Task) {
	if x.crumbs[t.eventID] || x.completed[t.eventID] {
		return
	}
	x.appendNew(history.Event{Kind: history.ActivityCancelRequested, SourceEventID: t.eventID, Reason: "canceled by the orchestration"})
	x.cancelActs = append(x.cancelActs, t.eventID)
}

// cancelTimer records that the code abandoned a timer that has not fired,
// so tools stop showing it as a wait. The timer's message stays queued; its
// firing completes nothing.
func (x *Execution) cancelTimer(t *Task) {
	if x.crumbs[t.eventID] || x.completed[t.eventID] {
		return
	}
	x.appendNew(history.Event{Kind: history.TimerCanceled, SourceEventID: t.eventID, Reason: "abandoned by the orchestration"})
}

// cancelWait records that the code abandoned an event wait.
func (x *Execution) cancelWait(t *Task) {
	x.waiters = slices.DeleteFunc(x.waiters, func(w *Task) bool { return w == t })
	if x.crumbs[t.eventID] {
		return
	}
	x.appendNew(history.Event{Kind: history.ExternalSubscribedCanceled, SourceEventID: t.eventID, Reason: "canceled by the orchestration"})
}

// cancelChild is cancelActivity for a sub-orchestration.
func (x *Execution) cancelChild(t *Task) {
	if x.crumbs[t.eventID] || x.completed[t.eventID] {
		return
	}
	x.appendNew(history.Event{Kind: history.SubOrchestrationCancelRequested, SourceEventID: t.eventID, Reason: "canceled by the parent orchestration"})
	x.cancelKids = append(x.cancelKids, ChildRef{EventID: t.eventID, InstanceID: t.childID})
}

// Cancel cancels a task the code no longer wants: it completes at once
// with a "canceled" failure. A running activity or child is asked to stop
// (a breadcrumb and TurnOutput.CanceledActivities / CanceledChildren); a
// timer or an event wait is abandoned (a TimerCanceled or
// ExternalSubscribedCanceled breadcrumb). A completion that arrives later
// is ignored. Canceling a completed task does nothing.
func (c *Context) Cancel(t *Task) {
	x := c.x
	if t == nil || t.done {
		return
	}
	x.cancelTask(t, x.pos, &history.ErrorDetails{Kind: history.ErrorCanceled, Message: "canceled by the orchestration"})
}

// Patched reports whether the execution takes the new branch of the code
// change id. It is true when history records the patch, or when the code
// reaches the call beyond the end of its recorded schedules (a new
// execution, or one running past what an older release recorded), in
// which case the patch is recorded; it is false when the call falls inside
// a history recorded before the change. The first answer sticks for the
// rest of the execution.
func (c *Context) Patched(id string) bool {
	x := c.x
	if v, ok := x.patches[id]; ok {
		return v
	}
	v := x.patchSeen[id]
	if !v && x.pastRecorded() {
		x.appendNew(history.Event{Kind: history.PatchRecorded, Name: id})
		x.matchPos = len(x.hist)
		v = true
	}
	x.patches[id] = v
	return v
}

// Deprecated keeps recording the patch id for new executions once the old
// branch is gone from the code, so that a release still asking Patched(id)
// replays them; histories without the patch replay too.
func (c *Context) Deprecated(id string) { c.Patched(id) }

// IsTimer reports whether t is a durable timer.
func (t *Task) IsTimer() bool { return t.kind == kindTimer }

// pastRecorded reports whether no recorded schedule remains to be matched:
// the code runs beyond what history records.
func (x *Execution) pastRecorded() bool {
	for i := x.matchPos; i < len(x.hist); i++ {
		if isSchedule(x.hist[i].Kind) {
			return false
		}
	}
	return true
}
