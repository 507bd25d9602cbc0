package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// EventSize stays close to the size of an event's JSON encoding, for small
// events and large ones alike.
func TestEventSizeIsCloseToJSON(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 10_000) + `"`)
	const ms = 1_732_470_000_000
	events := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms, Name: "Order", Version: "1.0.0", Input: big,
			Parent: &history.ParentRef{InstanceID: "parent", ExecutionID: 1, EventID: 4}},
		{EventID: 2, Kind: history.ActivityScheduled, TimestampMs: ms, Name: "Charge", Input: json.RawMessage(`{"amount":12}`), SessionID: "s"},
		{EventID: 3, Kind: history.ActivityCompleted, TimestampMs: ms, SourceEventID: 2, Output: big},
		{EventID: 4, Kind: history.ActivityFailed, TimestampMs: ms, SourceEventID: 2,
			Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "declined", Type: "*errors.errorString", Details: strings.Repeat("stack ", 500)}},
		{EventID: 5, Kind: history.TimerCreated, TimestampMs: ms, FireAtMs: ms + 60_000},
		{EventID: 6, Kind: history.TimerFired, TimestampMs: ms, SourceEventID: 5, FireAtMs: ms + 60_000},
		{EventID: 7, Kind: history.ExternalEvent, TimestampMs: ms, Name: "approval", Data: json.RawMessage("true")},
		{EventID: 8, Kind: history.SubOrchestrationScheduled, TimestampMs: ms, Name: "Child", ChildInstanceID: "order::sub::8", Input: big},
		{EventID: 9, Kind: history.CustomStatusUpdated, TimestampMs: ms, CustomStatus: json.RawMessage(`{"step":3}`)},
		{EventID: 10, Kind: history.GUIDRecorded, TimestampMs: ms, GUID: "0b0e8f3c-7a43-4d8c-9d0e-63a3f5a7b1c2"},
		{EventID: 11, Kind: history.OrchestrationCompleted, TimestampMs: ms, Output: json.RawMessage(`"done"`)},
	}
	for _, ev := range events {
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, n := EventSize(&ev), int64(len(raw))
		if got < n*2/3 || got > n*3/2 {
			t.Errorf("%s: EventSize %d, JSON %d bytes", ev.Kind, got, n)
		}
	}
}
