package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// TestStartInstanceTraceParent: POST /api/instances records a traceparent
// header as the instance's trace context; a malformed, oversized or
// repeated one is answered 400, naming the header, and starts nothing.
func TestStartInstanceTraceParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances",
		header: map[string]string{"Content-Type": "application/json", "Traceparent": tp},
		body:   `{"orchestration": "demo.Hello", "instanceId": "traced", "input": "Ada"}`}, http.StatusCreated)
	e.wait(t, "traced")
	events, err := e.client.GetHistory(context.Background(), "traced", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0].Kind != history.OrchestrationStarted || events[0].TraceParent != tp {
		t.Fatalf("the started event does not carry the traceparent: %+v", events)
	}

	// Without the header, no trace context.
	e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances", header: jsonCT,
		body: `{"orchestration": "demo.Hello", "instanceId": "untraced", "input": "Ada"}`}, http.StatusCreated)
	e.wait(t, "untraced")
	if events, err := e.client.GetHistory(context.Background(), "untraced", 0); err != nil || len(events) == 0 || events[0].TraceParent != "" {
		t.Fatalf("untraced start: %+v %v", events, err)
	}

	huge := "00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01-" + strings.Repeat("x", 64<<10)
	for name, value := range map[string]string{
		"empty":      "",
		"upper case": strings.ToUpper(tp),
		"short":      "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
		"garbage":    "not a trace",
		"oversized":  huge,
	} {
		res := e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances",
			header: map[string]string{"Content-Type": "application/json", "Traceparent": value},
			body:   `{"orchestration": "demo.Hello", "instanceId": "bad-trace", "input": "Ada"}`}, http.StatusBadRequest)
		var eb errorBody
		if err := json.Unmarshal(res.body, &eb); err != nil || !strings.Contains(eb.Error, "traceparent header") {
			t.Errorf("%s: answer %s does not name the header", name, res)
		}
		if len(res.body) > 1024 {
			t.Errorf("%s: a %d-byte header gave a %d-byte answer", name, len(value), len(res.body))
		}
	}

	// Two traceparent headers: which one holds is ambiguous.
	req, err := http.NewRequest("POST", e.srv.URL+"/api/instances",
		strings.NewReader(`{"orchestration": "demo.Hello", "instanceId": "bad-trace"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Traceparent", tp)
	req.Header.Add("Traceparent", tp)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("two traceparent headers: %d, want 400", res.StatusCode)
	}
	e.expect(t, "GET", "/api/instances/bad-trace", nil, http.StatusNotFound, nil)
}
