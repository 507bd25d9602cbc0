package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Func is an orchestration as the engine sees it: raw JSON in and out. The
// public package wraps typed user functions into this shape.
type Func func(ctx *Context, input json.RawMessage) (json.RawMessage, error)

// Config describes one execution of one instance.
type Config struct {
	InstanceID  string
	ExecutionID int64
	Func        Func
	// Logger is the orchestration's logger; the engine silences it while replaying.
	Logger *slog.Logger
	// Limits bounds what the execution may record (zero: no limits).
	Limits Limits
	// CancelGrace, when positive, is the grace period a new cancel request
	// gives the code: the request records its deadline (FireAtMs) and the
	// code sees it (see Context.Canceled). Zero or negative: a new cancel
	// request ends the execution at once. Recorded requests keep what they
	// recorded, so replay does not depend on this setting.
	CancelGrace time.Duration
}

// Result is the state of an execution after a turn.
type Result int

const (
	// Running: the code is waiting for something; more turns will follow.
	Running Result = iota
	// Completed: the code returned a value.
	Completed
	// Failed: the code returned an error or panicked.
	Failed
	// Canceled: a cancel request ended the execution.
	Canceled
	// ContinuedAsNew: the code asked for a fresh execution.
	ContinuedAsNew
)

func (r Result) String() string {
	switch r {
	case Running:
		return "Running"
	case Completed:
		return "Completed"
	case Failed:
		return "Failed"
	case Canceled:
		return "Canceled"
	case ContinuedAsNew:
		return "ContinuedAsNew"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// TurnInput is what one turn feeds the engine.
type TurnInput struct {
	// Now is the turn's time: it stamps new events, sets the fire time of
	// new timers and is what Context.Now returns for the first time.
	Now time.Time
	// History is the execution's persisted history. A live execution (one
	// that ran the previous turn) checks that it matches what it holds.
	History []history.Event
	// Started is the OrchestrationStarted event of a new execution, when
	// History is empty. The caller builds it (it resolves the version).
	Started *history.Event
	// Messages are the turn's messages for this instance. Start and
	// continue-as-new messages are the caller's business and are ignored.
	Messages []history.WorkItem
}

// ChildRef names a sub-orchestration by its scheduling event.
type ChildRef struct {
	EventID    int64
	InstanceID string
}

// Arrival is an external event that arrived but was not consumed.
type Arrival struct {
	Name string
	Data json.RawMessage
}

// TurnOutput is the outcome of one turn.
type TurnOutput struct {
	// Delta is the history to append, in order. It is empty for a turn that
	// changes nothing (all messages were stale or duplicates).
	Delta  []history.Event
	Result Result
	// Output is the return value (Completed).
	Output json.RawMessage
	// Error is the failure (Failed, Canceled).
	Error *history.ErrorDetails
	// ContinueAsNew holds the next execution's input and version (ContinuedAsNew).
	ContinueAsNew *ContinueAsNewError
	// CanceledActivities are activity IDs still in flight when the
	// execution ended; their breadcrumbs are in Delta.
	CanceledActivities []int64
	// CanceledChildren are sub-orchestrations still running when the
	// execution ended; each must receive a cancel request.
	CanceledChildren []ChildRef
	// Carried are external events that arrived and were never consumed, in
	// arrival order, to hand to the next execution (ContinuedAsNew).
	Carried []Arrival
	// Values are the instance's values the next execution starts with
	// (ContinuedAsNew): its OrchestrationStarted.Values.
	Values map[string]json.RawMessage
	// Nondeterminism, when set, means the turn must not be committed.
	Nondeterminism *NondeterminismError
	// Limit, when set, means the execution went over one of its Limits:
	// the turn must not be committed; the caller fails the execution
	// instead (FailUnrun). The code was stopped at the first action over
	// the limit.
	Limit *LimitError
}

// ErrStale is returned by Turn when a live execution is handed a history
// that is not the one it holds; the caller must replay from scratch.
var ErrStale = errors.New("replay: cached execution does not match stored history")

type taskKind int

const (
	kindActivity taskKind = iota + 1
	kindTimer
	kindEvent
	kindSubOrchestration
	kindComposite
	kindCancelNotice
	kindDetached
)

func (k taskKind) String() string {
	switch k {
	case kindActivity:
		return "activity"
	case kindTimer:
		return "timer"
	case kindEvent:
		return "external event"
	case kindSubOrchestration:
		return "sub-orchestration"
	case kindDetached:
		return "detached start"
	}
	return "task"
}

// Task is a durable operation the orchestration started. It completes when
// its completion event is applied.
type Task struct {
	x       *Execution
	kind    taskKind
	eventID int64
	name    string
	childID string

	done bool
	seq  int // index in history of the event that completed it
	// open marks an activity task counted in Execution.openActivities.
	open bool
	// idle marks an event wait that lost a Select: arrivals skip it until
	// the code awaits or selects it again.
	idle bool
	// Output and Failure are set when done.
	output  json.RawMessage
	failure *history.ErrorDetails

	onDone func()
	// onCancel, when set, cancels what a composite task runs.
	onCancel func(seq int, fail *history.ErrorDetails)
}

// EventID is the task's scheduling event (0 for composites).
func (t *Task) EventID() int64 { return t.eventID }

// Name is the activity, event or sub-orchestration name.
func (t *Task) Name() string { return t.name }

// ChildInstanceID is the instance ID of a sub-orchestration task.
func (t *Task) ChildInstanceID() string { return t.childID }

// IsActivity and friends tell the public package how to shape failures.
func (t *Task) IsActivity() bool { return t.kind == kindActivity || t.kind == kindComposite }

// IsSubOrchestration reports whether t is a sub-orchestration.
func (t *Task) IsSubOrchestration() bool { return t.kind == kindSubOrchestration }

// IsDetached reports whether t is a detached start.
func (t *Task) IsDetached() bool { return t.kind == kindDetached }

// Done reports whether the task has completed.
func (t *Task) Done() bool { return t.done }

// Result returns the output and failure of a completed task.
func (t *Task) Result() (json.RawMessage, *history.ErrorDetails) { return t.output, t.failure }

func (t *Task) complete(seq int, out json.RawMessage, fail *history.ErrorDetails) {
	if t.done {
		return
	}
	t.done, t.seq, t.output, t.failure = true, seq, out, fail
	if t.open {
		t.open = false
		t.x.openActivities--
	}
	if t.onDone != nil {
		t.onDone()
	}
}

type arrival struct {
	name     string
	data     json.RawMessage
	seq      int // its position in history
	consumed bool
}

// unwind is panicked inside the coroutine to stop user code.
type unwind struct{}

// Execution is one execution of an instance: its history, its code as a
// suspended coroutine, and the bookkeeping that ties them together. It can
// be kept between turns (the instance cache) or rebuilt by replaying.
type Execution struct {
	cfg Config
	ctx *Context

	hist  []history.Event
	index map[int64]int   // event ID -> position in hist
	tasks map[int64]*Task // scheduling event ID -> task
	// openActivities counts the activity tasks of tasks not done.
	openActivities int
	completed      map[int64]bool // scheduling event IDs with a completion in hist
	nextID         int64

	pos       int // next event the loop applies
	matchPos  int // next history position to match emitted actions against
	persisted int // events that were stored before this turn
	deltaFrom int // first event of this turn's delta
	mustPoll  bool
	replaying bool
	now       time.Time

	arrivals []*arrival
	waiters  []*Task // open external-event subscriptions, oldest first

	cancelReq *history.Event
	nondet    *NondeterminismError
	// canceling is set once the loop applies a graceful cancel request (at
	// history position cancelSeq); graceOver once its deadline fired.
	canceling, graceOver bool
	cancelSeq            int
	cancelNotices        []*Task // CancelRequested tasks still waiting
	composites           []*Task // calls with retries or timeouts, in creation order

	// crumbs are the schedules with a cancel breadcrumb in history.
	crumbs map[int64]bool
	// cancelActs and cancelKids are what the code canceled this turn.
	cancelActs []int64
	cancelKids []ChildRef
	// patchSeen holds the patches recorded in history; patches memoizes
	// each patch's answer for this execution.
	patchSeen map[string]bool
	patches   map[string]bool

	// values are the instance's values (ValueSet) at the code's position:
	// the previous execution's (OrchestrationStarted.Values), then each
	// SetValue the code made, as history records it.
	values map[string]json.RawMessage

	bytes   int64       // EventSize of hist
	actions int         // new events the code recorded this turn
	limit   *LimitError // set when the execution went over cfg.Limits

	started, finished bool
	inCoroutine       bool
	yield             func(struct{}) bool
	next              func() (struct{}, bool)
	stop              func()
	output            json.RawMessage
	err               error
	panicked          *history.ErrorDetails
}

// New returns an execution that has run nothing yet.
func New(cfg Config) *Execution {
	x := &Execution{
		cfg:       cfg,
		index:     map[int64]int{},
		tasks:     map[int64]*Task{},
		completed: map[int64]bool{},
		crumbs:    map[int64]bool{},
		patchSeen: map[string]bool{},
		patches:   map[string]bool{},
		nextID:    1,
		mustPoll:  true,
	}
	x.ctx = &Context{x: x}
	if cfg.Logger != nil {
		x.ctx.logger = slog.New(&replayHandler{h: cfg.Logger.Handler(), x: x})
	} else {
		x.ctx.logger = slog.New(slog.DiscardHandler)
	}
	return x
}

// InstanceID and ExecutionID identify the execution.
func (x *Execution) InstanceID() string { return x.cfg.InstanceID }

// ExecutionID is the execution's number, from 1.
func (x *Execution) ExecutionID() int64 { return x.cfg.ExecutionID }

// Len is the number of events the execution holds.
func (x *Execution) Len() int { return len(x.hist) }

// LastEventID is the ID of the last event the execution holds (0: none).
func (x *Execution) LastEventID() int64 {
	if len(x.hist) == 0 {
		return 0
	}
	return x.hist[len(x.hist)-1].EventID
}

// History returns the events the execution holds. The caller must not
// modify them; the slice is valid until the next Turn.
func (x *Execution) History() []history.Event { return slices.Clip(x.hist) }

// Finished reports whether the code has returned (or been stopped).
func (x *Execution) Finished() bool { return x.finished }

// OpenActivities counts the activities the execution scheduled whose
// result (or cancellation) it has not applied yet.
func (x *Execution) OpenActivities() int { return x.openActivities }

// Close stops the coroutine of an unfinished execution. It is safe to call
// more than once.
func (x *Execution) Close() {
	if x.stop != nil {
		x.stop()
		x.stop = nil
	}
}

// Turn applies one turn's messages and runs the code as far as it can go.
func (x *Execution) Turn(in TurnInput) (*TurnOutput, error) {
	if x.started || len(x.hist) > 0 {
		if len(in.History) != len(x.hist) || (len(x.hist) > 0 && in.History[len(in.History)-1].EventID != x.hist[len(x.hist)-1].EventID) {
			return nil, ErrStale
		}
	} else {
		x.hist = make([]history.Event, 0, len(in.History)+len(in.Messages)+4)
		for _, ev := range in.History {
			x.record(ev)
		}
	}
	x.now = in.Now
	x.persisted = len(x.hist)
	x.deltaFrom = len(x.hist)
	x.actions = 0
	if terminal(x.hist) {
		return &TurnOutput{Result: resultOf(x.hist)}, nil
	}
	if in.Started != nil {
		if len(x.hist) != 0 {
			return nil, fmt.Errorf("replay: OrchestrationStarted given for execution %d, which already has history", x.cfg.ExecutionID)
		}
		ev := *in.Started
		ev.EventID = x.nextID
		if ev.TimestampMs == 0 {
			ev.TimestampMs = in.Now.UnixMilli()
		}
		x.record(ev)
		x.checkPayload(&x.hist[0])
	}
	if len(x.hist) == 0 || x.hist[0].Kind != history.OrchestrationStarted {
		return nil, fmt.Errorf("replay: execution %d of %s: corrupt history: it does not begin with OrchestrationStarted", x.cfg.ExecutionID, x.cfg.InstanceID)
	}
	x.prepare(in.Messages)
	x.checkHistory()
	if x.nondet == nil && !x.cancelDue() && x.limit == nil {
		x.run()
	}
	return x.finalize(), nil
}

// record appends an event that is already part of history (persisted, or
// built by the engine) and updates the indexes.
func (x *Execution) record(ev history.Event) {
	x.index[ev.EventID] = len(x.hist)
	x.hist = append(x.hist, ev)
	x.bytes += EventSize(&ev)
	if ev.EventID >= x.nextID {
		x.nextID = ev.EventID + 1
	}
	switch ev.Kind {
	case history.ActivityCompleted, history.ActivityFailed, history.TimerFired,
		history.SubOrchestrationCompleted, history.SubOrchestrationFailed:
		x.completed[ev.SourceEventID] = true
		if ev.Kind == history.TimerFired && x.cancelReq != nil && ev.SourceEventID == x.cancelReq.EventID {
			x.graceOver = true
		}
	case history.OrchestrationCancelRequested:
		c := ev
		x.cancelReq = &c
	case history.ActivityCancelRequested, history.SubOrchestrationCancelRequested,
		history.TimerCanceled, history.ExternalSubscribedCanceled:
		x.crumbs[ev.SourceEventID] = true
	case history.PatchRecorded:
		x.patchSeen[ev.Name] = true
	}
}

// appendNew builds a new event with the next ID.
func (x *Execution) appendNew(ev history.Event) *history.Event {
	ev.EventID = x.nextID
	ev.TimestampMs = x.now.UnixMilli()
	x.record(ev)
	return &x.hist[len(x.hist)-1]
}

// prepare turns messages into history events: completions of this
// execution's schedules, external events and cancel requests. Stale
// completions (another execution) and duplicates are dropped.
func (x *Execution) prepare(msgs []history.WorkItem) {
	// A detached start's ack sends the starter a confirmation and, when the
	// ID is taken, the store adds a failure; both commit together, so they
	// arrive in one batch, in either order, and the failure wins.
	var startFailed map[int64]bool
	for i := range msgs {
		if m := &msgs[i]; m.Kind == history.WorkSubOrchFailed && m.ExecutionID == x.cfg.ExecutionID {
			if at, ok := x.index[m.ID]; ok && x.hist[at].Kind == history.DetachedOrchestrationScheduled {
				if startFailed == nil {
					startFailed = map[int64]bool{}
				}
				startFailed[m.ID] = true
			}
		}
	}
	for i := range msgs {
		m := &msgs[i]
		var kind, schedKind history.EventKind
		if m.Kind == history.WorkSubOrchCompleted && startFailed[m.ID] && m.ExecutionID == x.cfg.ExecutionID {
			continue // the start's confirmation, overruled by its failure
		}
		switch m.Kind {
		case history.WorkActivityCompleted:
			kind, schedKind = history.ActivityCompleted, history.ActivityScheduled
		case history.WorkActivityFailed:
			kind, schedKind = history.ActivityFailed, history.ActivityScheduled
		case history.WorkTimerFired:
			kind, schedKind = history.TimerFired, history.TimerCreated
		case history.WorkSubOrchCompleted:
			kind, schedKind = history.SubOrchestrationCompleted, history.SubOrchestrationScheduled
		case history.WorkSubOrchFailed:
			kind, schedKind = history.SubOrchestrationFailed, history.SubOrchestrationScheduled
		case history.WorkExternalRaised:
			x.checkPayload(x.appendNew(history.Event{Kind: history.ExternalEvent, Name: m.Name, Data: m.Data}))
			continue
		case history.WorkCancelInstance:
			if x.cancelReq == nil {
				ev := history.Event{Kind: history.OrchestrationCancelRequested, Reason: m.Reason, Error: m.Error}
				if x.cfg.CancelGrace > 0 {
					ev.FireAtMs = x.now.Add(x.cfg.CancelGrace).UnixMilli()
				}
				x.appendNew(ev)
			}
			continue
		default:
			continue // starts and continue-as-new belong to the caller
		}
		if m.ExecutionID != x.cfg.ExecutionID || x.completed[m.ID] {
			continue // stale (an older execution) or already applied
		}
		at, ok := x.index[m.ID]
		if ok && kind == history.TimerFired && graceful(&x.hist[at]) && x.hist[at].Kind == history.OrchestrationCancelRequested {
			schedKind = history.OrchestrationCancelRequested // the grace deadline
		}
		if ok && schedKind == history.SubOrchestrationScheduled && x.hist[at].Kind == history.DetachedOrchestrationScheduled {
			schedKind = history.DetachedOrchestrationScheduled // the outcome of a detached start
		}
		if !ok || x.hist[at].Kind != schedKind {
			got := "nothing"
			if ok {
				got = string(x.hist[at].Kind)
			}
			x.nondet = &NondeterminismError{
				InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: m.ID,
				Expected: fmt.Sprintf("%s for a %s completion", schedKind, kind),
				Got:      fmt.Sprintf("found %s there (a %s message names a schedule that does not exist)", got, m.Kind),
			}
			return
		}
		ev := history.Event{Kind: kind, SourceEventID: m.ID, Output: m.Output, Error: m.Error}
		if kind == history.ActivityFailed {
			ev.Data = m.Data // heartbeat details, for a retry
		}
		if kind == history.TimerFired {
			ev.FireAtMs = m.FireAtMs
		}
		x.checkPayload(x.appendNew(ev))
	}
}

// run is the interleaved loop: apply history one event at a time and let
// the code run after every event that completed something, so the code
// observes completions in history order, on every replay.
func (x *Execution) run() {
	if !x.started {
		x.start()
		x.mustPoll = false
		x.resume(x.persisted > 0)
	}
	for x.pos < len(x.hist) && x.nondet == nil && x.limit == nil && !x.finished {
		if x.mustPoll {
			x.mustPoll = false
			x.resume(x.pos-1 < x.persisted)
			if x.finished || x.nondet != nil || x.limit != nil {
				break
			}
		}
		x.apply(x.pos)
		x.pos++
	}
	if x.mustPoll && x.nondet == nil && x.limit == nil && !x.finished {
		x.mustPoll = false
		x.resume(x.pos-1 < x.persisted)
	}
	if x.nondet == nil && x.limit == nil {
		x.checkUnmatched()
	}
}

// checkUnmatched reports history schedules the code never reproduced. Only
// persisted events can be unmatched: everything new this turn was emitted by
// the code itself.
func (x *Execution) checkUnmatched() {
	if !x.finished {
		return // the loop itself flags schedules it passes unmatched
	}
	for i := x.matchPos; i < x.persisted; i++ {
		if isSchedule(x.hist[i].Kind) {
			x.nondet = &NondeterminismError{
				InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: x.hist[i].EventID,
				Expected: describe(&x.hist[i]), Got: "did not schedule it",
			}
			return
		}
	}
}

// apply applies history event i.
func (x *Execution) apply(i int) {
	ev := &x.hist[i]
	switch ev.Kind {
	case history.OrchestrationCancelRequested:
		if graceful(ev) {
			x.applyCancel(i)
		}
	case history.ActivityCompleted, history.ActivityFailed, history.TimerFired,
		history.SubOrchestrationCompleted, history.SubOrchestrationFailed:
		if ev.Kind == history.TimerFired && x.cancelReq != nil && ev.SourceEventID == x.cancelReq.EventID {
			return // the grace deadline: finalize ends the execution
		}
		t := x.tasks[ev.SourceEventID]
		if t == nil {
			// The schedule precedes its completion, so reaching here means
			// the code did not schedule it.
			at := x.index[ev.SourceEventID]
			x.nondet = &NondeterminismError{
				InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: ev.SourceEventID,
				Expected: describe(&x.hist[at]), Got: "did not schedule it",
			}
			return
		}
		if want := completionKind(t.kind); ev.Kind != want && !(want == history.ActivityCompleted && ev.Kind == history.ActivityFailed) &&
			!(want == history.SubOrchestrationCompleted && ev.Kind == history.SubOrchestrationFailed) {
			x.nondet = &NondeterminismError{
				InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: ev.EventID,
				Expected: fmt.Sprintf("a completion of the %s scheduled at event %d", t.kind, ev.SourceEventID),
				Got:      fmt.Sprintf("found %s for it", ev.Kind),
			}
			return
		}
		t.complete(i, ev.Output, ev.Error)
		x.mustPoll = true
	case history.ExternalEvent:
		a := &arrival{name: ev.Name, data: ev.Data, seq: i}
		x.arrivals = append(x.arrivals, a)
		if x.deliver(a, i) {
			x.mustPoll = true
		}
	default:
		if isSchedule(ev.Kind) && i >= x.matchPos {
			x.nondet = &NondeterminismError{
				InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: ev.EventID,
				Expected: describe(ev), Got: "did not schedule it",
			}
		}
	}
}

// deliver hands an arrival to the oldest open subscription for its name.
func (x *Execution) deliver(a *arrival, seq int) bool {
	for j, w := range x.waiters {
		if w.name == a.name && !w.idle {
			x.waiters = append(x.waiters[:j:j], x.waiters[j+1:]...)
			a.consumed = true
			w.complete(seq, a.data, nil)
			return true
		}
	}
	return false
}

func (x *Execution) start() {
	x.started = true
	x.values = maps.Clone(x.hist[0].Values)
	if x.values == nil {
		x.values = map[string]json.RawMessage{}
	}
	input := x.hist[0].Input
	seq := func(yield func(struct{}) bool) {
		x.yield = yield
		defer func() {
			x.finished = true
			if r := recover(); r != nil {
				if _, ok := r.(unwind); ok {
					return
				}
				x.panicked = &history.ErrorDetails{
					Kind:    history.ErrorApplication,
					Message: fmt.Sprintf("orchestration panicked: %v", r),
					Type:    "panic",
					Details: string(debug.Stack()),
				}
			}
		}()
		x.output, x.err = x.cfg.Func(x.ctx, input)
	}
	x.next, x.stop = iter.Pull(seq)
}

// resume runs the code until it blocks or returns.
func (x *Execution) resume(replaying bool) {
	if x.finished {
		return
	}
	x.replaying = replaying
	x.inCoroutine = true
	x.next()
	x.inCoroutine = false
	x.replaying = false
}

// block suspends the code until the engine resumes it.
func (x *Execution) block() {
	if !x.inCoroutine {
		panic("duroxide: orchestration code must not await from another goroutine")
	}
	x.inCoroutine = false
	ok := x.yield(struct{}{})
	x.inCoroutine = true
	if !ok {
		panic(unwind{})
	}
}

// abortIfBroken stops the code once nondeterminism has been found or a
// limit exceeded.
func (x *Execution) abortIfBroken() {
	if (x.nondet != nil || x.limit != nil) && x.inCoroutine {
		panic(unwind{})
	}
}

// emit records an action of the code. During replay it must match the next
// schedule in history; otherwise it becomes a new event. It returns the
// event (from history, or new).
func (x *Execution) emit(want history.Event) *history.Event { return x.emitWith(want, nil) }

// emitWith is emit with a hook that completes a new event once its ID is known.
func (x *Execution) emitWith(want history.Event, onNew func(*history.Event)) *history.Event {
	for x.matchPos < len(x.hist) && !isSchedule(x.hist[x.matchPos].Kind) {
		x.matchPos++
	}
	if x.matchPos < len(x.hist) {
		ev := &x.hist[x.matchPos]
		x.matchPos++
		if !matches(ev, &want) {
			if x.nondet == nil {
				x.nondet = &NondeterminismError{
					InstanceID: x.cfg.InstanceID, ExecutionID: x.cfg.ExecutionID, EventID: ev.EventID,
					Expected: describe(ev), Got: "scheduled " + describe(&want),
				}
			}
			return &want
		}
		return ev
	}
	want.EventID = x.nextID
	if onNew != nil {
		onNew(&want)
	}
	ev := x.appendNew(want)
	x.matchPos = len(x.hist)
	x.checkAction(ev)
	return ev
}

// completionKind is the successful completion event of a task kind.
func completionKind(k taskKind) history.EventKind {
	switch k {
	case kindTimer:
		return history.TimerFired
	case kindSubOrchestration, kindDetached:
		return history.SubOrchestrationCompleted
	}
	return history.ActivityCompleted
}

func isSchedule(k history.EventKind) bool {
	switch k {
	case history.ActivityScheduled, history.TimerCreated, history.ExternalSubscribed,
		history.SubOrchestrationScheduled, history.CustomStatusUpdated,
		history.NowRecorded, history.GUIDRecorded, history.DetachedOrchestrationScheduled,
		history.ValueSet:
		return true
	}
	return false
}

// matches reports whether an action reproduces a recorded schedule. Timers
// match by kind (their duration may change), custom status and recorded
// values by kind (their values come from history).
func matches(rec, act *history.Event) bool {
	if rec.Kind != act.Kind {
		return false
	}
	switch rec.Kind {
	case history.ActivityScheduled:
		return rec.Name == act.Name && rec.SessionID == act.SessionID && jsonEqual(rec.Input, act.Input)
	case history.ExternalSubscribed, history.ValueSet:
		return rec.Name == act.Name
	case history.SubOrchestrationScheduled, history.DetachedOrchestrationScheduled:
		if act.ChildInstanceID != "" && rec.ChildInstanceID != act.ChildInstanceID {
			return false
		}
		return rec.Name == act.Name && jsonEqual(rec.Input, act.Input)
	}
	return true
}

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func describe(ev *history.Event) string {
	switch ev.Kind {
	case history.ActivityScheduled:
		s := fmt.Sprintf("activity %q with input %s", ev.Name, orNone(ev.Input))
		if ev.SessionID != "" {
			s += fmt.Sprintf(" on session %q", ev.SessionID)
		}
		return s
	case history.TimerCreated:
		return "a timer"
	case history.ExternalSubscribed:
		return fmt.Sprintf("a wait for event %q", ev.Name)
	case history.SubOrchestrationScheduled:
		if ev.ChildInstanceID == "" {
			return fmt.Sprintf("sub-orchestration %q with input %s", ev.Name, orNone(ev.Input))
		}
		return fmt.Sprintf("sub-orchestration %q (%s) with input %s", ev.Name, ev.ChildInstanceID, orNone(ev.Input))
	case history.DetachedOrchestrationScheduled:
		return fmt.Sprintf("detached start of %q (%s) with input %s", ev.Name, ev.ChildInstanceID, orNone(ev.Input))
	case history.CustomStatusUpdated:
		return "a custom status update"
	case history.ValueSet:
		return fmt.Sprintf("a change of value %q", ev.Name)
	case history.NowRecorded:
		return "a call to Now"
	case history.GUIDRecorded:
		return "a call to NewGUID"
	case history.PatchRecorded:
		return fmt.Sprintf("patch %q", ev.Name)
	}
	return string(ev.Kind)
}

func orNone(b json.RawMessage) string {
	if len(b) == 0 {
		return "(none)"
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func terminal(h []history.Event) bool {
	return len(h) > 0 && h[len(h)-1].Kind.IsTerminal()
}

func resultOf(h []history.Event) Result {
	last := h[len(h)-1]
	switch last.Kind {
	case history.OrchestrationCompleted:
		return Completed
	case history.OrchestrationContinuedAsNew:
		return ContinuedAsNew
	case history.OrchestrationFailed:
		if last.Error != nil && last.Error.Kind == history.ErrorCanceled {
			return Canceled
		}
		return Failed
	}
	return Running
}

// finalize decides the turn's result and appends breadcrumbs and the
// terminal event, terminal event last.
func (x *Execution) finalize() *TurnOutput {
	out := &TurnOutput{Result: Running}
	out.CanceledActivities, out.CanceledChildren = x.cancelActs, x.cancelKids
	x.cancelActs, x.cancelKids = nil, nil
	if x.nondet != nil {
		out.CanceledActivities, out.CanceledChildren = nil, nil
		out.Nondeterminism = x.nondet
		x.Close()
		return out
	}
	x.checkEnding()
	if x.limit != nil && x.cancelReq == nil { // a cancel wins: it ends the execution anyway
		out.Limit = x.limit
		x.Close()
		return out
	}
	var term history.Event
	switch {
	case x.cancelReq != nil && (x.cancelDue() || x.finished):
		// A cancel request ends the execution once its grace is over or the
		// code returns, whatever it returned.
		out.Result = Canceled
		out.Error = x.cancelFailure()
		if x.cancelReq.Error != nil {
			out.Result, out.Error = Failed, x.cancelReq.Error
		}
		term = history.Event{Kind: history.OrchestrationFailed, Error: out.Error}
	case x.cancelReq != nil:
		// In the grace period: the code is still cleaning up.
	case x.finished && x.panicked != nil:
		out.Result = Failed
		out.Error = x.panicked
		term = history.Event{Kind: history.OrchestrationFailed, Error: out.Error}
	case x.finished && x.err != nil:
		var can *ContinueAsNewError
		if errors.As(x.err, &can) {
			out.Result = ContinuedAsNew
			out.ContinueAsNew = can
			if len(x.values) > 0 {
				out.Values = maps.Clone(x.values)
			}
			term = history.Event{Kind: history.OrchestrationContinuedAsNew, Input: can.Input, Version: can.Version}
			// Events of this turn that the loop did not reach before the
			// code returned are unconsumed arrivals too.
			for i := x.pos; i < len(x.hist); i++ {
				if ev := &x.hist[i]; ev.Kind == history.ExternalEvent {
					x.arrivals = append(x.arrivals, &arrival{name: ev.Name, data: ev.Data, seq: i})
				}
			}
			x.pos = len(x.hist)
			for _, a := range x.arrivals {
				if !a.consumed {
					out.Carried = append(out.Carried, Arrival{Name: a.name, Data: a.data})
				}
			}
			break
		}
		out.Result = Failed
		out.Error = &history.ErrorDetails{Kind: history.ErrorApplication, Message: x.err.Error(), Type: fmt.Sprintf("%T", x.err)}
		var de interface{ ErrorDetails() *history.ErrorDetails }
		if errors.As(x.err, &de) && de.ErrorDetails() != nil {
			out.Error = de.ErrorDetails()
		}
		term = history.Event{Kind: history.OrchestrationFailed, Error: out.Error}
	case x.finished:
		out.Result = Completed
		out.Output = x.output
		term = history.Event{Kind: history.OrchestrationCompleted, Output: x.output}
	}
	if out.Result != Running {
		reason := "orchestration " + out.Result.String()
		acts, kids := x.cancelOutstanding(reason)
		out.CanceledActivities = append(out.CanceledActivities, acts...)
		out.CanceledChildren = append(out.CanceledChildren, kids...)
		x.appendNew(term)
		x.Close()
	}
	out.Delta = x.hist[x.deltaFrom:]
	x.persisted = len(x.hist)
	return out
}

// cancelOutstanding appends breadcrumbs for activities and children that
// have not completed and returns them.
func (x *Execution) cancelOutstanding(reason string) (acts []int64, kids []ChildRef) {
	evs, acts, kids := CancelBreadcrumbs(x.hist, x.nextID, x.now.UnixMilli(), reason)
	for _, ev := range evs {
		x.record(ev)
	}
	return acts, kids
}

// CancelBreadcrumbs returns, for the activities and sub-orchestrations of
// hist that have neither completed nor been canceled, the cancel events to
// append (IDs from nextID, stamped nowMs) and their IDs. The engine uses it
// when an execution ends; FailUnrun when the runtime fails an execution
// without running its code.
func CancelBreadcrumbs(hist []history.Event, nextID, nowMs int64, reason string) (evs []history.Event, acts []int64, kids []ChildRef) {
	closed := map[int64]bool{}
	for i := range hist {
		switch ev := &hist[i]; ev.Kind {
		case history.ActivityCompleted, history.ActivityFailed, history.ActivityCancelRequested,
			history.SubOrchestrationCompleted, history.SubOrchestrationFailed, history.SubOrchestrationCancelRequested:
			closed[ev.SourceEventID] = true
		}
	}
	for i := range hist {
		ev := &hist[i]
		if closed[ev.EventID] {
			continue
		}
		crumb := history.Event{EventID: nextID, TimestampMs: nowMs, SourceEventID: ev.EventID, Reason: reason}
		switch ev.Kind {
		case history.ActivityScheduled:
			crumb.Kind = history.ActivityCancelRequested
			acts = append(acts, ev.EventID)
		case history.SubOrchestrationScheduled:
			crumb.Kind = history.SubOrchestrationCancelRequested
			kids = append(kids, ChildRef{EventID: ev.EventID, InstanceID: ev.ChildInstanceID})
		default:
			continue
		}
		evs = append(evs, crumb)
		nextID++
	}
	return evs, acts, kids
}
