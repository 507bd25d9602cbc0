package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/httpapi"
)

// TestValuesRoutes: GET /api/instances/{id}/values and /values/{key} read
// what the instance set; bad keys are 400; without the token nothing is
// read.
func TestValuesRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "v1", valuesOrch, "hello")
	e.wait(t, "v1")
	var list struct {
		Values []struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		} `json:"values"`
	}
	res := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/v1/values"}, http.StatusOK)
	if err := json.Unmarshal(res.body, &list); err != nil || len(list.Values) != 1 ||
		list.Values[0].Key != "greeting" || string(list.Values[0].Value) != `"hello"` {
		t.Fatalf("values: %s (%v)", res, err)
	}
	if res := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/v1/values/greeting"}, http.StatusOK); !strings.Contains(string(res.body), `"value":"hello"`) {
		t.Fatalf("value: %s", res)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/instances/v1/values/nope", http.StatusNotFound},
		{"/api/instances/nobody/values", http.StatusNotFound},
		{"/api/instances/v1/values/a%1Bb", http.StatusBadRequest},
		{"/api/instances/v1/values/" + strings.Repeat("k", 300), http.StatusBadRequest},
		{"/api/instances/%FF/values", http.StatusBadRequest},
		{"/api/instances/v1?waitForChange=" + strings.Repeat("%22", 300), http.StatusBadRequest},
		{"/api/instances/v1?waitForChange=x&wait=-1s", http.StatusBadRequest},
	} {
		e.expectRaw(t, rawRequest{method: "GET", path: tc.path}, tc.status)
	}
	te := newEnv(t, &httpapi.Options{AuthToken: testToken})
	te.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/v1/values"}, http.StatusUnauthorized)
	te.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/v1/values/greeting"}, http.StatusUnauthorized)
}

// TestWaitForChangeLongPoll: ?waitForChange answers once the status
// changes (a value set by the next turn), with the new ETag; a stale ETag
// answers at once.
func TestWaitForChangeLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res := e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances/o1/signal-with-start", header: jsonCT,
		body: `{"orchestration": "` + orderOrch + `", "input": {"count": 2}, "event": "update", "data": {"amount": 1}}`}, http.StatusCreated)
	_ = res
	// Wait until the first event is consumed: its turn set no value, but
	// the instance runs and waits for the second event.
	var st struct {
		ETag   string `json:"etag"`
		Status string `json:"status"`
	}
	first := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/o1?waitForChange="}, http.StatusOK)
	if err := json.Unmarshal(first.body, &st); err != nil || st.ETag == "" || first.header.Get("ETag") == "" {
		t.Fatalf("status: %s (%v)", first, err)
	}
	done := make(chan response, 1)
	go func() {
		done <- e.send(t, rawRequest{method: "GET", path: "/api/instances/o1?wait=60s&waitForChange=" + st.ETag})
	}()
	e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances/o1/signal-with-start", header: jsonCT,
		body: `{"orchestration": "` + orderOrch + `", "event": "update", "data": {"amount": 2}}`}, http.StatusAccepted)
	// The instance changes (a turn runs, and it ends Completed): the poll
	// answers with another ETag.
	got := <-done
	var next struct {
		ETag string `json:"etag"`
	}
	if err := json.Unmarshal(got.body, &next); err != nil || got.status != http.StatusOK || next.ETag == st.ETag {
		t.Fatalf("long poll: %s (%v), first etag %s", got, err, st.ETag)
	}
	e.wait(t, "o1")
	if res := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/o1?waitForChange=" + st.ETag}, http.StatusOK); !strings.Contains(string(res.body), `"Completed"`) {
		t.Fatalf("a stale etag: %s", res)
	}
}
