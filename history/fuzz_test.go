package history_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// brokenSeeds are inputs near the valid ones, for both decoders.
var brokenSeeds = []string{
	``,
	`null`,
	`[]`,
	`{}`,
	`{`,
	`"x"`,
	`{"eventId":0,"type":"OrchestrationStarted","name":"x"}`,
	`{"eventId":1,"type":"OrchestrationStarted","name":"x","sourceEventId":-1}`,
	`{"eventId":1,"type":"OrchestrationStarted","name":"x","input":null,"parent":{}}`,
	`{"EVENTID":1,"Type":"OrchestrationStarted","NAME":"x","input":[1, 2, "<&>"]}`,
	`{"eventId":1,"type":"OrchestrationStarted","name":"x","type":"TimerCreated","fireAtMs":5}`,
	`{"eventId":2,"type":"ActivityFailed","sourceEventId":1,"error":{"kind":"nope"}}`,
	`{"eventId":2,"type":"ActivityFailed","sourceEventId":1,"error":{"kind":"poison","message":"\u2028\ud800"}}`,
	"{\"eventId\":1,\"type\":\"OrchestrationStarted\",\"name\":\"\xff\",\"input\":\"\xfe\"}",
	`{"type":"CancelInstance","instanceId":"i","executionId":-1}`,
	`{"type":"TimerFired","instanceId":"i","executionId":1,"id":5,"fireAtMs":0}`,
	`{"type":"ExternalRaised","instanceId":"i","name":"n","data":{"a" : [ true , null ] }}`,
	`{"type":"SubOrchFailed","instanceId":"i","executionId":1,"id":3,"childInstanceId":"c","error":null}`,
}

// FuzzDecodeEvent: DecodeEvent never panics, every failure wraps ErrInvalid,
// and a decoded event is valid and encodes to a fixed point.
func FuzzDecodeEvent(f *testing.F) {
	for _, doc := range readGolden(f, eventsGolden) {
		f.Add([]byte(doc))
	}
	for _, doc := range readGolden(f, workItemsGolden) {
		f.Add([]byte(doc))
	}
	for _, s := range brokenSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := history.DecodeEvent(data)
		if err != nil {
			if !errors.Is(err, history.ErrInvalid) {
				t.Fatalf("DecodeEvent error %q does not wrap ErrInvalid", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded event does not validate: %v", err)
		}
		if !e.Kind.Known() {
			t.Fatalf("decoded event has unknown kind %q", e.Kind)
		}
		b1, err := history.EncodeEvent(&e)
		if err != nil {
			t.Fatalf("EncodeEvent of a decoded event: %v", err)
		}
		e2, err := history.DecodeEvent(b1)
		if err != nil {
			t.Fatalf("DecodeEvent(EncodeEvent(e)) = %v\njson: %s", err, b1)
		}
		b2, err := history.EncodeEvent(&e2)
		if err != nil {
			t.Fatalf("EncodeEvent of a re-decoded event: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not a fixed point\nfirst:  %s\nsecond: %s", b1, b2)
		}
	})
}

// FuzzDecodeWorkItem is FuzzDecodeEvent for work items.
func FuzzDecodeWorkItem(f *testing.F) {
	for _, doc := range readGolden(f, workItemsGolden) {
		f.Add([]byte(doc))
	}
	for _, doc := range readGolden(f, eventsGolden) {
		f.Add([]byte(doc))
	}
	for _, s := range brokenSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := history.DecodeWorkItem(data)
		if err != nil {
			if !errors.Is(err, history.ErrInvalid) {
				t.Fatalf("DecodeWorkItem error %q does not wrap ErrInvalid", err)
			}
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("decoded work item does not validate: %v", err)
		}
		if !w.Kind.Known() {
			t.Fatalf("decoded work item has unknown kind %q", w.Kind)
		}
		b1, err := history.EncodeWorkItem(&w)
		if err != nil {
			t.Fatalf("EncodeWorkItem of a decoded work item: %v", err)
		}
		w2, err := history.DecodeWorkItem(b1)
		if err != nil {
			t.Fatalf("DecodeWorkItem(EncodeWorkItem(w)) = %v\njson: %s", err, b1)
		}
		b2, err := history.EncodeWorkItem(&w2)
		if err != nil {
			t.Fatalf("EncodeWorkItem of a re-decoded work item: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not a fixed point\nfirst:  %s\nsecond: %s", b1, b2)
		}
	})
}
