package replay

import (
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Started returns the OrchestrationStarted event of a new execution, to
// pass as TurnInput.Started or to FailUnrun. Its EventID and timestamp are
// left for the engine to fill.
func Started(name, version string, input json.RawMessage, parent *history.ParentRef) *history.Event {
	return &history.Event{Kind: history.OrchestrationStarted, Name: name, Version: version, Input: input, Parent: parent}
}

// Ending is the history that ends an execution without running its code,
// and what the ending leaves to cancel.
type Ending struct {
	// Events are to be appended to the execution's history, the terminal
	// event last.
	Events []history.Event
	// CanceledActivities are the activities still in flight; their
	// breadcrumbs are in Events.
	CanceledActivities []int64
	// CanceledChildren are the sub-orchestrations still in flight; each
	// must receive a cancel request.
	CanceledChildren []ChildRef
}

// FailUnrun ends an execution Failed with details without running its code
// (the runtime gave up on it: poison, an unregistered orchestration,
// nondeterminism under the fail policy). hist is the execution's persisted
// history; when it is empty, started (see Started) must be given and
// becomes event 1. Activities and children still in flight get cancel
// breadcrumbs (as when the code ends), then OrchestrationFailed comes last.
// Every event is stamped now.
func FailUnrun(hist []history.Event, started *history.Event, now time.Time, details *history.ErrorDetails) Ending {
	ms := now.UnixMilli()
	var e Ending
	next := int64(1)
	if len(hist) > 0 {
		next = hist[len(hist)-1].EventID + 1
	} else {
		ev := history.Event{Kind: history.OrchestrationStarted}
		if started != nil {
			ev = *started
		}
		ev.EventID, ev.TimestampMs = 1, ms
		e.Events = append(e.Events, ev)
		next = 2
	}
	crumbs, acts, kids := CancelBreadcrumbs(hist, next, ms, "orchestration "+Failed.String())
	e.Events = append(e.Events, crumbs...)
	next += int64(len(crumbs))
	e.CanceledActivities, e.CanceledChildren = acts, kids
	e.Events = append(e.Events, history.Event{EventID: next, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: details})
	return e
}

// CancelUnstarted is the whole history of an instance canceled before its
// (delayed) start: OrchestrationStarted (name and version, no input: the
// code never ran), OrchestrationCancelRequested with reason, and
// OrchestrationFailed with a canceled failure, all stamped now. An empty
// reason reads "canceled". It returns the failure too, for the instance's
// status.
func CancelUnstarted(name, version, reason string, now time.Time) ([]history.Event, *history.ErrorDetails) {
	if reason == "" {
		reason = "canceled"
	}
	ms := now.UnixMilli()
	details := &history.ErrorDetails{Kind: history.ErrorCanceled, Message: reason}
	return []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms, Name: name, Version: version},
		{EventID: 2, Kind: history.OrchestrationCancelRequested, TimestampMs: ms, Reason: reason},
		{EventID: 3, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: details},
	}, details
}
