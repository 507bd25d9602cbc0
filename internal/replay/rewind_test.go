package replay

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// h builds a history: events get IDs 1, 2, 3... in order.
func rwHist(evs ...history.Event) []history.Event {
	for i := range evs {
		evs[i].EventID = int64(i + 1)
	}
	return evs
}

var (
	rwStarted = history.Event{Kind: history.OrchestrationStarted, Name: "O", Version: "1", Input: json.RawMessage(`"in"`)}
	rwFailed  = history.Event{Kind: history.OrchestrationFailed, Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "x"}}
	rwRewound = history.Event{Kind: history.OrchestrationFailed,
		Error: &history.ErrorDetails{Kind: history.ErrorCanceled, Code: history.CodeRewound, Message: "rewound"}}
)

func rwSched(name string) history.Event {
	return history.Event{Kind: history.ActivityScheduled, Name: name, Input: json.RawMessage(`1`)}
}
func rwDone(src int64, out string) history.Event {
	return history.Event{Kind: history.ActivityCompleted, SourceEventID: src, Output: json.RawMessage(out)}
}
func rwFail(src int64) history.Event {
	return history.Event{Kind: history.ActivityFailed, SourceEventID: src, Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "boom"}}
}

func TestPlanRewind(t *testing.T) {
	t.Parallel()
	type want struct {
		cut        int64
		messages   []history.WorkItemKind
		activities []int64
	}
	for _, tc := range []struct {
		name string
		hist []history.Event
		want want
	}{
		{"the failed step runs again", rwHist(rwStarted, rwSched("A"), rwDone(2, `"a"`), rwSched("B"), rwFail(4), rwFailed),
			want{cut: 5, activities: []int64{4}}},
		{"a result of the failing turn is given again", rwHist(rwStarted, rwSched("A"), rwSched("B"), rwDone(2, `"a"`), rwFail(3), rwFailed),
			want{cut: 4, messages: []history.WorkItemKind{history.WorkActivityCompleted}, activities: []int64{3}}},
		{"a pending timer is queued again, an event raised again", rwHist(rwStarted,
			history.Event{Kind: history.TimerCreated, FireAtMs: 5000}, rwSched("A"),
			history.Event{Kind: history.ExternalEvent, Name: "go", Data: json.RawMessage(`1`)}, rwFail(3), rwFailed),
			want{cut: 4, messages: []history.WorkItemKind{history.WorkExternalRaised, history.WorkTimerFired}, activities: []int64{3}}},
		{"a failure in the first turn starts over", rwHist(rwStarted, rwFailed),
			want{cut: 1, messages: []history.WorkItemKind{history.WorkStartOrchestration}}},
		{"a cancel request is dropped", rwHist(rwStarted, history.Event{Kind: history.ExternalSubscribed, Name: "go"},
			history.Event{Kind: history.OrchestrationCancelRequested, Reason: "stop"}, rwFailed),
			want{cut: 3}},
		{"a cancel before cleanup turns is the anchor", rwHist(rwStarted, rwSched("A"),
			history.Event{Kind: history.OrchestrationCancelRequested}, rwSched("Undo"), rwDone(4, `0`), rwDone(2, `1`), rwFailed),
			want{cut: 3, messages: []history.WorkItemKind{history.WorkActivityCompleted}}},
		// A forced rewind of a Running execution plans over its history
		// with the rewind's end appended (rwRewound).
		{"stuck retrying: the failed attempt runs again, the retry timer goes", rwHist(rwStarted, rwSched("A"), rwDone(2, `"a"`),
			rwSched("B"), rwFail(4), history.Event{Kind: history.TimerCreated, FireAtMs: 86_400_000}, rwRewound),
			want{cut: 5, activities: []int64{4}}},
		{"stuck on an activity: the turn that scheduled it runs again", rwHist(rwStarted, rwSched("A"), rwDone(2, `"a"`),
			rwSched("B"), rwRewound),
			want{cut: 3, messages: []history.WorkItemKind{history.WorkActivityCompleted}}},
		{"stuck in the first turn starts over", rwHist(rwStarted, history.Event{Kind: history.ExternalSubscribed, Name: "never"}, rwRewound),
			want{cut: 1, messages: []history.WorkItemKind{history.WorkStartOrchestration}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanRewind("i", 1, tc.hist)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []history.WorkItemKind
			for _, m := range p.Messages {
				kinds = append(kinds, m.Kind)
				if m.Kind != history.WorkExternalRaised && m.ExecutionID != 2 {
					t.Fatalf("message %s for execution %d, want 2", m.Kind, m.ExecutionID)
				}
			}
			var acts []int64
			for _, a := range p.Activities {
				acts = append(acts, a.ID)
				if a.ExecutionID != 2 || a.Kind != history.WorkActivityExecute || a.Name == "" {
					t.Fatalf("activity %+v", a)
				}
			}
			if p.Cut != tc.want.cut || !slices.Equal(kinds, tc.want.messages) || !slices.Equal(acts, tc.want.activities) {
				t.Fatalf("plan: cut %d, messages %v, activities %v; want %+v", p.Cut, kinds, acts, tc.want)
			}
			if int64(len(p.History)) != max(p.Cut-1, 0) || (len(p.History) > 0 && !slices.EqualFunc(p.History, tc.hist[:len(p.History)],
				func(a, b history.Event) bool { return a.EventID == b.EventID && a.Kind == b.Kind })) {
				t.Fatalf("kept history %v, want the first %d events", p.History, p.Cut-1)
			}
		})
	}
}

func TestPlanRewindRefuses(t *testing.T) {
	t.Parallel()
	child := history.Event{Kind: history.SubOrchestrationScheduled, Name: "C", ChildInstanceID: "i::2"}
	for name, hist := range map[string][]history.Event{
		"empty":     nil,
		"completed": rwHist(rwStarted, history.Event{Kind: history.OrchestrationCompleted}),
		"running":   rwHist(rwStarted, rwSched("A")),
		"a child in flight": rwHist(rwStarted, child, rwSched("A"), rwFail(3),
			history.Event{Kind: history.SubOrchestrationCancelRequested, SourceEventID: 2}, rwFailed),
		"a failed child": rwHist(rwStarted, child,
			history.Event{Kind: history.SubOrchestrationFailed, SourceEventID: 2, Error: &history.ErrorDetails{Kind: history.ErrorApplication}}, rwFailed),
	} {
		if _, err := PlanRewind("i", 1, hist); !errors.Is(err, ErrNotRewindable) {
			t.Errorf("%s: %v, want ErrNotRewindable", name, err)
		}
	}
}
