package history_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// TestFixturesCoverEveryKind fails when a kind is added to EventKinds or
// WorkItemKinds without a fixture here (and so without round-trip, golden and
// validation coverage), or when a fixture's kind leaves the lists.
func TestFixturesCoverEveryKind(t *testing.T) {
	t.Parallel()
	events := eventFixtures()
	seenE := map[history.EventKind]bool{}
	for _, k := range history.EventKinds {
		if seenE[k] {
			t.Fatalf("EventKinds lists %s twice", k)
		}
		seenE[k] = true
		c, ok := events[k]
		if !ok {
			t.Fatalf("EventKinds has %s but eventFixtures has no fixture for it; add one and run go test -run Golden -update", k)
		}
		if c.event.Kind != k {
			t.Fatalf("fixture under %s has Kind %s", k, c.event.Kind)
		}
	}
	for k := range events {
		if !seenE[k] {
			t.Fatalf("fixture kind %s is not in EventKinds; a released kind must never be removed", k)
		}
	}

	items := workItemFixtures()
	seenW := map[history.WorkItemKind]bool{}
	for _, k := range history.WorkItemKinds {
		if seenW[k] {
			t.Fatalf("WorkItemKinds lists %s twice", k)
		}
		seenW[k] = true
		c, ok := items[k]
		if !ok {
			t.Fatalf("WorkItemKinds has %s but workItemFixtures has no fixture for it; add one and run go test -run Golden -update", k)
		}
		if c.item.Kind != k {
			t.Fatalf("fixture under %s has Kind %s", k, c.item.Kind)
		}
	}
	for k := range items {
		if !seenW[k] {
			t.Fatalf("fixture kind %s is not in WorkItemKinds; a released kind must never be removed", k)
		}
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	fixtures := eventFixtures()
	for _, k := range history.EventKinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			c, ok := fixtures[k]
			if !ok {
				t.Fatalf("no fixture for %s", k)
			}
			want := c.event
			if err := want.Validate(); err != nil {
				t.Fatalf("fixture does not validate: %v", err)
			}
			b := mustEncodeEvent(t, want)
			got, err := history.DecodeEvent(b)
			if err != nil {
				t.Fatalf("DecodeEvent(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the event\n got: %+v\nwant: %+v\njson: %s", got, want, b)
			}
			if again := mustEncodeEvent(t, got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding is not stable\nfirst:  %s\nsecond: %s", b, again)
			}
		})
	}
}

func TestWorkItemRoundTrip(t *testing.T) {
	t.Parallel()
	fixtures := workItemFixtures()
	for _, k := range history.WorkItemKinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			c, ok := fixtures[k]
			if !ok {
				t.Fatalf("no fixture for %s", k)
			}
			want := c.item
			if err := want.Validate(); err != nil {
				t.Fatalf("fixture does not validate: %v", err)
			}
			b := mustEncodeWorkItem(t, want)
			got, err := history.DecodeWorkItem(b)
			if err != nil {
				t.Fatalf("DecodeWorkItem(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the work item\n got: %+v\nwant: %+v\njson: %s", got, want, b)
			}
			if again := mustEncodeWorkItem(t, got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding is not stable\nfirst:  %s\nsecond: %s", b, again)
			}
		})
	}
}

// requireAllFieldsSet fails if any field of the struct *ptr is zero, so a field
// added to the type cannot be left out of the all-fields pins below.
func requireAllFieldsSet(t *testing.T, ptr any) {
	t.Helper()
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("%s.%s is zero; set it in this test and pin its JSON name", v.Type().Name(), v.Type().Field(i).Name)
		}
	}
}

// TestEventAllFieldsEncoding pins the JSON name and position of every field of
// Event, ErrorDetails and ParentRef. No real kind uses all fields at once, but
// Validate allows extra fields, so the encoder must carry every one of them.
func TestEventAllFieldsEncoding(t *testing.T) {
	t.Parallel()
	e := history.Event{
		EventID: 3, Kind: history.ActivityFailed, SourceEventID: 2, TimestampMs: ts,
		Name: "n", Version: "v", Input: raw(`"in"`), Output: raw(`"out"`),
		Error: &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: "m", Type: "t", Details: "d", Code: "c",
			Divergence: &history.Divergence{EventID: 6, Expected: "x", Got: "y"}},
		Data: raw(`"data"`), Reason: "r", FireAtMs: ts + 1, SessionID: "s", ChildInstanceID: "c",
		Parent:       &history.ParentRef{InstanceID: "p", ExecutionID: 4, EventID: 5},
		CustomStatus: raw(`"cs"`), TimeMs: ts + 2, GUID: "g", Values: map[string]json.RawMessage{"k": raw(`1`)}, TraceParent: "tp",
		Queue: "q", HeartbeatTimeoutMs: 5000, StartToCloseTimeoutMs: 6000, ScheduleToCloseTimeoutMs: 7000,
	}
	requireAllFieldsSet(t, &e)
	requireAllFieldsSet(t, e.Error)
	requireAllFieldsSet(t, e.Error.Divergence)
	requireAllFieldsSet(t, e.Parent)

	const want = `{"eventId":3,"type":"ActivityFailed","sourceEventId":2,"timestampMs":1732170000000,` +
		`"name":"n","version":"v","input":"in","output":"out",` +
		`"error":{"kind":"infrastructure","message":"m","type":"t","details":"d","code":"c",` +
		`"divergence":{"eventId":6,"expected":"x","got":"y"}},` +
		`"data":"data","reason":"r","fireAtMs":1732170000001,"sessionId":"s","childInstanceId":"c",` +
		`"parent":{"instanceId":"p","executionId":4,"eventId":5},` +
		`"customStatus":"cs","timeMs":1732170000002,"guid":"g","values":{"k":1},"traceParent":"tp",` +
		`"queue":"q","heartbeatTimeoutMs":5000,"startToCloseTimeoutMs":6000,"scheduleToCloseTimeoutMs":7000}`
	b := mustEncodeEvent(t, e)
	if string(b) != want {
		t.Fatalf("encoding changed\n got: %s\nwant: %s", b, want)
	}
	got, err := history.DecodeEvent(b)
	if err != nil {
		t.Fatalf("DecodeEvent: %v", err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip changed the event\n got: %+v\nwant: %+v", got, e)
	}
}

// TestWorkItemAllFieldsEncoding is TestEventAllFieldsEncoding for WorkItem.
func TestWorkItemAllFieldsEncoding(t *testing.T) {
	t.Parallel()
	w := history.WorkItem{
		Kind: history.WorkSubOrchFailed, InstanceID: "i", ExecutionID: 2, ID: 3,
		Name: "n", Version: "v", Input: raw(`"in"`), Output: raw(`"out"`),
		Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: "m", Type: "t", Details: "d", Code: history.CodeInstanceExists},
		Data:  raw(`"data"`), Reason: "r", FireAtMs: ts, SessionID: "s", ChildInstanceID: "c",
		Parent:      &history.ParentRef{InstanceID: "p", ExecutionID: 4, EventID: 5},
		TraceParent: "tp",
		TimeoutMs:   60000,
		Values:      map[string]json.RawMessage{"k": raw(`1`)},
		Queue:       "q", HeartbeatTimeoutMs: 5000,
	}
	requireAllFieldsSet(t, &w)

	const want = `{"type":"SubOrchFailed","instanceId":"i","executionId":2,"id":3,` +
		`"name":"n","version":"v","input":"in","output":"out",` +
		`"error":{"kind":"configuration","message":"m","type":"t","details":"d","code":"instance_exists"},` +
		`"data":"data","reason":"r","fireAtMs":1732170000000,"sessionId":"s","childInstanceId":"c",` +
		`"parent":{"instanceId":"p","executionId":4,"eventId":5},"traceParent":"tp","timeoutMs":60000,"values":{"k":1},` +
		`"queue":"q","heartbeatTimeoutMs":5000}`
	b := mustEncodeWorkItem(t, w)
	if string(b) != want {
		t.Fatalf("encoding changed\n got: %s\nwant: %s", b, want)
	}
	got, err := history.DecodeWorkItem(b)
	if err != nil {
		t.Fatalf("DecodeWorkItem: %v", err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("round trip changed the work item\n got: %+v\nwant: %+v", got, w)
	}
}

// TestPayloadNormalization pins what the encoder does to payload bytes: they
// are embedded once (a JSON string payload stays a JSON string, never a string
// holding JSON), compacted, and <, >, & and U+2028 are escaped. Decoding the
// result is a fixed point, which is what the fuzzers rely on.
func TestPayloadNormalization(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, payload, want string
	}{
		{"string", `"Ada"`, `"Ada"`},
		{"compact", `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"whitespace", "{ \"a\" :\n\t[1, 2] }", `{"a":[1,2]}`},
		{"html", `"<b>&</b>"`, `"\u003cb\u003e\u0026\u003c/b\u003e"`},
		{"line separator", "\"a\u2028b\"", `"a\u2028b"`},
		{"null", `null`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := history.Event{EventID: 2, Kind: history.ActivityScheduled, Name: "Hello", Input: raw(tt.payload)}
			b := mustEncodeEvent(t, e)
			wantDoc := `{"eventId":2,"type":"ActivityScheduled","timestampMs":0,"name":"Hello","input":` + tt.want + `}`
			if string(b) != wantDoc {
				t.Fatalf("encoding\n got: %s\nwant: %s", b, wantDoc)
			}
			got, err := history.DecodeEvent(b)
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if string(got.Input) != tt.want {
				t.Fatalf("decoded input %s, want %s", got.Input, tt.want)
			}
			if !json.Valid(got.Input) {
				t.Fatalf("decoded input %q is not JSON", got.Input)
			}
			if again := mustEncodeEvent(t, got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding is not stable\nfirst:  %s\nsecond: %s", b, again)
			}
		})
	}
}
