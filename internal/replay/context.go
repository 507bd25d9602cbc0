package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go/history"
)

// Context is the engine side of an orchestration's context. Every method
// must be called from the orchestration's own goroutine.
type Context struct {
	x      *Execution
	logger *slog.Logger
}

// InstanceID returns the instance being run.
func (c *Context) InstanceID() string { return c.x.cfg.InstanceID }

// ExecutionID returns the execution being run.
func (c *Context) ExecutionID() int64 { return c.x.cfg.ExecutionID }

// Name and Version of the orchestration, from OrchestrationStarted.
func (c *Context) Name() string { return c.x.hist[0].Name }

// Version returns the orchestration version the execution is pinned to.
func (c *Context) Version() string { return c.x.hist[0].Version }

// IsReplaying reports whether the code is re-running steps already recorded.
func (c *Context) IsReplaying() bool { return c.x.replaying }

// Logger returns a logger that is silent while replaying.
func (c *Context) Logger() *slog.Logger { return c.logger }

// ScheduleActivity schedules an activity.
func (c *Context) ScheduleActivity(name string, input json.RawMessage, sessionID string) *Task {
	x := c.x
	ev := x.emit(history.Event{Kind: history.ActivityScheduled, Name: name, Input: input, SessionID: sessionID})
	x.abortIfBroken()
	return x.bind(ev.EventID, kindActivity, name, "")
}

// ScheduleTimer schedules a durable timer that fires after d.
func (c *Context) ScheduleTimer(d time.Duration) *Task {
	x := c.x
	if d < 0 {
		d = 0
	}
	ev := x.emit(history.Event{Kind: history.TimerCreated, FireAtMs: x.now.Add(d).UnixMilli()})
	x.abortIfBroken()
	return x.bind(ev.EventID, kindTimer, "", "")
}

// WaitForEvent subscribes to the next arrival of external event name.
// Arrivals are buffered: an event raised before the wait is delivered to it.
func (c *Context) WaitForEvent(name string) *Task {
	x := c.x
	ev := x.emit(history.Event{Kind: history.ExternalSubscribed, Name: name})
	x.abortIfBroken()
	t := x.bind(ev.EventID, kindEvent, name, "")
	x.waiters = append(x.waiters, t)
	x.takeBuffered(t)
	return t
}

// takeBuffered completes an open wait with the oldest unconsumed arrival of
// its name, if any. It ranks by the arrival's position in history.
func (x *Execution) takeBuffered(t *Task) {
	if t.done || t.kind != kindEvent {
		return
	}
	for _, a := range x.arrivals {
		if !a.consumed && a.name == t.name {
			a.consumed = true
			for j, w := range x.waiters {
				if w == t {
					x.waiters = append(x.waiters[:j:j], x.waiters[j+1:]...)
					break
				}
			}
			t.complete(a.seq, a.data, nil)
			return
		}
	}
}

// wake makes an event wait that lost a Select eligible for arrivals again.
func (x *Execution) wake(t *Task) {
	if t != nil && t.idle {
		t.idle = false
		x.takeBuffered(t)
	}
}

// ScheduleSubOrchestration starts a child orchestration. An empty
// instanceID derives a deterministic one from the parent; an empty version
// lets the child's runtime choose.
func (c *Context) ScheduleSubOrchestration(name, version, instanceID string, input json.RawMessage) *Task {
	x := c.x
	want := history.Event{Kind: history.SubOrchestrationScheduled, Name: name, Version: version, Input: input, ChildInstanceID: instanceID}
	ev := x.emitWith(want, func(ev *history.Event) {
		if ev.ChildInstanceID == "" {
			ev.ChildInstanceID = x.childID(ev.EventID)
		}
	})
	x.abortIfBroken()
	return x.bind(ev.EventID, kindSubOrchestration, name, ev.ChildInstanceID)
}

// StartOrchestration records a detached start of the orchestration name as
// the independent instance instanceID (an empty one derives a deterministic
// ID from this instance, as for children; an empty version lets the new
// instance's runtime choose). The task completes when the start is
// committed, or fails when the ID is taken.
func (c *Context) StartOrchestration(name, version, instanceID string, input json.RawMessage) *Task {
	x := c.x
	want := history.Event{Kind: history.DetachedOrchestrationScheduled, Name: name, Version: version, Input: input, ChildInstanceID: instanceID}
	ev := x.emitWith(want, func(ev *history.Event) {
		if ev.ChildInstanceID == "" {
			ev.ChildInstanceID = x.childID(ev.EventID)
		}
	})
	x.abortIfBroken()
	return x.bind(ev.EventID, kindDetached, name, ev.ChildInstanceID)
}

// childID is the deterministic ID of an auto-named child.
func (x *Execution) childID(eventID int64) string {
	if x.cfg.ExecutionID == 1 {
		return fmt.Sprintf("%s::sub::%d", x.cfg.InstanceID, eventID)
	}
	return fmt.Sprintf("%s::sub::%d.%d", x.cfg.InstanceID, x.cfg.ExecutionID, eventID)
}

// SetCustomStatus records a custom status value (nil clears it).
func (c *Context) SetCustomStatus(v json.RawMessage) {
	c.x.emit(history.Event{Kind: history.CustomStatusUpdated, CustomStatus: v})
	c.x.abortIfBroken()
}

// SetValue records the instance value key (nil v clears it). A new value
// over Limits.MaxValueBytes, or a new key beyond Limits.MaxValues, goes
// over a limit and stops the code.
func (c *Context) SetValue(key string, v json.RawMessage) {
	x := c.x
	ev := x.emitWith(history.Event{Kind: history.ValueSet, Name: key, Data: v}, x.checkValue)
	x.abortIfBroken()
	if ev.Data == nil {
		delete(x.values, ev.Name)
	} else {
		x.values[ev.Name] = ev.Data
	}
}

// Value returns the instance value key as the code last set it (or the
// previous execution left it), and whether it is set.
func (c *Context) Value(key string) (json.RawMessage, bool) {
	v, ok := c.x.values[key]
	return v, ok
}

// Now returns the orchestration's current time, recorded on first call.
func (c *Context) Now() time.Time {
	x := c.x
	ev := x.emit(history.Event{Kind: history.NowRecorded, TimeMs: x.now.UnixMilli()})
	x.abortIfBroken()
	return time.UnixMilli(ev.TimeMs).UTC()
}

// NewGUID returns a random UUID, recorded on first call.
func (c *Context) NewGUID() string {
	x := c.x
	ev := x.emit(history.Event{Kind: history.GUIDRecorded, GUID: uuid.NewString()})
	x.abortIfBroken()
	return ev.GUID
}

// Await blocks until t completes.
func (c *Context) Await(t *Task) {
	c.x.wake(t)
	for !t.done {
		c.x.block()
	}
}

// Select blocks until one of tasks completes and returns the index of the
// one whose completion comes first in history (a cancel notice first among
// tasks its cancellation completed). It returns -1 for no tasks.
func (c *Context) Select(tasks ...*Task) int {
	if len(tasks) == 0 {
		return -1
	}
	for _, t := range tasks {
		c.x.wake(t)
	}
	for {
		best := -1
		for i, t := range tasks {
			// A cancel notice wins a tie: the cancellation completes it and
			// the tasks it cancels at the same point of history.
			if t != nil && t.done && (best < 0 || t.seq < tasks[best].seq ||
				(t.seq == tasks[best].seq && t.kind == kindCancelNotice && tasks[best].kind != kindCancelNotice)) {
				best = i
			}
		}
		if best >= 0 {
			// Event waits that lost stop taking arrivals, so a loop that
			// waits afresh each round gets the next event; selecting or
			// awaiting a loser again makes it eligible again.
			for _, t := range tasks {
				if t != nil && !t.done && t.kind == kindEvent {
					t.idle = true
				}
			}
			return best
		}
		c.x.block()
	}
}

// ContinueAsNew returns the error an orchestration returns to continue as new.
func (c *Context) ContinueAsNew(input json.RawMessage, version string) error {
	return &ContinueAsNewError{Input: input, Version: version}
}

// ScheduleActivityWithRetry schedules an activity and, on application
// failure, retries it after durable timers until it succeeds or
// MaxAttempts is reached (see ScheduleActivityOptions).
func (c *Context) ScheduleActivityWithRetry(name string, input json.RawMessage, sessionID string, p RetryPolicy) *Task {
	return c.scheduleComposite(name, input, ActivityOptions{SessionID: sessionID, Retry: &p})
}

// bind creates the task for a scheduling event.
func (x *Execution) bind(eventID int64, kind taskKind, name, childID string) *Task {
	t := &Task{x: x, kind: kind, eventID: eventID, name: name, childID: childID}
	if x.nondet == nil {
		if old := x.tasks[eventID]; old != nil && old.open {
			old.open = false
			x.openActivities--
		}
		x.tasks[eventID] = t
		if kind == kindActivity {
			t.open = true
			x.openActivities++
		}
	}
	return t
}

// replayHandler silences a logger while the code replays.
type replayHandler struct {
	h slog.Handler
	x *Execution
}

func (r *replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !r.x.replaying && r.h.Enabled(ctx, l)
}
func (r *replayHandler) Handle(ctx context.Context, rec slog.Record) error {
	return r.h.Handle(ctx, rec)
}
func (r *replayHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return &replayHandler{h: r.h.WithAttrs(a), x: r.x}
}
func (r *replayHandler) WithGroup(n string) slog.Handler {
	return &replayHandler{h: r.h.WithGroup(n), x: r.x}
}
