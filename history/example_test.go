package history_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
)

// A store reads an event row back and hands it to the replay engine. Rows
// that are not valid history are reported as corrupt, not replayed.
func ExampleDecodeEvent() {
	row := []byte(`{"eventId":3,"type":"ActivityCompleted","sourceEventId":2,"timestampMs":1732170000003,"output":{"receipt":"r-981"}}`)
	e, err := history.DecodeEvent(row)
	if err != nil {
		fmt.Println("corrupt row:", err)
		return
	}
	fmt.Printf("event %d: %s of event %d, output %s\n", e.EventID, e.Kind, e.SourceEventID, e.Output)

	// A completion that does not say what it completes is rejected.
	_, err = history.DecodeEvent([]byte(`{"eventId":4,"type":"ActivityCompleted"}`))
	fmt.Println(errors.Is(err, history.ErrInvalid))
	fmt.Println(err)
	// Output:
	// event 3: ActivityCompleted of event 2, output {"receipt":"r-981"}
	// true
	// invalid history data: ActivityCompleted event 4 has sourceEventId 0
}

// The runtime encodes a work item before enqueueing it. Payloads are JSON
// documents embedded as they are, not strings holding JSON.
func ExampleEncodeWorkItem() {
	input, err := json.Marshal(map[string]string{"card": "4242"})
	if err != nil {
		panic(err)
	}
	b, err := history.EncodeWorkItem(&history.WorkItem{
		Kind:        history.WorkActivityExecute,
		InstanceID:  "order-42",
		ExecutionID: 1,
		ID:          2,
		Name:        "ChargeCard",
		Input:       input,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))

	// An invalid work item is refused before it reaches a queue.
	_, err = history.EncodeWorkItem(&history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: "order-42", ExecutionID: 1, Name: "ChargeCard"})
	fmt.Println(err)
	// Output:
	// {"type":"ActivityExecute","instanceId":"order-42","executionId":1,"id":2,"name":"ChargeCard","input":{"card":"4242"}}
	// invalid history data: ActivityExecute work item has id 0
}
