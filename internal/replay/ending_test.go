package replay

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

func TestFailUnrun(t *testing.T) {
	ms := t0.UnixMilli()
	parent := &history.ParentRef{InstanceID: "p", ExecutionID: 2, EventID: 7}
	boom := &history.ErrorDetails{Kind: history.ErrorPoison, Message: "boom"}
	running := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, Name: "O", Version: "1.0.0"},
		{EventID: 2, Kind: history.ActivityScheduled, Name: "A"},
		{EventID: 3, Kind: history.ActivityScheduled, Name: "B"},
		{EventID: 4, Kind: history.SubOrchestrationScheduled, Name: "C", ChildInstanceID: "i::sub::4"},
		{EventID: 5, Kind: history.ActivityCompleted, SourceEventID: 3},
		{EventID: 6, Kind: history.TimerCreated, FireAtMs: ms + 1000},
	}
	reason := "orchestration Failed"
	tests := []struct {
		name    string
		hist    []history.Event
		started *history.Event
		want    Ending
	}{
		{
			name:    "no history: the start is recorded first",
			started: Started("O", "2.0.0", json.RawMessage(`"in"`), parent),
			want: Ending{Events: []history.Event{
				{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms, Name: "O", Version: "2.0.0", Input: json.RawMessage(`"in"`), Parent: parent},
				{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: boom},
			}},
		},
		{
			name: "in flight work gets breadcrumbs before the failure",
			hist: running,
			want: Ending{
				Events: []history.Event{
					{EventID: 7, Kind: history.ActivityCancelRequested, TimestampMs: ms, SourceEventID: 2, Reason: reason},
					{EventID: 8, Kind: history.SubOrchestrationCancelRequested, TimestampMs: ms, SourceEventID: 4, Reason: reason},
					{EventID: 9, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: boom},
				},
				CanceledActivities: []int64{2},
				CanceledChildren:   []ChildRef{{EventID: 4, InstanceID: "i::sub::4"}},
			},
		},
		{
			name: "nothing in flight",
			hist: running[:1],
			want: Ending{Events: []history.Event{{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: boom}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FailUnrun(tt.hist, tt.started, t0, boom)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FailUnrun\n got: %+v\nwant: %+v", got, tt.want)
			}
			for i := range got.Events {
				if err := got.Events[i].Validate(); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
		})
	}
}

func TestCancelUnstarted(t *testing.T) {
	ms := t0.UnixMilli()
	for _, tt := range []struct{ reason, want string }{
		{"not needed", "not needed"},
		{"", "canceled"},
	} {
		evs, details := CancelUnstarted("O", "1.0.0", tt.reason, t0)
		wantDetails := &history.ErrorDetails{Kind: history.ErrorCanceled, Message: tt.want}
		want := []history.Event{
			{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms, Name: "O", Version: "1.0.0"},
			{EventID: 2, Kind: history.OrchestrationCancelRequested, TimestampMs: ms, Reason: tt.want},
			{EventID: 3, Kind: history.OrchestrationFailed, TimestampMs: ms, Error: wantDetails},
		}
		if !reflect.DeepEqual(evs, want) || !reflect.DeepEqual(details, wantDetails) {
			t.Fatalf("CancelUnstarted(%q)\n got: %+v %+v\nwant: %+v %+v", tt.reason, evs, details, want, wantDetails)
		}
		// A replay of that history reads it as canceled.
		if got := resultOf(evs); got != Canceled {
			t.Fatalf("result of the history: %s, want Canceled", got)
		}
	}
}

// The event Started builds is the one the engine records as event 1.
func TestStartedIsRecordedAsEventOne(t *testing.T) {
	x := New(Config{InstanceID: "i", ExecutionID: 1, Func: func(*Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`1`), nil
	}})
	defer x.Close()
	out, err := x.Turn(TurnInput{Now: t0, Started: Started("O", "1.0.0", json.RawMessage(`"in"`), nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := history.Event{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: t0.UnixMilli(), Name: "O", Version: "1.0.0", Input: json.RawMessage(`"in"`)}
	if len(out.Delta) == 0 || !reflect.DeepEqual(out.Delta[0], want) {
		t.Fatalf("delta %+v, want event 1 %+v", out.Delta, want)
	}
}
