package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// fetchTurns locks up to max instances and starts a turn for each.
func (r *Runtime) fetchTurns(max int) (int, error) {
	wakes := r.hub.orchWakes.Load()
	start := time.Now() // real time, even under a fake clock: metrics measure work
	items, err := r.p.FetchOrchestrationItems(r.io, provider.FetchOptions{LockTimeout: r.o.OrchestratorLockTimeout, Max: max})
	if err != nil {
		return 0, err
	}
	for _, it := range items {
		r.work.Add(1)
		go func() {
			defer func() {
				<-r.orchSlots
				r.work.Done()
			}()
			res := r.runTurn(it)
			r.metrics.observeTurn(res, time.Since(start))
			r.endTurn(wakes)
		}()
	}
	return len(items), nil
}

// endTurn runs once a turn has released its instance lock. Messages that
// were enqueued in this process, or came due, while the instance was
// locked could not be fetched: their wake-up found nothing to take, and a
// fetch loop may be backing off from them. Wake the dispatchers again.
func (r *Runtime) endTurn(wakesAtFetch uint64) {
	r.hub.turnsEnded.Add(1)
	if r.hub.orchWakes.Load() != wakesAtFetch || r.hub.stalled.Load() > 0 {
		r.hub.WakeOrchestrator()
	}
}

// outcome is what a turn decided.
type outcome struct {
	ack     *provider.TurnAck
	abandon *provider.AbandonOptions
	exec    *replay.Execution // to cache after the ack commits
	result  replay.Result
	// cancelled lists activities to cancel if they run in this process.
	cancelled []activityKey
}

// runTurn runs a turn and commits or abandons it.
func (r *Runtime) runTurn(it *provider.OrchestrationItem) TurnResult {
	rn := r.startRenewer(r.o.OrchestratorLockTimeout, func() error {
		return r.p.RenewOrchestrationItemLock(r.io, it.LockToken, r.o.OrchestratorLockTimeout)
	}, func(error) {})
	oc := r.turn(it)
	rn.stop()
	if oc.abandon != nil {
		if err := r.p.AbandonOrchestrationItem(r.io, it.LockToken, *oc.abandon); err != nil && !errors.Is(err, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", "instance", it.InstanceID, "error", err)
		}
		if oc.exec != nil {
			oc.exec.Close()
		}
		// The fetch loop sleeps on a deadline computed before the abandon;
		// wake it so it sleeps until the retry is due instead.
		r.hub.WakeOrchestrator()
		return TurnAbandoned
	}
	if err := r.ackTurn(oc.ack); err != nil {
		if oc.exec != nil {
			oc.exec.Close()
		}
		if errors.Is(err, provider.ErrLockLost) {
			r.log.Info("turn lost its lock; another node will redo it", "instance", it.InstanceID)
			return TurnLockLost
		}
		r.log.Error("committing turn failed; it will be retried", "instance", it.InstanceID, "error", err)
		if aerr := r.p.AbandonOrchestrationItem(r.io, it.LockToken, provider.AbandonOptions{Delay: 50 * time.Millisecond}); aerr != nil && !errors.Is(aerr, provider.ErrLockLost) {
			r.log.Warn("abandoning turn failed; its lock will expire", "instance", it.InstanceID, "error", aerr)
		}
		return TurnCommitFailed
	}
	r.mu.Lock()
	delete(r.parked, it.InstanceID)
	r.mu.Unlock()
	if oc.exec != nil {
		if oc.result == replay.Running && r.cache != nil {
			r.cache.put(oc.exec)
		} else {
			oc.exec.Close()
		}
	}
	if len(oc.ack.WorkerItems) > 0 {
		r.hub.WakeWorker()
	}
	if len(oc.ack.OrchestratorItems) > 0 {
		r.hub.WakeOrchestrator()
	}
	r.hub.InstanceChanged(it.InstanceID)
	for _, k := range oc.cancelled {
		r.cancelLocal(k)
	}
	return TurnCommitted
}

// ackTurn commits a turn, retrying transient failures.
func (r *Runtime) ackTurn(ack *provider.TurnAck) error {
	return r.retry(func() error { return provider.AckOrchestrationItem(r.io, r.p, ack) })
}

// turn computes what to do with one fetched instance.
func (r *Runtime) turn(it *provider.OrchestrationItem) outcome {
	// consume acks the turn's messages and changes nothing else. Acks name
	// an execution (>= 1): the current one, or 1 for an instance that has
	// no row, whose ack without metadata creates nothing.
	consume := outcome{ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}}
	inst := it.Instance
	if inst == nil {
		r.log.Info("dropping messages for an unknown instance", "instance", it.InstanceID, "messages", len(it.Messages))
		return consume
	}
	if inst.CurrentExecutionID > 0 {
		consume.ack.ExecutionID = inst.CurrentExecutionID
	}
	if it.HistoryError != nil {
		if it.AttemptCount > r.o.MaxAttempts {
			r.log.Error("history cannot be read; failing the instance", "instance", it.InstanceID, "error", it.HistoryError)
			return outcome{ack: &provider.TurnAck{LockToken: it.LockToken, ExecutionID: inst.CurrentExecutionID,
				Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed,
					Error: &history.ErrorDetails{Kind: history.ErrorPoison, Message: "stored history cannot be decoded: " + it.HistoryError.Error()}}}}
		}
		return outcome{abandon: &provider.AbandonOptions{Delay: time.Second,
			Error: &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: "stored history cannot be decoded: " + it.HistoryError.Error()}}}
	}
	hist := it.History
	execID := inst.CurrentExecutionID
	var start *history.WorkItem
	switch {
	case len(hist) == 0 && inst.Status.IsTerminal():
		return consume // canceled before its delayed start: drop the start
	case len(hist) == 0:
		for i := range it.Messages {
			if it.Messages[i].Kind == history.WorkStartOrchestration {
				start = &it.Messages[i]
				break
			}
		}
		if start != nil {
			execID = max(start.ExecutionID, 1)
		}
	case hist[len(hist)-1].Kind == history.OrchestrationContinuedAsNew:
		for i := range it.Messages {
			if m := &it.Messages[i]; m.Kind == history.WorkContinueAsNew && m.ExecutionID == execID+1 {
				start = m
				break
			}
		}
		if start == nil {
			return consume // late messages for a finished execution
		}
		execID, hist = start.ExecutionID, nil
	case hist[len(hist)-1].Kind.IsTerminal():
		return consume // late messages for a finished instance are dropped
	}
	if len(hist) == 0 && start == nil {
		if inst.Status.IsTerminal() {
			return consume
		}
		for i := range it.Messages {
			if m := &it.Messages[i]; m.Kind == history.WorkCancelInstance {
				return r.cancelBeforeStart(it, inst, m.Reason)
			}
		}
		// Messages that arrived before the start is visible (a delayed
		// start): keep them, without counting attempts, until it is.
		return outcome{abandon: &provider.AbandonOptions{Delay: r.backoff(it.AttemptCount), IgnoreAttempt: true}}
	}

	name, version := "", ""
	var parent *history.ParentRef
	if start != nil {
		name, version, parent = start.Name, start.Version, start.Parent
		if start.Kind == history.WorkContinueAsNew && version == "" {
			version = inst.OrchestrationVersion
		}
	} else {
		name, version, parent = hist[0].Name, hist[0].Version, hist[0].Parent
	}
	fn, resolved, ok := r.reg.Orchestration(name, version)
	what := name
	if version != "" {
		what += " version " + version
	}
	if !ok {
		msg := fmt.Sprintf("orchestration %s is not registered on this runtime", what)
		if it.AttemptCount > r.o.MaxAttempts {
			return r.failTurn(it, execID, hist, start, name, version, parent,
				&history.ErrorDetails{Kind: history.ErrorConfiguration, Message: msg})
		}
		r.log.Warn("orchestration not registered; will retry", "instance", it.InstanceID, "orchestration", what, "attempt", it.AttemptCount)
		return outcome{abandon: &provider.AbandonOptions{Delay: r.backoff(it.AttemptCount),
			Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: msg}}}
	}
	if it.AttemptCount > r.o.MaxAttempts {
		return r.failTurn(it, execID, hist, start, name, resolved, parent, &history.ErrorDetails{Kind: history.ErrorPoison,
			Message: fmt.Sprintf("turn failed %d times (max attempts %d): the runtime crashed or lost its lock each time", it.AttemptCount-1, r.o.MaxAttempts)})
	}

	now := r.clock.Now()
	var started *history.Event
	if len(hist) == 0 {
		started = &history.Event{Kind: history.OrchestrationStarted, Name: name, Version: resolved, Input: start.Input, Parent: parent}
	}
	x := r.cache.take(it.InstanceID, execID)
	if x == nil || started != nil {
		if x != nil {
			x.Close()
		}
		x = r.newExecution(it.InstanceID, execID, fn)
	}
	in := replay.TurnInput{Now: now, History: hist, Started: started, Messages: it.Messages}
	out, err := x.Turn(in)
	if errors.Is(err, replay.ErrStale) {
		x.Close()
		x = r.newExecution(it.InstanceID, execID, fn)
		out, err = x.Turn(in)
	}
	if err != nil {
		x.Close()
		r.log.Error("history cannot be replayed", "instance", it.InstanceID, "error", err)
		return outcome{abandon: &provider.AbandonOptions{Delay: time.Second,
			Error: &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: err.Error()}}}
	}
	if nd := out.Nondeterminism; nd != nil {
		x.Close()
		details := &history.ErrorDetails{Kind: history.ErrorNondeterminism, Message: nd.Error()}
		if r.o.FailOnNondeterminism {
			return r.failTurn(it, execID, hist, start, name, resolved, parent, details)
		}
		r.mu.Lock()
		r.parked[it.InstanceID]++
		n := r.parked[it.InstanceID]
		r.mu.Unlock()
		r.log.Error("orchestration is nondeterministic; parked until a fixed deploy replays it", "instance", it.InstanceID, "error", nd)
		return outcome{abandon: &provider.AbandonOptions{Delay: r.backoff(n), IgnoreAttempt: true, Error: details}}
	}
	ack := r.buildAck(it.InstanceID, it.LockToken, execID, name, resolved, started, parent, out)
	oc := outcome{ack: ack, exec: x, result: out.Result}
	for _, id := range out.CancelledActivities {
		oc.cancelled = append(oc.cancelled, activityKey{it.InstanceID, execID, id})
	}
	return oc
}

func (r *Runtime) newExecution(instanceID string, execID int64, fn replay.Func) *replay.Execution {
	return replay.New(replay.Config{
		InstanceID: instanceID, ExecutionID: execID, Func: fn,
		Logger: r.log.With("instance", instanceID, "execution", execID),
	})
}

// buildAck turns the engine's output into a turn ack: history, instance
// metadata, and every message the turn sends, with its routing.
func (r *Runtime) buildAck(id, token string, execID int64, name, version string, started *history.Event,
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
	cancelled := map[int64]bool{}
	for _, a := range out.CancelledActivities {
		cancelled[a] = true
	}
	for i := range out.Delta {
		ev := &out.Delta[i]
		switch ev.Kind {
		case history.ActivityScheduled:
			if cancelled[ev.EventID] {
				delete(cancelled, ev.EventID) // scheduled and dropped in one turn: never enqueue it
				continue
			}
			ack.WorkerItems = append(ack.WorkerItems, &provider.WorkerMessage{
				InstanceID: id, ExecutionID: execID, ActivityID: ev.EventID, SessionID: ev.SessionID,
				Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: id, ExecutionID: execID,
					ID: ev.EventID, Name: ev.Name, Input: ev.Input, SessionID: ev.SessionID},
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
						Error:           &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: ChildExistsMessage},
					}},
				},
			})
		case history.CustomStatusUpdated:
			md.CustomStatus = &provider.CustomStatusUpdate{Value: ev.CustomStatus}
		}
	}
	for _, a := range out.CancelledActivities {
		if cancelled[a] {
			ack.CancelledActivities = append(ack.CancelledActivities, provider.ActivityRef{InstanceID: id, ExecutionID: execID, ActivityID: a})
		}
	}
	reason := "parent " + out.Result.String()
	for _, c := range out.CanceledChildren {
		ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{InstanceID: c.InstanceID,
			Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: c.InstanceID, Reason: reason}})
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
		ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{InstanceID: id,
			Item: history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: id, ExecutionID: execID + 1,
				Name: name, Version: next, Input: out.ContinueAsNew.Input, Parent: parent}})
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

// ChildExistsMessage is the failure a parent sees when an explicit child ID
// is taken.
const ChildExistsMessage = "instance already exists"

// parentNotice is the completion a finished child sends its parent.
func parentNotice(id string, parent *history.ParentRef, res replay.Result, output []byte, fail *history.ErrorDetails) *provider.OrchestratorMessage {
	item := history.WorkItem{InstanceID: parent.InstanceID, ExecutionID: parent.ExecutionID, ID: parent.EventID, ChildInstanceID: id}
	switch res {
	case replay.Completed:
		item.Kind, item.Output = history.WorkSubOrchCompleted, output
	case replay.Failed, replay.Canceled:
		item.Kind, item.Error = history.WorkSubOrchFailed, fail
	default:
		return nil
	}
	if parent.EventID == 0 || parent.ExecutionID == 0 {
		return nil
	}
	return &provider.OrchestratorMessage{InstanceID: parent.InstanceID, Item: item}
}

// failTurn ends the execution with a failure without running its code
// (poison, unregistered orchestration, nondeterminism with the fail policy).
func (r *Runtime) failTurn(it *provider.OrchestrationItem, execID int64, hist []history.Event, start *history.WorkItem,
	name, version string, parent *history.ParentRef, details *history.ErrorDetails) outcome {
	now := r.clock.Now().UnixMilli()
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: execID}
	next := int64(1)
	if len(hist) > 0 {
		next = hist[len(hist)-1].EventID + 1
	} else {
		var input []byte
		if start != nil {
			input = start.Input
		}
		ack.History = append(ack.History, history.Event{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: now,
			Name: name, Version: version, Input: input, Parent: parent})
		ack.Metadata.OrchestrationName, ack.Metadata.OrchestrationVersion, ack.Metadata.Input = name, version, input
		if parent != nil {
			ack.Metadata.ParentInstanceID, ack.Metadata.ParentExecutionID = parent.InstanceID, parent.ExecutionID
		}
		next = 2
	}
	// Cancel what the execution still has in flight.
	crumbs, acts, kids := replay.CancelBreadcrumbs(hist, next, now, "orchestration "+replay.Failed.String())
	ack.History = append(ack.History, crumbs...)
	next += int64(len(crumbs))
	for _, a := range acts {
		ack.CancelledActivities = append(ack.CancelledActivities, provider.ActivityRef{InstanceID: it.InstanceID, ExecutionID: execID, ActivityID: a})
	}
	for _, k := range kids {
		ack.OrchestratorItems = append(ack.OrchestratorItems, &provider.OrchestratorMessage{InstanceID: k.InstanceID,
			Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: k.InstanceID, Reason: "parent " + replay.Failed.String()}})
	}
	ack.History = append(ack.History, history.Event{EventID: next, Kind: history.OrchestrationFailed, TimestampMs: now, Error: details})
	ack.Metadata.Status, ack.Metadata.Error = provider.StatusFailed, details
	if parent != nil {
		if msg := parentNotice(it.InstanceID, parent, replay.Failed, nil, details); msg != nil {
			ack.OrchestratorItems = append(ack.OrchestratorItems, msg)
		}
	}
	r.log.Error("orchestration failed", "instance", it.InstanceID, "kind", details.Kind, "error", details.Message)
	oc := outcome{ack: ack, result: replay.Failed}
	for _, a := range ack.CancelledActivities {
		oc.cancelled = append(oc.cancelled, activityKey{it.InstanceID, execID, a.ActivityID})
	}
	return oc
}

// cancelBeforeStart ends an instance whose delayed start has not come due:
// its only execution records the start and the cancellation, and the start
// message, when it comes due, finds the instance finished and is dropped.
func (r *Runtime) cancelBeforeStart(it *provider.OrchestrationItem, inst *provider.InstanceMeta, reason string) outcome {
	if reason == "" {
		reason = "canceled"
	}
	now := r.clock.Now().UnixMilli()
	details := &history.ErrorDetails{Kind: history.ErrorCanceled, Message: reason}
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{
			{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: now, Name: inst.OrchestrationName, Version: inst.OrchestrationVersion},
			{EventID: 2, Kind: history.OrchestrationCancelRequested, TimestampMs: now, Reason: reason},
			{EventID: 3, Kind: history.OrchestrationFailed, TimestampMs: now, Error: details},
		},
		Metadata: provider.ExecutionMetadata{OrchestrationName: inst.OrchestrationName, OrchestrationVersion: inst.OrchestrationVersion,
			Status: provider.StatusCanceled, Error: details},
	}
	return outcome{ack: ack, result: replay.Canceled}
}
