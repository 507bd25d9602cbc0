package history_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// update rewrites the golden files from the fixtures. The golden files are the
// storage contract: regenerate them only for a new kind or a new optional
// field, never to paper over a changed encoding of an existing one.
var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the fixtures")

const (
	eventsGolden    = "testdata/events.golden.json"
	workItemsGolden = "testdata/workitems.golden.json"
)

// ts is the base wall-clock time of the fixtures (2024-11-21T06:20:00Z).
const ts int64 = 1732170000000

// eventCase is the fixture of one event kind: a fully populated valid event and
// the JSON keys, beyond the always-required eventId and type, without which an
// event of that kind is invalid. The list is written from the documented
// contract, independently of the package's own rule table.
type eventCase struct {
	event    history.Event
	required []string
}

// workItemCase is the work-item twin of eventCase; instanceId and type are
// always required and not listed.
type workItemCase struct {
	item     history.WorkItem
	required []string
}

// raw returns s as a payload. Fixture payloads are compact and free of <, >
// and &, so they survive encoding byte for byte.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// eventFixtures returns a fresh fixture per event kind; callers may mutate it.
func eventFixtures() map[history.EventKind]eventCase {
	return map[history.EventKind]eventCase{
		history.OrchestrationStarted: {event: history.Event{
			EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ts,
			Name: "ProcessOrder", Version: "1.2.0", Input: raw(`{"orderId":"order-42","items":[1,2,3]}`),
			Parent: &history.ParentRef{InstanceID: "customer-7", ExecutionID: 2, EventID: 5},
			Values: map[string]json.RawMessage{"stage": raw(`"packing"`)},
		}, required: []string{"name"}},
		history.OrchestrationCompleted: {event: history.Event{
			EventID: 12, Kind: history.OrchestrationCompleted, TimestampMs: ts + 12,
			Output: raw(`{"status":"shipped","total":129.5}`),
		}},
		history.OrchestrationFailed: {event: history.Event{
			EventID: 12, Kind: history.OrchestrationFailed, TimestampMs: ts + 12,
			Error: &history.ErrorDetails{
				Kind: history.ErrorApplication, Message: "payment declined",
				Type: "*payments.DeclinedError", Details: "card ending 4242 declined",
			},
		}, required: []string{"error"}},
		history.OrchestrationContinuedAsNew: {event: history.Event{
			EventID: 30, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ts + 30,
			Version: "1.3.0", Input: raw(`{"cursor":"page-2"}`),
		}},
		history.OrchestrationCancelRequested: {event: history.Event{
			EventID: 7, Kind: history.OrchestrationCancelRequested, TimestampMs: ts + 7,
			Reason: "customer cancelled the order",
		}},
		history.ActivityScheduled: {event: history.Event{
			EventID: 2, Kind: history.ActivityScheduled, TimestampMs: ts + 2,
			Name: "ChargeCard", Input: raw(`"Ada"`), SessionID: "session-eu-1",
		}, required: []string{"name"}},
		history.ActivityCompleted: {event: history.Event{
			EventID: 3, Kind: history.ActivityCompleted, SourceEventID: 2, TimestampMs: ts + 3,
			Output: raw(`{"receipt":"r-981"}`),
		}, required: []string{"sourceEventId"}},
		history.ActivityFailed: {event: history.Event{
			EventID: 3, Kind: history.ActivityFailed, SourceEventID: 2, TimestampMs: ts + 3,
			Error: &history.ErrorDetails{
				Kind: history.ErrorTimeout, Message: "activity timed out after 30s",
				Type: "context.deadlineExceededError", Details: "attempt 3 of 3",
			},
		}, required: []string{"sourceEventId", "error"}},
		history.ActivityCancelRequested: {event: history.Event{
			EventID: 4, Kind: history.ActivityCancelRequested, SourceEventID: 2, TimestampMs: ts + 4,
			Reason: "lost race",
		}, required: []string{"sourceEventId"}},
		history.TimerCreated: {event: history.Event{
			EventID: 5, Kind: history.TimerCreated, TimestampMs: ts + 5,
			FireAtMs: ts + 60_000,
		}, required: []string{"fireAtMs"}},
		history.TimerFired: {event: history.Event{
			EventID: 6, Kind: history.TimerFired, SourceEventID: 5, TimestampMs: ts + 60_001,
			FireAtMs: ts + 60_000,
		}, required: []string{"sourceEventId", "fireAtMs"}},
		history.ExternalSubscribed: {event: history.Event{
			EventID: 8, Kind: history.ExternalSubscribed, TimestampMs: ts + 8,
			Name: "Approval",
		}, required: []string{"name"}},
		history.ExternalEvent: {event: history.Event{
			EventID: 9, Kind: history.ExternalEvent, TimestampMs: ts + 9,
			Name: "Approval", Data: raw(`{"approved":true,"by":"grace"}`),
		}, required: []string{"name"}},
		history.ExternalSubscribedCanceled: {event: history.Event{
			EventID: 10, Kind: history.ExternalSubscribedCanceled, SourceEventID: 8, TimestampMs: ts + 10,
			Reason: "timer won the race",
		}, required: []string{"sourceEventId"}},
		history.SubOrchestrationScheduled: {event: history.Event{
			EventID: 11, Kind: history.SubOrchestrationScheduled, TimestampMs: ts + 11,
			Name: "ShipOrder", Version: "2.0.1", ChildInstanceID: "order-42::sub::11",
			Input: raw(`{"warehouse":"ams-3"}`),
		}, required: []string{"name", "childInstanceId"}},
		history.DetachedOrchestrationScheduled: {event: history.Event{
			EventID: 24, Kind: history.DetachedOrchestrationScheduled, TimestampMs: ts + 24,
			Name: "SendReceipt", Version: "1.0.0", ChildInstanceID: "receipt-42",
			Input: raw(`{"order":42}`),
		}, required: []string{"name", "childInstanceId"}},
		history.SubOrchestrationCompleted: {event: history.Event{
			EventID: 13, Kind: history.SubOrchestrationCompleted, SourceEventID: 11, TimestampMs: ts + 13,
			Output: raw(`"tracking-123"`),
		}, required: []string{"sourceEventId"}},
		history.SubOrchestrationFailed: {event: history.Event{
			EventID: 13, Kind: history.SubOrchestrationFailed, SourceEventID: 11, TimestampMs: ts + 13,
			Error: &history.ErrorDetails{
				Kind: history.ErrorCanceled, Message: "sub-orchestration canceled",
				Type: "*duroxide.CanceledError", Details: "parent canceled",
			},
		}, required: []string{"sourceEventId", "error"}},
		history.SubOrchestrationCancelRequested: {event: history.Event{
			EventID: 14, Kind: history.SubOrchestrationCancelRequested, SourceEventID: 11, TimestampMs: ts + 14,
			Reason: "parent completed first",
		}, required: []string{"sourceEventId"}},
		history.CustomStatusUpdated: {event: history.Event{
			EventID: 15, Kind: history.CustomStatusUpdated, TimestampMs: ts + 15,
			CustomStatus: raw(`{"stage":"packing","progress":0.5}`),
		}},
		history.ValueSet: {event: history.Event{
			EventID: 25, Kind: history.ValueSet, TimestampMs: ts + 25,
			Name: "stage", Data: raw(`{"step":"packing"}`),
		}, required: []string{"name"}},
		history.NowRecorded: {event: history.Event{
			EventID: 16, Kind: history.NowRecorded, TimestampMs: ts + 16,
			TimeMs: ts + 16,
		}, required: []string{"timeMs"}},
		history.GUIDRecorded: {event: history.Event{
			EventID: 17, Kind: history.GUIDRecorded, TimestampMs: ts + 17,
			GUID: "0f8fad5b-d9cb-469f-a165-70867728950e",
		}, required: []string{"guid"}},
		history.PatchRecorded: {event: history.Event{
			EventID: 18, Kind: history.PatchRecorded, TimestampMs: ts + 18,
			Name: "charge-before-ship",
		}, required: []string{"name"}},
		history.TimerCanceled: {event: history.Event{
			EventID: 19, Kind: history.TimerCanceled, SourceEventID: 5, TimestampMs: ts + 19,
			Reason: "canceled by the orchestration",
		}, required: []string{"sourceEventId"}},
	}
}

// workItemFixtures returns a fresh fixture per work-item kind; callers may
// mutate it.
func workItemFixtures() map[history.WorkItemKind]workItemCase {
	return map[history.WorkItemKind]workItemCase{
		history.WorkStartOrchestration: {item: history.WorkItem{
			Kind: history.WorkStartOrchestration, InstanceID: "order-42::sub::11", ExecutionID: 1,
			Name: "ShipOrder", Version: "2.0.1", Input: raw(`{"warehouse":"ams-3"}`),
			Parent: &history.ParentRef{InstanceID: "order-42", ExecutionID: 1, EventID: 11},
		}, required: []string{"executionId", "name"}},
		history.WorkActivityExecute: {item: history.WorkItem{
			Kind: history.WorkActivityExecute, InstanceID: "order-42", ExecutionID: 1, ID: 2,
			Name: "ChargeCard", Input: raw(`"Ada"`), SessionID: "session-eu-1",
		}, required: []string{"executionId", "id", "name"}},
		history.WorkActivityCompleted: {item: history.WorkItem{
			Kind: history.WorkActivityCompleted, InstanceID: "order-42", ExecutionID: 1, ID: 2,
			Output: raw(`{"receipt":"r-981"}`),
		}, required: []string{"executionId", "id"}},
		history.WorkActivityFailed: {item: history.WorkItem{
			Kind: history.WorkActivityFailed, InstanceID: "order-42", ExecutionID: 1, ID: 2,
			Error: &history.ErrorDetails{
				Kind: history.ErrorPoison, Message: "message exceeded 10 delivery attempts",
				Type: "*duroxide.PoisonError", Details: "attempts=11",
			},
		}, required: []string{"executionId", "id", "error"}},
		history.WorkTimerFired: {item: history.WorkItem{
			Kind: history.WorkTimerFired, InstanceID: "order-42", ExecutionID: 1, ID: 5,
			FireAtMs: ts + 60_000,
		}, required: []string{"executionId", "id", "fireAtMs"}},
		history.WorkExternalRaised: {item: history.WorkItem{
			Kind: history.WorkExternalRaised, InstanceID: "order-42",
			Name: "Approval", Data: raw(`{"approved":true,"by":"grace"}`),
		}, required: []string{"name"}},
		history.WorkSubOrchCompleted: {item: history.WorkItem{
			Kind: history.WorkSubOrchCompleted, InstanceID: "order-42", ExecutionID: 1, ID: 11,
			ChildInstanceID: "order-42::sub::11", Output: raw(`"tracking-123"`),
		}, required: []string{"executionId", "id", "childInstanceId"}},
		history.WorkSubOrchFailed: {item: history.WorkItem{
			Kind: history.WorkSubOrchFailed, InstanceID: "order-42", ExecutionID: 1, ID: 11,
			ChildInstanceID: "order-42::sub::11",
			Error: &history.ErrorDetails{
				Kind: history.ErrorNondeterminism, Message: "history does not match code",
				Type: "*replay.NondeterminismError", Details: "event 4: want ActivityScheduled, got TimerCreated",
			},
		}, required: []string{"executionId", "id", "childInstanceId", "error"}},
		history.WorkCancelInstance: {item: history.WorkItem{
			Kind: history.WorkCancelInstance, InstanceID: "order-42", ExecutionID: 1,
			Reason: "customer cancelled the order",
		}},
		history.WorkContinueAsNew: {item: history.WorkItem{
			Kind: history.WorkContinueAsNew, InstanceID: "order-42", ExecutionID: 3,
			Name: "ProcessOrder", Version: "1.3.0", Input: raw(`{"cursor":"page-2"}`),
			Values: map[string]json.RawMessage{"stage": raw(`"packing"`)},
		}, required: []string{"executionId", "name"}},
	}
}

// alwaysRequiredEvent and alwaysRequiredWorkItem are required for every kind.
var (
	alwaysRequiredEvent    = []string{"eventId", "type"}
	alwaysRequiredWorkItem = []string{"type", "instanceId"}
)

func mustEncodeEvent(t testing.TB, e history.Event) []byte {
	t.Helper()
	b, err := history.EncodeEvent(&e)
	if err != nil {
		t.Fatalf("EncodeEvent(%s): %v", e.Kind, err)
	}
	return b
}

func mustEncodeWorkItem(t testing.TB, w history.WorkItem) []byte {
	t.Helper()
	b, err := history.EncodeWorkItem(&w)
	if err != nil {
		t.Fatalf("EncodeWorkItem(%s): %v", w.Kind, err)
	}
	return b
}

// object splits a JSON object into its members, keeping each value's bytes.
func object(t testing.TB, doc []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("parsing %s: %v", doc, err)
	}
	if m == nil {
		t.Fatalf("parsing %s: not an object", doc)
	}
	return m
}

// marshalObject joins members back into one JSON object (keys sorted).
func marshalObject(t testing.TB, m map[string]json.RawMessage) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshaling object: %v", err)
	}
	return b
}

// withMember returns doc with key set to the JSON value v (or deleted when v
// is empty).
func withMember(t testing.TB, doc []byte, key, v string) []byte {
	t.Helper()
	m := object(t, doc)
	if v == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(v)
	}
	return marshalObject(t, m)
}

// zeroJSONField sets the field of the struct *ptr whose JSON name is key to its
// zero value, as if the key had been omitted from the document.
func zeroJSONField(t testing.TB, ptr any, key string) {
	t.Helper()
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == key {
			v.Field(i).SetZero()
			return
		}
	}
	t.Fatalf("%T has no field with JSON name %q", ptr, key)
}

// requireInvalid fails unless err wraps history.ErrInvalid and its message
// names every word in words (whole words, so "id" does not match "instanceId").
func requireInvalid(t testing.TB, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one wrapping ErrInvalid")
	}
	if !errors.Is(err, history.ErrInvalid) {
		t.Fatalf("error %q (%T) does not wrap ErrInvalid", err, err)
	}
	for _, w := range words {
		if !wholeWord(w).MatchString(err.Error()) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

// wholeWord matches w not glued to other word characters.
func wholeWord(w string) *regexp.Regexp {
	isWord := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	expr := regexp.QuoteMeta(w)
	if w != "" && isWord(w[0]) {
		expr = `\b` + expr
	}
	if w != "" && isWord(w[len(w)-1]) {
		expr += `\b`
	}
	return regexp.MustCompile(expr)
}

// goldenFile renders one encoded document per kind, in list order, as a JSON
// object keyed by kind. Each document is written verbatim on its own line, so
// the bytes under a key are exactly what the encoder produced.
func goldenFile(keys []string, docs [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		key, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s: %s", key, docs[i])
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// checkGoldenFile compares want with the file at path, or rewrites the file
// with -update.
func checkGoldenFile(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatalf("writing %s: %v", path, err)
		}
		t.Logf("rewrote %s", path)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (run go test -run Golden -update to create it): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the current encoding of the fixtures; the JSON encoding is a storage "+
			"contract and must not change.\n--- golden\n%s\n--- current\n%s", path, got, want)
	}
}

// readGolden returns the documents of a golden file, keyed by kind.
func readGolden(t testing.TB, path string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return object(t, b)
}
