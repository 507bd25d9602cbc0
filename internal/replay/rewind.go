package replay

import (
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
)

// ErrNotRewindable is returned by PlanRewind for a history it cannot
// resume: one that did not end Failed, or whose resume point leaves a
// sub-orchestration in flight (its result would go to the old execution).
var ErrNotRewindable = errors.New("history cannot be rewound")

// RewindPlan is how a new execution takes over from a failed or canceled
// one: the old execution's history up to the turn that led to its end,
// and the messages and activities that let it go on from there.
type RewindPlan struct {
	// Cut is the ID of the first event left out (the whole old history
	// when 1: the new execution starts from scratch).
	Cut int64
	// History is the new execution's history: the old one's events before
	// Cut, unchanged.
	History []history.Event
	// Messages are queued for the new execution, in order: the results
	// the left-out turns had received (activities completed, timers fired,
	// events raised) and the timers still pending; or, starting from
	// scratch, the start. A timer is visible at its FireAtMs.
	Messages []history.WorkItem
	// Activities are queued in the worker queue: the activities still
	// pending at the cut, the failed one among them.
	Activities []history.WorkItem
}

// PlanRewind plans the rewind of execution execID of instanceID from its
// history hist, which must end Failed (a cancellation ends Failed too).
//
// The new execution resumes from the start of the turn that led to the
// end, so its history ends at a turn boundary, as every stored history
// does between turns. That turn's results are given back as messages,
// except the failures of activities, which run again (with the code
// deployed now), and the cancellation of a canceled instance, which is
// dropped (the new execution resumes from before the cancel request). The
// new execution's code replays the kept history as it replays any stored
// history, so a change that does not replay it parks the instance as
// nondeterministic, as a deploy would.
func PlanRewind(instanceID string, execID int64, hist []history.Event) (*RewindPlan, error) {
	if len(hist) == 0 || hist[0].Kind != history.OrchestrationStarted {
		return nil, fmt.Errorf("%w: the execution has no start", ErrNotRewindable)
	}
	last := len(hist) - 1
	if hist[last].Kind != history.OrchestrationFailed {
		return nil, fmt.Errorf("%w: the execution ended %s, not failed or canceled", ErrNotRewindable, hist[last].Kind)
	}
	// The anchor is the last event before the end, or the last cancel
	// request: the cut is the start of the run of received events (the
	// messages of one turn, or of turns that emitted nothing) before it.
	anchor := last - 1
	for i := last - 1; i > 0; i-- {
		if hist[i].Kind == history.OrchestrationCancelRequested {
			anchor = i
			break
		}
	}
	k := anchor
	for k > 0 && !received(hist[k].Kind) {
		k--
	}
	for k > 0 && received(hist[k-1].Kind) {
		k--
	}
	if k <= 0 {
		return fromScratch(instanceID, execID, hist), nil
	}
	plan := &RewindPlan{Cut: int64(k + 1), History: append([]history.Event(nil), hist[:k]...)}
	next := execID + 1

	// What the kept history still waits for.
	pending := map[int64]*history.Event{}
	var order []int64
	for i := range plan.History {
		ev := &plan.History[i]
		switch ev.Kind {
		case history.ActivityScheduled, history.TimerCreated, history.SubOrchestrationScheduled,
			history.DetachedOrchestrationScheduled:
			pending[ev.EventID] = ev
			order = append(order, ev.EventID)
		case history.ActivityCompleted, history.ActivityFailed, history.ActivityCancelRequested,
			history.TimerFired, history.TimerCanceled,
			history.SubOrchestrationCompleted, history.SubOrchestrationFailed, history.SubOrchestrationCancelRequested:
			delete(pending, ev.SourceEventID)
		}
	}
	// The left-out turns' results, in the order they arrived: results of
	// what the kept history waits for go back as messages (the failure of
	// an activity excepted: it runs again), events raised go back, the
	// rest (results of schedules left out, the cancel request) is dropped.
	done := map[int64]bool{}
	for i := k; i < last; i++ {
		ev := &hist[i]
		s := pending[ev.SourceEventID]
		switch {
		case ev.Kind == history.ExternalEvent:
			plan.Messages = append(plan.Messages, history.WorkItem{Kind: history.WorkExternalRaised,
				InstanceID: instanceID, Name: ev.Name, Data: ev.Data})
		case s == nil || done[s.EventID]:
		case ev.Kind == history.ActivityCompleted:
			plan.Messages = append(plan.Messages, history.WorkItem{Kind: history.WorkActivityCompleted,
				InstanceID: instanceID, ExecutionID: next, ID: s.EventID, Output: ev.Output})
			done[s.EventID] = true
		case ev.Kind == history.TimerFired && s.Kind == history.TimerCreated:
			plan.Messages = append(plan.Messages, history.WorkItem{Kind: history.WorkTimerFired,
				InstanceID: instanceID, ExecutionID: next, ID: s.EventID, FireAtMs: ev.FireAtMs})
			done[s.EventID] = true
		case ev.Kind == history.SubOrchestrationCompleted:
			plan.Messages = append(plan.Messages, history.WorkItem{Kind: history.WorkSubOrchCompleted,
				InstanceID: instanceID, ExecutionID: next, ID: s.EventID, ChildInstanceID: s.ChildInstanceID, Output: ev.Output})
			done[s.EventID] = true
		}
	}
	// What is still pending: activities run (again), timers wait for
	// their time; a child's result would go to the old execution.
	for _, id := range order {
		s, ok := pending[id]
		if !ok || done[id] {
			continue
		}
		switch s.Kind {
		case history.ActivityScheduled:
			plan.Activities = append(plan.Activities, history.WorkItem{Kind: history.WorkActivityExecute,
				InstanceID: instanceID, ExecutionID: next, ID: id, Name: s.Name, Input: s.Input, SessionID: s.SessionID,
				Queue: s.Queue, HeartbeatTimeoutMs: s.HeartbeatTimeoutMs, Data: s.Data})
		case history.TimerCreated:
			plan.Messages = append(plan.Messages, history.WorkItem{Kind: history.WorkTimerFired,
				InstanceID: instanceID, ExecutionID: next, ID: id, FireAtMs: s.FireAtMs})
		default:
			return nil, fmt.Errorf("%w: sub-orchestration %s (%s, event %d) was in flight or failed at the resume point (event %d)",
				ErrNotRewindable, s.ChildInstanceID, s.Name, id, k+1)
		}
	}
	return plan, nil
}

// fromScratch plans a new execution that starts over: the end came in the
// first turn.
func fromScratch(instanceID string, execID int64, hist []history.Event) *RewindPlan {
	st := &hist[0]
	return &RewindPlan{Cut: 1, Messages: []history.WorkItem{{Kind: history.WorkStartOrchestration,
		InstanceID: instanceID, ExecutionID: execID + 1, Name: st.Name, Version: st.Version, Input: st.Input,
		Parent: st.Parent, TraceParent: st.TraceParent}}}
}

// received reports whether events of kind k are appended from messages a
// turn receives (as opposed to what the code emits).
func received(k history.EventKind) bool {
	switch k {
	case history.ActivityCompleted, history.ActivityFailed, history.TimerFired, history.ExternalEvent,
		history.SubOrchestrationCompleted, history.SubOrchestrationFailed, history.OrchestrationCancelRequested:
		return true
	}
	return false
}
