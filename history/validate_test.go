package history_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// badValues are JSON values that leave a required member missing or invalid.
// null counts: encoding/json leaves the field at its zero value.
var badValues = map[string][]string{
	"eventId":         {"0", "-1", "-9223372036854775808", "null"},
	"type":            {`""`, `"Bogus"`, `"activityScheduled"`, `"StartOrchestration "`, "null"},
	"name":            {`""`, "null"},
	"sourceEventId":   {"0", "-1", "null"},
	"error":           {"null", `{"kind":"bogus","message":"x"}`, `{"message":"no kind"}`, `{"kind":"Application","message":"x"}`},
	"fireAtMs":        {"0", "-1", "null"},
	"childInstanceId": {`""`, "null"},
	"timeMs":          {"0", "null"},
	"guid":            {`""`, "null"},
	"instanceId":      {`""`, "null"},
	"executionId":     {"0", "-1", "null"},
	"id":              {"0", "-1", "null"},
}

// errorWord is the word an error about a missing or bad member must contain.
// A bad error object is reported by its kind, not by the member name.
func errorWord(key, value string) string {
	if key == "error" && value != "" && value != "null" {
		return "kind"
	}
	return key
}

// TestEventRequiredFields removes, then spoils, each required member of each
// kind's fixture. Decoding must fail with ErrInvalid and say which kind and
// member; the same value built in Go must fail Validate and EncodeEvent.
func TestEventRequiredFields(t *testing.T) {
	t.Parallel()
	fixtures := eventFixtures()
	for _, k := range history.EventKinds {
		c := fixtures[k]
		doc := mustEncodeEvent(t, c.event)
		for _, key := range append(slices.Clone(alwaysRequiredEvent), c.required...) {
			for _, v := range append([]string{""}, badValues[key]...) {
				name := string(k) + "/" + key + "=" + v
				if v == "" {
					name = string(k) + "/without_" + key
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					in := withMember(t, doc, key, v)
					words := []string{errorWord(key, v)}
					if key != "type" {
						words = append(words, string(k))
					}
					got, err := history.DecodeEvent(in)
					requireInvalid(t, err, words...)
					if !isZeroEvent(got) {
						t.Fatalf("DecodeEvent returned a half-filled event %+v with its error", got)
					}

					// The same value built in Go.
					var e history.Event
					if err := json.Unmarshal(in, &e); err != nil {
						t.Fatalf("unmarshal %s: %v", in, err)
					}
					requireInvalid(t, e.Validate(), words...)
					b, err := history.EncodeEvent(&e)
					requireInvalid(t, err, words...)
					if b != nil {
						t.Fatalf("EncodeEvent returned %s with its error", b)
					}
				})
			}
		}
	}
}

// TestWorkItemRequiredFields is the work-item twin of TestEventRequiredFields.
func TestWorkItemRequiredFields(t *testing.T) {
	t.Parallel()
	fixtures := workItemFixtures()
	for _, k := range history.WorkItemKinds {
		c := fixtures[k]
		doc := mustEncodeWorkItem(t, c.item)
		for _, key := range append(slices.Clone(alwaysRequiredWorkItem), c.required...) {
			for _, v := range append([]string{""}, badValues[key]...) {
				name := string(k) + "/" + key + "=" + v
				if v == "" {
					name = string(k) + "/without_" + key
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					in := withMember(t, doc, key, v)
					words := []string{errorWord(key, v)}
					if key != "type" {
						words = append(words, string(k))
					}
					got, err := history.DecodeWorkItem(in)
					requireInvalid(t, err, words...)
					if !isZeroWorkItem(got) {
						t.Fatalf("DecodeWorkItem returned a half-filled work item %+v with its error", got)
					}

					var w history.WorkItem
					if err := json.Unmarshal(in, &w); err != nil {
						t.Fatalf("unmarshal %s: %v", in, err)
					}
					requireInvalid(t, w.Validate(), words...)
					b, err := history.EncodeWorkItem(&w)
					requireInvalid(t, err, words...)
					if b != nil {
						t.Fatalf("EncodeWorkItem returned %s with its error", b)
					}
				})
			}
		}
	}
}

func isZeroEvent(e history.Event) bool {
	return e.EventID == 0 && e.Kind == "" && e.Error == nil && e.Parent == nil && e.Input == nil && e.Name == ""
}

func isZeroWorkItem(w history.WorkItem) bool {
	return w.Kind == "" && w.InstanceID == "" && w.Error == nil && w.Parent == nil && w.Input == nil && w.Name == ""
}

// TestNegativeOptionalIDs: ids that a kind does not require may be absent but
// never negative.
func TestNegativeOptionalIDs(t *testing.T) {
	t.Parallel()
	events := eventFixtures()
	for _, k := range history.EventKinds {
		if slices.Contains(events[k].required, "sourceEventId") {
			continue // covered by TestEventRequiredFields
		}
		t.Run("event/"+string(k)+"/sourceEventId", func(t *testing.T) {
			t.Parallel()
			in := withMember(t, mustEncodeEvent(t, events[k].event), "sourceEventId", "-1")
			_, err := history.DecodeEvent(in)
			requireInvalid(t, err, "sourceEventId", string(k))
			// A positive sourceEventId on such a kind is tolerated.
			in = withMember(t, in, "sourceEventId", "1")
			if _, err := history.DecodeEvent(in); err != nil {
				t.Fatalf("DecodeEvent(%s): %v", in, err)
			}
		})
	}
	items := workItemFixtures()
	for _, k := range history.WorkItemKinds {
		for _, key := range []string{"executionId", "id"} {
			if slices.Contains(items[k].required, key) {
				continue
			}
			t.Run("workitem/"+string(k)+"/"+key, func(t *testing.T) {
				t.Parallel()
				in := withMember(t, mustEncodeWorkItem(t, items[k].item), key, "-1")
				_, err := history.DecodeWorkItem(in)
				requireInvalid(t, err, key, string(k))
			})
		}
	}
}

// TestErrorDetailsOnOptionalField: an error is validated wherever it appears,
// including on kinds that do not require one.
func TestErrorDetailsOnOptionalField(t *testing.T) {
	t.Parallel()
	e := history.Event{EventID: 9, Kind: history.OrchestrationCompleted,
		Error: &history.ErrorDetails{Kind: "bogus", Message: "x"}}
	requireInvalid(t, e.Validate(), "bogus", "OrchestrationCompleted")
	_, err := history.EncodeEvent(&e)
	requireInvalid(t, err, "bogus")
	_, err = history.DecodeEvent([]byte(`{"eventId":9,"type":"OrchestrationCompleted","error":{"kind":"bogus","message":"x"}}`))
	requireInvalid(t, err, "bogus")

	w := history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i",
		Error: &history.ErrorDetails{Kind: "bogus", Message: "x"}}
	requireInvalid(t, w.Validate(), "bogus", "CancelInstance")
	_, err = history.EncodeWorkItem(&w)
	requireInvalid(t, err, "bogus")
	_, err = history.DecodeWorkItem([]byte(`{"type":"CancelInstance","instanceId":"i","error":{"kind":"bogus"}}`))
	requireInvalid(t, err, "bogus")
}

func TestErrorDetailsValidate(t *testing.T) {
	t.Parallel()
	known := []history.ErrorKind{
		history.ErrorApplication, history.ErrorCanceled, history.ErrorPoison, history.ErrorNondeterminism,
		history.ErrorConfiguration, history.ErrorInfrastructure, history.ErrorTimeout,
	}
	// The kind strings are stored; pin them.
	wantStrings := []string{"application", "canceled", "poison", "nondeterminism", "configuration", "infrastructure", "timeout"}
	for i, k := range known {
		if string(k) != wantStrings[i] {
			t.Fatalf("error kind %d is %q, want %q", i, k, wantStrings[i])
		}
		d := history.ErrorDetails{Kind: k}
		if err := d.Validate(); err != nil {
			t.Fatalf("Validate(%s): %v", k, err)
		}
	}
	for _, k := range []history.ErrorKind{"", "bogus", "Application", "cancelled", " timeout"} {
		d := history.ErrorDetails{Kind: k, Message: "m"}
		requireInvalid(t, d.Validate(), "unknown", "kind")
		if !strings.Contains(d.Validate().Error(), `"`+string(k)+`"`) {
			t.Fatalf("error %q does not quote the bad kind %q", d.Validate(), k)
		}
	}
}

func TestErrorDetailsError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    history.ErrorDetails
		want string
	}{
		{history.ErrorDetails{Kind: history.ErrorApplication, Message: "payment declined"}, "application: payment declined"},
		{history.ErrorDetails{Kind: history.ErrorTimeout, Message: "too slow", Type: "T", Details: "stack"}, "timeout: too slow"},
		{history.ErrorDetails{Kind: history.ErrorCanceled}, "canceled: "},
	}
	for _, tt := range tests {
		var err error = &tt.d // *ErrorDetails is an error
		if got := err.Error(); got != tt.want {
			t.Fatalf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestDecodeMalformed: anything that is not one JSON object of the right shape
// is rejected with ErrInvalid, and no partial value is returned.
func TestDecodeMalformed(t *testing.T) {
	t.Parallel()
	const okEvent = `{"eventId":1,"type":"OrchestrationStarted","name":"Hello"}`
	const okItem = `{"type":"CancelInstance","instanceId":"i"}`
	common := []struct{ name, doc string }{
		{"empty", ``},
		{"blank", " \n\t"},
		{"truncated", `{"eventId":1,"type":`},
		{"open brace", `{`},
		{"bad literal", `nul`},
		{"null", `null`},
		{"empty object", `{}`},
		{"array", `[]`},
		{"number", `42`},
		{"string", `"OrchestrationStarted"`},
		{"true", `true`},
		{"single quotes", `{'type':'CancelInstance'}`},
		{"trailing comma", `{"type":"CancelInstance","instanceId":"i",}`},
		{"control char", "{\"type\":\"CancelInstance\",\"instanceId\":\"a\x01b\"}"},
		{"bom", "\xef\xbb\xbf" + okItem},
	}
	events := append(slices.Clone(common), []struct{ name, doc string }{
		{"array of event", `[` + okEvent + `]`},
		{"two documents", okEvent + okEvent},
		{"trailing garbage", okEvent + ` x`},
		{"eventId string", `{"eventId":"1","type":"OrchestrationStarted","name":"Hello"}`},
		{"eventId fraction", `{"eventId":1.5,"type":"OrchestrationStarted","name":"Hello"}`},
		{"eventId exponent", `{"eventId":1e3,"type":"OrchestrationStarted","name":"Hello"}`},
		{"eventId overflow", `{"eventId":9223372036854775808,"type":"OrchestrationStarted","name":"Hello"}`},
		{"eventId bool", `{"eventId":true,"type":"OrchestrationStarted","name":"Hello"}`},
		{"type number", `{"eventId":1,"type":1,"name":"Hello"}`},
		{"type object", `{"eventId":1,"type":{},"name":"Hello"}`},
		{"name number", `{"eventId":1,"type":"OrchestrationStarted","name":5}`},
		{"name array", `{"eventId":1,"type":"OrchestrationStarted","name":["Hello"]}`},
		{"timestamp string", `{"eventId":1,"type":"OrchestrationStarted","name":"Hello","timestampMs":"now"}`},
		{"sourceEventId bool", `{"eventId":3,"type":"ActivityCompleted","sourceEventId":true}`},
		{"fireAtMs string", `{"eventId":5,"type":"TimerCreated","fireAtMs":"soon"}`},
		{"error string", `{"eventId":9,"type":"OrchestrationFailed","error":"boom"}`},
		{"error array", `{"eventId":9,"type":"OrchestrationFailed","error":[]}`},
		{"error kind number", `{"eventId":9,"type":"OrchestrationFailed","error":{"kind":1}}`},
		{"error message object", `{"eventId":9,"type":"OrchestrationFailed","error":{"kind":"poison","message":{}}}`},
		{"parent string", `{"eventId":1,"type":"OrchestrationStarted","name":"Hello","parent":"p"}`},
		{"parent eventId string", `{"eventId":1,"type":"OrchestrationStarted","name":"Hello","parent":{"eventId":"1"}}`},
		{"bad payload", `{"eventId":1,"type":"OrchestrationStarted","name":"Hello","input":{"a":}}`},
		{"timeMs float", `{"eventId":16,"type":"NowRecorded","timeMs":1.0}`},
		{"guid number", `{"eventId":17,"type":"GUIDRecorded","guid":42}`},
	}...)
	for _, tt := range events {
		t.Run("event/"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := history.DecodeEvent([]byte(tt.doc))
			requireInvalid(t, err)
			if !isZeroEvent(got) {
				t.Fatalf("DecodeEvent returned %+v with its error", got)
			}
		})
	}
	items := append(slices.Clone(common), []struct{ name, doc string }{
		{"array of item", `[` + okItem + `]`},
		{"two documents", okItem + okItem},
		{"trailing garbage", okItem + ` x`},
		{"event document", okEvent},
		{"type number", `{"type":7,"instanceId":"i"}`},
		{"instanceId number", `{"type":"CancelInstance","instanceId":42}`},
		{"executionId string", `{"type":"CancelInstance","instanceId":"i","executionId":"1"}`},
		{"executionId fraction", `{"type":"CancelInstance","instanceId":"i","executionId":0.5}`},
		{"id array", `{"type":"CancelInstance","instanceId":"i","id":[]}`},
		{"error number", `{"type":"CancelInstance","instanceId":"i","error":1}`},
		{"parent string", `{"type":"CancelInstance","instanceId":"i","parent":"p"}`},
		{"reason number", `{"type":"CancelInstance","instanceId":"i","reason":5}`},
		{"fireAtMs overflow", `{"type":"TimerFired","instanceId":"i","executionId":1,"id":5,"fireAtMs":1e99}`},
		{"bad payload", `{"type":"ExternalRaised","instanceId":"i","name":"n","data":[1,]}`},
	}...)
	for _, tt := range items {
		t.Run("workitem/"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := history.DecodeWorkItem([]byte(tt.doc))
			requireInvalid(t, err)
			if !isZeroWorkItem(got) {
				t.Fatalf("DecodeWorkItem returned %+v with its error", got)
			}
		})
	}
}

// TestUnknownKind: a kind this release does not know is corrupt data, and the
// error quotes it.
func TestUnknownKind(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Bogus", "orchestrationStarted", "StartOrchestration", "ActivityExecute"} {
		_, err := history.DecodeEvent([]byte(`{"eventId":1,"type":"` + kind + `","name":"x"}`))
		requireInvalid(t, err, "unknown", "event", "type", kind)
	}
	for _, kind := range []string{"Bogus", "startOrchestration", "OrchestrationStarted", "ActivityScheduled"} {
		_, err := history.DecodeWorkItem([]byte(`{"type":"` + kind + `","instanceId":"i","executionId":1,"id":1,"name":"x"}`))
		requireInvalid(t, err, "unknown", "work", "item", "type", kind)
	}
}

// TestEncodeRefusesInvalid: the encoders validate first, so an invalid value
// never reaches a store.
func TestEncodeRefusesInvalid(t *testing.T) {
	t.Parallel()
	events := []struct {
		name  string
		e     history.Event
		words []string
	}{
		{"zero value", history.Event{}, []string{"type"}},
		{"unknown kind", history.Event{EventID: 1, Kind: "Bogus", Name: "x"}, []string{"Bogus"}},
		{"eventId zero", history.Event{Kind: history.OrchestrationStarted, Name: "x"}, []string{"eventId"}},
		{"eventId negative", history.Event{EventID: -4, Kind: history.OrchestrationStarted, Name: "x"}, []string{"eventId", "-4"}},
		{"sourceEventId negative", history.Event{EventID: 2, Kind: history.ActivityScheduled, Name: "x", SourceEventID: -1}, []string{"sourceEventId"}},
		{"no name", history.Event{EventID: 2, Kind: history.ActivityScheduled}, []string{"name"}},
		{"bad error kind", history.Event{EventID: 2, Kind: history.ActivityFailed, SourceEventID: 1, Error: &history.ErrorDetails{Kind: "oops"}}, []string{"oops"}},
		// Validate does not look inside payloads; the encoder still refuses them.
		{"payload not JSON", history.Event{EventID: 2, Kind: history.ActivityScheduled, Name: "x", Input: raw(`{oops`)}, nil},
	}
	for _, tt := range events {
		t.Run("event/"+tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := history.EncodeEvent(&tt.e)
			requireInvalid(t, err, tt.words...)
			if b != nil {
				t.Fatalf("EncodeEvent returned %s with its error", b)
			}
		})
	}
	items := []struct {
		name  string
		w     history.WorkItem
		words []string
	}{
		{"zero value", history.WorkItem{}, []string{"type"}},
		{"unknown kind", history.WorkItem{Kind: "Bogus", InstanceID: "i"}, []string{"Bogus"}},
		{"no instance", history.WorkItem{Kind: history.WorkCancelInstance}, []string{"instanceId"}},
		{"executionId negative", history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", ExecutionID: -2}, []string{"executionId", "-2"}},
		{"no id", history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: "i", ExecutionID: 1, Name: "x"}, []string{"id"}},
		{"bad error kind", history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Error: &history.ErrorDetails{Kind: "oops"}}, []string{"oops"}},
		{"payload not JSON", history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: "x", Data: raw(`[1,`)}, nil},
	}
	for _, tt := range items {
		t.Run("workitem/"+tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := history.EncodeWorkItem(&tt.w)
			requireInvalid(t, err, tt.words...)
			if b != nil {
				t.Fatalf("EncodeWorkItem returned %s with its error", b)
			}
		})
	}
}

// TestKindStrings pins the stored names of every kind: they are the JSON
// "type" values and the event_type column of the stores.
func TestKindStrings(t *testing.T) {
	t.Parallel()
	wantEvents := []string{
		"OrchestrationStarted", "OrchestrationCompleted", "OrchestrationFailed",
		"OrchestrationContinuedAsNew", "OrchestrationCancelRequested",
		"ActivityScheduled", "ActivityCompleted", "ActivityFailed", "ActivityCancelRequested",
		"TimerCreated", "TimerFired",
		"ExternalSubscribed", "ExternalEvent", "ExternalSubscribedCancelled",
		"SubOrchestrationScheduled", "SubOrchestrationCompleted", "SubOrchestrationFailed",
		"SubOrchestrationCancelRequested",
		"CustomStatusUpdated", "NowRecorded", "GUIDRecorded",
	}
	// Released kinds keep their place; new ones are appended.
	if len(history.EventKinds) < len(wantEvents) {
		t.Fatalf("EventKinds has %d kinds, want at least %d", len(history.EventKinds), len(wantEvents))
	}
	for i, want := range wantEvents {
		if got := string(history.EventKinds[i]); got != want {
			t.Fatalf("EventKinds[%d] = %q, want %q", i, got, want)
		}
	}
	wantItems := []string{
		"StartOrchestration", "ActivityExecute", "ActivityCompleted", "ActivityFailed",
		"TimerFired", "ExternalRaised", "SubOrchCompleted", "SubOrchFailed",
		"CancelInstance", "ContinueAsNew",
	}
	if len(history.WorkItemKinds) < len(wantItems) {
		t.Fatalf("WorkItemKinds has %d kinds, want at least %d", len(history.WorkItemKinds), len(wantItems))
	}
	for i, want := range wantItems {
		if got := string(history.WorkItemKinds[i]); got != want {
			t.Fatalf("WorkItemKinds[%d] = %q, want %q", i, got, want)
		}
	}
}

func TestEventKindKnown(t *testing.T) {
	t.Parallel()
	for _, k := range history.EventKinds {
		if !k.Known() {
			t.Fatalf("%s.Known() = false for a listed kind", k)
		}
	}
	for _, k := range []history.EventKind{"", "Bogus", "activityScheduled", "ACTIVITYSCHEDULED", "ActivityScheduled ", "StartOrchestration", "ExternalRaised"} {
		if k.Known() {
			t.Fatalf("%q.Known() = true", k)
		}
	}
}

func TestEventKindIsTerminal(t *testing.T) {
	t.Parallel()
	terminal := map[history.EventKind]bool{
		history.OrchestrationCompleted:      true,
		history.OrchestrationFailed:         true,
		history.OrchestrationContinuedAsNew: true,
	}
	for _, k := range history.EventKinds {
		if got := k.IsTerminal(); got != terminal[k] {
			t.Fatalf("%s.IsTerminal() = %v, want %v", k, got, terminal[k])
		}
	}
	for _, k := range []history.EventKind{"", "Bogus", "orchestrationCompleted"} {
		if k.IsTerminal() {
			t.Fatalf("%q.IsTerminal() = true", k)
		}
	}
}

func TestWorkItemKindKnown(t *testing.T) {
	t.Parallel()
	for _, k := range history.WorkItemKinds {
		if !k.Known() {
			t.Fatalf("%s.Known() = false for a listed kind", k)
		}
	}
	for _, k := range []history.WorkItemKind{"", "Bogus", "startOrchestration", "OrchestrationStarted", "ActivityScheduled", "ExternalEvent"} {
		if k.Known() {
			t.Fatalf("%q.Known() = true", k)
		}
	}
}

// TestErrInvalidIsSentinel: ErrInvalid is matched with errors.Is, through any
// amount of wrapping by callers.
func TestErrInvalidIsSentinel(t *testing.T) {
	t.Parallel()
	_, err := history.DecodeEvent([]byte(`{}`))
	wrapped := errors.Join(errors.New("loading history"), err)
	if !errors.Is(wrapped, history.ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", wrapped)
	}
	if history.ErrInvalid.Error() != "invalid history data" {
		t.Fatalf("ErrInvalid = %q", history.ErrInvalid)
	}
}
