// Package turn decides what one orchestration turn does: given an instance
// fetched from the store with its messages, it works out which execution
// the turn belongs to and which code runs it, runs that code through the
// replay engine, and says what to commit (an ack: history, metadata and the
// messages the turn sends) or that the messages go back to the queue for a
// later retry (an abandon).
//
// Decide is a pure function of its Input: it does no store I/O, starts no
// goroutines of its own (the replay engine runs the orchestration code as a
// coroutine) and reads no clock (Input.Now is the turn's time). The caller,
// internal/dispatch, does the scheduling: locks, the commit, the cache of
// live executions, wake-ups and logging.
//
// Invariants:
//   - A Decision has exactly one of Ack and Abandon.
//   - Decide owns Input.Cached: it either returns it (as Decision.Exec) or
//     closes it. Decision.Exec is set only when the execution is still
//     Running after the turn, to be cached once the ack commits; the caller
//     closes it if the ack does not commit.
//   - Every history event comes from internal/replay: the engine, or its
//     builders for starts and endings decided without running the code.
//   - An ack names an execution >= 1; an ack that only consumes messages
//     (unknown instance, late messages for a finished execution) changes
//     nothing else.
package turn

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// Registry resolves orchestration names to code.
type Registry interface {
	// Orchestration returns the function of name at version ("" = the
	// default for new instances) and the resolved version.
	Orchestration(name, version string) (replay.Func, string, bool)
}

// Policy is the runtime's configuration that shapes decisions, and what the
// caller remembers of the instance between turns.
type Policy struct {
	// MaxAttempts bounds deliveries: a turn whose messages were delivered
	// more than MaxAttempts times fails the execution with kind "poison";
	// an orchestration still unregistered at delivery MaxAttempts fails
	// with kind "configuration" (see Unregistered).
	MaxAttempts int
	// FailOnNondeterminism fails a nondeterministic execution instead of
	// parking it.
	FailOnNondeterminism bool
	// Backoff is the delay before retry n (n >= 1).
	Backoff func(n int) time.Duration
	// Parks is how many turns in a row parked this instance before this one.
	Parks int
	// Logger is the base of the orchestration code's logger (nil: silent).
	Logger *slog.Logger
	// Limits bounds what an execution may record; an execution that goes
	// over one fails with kind "configuration" and code
	// history.CodeLimitExceeded, without committing what the turn recorded.
	Limits replay.Limits
	// CancelGrace is the grace period a new cancel request gives the code
	// (see replay.Config.CancelGrace; zero or negative: none).
	CancelGrace time.Duration
	// Unserved, when set, is why the instance was fetched for failing: no
	// live runtime registers its orchestration (RuntimeOptions.
	// UnservedTimeout). If the orchestration is not registered here
	// either, the execution fails at once with kind "configuration" and
	// this message; if it is, the turn runs as usual.
	Unserved string
}

// Input is everything Decide looks at.
type Input struct {
	// Item is the fetched instance; its History is the current execution's
	// full history.
	Item *provider.OrchestrationItem
	// Cached is the live execution kept from the instance's previous turn,
	// or nil. Decide takes ownership of it.
	Cached   *replay.Execution
	Registry Registry
	Policy   Policy
	// Now is the turn's time.
	Now time.Time
}

// Decision is what a turn does.
type Decision struct {
	// Ack is to be committed (nil when abandoning).
	Ack *provider.TurnAck
	// Abandon gives the messages back to the queue (nil when acking).
	Abandon *provider.AbandonOptions
	// Parked reports an abandon that parks a nondeterministic instance: the
	// caller counts it towards Policy.Parks of the next turn, until a turn
	// commits.
	Parked bool
	// Exec is the execution to cache after Ack commits; set only while it
	// is still running.
	Exec *replay.Execution
	// Result is the execution's state after the turn (Running when the
	// turn only consumed messages or abandoned).
	Result replay.Result
	// CancelLocal lists activities the turn canceled; the caller cancels
	// those that run in its process once Ack commits.
	CancelLocal []provider.ActivityRef
	// Log, when set, is what the caller should log about the turn. Its
	// attributes do not include the instance ID.
	Log *Log
}

// Log is a log record for the caller to write.
type Log struct {
	Level slog.Level
	Msg   string
	Attrs []slog.Attr
}

// Unregistered reports whether a name that is not registered at delivery
// attempt (from 1) fails for good, with kind "configuration", rather than
// waiting with backoff for a runtime that has it: from attempt maxAttempts
// on, for orchestrations and activities alike. A name is thus looked up
// maxAttempts times, on maxAttempts deliveries, before it fails.
func Unregistered(attempt, maxAttempts int) bool {
	return attempt >= maxAttempts
}

// ChildExistsMessage is the message of the failure a parent sees when a
// sub-orchestration's explicit instance ID is taken; code recognizes that
// failure by its code, history.CodeInstanceExists.
const ChildExistsMessage = "instance already exists"

// Decide works out what the turn of in.Item does.
func Decide(in Input) Decision {
	d := decide(in)
	if in.Cached != nil && d.Exec != in.Cached {
		in.Cached.Close()
	}
	return d
}

func decide(in Input) Decision {
	it, pol := in.Item, in.Policy
	// consume acks the turn's messages and changes nothing else. Acks name
	// an execution (>= 1): the current one, or 1 for an instance that has
	// no row, whose ack without metadata creates nothing.
	consume := Decision{Ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}}
	inst := it.Instance
	if inst == nil {
		consume.Log = &Log{Level: slog.LevelInfo, Msg: "dropping messages for an unknown instance",
			Attrs: []slog.Attr{slog.Int(logkey.Messages, len(it.Messages))}}
		return consume
	}
	if inst.CurrentExecutionID > 0 {
		consume.Ack.ExecutionID = inst.CurrentExecutionID
	}
	if it.HistoryError != nil {
		return corrupt(it, pol)
	}

	// Which execution the turn belongs to, and the message that starts it
	// (when it has no history yet).
	hist := it.History
	execID := inst.CurrentExecutionID
	var start *history.WorkItem
	var deadlineMs int64 // the instance deadline, carried over ContinueAsNew
	if len(hist) > 0 {
		deadlineMs = hist[0].FireAtMs
	}
	switch {
	case len(hist) == 0 && inst.Status.IsTerminal():
		return consume // canceled before its delayed start: drop the start
	case len(hist) == 0:
		start = findMessage(it.Messages, func(m *history.WorkItem) bool { return m.Kind == history.WorkStartOrchestration })
		if start != nil {
			execID = max(start.ExecutionID, 1)
		}
	case hist[len(hist)-1].Kind == history.OrchestrationContinuedAsNew:
		start = findMessage(it.Messages, func(m *history.WorkItem) bool {
			return m.Kind == history.WorkContinueAsNew && m.ExecutionID == execID+1
		})
		if start == nil {
			return consume // late messages for a finished execution
		}
		execID, hist = start.ExecutionID, nil
	case hist[len(hist)-1].Kind.IsTerminal():
		return consume // late messages for a finished instance are dropped
	}
	if len(hist) == 0 && start == nil {
		return beforeStart(it, inst, pol, in.Now)
	}

	// Which code runs it.
	var name, version string
	var parent *history.ParentRef
	var input []byte
	if start != nil {
		name, version, parent, input = start.Name, start.Version, start.Parent, start.Input
		if start.Kind == history.WorkContinueAsNew && version == "" {
			version = inst.OrchestrationVersion
		}
	} else {
		name, version, parent = hist[0].Name, hist[0].Version, hist[0].Parent
	}
	var started *history.Event
	fn, resolved, ok := in.Registry.Orchestration(name, version)
	if !ok {
		what := name
		if version != "" {
			what += " version " + version
		}
		msg := fmt.Sprintf("orchestration %s is not registered on this runtime", what)
		if pol.Unserved != "" {
			if len(hist) == 0 {
				started = replay.Started(name, version, input, parent)
			}
			return fail(it, execID, hist, started, parent, in.Now, &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: pol.Unserved})
		}
		if Unregistered(it.AttemptCount, pol.MaxAttempts) {
			if len(hist) == 0 {
				started = replay.Started(name, version, input, parent)
			}
			return fail(it, execID, hist, started, parent, in.Now, &history.ErrorDetails{Kind: history.ErrorConfiguration,
				Message: fmt.Sprintf("%s (looked up on %d deliveries)", msg, it.AttemptCount)})
		}
		return Decision{
			Abandon: &provider.AbandonOptions{Delay: pol.Backoff(it.AttemptCount),
				Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: msg}},
			Log: &Log{Level: slog.LevelWarn, Msg: "orchestration not registered; will retry",
				Attrs: []slog.Attr{slog.String(logkey.Orchestration, what), slog.Int(logkey.Attempt, it.AttemptCount)}},
		}
	}
	// armTimeout is the instance timeout to arm with this turn's ack.
	var armTimeout time.Duration
	if len(hist) == 0 {
		started = replay.Started(name, resolved, input, parent)
		if start != nil {
			started.TraceParent = start.TraceParent // informational: tracing links turns to it
			switch {
			case start.Kind == history.WorkStartOrchestration && start.TimeoutMs > 0:
				armTimeout = time.Duration(start.TimeoutMs) * time.Millisecond
				started.FireAtMs = in.Now.Add(armTimeout).UnixMilli()
			case start.Kind == history.WorkContinueAsNew:
				started.FireAtMs = deadlineMs
				started.Values = start.Values
			}
		}
	}
	if it.AttemptCount > pol.MaxAttempts {
		return fail(it, execID, hist, started, parent, in.Now, &history.ErrorDetails{Kind: history.ErrorPoison,
			Message: fmt.Sprintf("turn failed %d times (max attempts %d): the runtime crashed or lost its lock each time", it.AttemptCount-1, pol.MaxAttempts)})
	}

	// Run the code.
	x := in.Cached
	if x != nil && (started != nil || x.ExecutionID() != execID) {
		x.Close()
		x = nil
	}
	if x == nil {
		x = newExecution(it.InstanceID, execID, fn, pol)
	}
	turnIn := replay.TurnInput{Now: in.Now, History: hist, Started: started, Messages: it.Messages}
	out, err := x.Turn(turnIn)
	if errors.Is(err, replay.ErrStale) {
		x.Close()
		x = newExecution(it.InstanceID, execID, fn, pol)
		out, err = x.Turn(turnIn)
	}
	if err != nil {
		x.Close()
		return Decision{
			Abandon: &provider.AbandonOptions{Delay: time.Second,
				Error: &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: err.Error()}},
			Log: &Log{Level: slog.LevelError, Msg: "history cannot be replayed", Attrs: []slog.Attr{slog.Any(logkey.Error, err)}},
		}
	}
	if nd := out.Nondeterminism; nd != nil {
		x.Close()
		details := &history.ErrorDetails{Kind: history.ErrorNondeterminism, Message: nd.Error(),
			Divergence: &history.Divergence{EventID: nd.EventID, Expected: nd.Expected, Got: nd.Got}}
		if pol.FailOnNondeterminism {
			return fail(it, execID, hist, started, parent, in.Now, details)
		}
		return Decision{
			Abandon: &provider.AbandonOptions{Delay: pol.Backoff(pol.Parks + 1), IgnoreAttempt: true, Error: details},
			Parked:  true,
			Log: &Log{Level: slog.LevelError, Msg: "orchestration is nondeterministic; parked until a fixed deploy replays it",
				Attrs: []slog.Attr{slog.Any(logkey.Error, nd)}},
		}
	}
	if out.Limit != nil {
		// Nothing the turn recorded is committed: the execution ends
		// failed after its stored history, so a runaway orchestration
		// leaves two events in the store, not the actions it tried.
		x.Close()
		return fail(it, execID, hist, started, parent, in.Now, out.Limit.ErrorDetails())
	}
	d := Decision{Ack: buildAck(it.InstanceID, it.LockToken, execID, name, resolved, started, parent, out), Result: out.Result}
	if armTimeout > 0 && out.Result == replay.Running {
		d.Ack.OrchestratorItems = append(d.Ack.OrchestratorItems, timeoutMessage(it.InstanceID, started.FireAtMs, armTimeout))
	}
	if out.Result == replay.Running {
		d.Exec = x
	} else {
		x.Close()
	}
	for _, id := range out.CanceledActivities {
		d.CancelLocal = append(d.CancelLocal, provider.ActivityRef{InstanceID: it.InstanceID, ExecutionID: execID, ActivityID: id})
	}
	return d
}

func findMessage(msgs []history.WorkItem, match func(*history.WorkItem) bool) *history.WorkItem {
	for i := range msgs {
		if match(&msgs[i]) {
			return &msgs[i]
		}
	}
	return nil
}

// corrupt decides the turn of an instance whose stored history cannot be
// decoded: retry (a store glitch, or a fixed release may read it), then,
// past MaxAttempts, fail the instance.
func corrupt(it *provider.OrchestrationItem, pol Policy) Decision {
	msg := "stored history cannot be decoded: " + it.HistoryError.Error()
	if it.AttemptCount > pol.MaxAttempts {
		return Decision{
			Ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: it.Instance.CurrentExecutionID,
				Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed,
					Error: &history.ErrorDetails{Kind: history.ErrorPoison, Message: msg}}},
			Result: replay.Failed,
			Log: &Log{Level: slog.LevelError, Msg: "history cannot be read; failing the instance",
				Attrs: []slog.Attr{slog.Any(logkey.Error, it.HistoryError)}},
		}
	}
	return Decision{Abandon: &provider.AbandonOptions{Delay: time.Second,
		Error: &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: msg}}}
}

// beforeStart decides the turn of an instance whose first execution has no
// history and whose start message is not in the batch: a delayed start not
// yet due, with events or a cancel request that arrived ahead of it.
func beforeStart(it *provider.OrchestrationItem, inst *provider.InstanceMeta, pol Policy, now time.Time) Decision {
	if inst.Status.IsTerminal() {
		return Decision{Ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: max(inst.CurrentExecutionID, 1)}}
	}
	if m := findMessage(it.Messages, func(m *history.WorkItem) bool { return m.Kind == history.WorkCancelInstance }); m != nil {
		evs, details := replay.CancelUnstarted(inst.OrchestrationName, inst.OrchestrationVersion, m.Reason, now)
		return Decision{
			Ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: evs,
				Metadata: provider.ExecutionMetadata{OrchestrationName: inst.OrchestrationName, OrchestrationVersion: inst.OrchestrationVersion,
					Status: provider.StatusCanceled, Error: details}},
			Result: replay.Canceled,
		}
	}
	// Keep the messages, without counting attempts, until the start is
	// visible: until StartAt when the store says when that is, else with
	// backoff.
	delay := pol.Backoff(it.AttemptCount)
	if inst.StartAt.After(now) {
		delay = inst.StartAt.Sub(now)
	}
	return Decision{Abandon: &provider.AbandonOptions{Delay: delay, IgnoreAttempt: true, UntilStart: true}}
}

// fail ends the execution with a failure without running its code (poison,
// unregistered orchestration, nondeterminism with the fail policy). started
// is the execution's first event when it has no history yet.
func fail(it *provider.OrchestrationItem, execID int64, hist []history.Event, started *history.Event,
	parent *history.ParentRef, now time.Time, details *history.ErrorDetails) Decision {
	end := replay.FailUnrun(hist, started, now, details)
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: execID, History: end.Events}
	if started != nil {
		ack.Metadata.OrchestrationName, ack.Metadata.OrchestrationVersion, ack.Metadata.Input = started.Name, started.Version, started.Input
		if parent != nil {
			ack.Metadata.ParentInstanceID, ack.Metadata.ParentExecutionID = parent.InstanceID, parent.ExecutionID
		}
	}
	d := Decision{Ack: ack, Result: replay.Failed, Log: &Log{Level: slog.LevelError, Msg: "orchestration failed",
		Attrs: []slog.Attr{slog.String(logkey.Kind, string(details.Kind)), slog.String(logkey.Error, details.Message)}}}
	for _, a := range end.CanceledActivities {
		ref := provider.ActivityRef{InstanceID: it.InstanceID, ExecutionID: execID, ActivityID: a}
		ack.CanceledActivities = append(ack.CanceledActivities, ref)
		d.CancelLocal = append(d.CancelLocal, ref)
	}
	for _, k := range end.CanceledChildren {
		ack.OrchestratorItems = append(ack.OrchestratorItems, cancelChild(k.InstanceID, replay.Failed))
	}
	ack.Metadata.Status, ack.Metadata.Error = provider.StatusFailed, details
	if parent != nil {
		if msg := parentNotice(it.InstanceID, parent, replay.Failed, nil, details); msg != nil {
			ack.OrchestratorItems = append(ack.OrchestratorItems, msg)
		}
	}
	return d
}

func cancelChild(id string, res replay.Result) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{InstanceID: id,
		Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: id, Reason: "parent " + res.String()}}
}

func newExecution(instanceID string, execID int64, fn replay.Func, pol Policy) *replay.Execution {
	cfg := replay.Config{InstanceID: instanceID, ExecutionID: execID, Func: fn, Limits: pol.Limits, CancelGrace: pol.CancelGrace}
	if pol.Logger != nil {
		cfg.Logger = pol.Logger.With(logkey.Instance, instanceID, logkey.Execution, execID)
	}
	return replay.New(cfg)
}

// timeoutMessage is the instance timeout: a cancel request, visible at the
// deadline, that carries a "timeout" failure. It is addressed to the
// instance, not to an execution, so it outlives ContinueAsNew; an instance
// that ended before it drops it.
func timeoutMessage(id string, deadlineMs int64, timeout time.Duration) *provider.OrchestratorMessage {
	msg := fmt.Sprintf("instance timed out after %s", timeout)
	return &provider.OrchestratorMessage{InstanceID: id, VisibleAt: time.UnixMilli(deadlineMs),
		Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: id, Reason: msg,
			Error: &history.ErrorDetails{Kind: history.ErrorTimeout, Message: msg}}}
}

// buildAck turns the engine's output into a turn ack: history, instance
// metadata, and every message the turn sends, with its routing.
func buildAck(id, token string, execID int64, name, version string, started *history.Event,
	parent *history.ParentRef, out *replay.TurnOutput) *provider.TurnAck {
	ack := &provider.TurnAck{LockToken: token, ExecutionID: execID, History: out.Delta}
	md := &ack.Metadata
	if started != nil {
		md.OrchestrationName, md.OrchestrationVersion, md.Input = name, version, started.Input
		md.Status = provider.StatusRunning
		if parent != nil {
			md.ParentInstanceID, md.ParentExecutionID = parent.InstanceID, parent.ExecutionID
		}
	}
	canceled := map[int64]bool{}
	for _, a := range out.CanceledActivities {
		canceled[a] = true
	}
	for i := range out.Delta {
		ev := &out.Delta[i]
		switch ev.Kind {
		case history.ActivityScheduled:
			if canceled[ev.EventID] {
				delete(canceled, ev.EventID) // scheduled and dropped in one turn: never enqueue it
				continue
			}
			ack.WorkerItems = append(ack.WorkerItems, &provider.WorkerMessage{
				InstanceID: id, ExecutionID: execID, ActivityID: ev.EventID, SessionID: ev.SessionID,
				Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: id, ExecutionID: execID,
					ID: ev.EventID, Name: ev.Name, Input: ev.Input, SessionID: ev.SessionID,
					Queue: ev.Queue, HeartbeatTimeoutMs: ev.HeartbeatTimeoutMs, Data: ev.Data},
			})
		case history.TimerCreated:
			ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{
				InstanceID: id, VisibleAt: time.UnixMilli(ev.FireAtMs),
				Item: history.WorkItem{Kind: history.WorkTimerFired, InstanceID: id, ExecutionID: execID, ID: ev.EventID, FireAtMs: ev.FireAtMs},
			})
		case history.SubOrchestrationScheduled:
			ref := &history.ParentRef{InstanceID: id, ExecutionID: execID, EventID: ev.EventID}
			ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{
				InstanceID: ev.ChildInstanceID,
				Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: ev.ChildInstanceID, ExecutionID: 1,
					Name: ev.Name, Version: ev.Version, Input: ev.Input, Parent: ref},
				Create: &provider.NewInstance{OrchestrationName: ev.Name, OrchestrationVersion: ev.Version, Input: ev.Input,
					ParentInstanceID: id, ParentExecutionID: execID,
					OnExists: &provider.OrchestratorMessage{InstanceID: id, Item: history.WorkItem{
						Kind: history.WorkSubOrchFailed, InstanceID: id, ExecutionID: execID, ID: ev.EventID,
						ChildInstanceID: ev.ChildInstanceID,
						Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: ChildExistsMessage,
							Code: history.CodeInstanceExists},
					}},
				},
			})
		case history.DetachedOrchestrationScheduled:
			ack.OrchestratorItems = append(ack.OrchestratorItems, detachedStart(id, execID, ev)...)
		case history.CustomStatusUpdated:
			md.CustomStatus = &provider.CustomStatusUpdate{Value: ev.CustomStatus}
		case history.ValueSet:
			ack.Values = append(ack.Values, provider.ValueUpdate{Key: ev.Name, Value: ev.Data})
		case history.OrchestrationCancelRequested:
			if ev.FireAtMs > 0 && out.Result == replay.Running {
				// The grace deadline: its firing ends the execution.
				ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{
					InstanceID: id, VisibleAt: time.UnixMilli(ev.FireAtMs),
					Item: history.WorkItem{Kind: history.WorkTimerFired, InstanceID: id, ExecutionID: execID, ID: ev.EventID, FireAtMs: ev.FireAtMs},
				})
			}
		}
	}
	for _, a := range out.CanceledActivities {
		if canceled[a] {
			ack.CanceledActivities = append(ack.CanceledActivities, provider.ActivityRef{InstanceID: id, ExecutionID: execID, ActivityID: a})
		}
	}
	for _, c := range out.CanceledChildren {
		ack.OrchestratorItems = append(ack.OrchestratorItems, cancelChild(c.InstanceID, out.Result))
	}
	switch out.Result {
	case replay.Completed:
		md.Status, md.Output = provider.StatusCompleted, out.Output
	case replay.Failed:
		md.Status, md.Error = provider.StatusFailed, out.Error
	case replay.Canceled:
		md.Status, md.Error = provider.StatusCanceled, out.Error
	case replay.ContinuedAsNew:
		md.Status = provider.StatusContinuedAsNew
		next := out.ContinueAsNew.Version
		if next == "" {
			next = version
		}
		// The instance is pinned to the next execution's version from now
		// on: stores route its next turn (the ContinueAsNew) by it.
		md.OrchestrationVersion = next
		ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{InstanceID: id,
			Item: history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: id, ExecutionID: execID + 1,
				Name: name, Version: next, Input: out.ContinueAsNew.Input, Parent: parent, Values: out.Values}})
		for _, a := range out.Carried {
			ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{InstanceID: id,
				Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: id, Name: a.Name, Data: a.Data}})
		}
	}
	if parent != nil {
		if msg := parentNotice(id, parent, out.Result, out.Output, out.Error); msg != nil {
			ack.OrchestratorItems = append(ack.OrchestratorItems, msg)
		}
	}
	return ack
}

// parentNotice is the completion a finished child sends its parent, or nil
// (the execution is not finished, or continued as new, or the parent
// reference is incomplete).
func parentNotice(id string, parent *history.ParentRef, res replay.Result, output []byte, fail *history.ErrorDetails) *provider.OrchestratorMessage {
	if parent.EventID == 0 || parent.ExecutionID == 0 {
		return nil
	}
	item := history.WorkItem{InstanceID: parent.InstanceID, ExecutionID: parent.ExecutionID, ID: parent.EventID, ChildInstanceID: id}
	switch res {
	case replay.Completed:
		item.Kind, item.Output = history.WorkSubOrchCompleted, output
	case replay.Failed, replay.Canceled:
		item.Kind, item.Error = history.WorkSubOrchFailed, fail
	default:
		return nil
	}
	return &provider.OrchestratorMessage{InstanceID: parent.InstanceID, Item: item}
}

// detachedStart is the pair of messages of a detached start: the start of
// the new instance, created with no parent link (on a taken ID the store
// enqueues its OnExists failure to the starter instead), then the starter's
// confirmation. Both commit in the same ack, so the starter fetches them
// together (a turn takes every visible message of its instance), and the
// engine lets the failure overrule the confirmation, whatever their order.
func detachedStart(id string, execID int64, ev *history.Event) []*provider.OrchestratorMessage {
	child := ev.ChildInstanceID
	return []*provider.OrchestratorMessage{{
		InstanceID: child,
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: child, ExecutionID: 1,
			Name: ev.Name, Version: ev.Version, Input: ev.Input},
		Create: &provider.NewInstance{OrchestrationName: ev.Name, OrchestrationVersion: ev.Version, Input: ev.Input,
			OnExists: &provider.OrchestratorMessage{InstanceID: id, Item: history.WorkItem{
				Kind: history.WorkSubOrchFailed, InstanceID: id, ExecutionID: execID, ID: ev.EventID,
				ChildInstanceID: child,
				Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: ChildExistsMessage,
					Code: history.CodeInstanceExists},
			}},
		},
	}, {
		InstanceID: id,
		Item: history.WorkItem{Kind: history.WorkSubOrchCompleted, InstanceID: id, ExecutionID: execID, ID: ev.EventID,
			ChildInstanceID: child},
	}}
}
