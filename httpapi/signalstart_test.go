package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// orderTrigger delivers each call as the event named by the body's type
// to order-<id>, starting orderOrch there first; one lock per order.
func orderTrigger() httpapi.Trigger {
	return httpapi.Trigger{ID: "orders", InstanceID: "order-{/id}", WorkflowID: "order-{/id}",
		Orchestration: orderOrch, Deliver: httpapi.DeliverEvent, Event: "{/type}", IdempotencyKey: "{header:X-Delivery}"}
}

func orderBody(id string, count, amount int) string {
	return fmt.Sprintf(`{"id": %q, "type": "update", "count": %d, "amount": %d}`, id, count, amount)
}

// TestWebhookDeliverEventBurst: many concurrent calls of a deliver-event
// trigger for one new order start one instance and deliver every event
// once; a repeated delivery ID delivers nothing.
func TestWebhookDeliverEventBurst(t *testing.T) {
	t.Parallel()
	const calls = 24
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{orderTrigger()}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	answers := make([]webhookAnswer, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			h := http.Header{"X-Delivery": {fmt.Sprint("d", i)}}
			answers[i], errs[i] = e.callWebhookHeader(ctx, "orders", orderBody("42", calls, i+1), h)
		})
	}
	wg.Wait()
	starts := 0
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		checkWebhookShape(t, a)
		if a.status != http.StatusOK || a.ExecutionID != "order-42" || a.Event != "update" || a.Started == nil {
			t.Fatalf("call %d: %s", i, a)
		}
		if *a.Started {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d calls started the order, want 1", starts)
	}
	// A repeated delivery: a duplicate, nothing delivered.
	if a := e.webhookHeader(t, "orders", orderBody("42", calls, 1000), http.Header{"X-Delivery": {"d0"}}); !a.Duplicate || a.ExecutionID != "order-42" {
		t.Fatalf("repeated delivery: %s", a)
	}
	st := e.wait(t, "order-42")
	var sum int
	if err := st.Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if want := calls * (calls + 1) / 2; sum != want {
		t.Fatalf("sum %d, want %d: every event once", sum, want)
	}
	if got := e.instances(t); len(got) != 1 {
		t.Fatalf("instances %v, want one", got)
	}
	// The order ended: a late event is refused and starts nothing.
	if a := e.webhookHeader(t, "orders", orderBody("42", 1, 1), http.Header{"X-Delivery": {"late"}}); a.status != http.StatusConflict {
		t.Fatalf("an event for an ended order: %s", a)
	}
}

// TestSignalWithStartRoute covers POST /api/instances/{id}/signal-with-start:
// start, delivery, duplicate, ended instance, bad and hostile bodies, and
// that an unauthenticated call changes nothing.
func TestSignalWithStartRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	path := "/api/instances/o1/signal-with-start"
	body := func(amount int, extra string) string {
		return fmt.Sprintf(`{"orchestration": %q, "input": {"count": 2}, "event": "update", "data": {"amount": %d}%s}`, orderOrch, amount, extra)
	}
	res := e.expectRaw(t, rawRequest{method: "POST", path: path, body: body(3, ""), header: jsonCT}, http.StatusCreated)
	if !strings.Contains(string(res.body), `"started":true`) || res.header.Get("Location") != "/api/instances/o1" {
		t.Fatalf("first call: %s", res)
	}
	key := `, "idempotencyKey": "delivery-2"`
	if res := e.expectRaw(t, rawRequest{method: "POST", path: path, body: body(4, key), header: jsonCT}, http.StatusAccepted); !strings.Contains(string(res.body), `"started":false`) {
		t.Fatalf("second call: %s", res)
	}
	if res := e.expectRaw(t, rawRequest{method: "POST", path: path, body: body(100, key), header: jsonCT}, http.StatusOK); !strings.Contains(string(res.body), `"duplicate":true`) {
		t.Fatalf("repeated delivery: %s", res)
	}
	st := e.wait(t, "o1")
	var sum int
	if err := st.Decode(&sum); err != nil || sum != 7 {
		t.Fatalf("sum %d (%v), want 7", sum, err)
	}
	e.expectRaw(t, rawRequest{method: "POST", path: path, body: body(1, ""), header: jsonCT}, http.StatusConflict)

	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"no event", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"no orchestration", "/api/instances/o2/signal-with-start", `{"event": "e"}`, http.StatusBadRequest},
		{"unknown field", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello", "event": "e", "nope": 1}`, http.StatusBadRequest},
		{"control in event", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello", "event": "e\u001b"}`, http.StatusBadRequest},
		{"long event", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello", "event": "` + strings.Repeat("e", duroxide.MaxNameLength+1) + `"}`, http.StatusBadRequest},
		{"invalid UTF-8 in data", "/api/instances/o2/signal-with-start", "{\"orchestration\": \"demo.Hello\", \"event\": \"e\", \"data\": \"\xff\"}", http.StatusBadRequest},
		{"control in path ID", "/api/instances/a%00b/signal-with-start", `{"orchestration": "demo.Hello", "event": "e"}`, http.StatusBadRequest},
		{"slash ID", "/api/instances/..%2Fetc/signal-with-start", `{"orchestration": "demo.Hello", "event": "e"}`, http.StatusBadRequest},
		{"queue without lock", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello", "event": "e", "queueIfLocked": true}`, http.StatusBadRequest},
		{"malformed", "/api/instances/o2/signal-with-start", `{`, http.StatusBadRequest},
		{"huge", "/api/instances/o2/signal-with-start", `{"orchestration": "demo.Hello", "event": "e", "data": "` + strings.Repeat("x", 2<<20) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.expectRaw(t, rawRequest{method: "POST", path: tc.path, body: tc.body, header: jsonCT}, tc.status)
		})
	}
	if got := e.instances(t); len(got) != 1 {
		t.Fatalf("instances %v: a refused call created one", got)
	}

	// With a token, an unauthenticated call is refused and changes nothing.
	te := newEnv(t, &httpapi.Options{AuthToken: testToken})
	te.expectRaw(t, rawRequest{method: "POST", path: path, body: body(1, ""), header: jsonCT}, http.StatusUnauthorized)
	if got := te.instances(t); len(got) != 0 {
		t.Fatalf("an unauthenticated call created %v", got)
	}
}

// TestDeliverEventTriggerValidation: a deliver-event trigger needs an
// event and an instance ID; an event on a start trigger is refused.
func TestDeliverEventTriggerValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    httpapi.Trigger
		want string
	}{
		{"no event", httpapi.Trigger{ID: "a", InstanceID: "o-{/id}", Orchestration: demo.Hello, Deliver: httpapi.DeliverEvent}, "event: required"},
		{"no instance", httpapi.Trigger{ID: "a", Orchestration: demo.Hello, Deliver: httpapi.DeliverEvent, Event: "e"}, "instanceId: required"},
		{"event on start", httpapi.Trigger{ID: "a", Orchestration: demo.Hello, Event: "e"}, "event: only"},
		{"bad mode", httpapi.Trigger{ID: "a", Orchestration: demo.Hello, Deliver: "signal"}, "deliver: must be"},
		{"bad event template", httpapi.Trigger{ID: "a", InstanceID: "o", Orchestration: demo.Hello, Deliver: httpapi.DeliverEvent, Event: "{/x"}, "event:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpapi.ParseTriggers(strings.NewReader(mustTriggersJSON(t, tc.t)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseTriggers: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func mustTriggersJSON(t *testing.T, tr httpapi.Trigger) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"triggers": []httpapi.Trigger{tr}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
