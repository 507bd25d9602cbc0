package history_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// The golden tests are not parallel: with -update they write the files the
// parallel tests read.

// TestGoldenEvents checks that every kind still encodes to the bytes recorded
// in testdata/events.golden.json and that the recorded bytes still decode to
// the fixture. A renamed, retyped or reordered JSON field breaks it.
func TestGoldenEvents(t *testing.T) {
	fixtures := eventFixtures()
	keys := make([]string, 0, len(history.EventKinds))
	docs := make([][]byte, 0, len(history.EventKinds))
	for _, k := range history.EventKinds {
		c, ok := fixtures[k]
		if !ok {
			t.Fatalf("no fixture for %s", k)
		}
		keys = append(keys, string(k))
		docs = append(docs, mustEncodeEvent(t, c.event))
	}
	checkGoldenFile(t, eventsGolden, goldenFile(keys, docs))

	golden := readGolden(t, eventsGolden)
	for name, doc := range golden {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := history.EventKind(name)
			if !slices.Contains(history.EventKinds, k) {
				t.Fatalf("golden kind %s is no longer in EventKinds; stored events of this kind would become unreadable", k)
			}
			got, err := history.DecodeEvent(doc)
			if err != nil {
				t.Fatalf("golden %s no longer decodes: %v", doc, err)
			}
			if want := fixtures[k].event; !reflect.DeepEqual(got, want) {
				t.Fatalf("golden document decodes differently\n got: %+v\nwant: %+v", got, want)
			}
			if enc := mustEncodeEvent(t, got); !bytes.Equal(enc, doc) {
				t.Fatalf("encoding changed\ngolden: %s\ncurrent: %s", doc, enc)
			}
		})
	}
}

// TestGoldenWorkItems is TestGoldenEvents for testdata/workitems.golden.json.
func TestGoldenWorkItems(t *testing.T) {
	fixtures := workItemFixtures()
	keys := make([]string, 0, len(history.WorkItemKinds))
	docs := make([][]byte, 0, len(history.WorkItemKinds))
	for _, k := range history.WorkItemKinds {
		c, ok := fixtures[k]
		if !ok {
			t.Fatalf("no fixture for %s", k)
		}
		keys = append(keys, string(k))
		docs = append(docs, mustEncodeWorkItem(t, c.item))
	}
	checkGoldenFile(t, workItemsGolden, goldenFile(keys, docs))

	golden := readGolden(t, workItemsGolden)
	for name, doc := range golden {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := history.WorkItemKind(name)
			if !slices.Contains(history.WorkItemKinds, k) {
				t.Fatalf("golden kind %s is no longer in WorkItemKinds; queued messages of this kind would become unreadable", k)
			}
			got, err := history.DecodeWorkItem(doc)
			if err != nil {
				t.Fatalf("golden %s no longer decodes: %v", doc, err)
			}
			if want := fixtures[k].item; !reflect.DeepEqual(got, want) {
				t.Fatalf("golden document decodes differently\n got: %+v\nwant: %+v", got, want)
			}
			if enc := mustEncodeWorkItem(t, got); !bytes.Equal(enc, doc) {
				t.Fatalf("encoding changed\ngolden: %s\ncurrent: %s", doc, enc)
			}
		})
	}
}

// addUnknownFields returns doc with members a newer release might add, at the
// top level and inside the nested error and parent objects.
func addUnknownFields(t *testing.T, doc []byte) []byte {
	t.Helper()
	m := object(t, doc)
	m["schemaVersion"] = json.RawMessage(`7`)
	m["futureField"] = json.RawMessage(`{"nested":[1,"two",null,{"deep":true}]}`)
	m["futureText"] = json.RawMessage(`"hello"`)
	for _, nested := range []string{"error", "parent"} {
		if v, ok := m[nested]; ok {
			n := object(t, v)
			n["retryable"] = json.RawMessage(`true`)
			n["futureList"] = json.RawMessage(`[]`)
			m[nested] = marshalObject(t, n)
		}
	}
	return marshalObject(t, m)
}

// TestDecodeEventIgnoresUnknownFields: a document written by a newer release,
// with members this release does not know, still decodes (forward-compatible
// reads), and the unknown members are dropped.
func TestDecodeEventIgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	fixtures := eventFixtures()
	for name, doc := range readGolden(t, eventsGolden) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := addUnknownFields(t, doc)
			got, err := history.DecodeEvent(in)
			if err != nil {
				t.Fatalf("DecodeEvent(%s): %v", in, err)
			}
			if want := fixtures[history.EventKind(name)].event; !reflect.DeepEqual(got, want) {
				t.Fatalf("unknown fields changed the event\n got: %+v\nwant: %+v", got, want)
			}
			if enc := mustEncodeEvent(t, got); !bytes.Equal(enc, doc) {
				t.Fatalf("re-encoding kept unknown fields or changed\n got: %s\nwant: %s", enc, doc)
			}
		})
	}
}

// TestDecodeWorkItemIgnoresUnknownFields is the work-item twin.
func TestDecodeWorkItemIgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	fixtures := workItemFixtures()
	for name, doc := range readGolden(t, workItemsGolden) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := addUnknownFields(t, doc)
			got, err := history.DecodeWorkItem(in)
			if err != nil {
				t.Fatalf("DecodeWorkItem(%s): %v", in, err)
			}
			if want := fixtures[history.WorkItemKind(name)].item; !reflect.DeepEqual(got, want) {
				t.Fatalf("unknown fields changed the work item\n got: %+v\nwant: %+v", got, want)
			}
			if enc := mustEncodeWorkItem(t, got); !bytes.Equal(enc, doc) {
				t.Fatalf("re-encoding kept unknown fields or changed\n got: %s\nwant: %s", enc, doc)
			}
		})
	}
}

// TestDecodeEventOmittedOptionalFields: every member of a golden document that
// is not required for its kind may be left out (an older release did not
// write it); the field then decodes to its zero value and nothing else
// changes. The minimal document, with only the required members, decodes too.
func TestDecodeEventOmittedOptionalFields(t *testing.T) {
	t.Parallel()
	fixtures := eventFixtures()
	for _, k := range history.EventKinds {
		c := fixtures[k]
		doc := mustEncodeEvent(t, c.event)
		required := append(slices.Clone(alwaysRequiredEvent), c.required...)
		minimal := c.event
		members := object(t, doc)
		for key := range members {
			if slices.Contains(required, key) {
				continue
			}
			zeroJSONField(t, &minimal, key)
			t.Run(string(k)+"/without_"+key, func(t *testing.T) {
				t.Parallel()
				want := c.event
				zeroJSONField(t, &want, key)
				in := withMember(t, doc, key, "")
				got, err := history.DecodeEvent(in)
				if err != nil {
					t.Fatalf("DecodeEvent(%s): %v (is %q required for %s?)", in, err, key, k)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("omitting %q\n got: %+v\nwant: %+v", key, got, want)
				}
			})
		}
		t.Run(string(k)+"/minimal", func(t *testing.T) {
			t.Parallel()
			m := object(t, doc)
			for key := range m {
				if !slices.Contains(required, key) {
					delete(m, key)
				}
			}
			in := marshalObject(t, m)
			got, err := history.DecodeEvent(in)
			if err != nil {
				t.Fatalf("DecodeEvent(%s): %v", in, err)
			}
			if !reflect.DeepEqual(got, minimal) {
				t.Fatalf("minimal document\n got: %+v\nwant: %+v", got, minimal)
			}
		})
	}
}

// TestDecodeWorkItemOmittedOptionalFields is the work-item twin.
func TestDecodeWorkItemOmittedOptionalFields(t *testing.T) {
	t.Parallel()
	fixtures := workItemFixtures()
	for _, k := range history.WorkItemKinds {
		c := fixtures[k]
		doc := mustEncodeWorkItem(t, c.item)
		required := append(slices.Clone(alwaysRequiredWorkItem), c.required...)
		minimal := c.item
		for key := range object(t, doc) {
			if slices.Contains(required, key) {
				continue
			}
			zeroJSONField(t, &minimal, key)
			t.Run(string(k)+"/without_"+key, func(t *testing.T) {
				t.Parallel()
				want := c.item
				zeroJSONField(t, &want, key)
				in := withMember(t, doc, key, "")
				got, err := history.DecodeWorkItem(in)
				if err != nil {
					t.Fatalf("DecodeWorkItem(%s): %v (is %q required for %s?)", in, err, key, k)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("omitting %q\n got: %+v\nwant: %+v", key, got, want)
				}
			})
		}
		t.Run(string(k)+"/minimal", func(t *testing.T) {
			t.Parallel()
			m := object(t, doc)
			for key := range m {
				if !slices.Contains(required, key) {
					delete(m, key)
				}
			}
			in := marshalObject(t, m)
			got, err := history.DecodeWorkItem(in)
			if err != nil {
				t.Fatalf("DecodeWorkItem(%s): %v", in, err)
			}
			if !reflect.DeepEqual(got, minimal) {
				t.Fatalf("minimal document\n got: %+v\nwant: %+v", got, minimal)
			}
		})
	}
}

// TestDecodeHandWrittenDocuments decodes documents as other writers (an older
// release, a hand-repaired row) may have stored them: members in another
// order, optional members absent, extra members present.
func TestDecodeHandWrittenDocuments(t *testing.T) {
	t.Parallel()
	events := []struct {
		name, doc string
		want      history.Event
	}{
		{
			name: "no timestamp",
			doc:  `{"type":"OrchestrationStarted","name":"Hello","eventId":1}`,
			want: history.Event{EventID: 1, Kind: history.OrchestrationStarted, Name: "Hello"},
		},
		{
			name: "completion without output",
			doc:  `{"eventId":3,"type":"ActivityCompleted","sourceEventId":2,"timestampMs":5}`,
			want: history.Event{EventID: 3, Kind: history.ActivityCompleted, SourceEventID: 2, TimestampMs: 5},
		},
		{
			name: "cleared custom status",
			doc:  `{"eventId":4,"type":"CustomStatusUpdated","timestampMs":5}`,
			want: history.Event{EventID: 4, Kind: history.CustomStatusUpdated, TimestampMs: 5},
		},
		{
			name: "error without type and details",
			doc:  `{"eventId":9,"type":"OrchestrationFailed","error":{"kind":"canceled","message":"stop"}}`,
			want: history.Event{EventID: 9, Kind: history.OrchestrationFailed,
				Error: &history.ErrorDetails{Kind: history.ErrorCanceled, Message: "stop"}},
		},
		{
			name: "extra members and whitespace",
			doc: "{\n  \"eventId\": 2,\n  \"type\": \"ActivityScheduled\",\n  \"name\": \"Hello\",\n" +
				"  \"input\": \"Ada\",\n  \"retryPolicy\": {\"max\": 3},\n  \"tags\": [\"a\"]\n}",
			want: history.Event{EventID: 2, Kind: history.ActivityScheduled, Name: "Hello", Input: raw(`"Ada"`)},
		},
	}
	for _, tt := range events {
		t.Run("event/"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := history.DecodeEvent([]byte(tt.doc))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("\n got: %+v\nwant: %+v", got, tt.want)
			}
		})
	}

	items := []struct {
		name, doc string
		want      history.WorkItem
	}{
		{
			name: "raised event without execution",
			doc:  `{"instanceId":"i","type":"ExternalRaised","name":"Approval"}`,
			want: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: "Approval"},
		},
		{
			name: "bare cancel",
			doc:  `{"type":"CancelInstance","instanceId":"i"}`,
			want: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i"},
		},
		{
			name: "start with extra members",
			doc:  `{"type":"StartOrchestration","instanceId":"i","executionId":1,"name":"Hello","priority":5,"parent":null}`,
			want: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "i", ExecutionID: 1, Name: "Hello"},
		},
	}
	for _, tt := range items {
		t.Run("workitem/"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := history.DecodeWorkItem([]byte(tt.doc))
			if err != nil {
				t.Fatalf("DecodeWorkItem: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("\n got: %+v\nwant: %+v", got, tt.want)
			}
		})
	}
}
