package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// hourApproval is the input of an Approval instance that stays Running
// for the whole test (its timer is an hour away).
var hourApproval = approvalInput(3600)

func TestStartInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	t.Run("generated ID", func(t *testing.T) {
		t.Parallel()
		var out struct{ InstanceID string }
		res := e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "input": "Ada"}`, http.StatusCreated, &out)
		if _, err := uuid.Parse(out.InstanceID); err != nil {
			t.Fatalf("instanceId %q is not a UUID: %v", out.InstanceID, err)
		}
		if loc, want := res.header.Get("Location"), "/api/instances/"+out.InstanceID; loc != want {
			t.Errorf("Location %q, want %q", loc, want)
		}
		if st := e.wait(t, out.InstanceID); string(st.Output) != `"Hello, Ada!"` {
			t.Fatalf("output %s, want \"Hello, Ada!\"", st.Output)
		}
	})

	t.Run("explicit ID, version and structured input", func(t *testing.T) {
		t.Parallel()
		var out struct{ InstanceID string }
		e.expect(t, "POST", "/api/instances",
			`{"orchestration": "demo.Approval", "instanceId": "start.explicit id", "version": "1.0.0", "input": {"timeoutSeconds": 3600}}`,
			http.StatusCreated, &out)
		if out.InstanceID != "start.explicit id" {
			t.Fatalf("instanceId %q", out.InstanceID)
		}
		var st status
		e.expect(t, "GET", "/api/instances/start.explicit%20id", nil, http.StatusOK, &st)
		if st.Version != "1.0.0" || st.Orchestration != demo.Approval || string(st.Input) != `{"timeoutSeconds":3600}` {
			t.Fatalf("status %+v", st)
		}
		eb := e.expectError(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "start.explicit id"}`, http.StatusConflict)
		if !strings.Contains(eb.Error, "exists") {
			t.Errorf("409 error %q does not say the instance exists", eb.Error)
		}
	})

	t.Run("delayed start", func(t *testing.T) {
		t.Parallel()
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "start-delayed", "startAt": "`+at+`"}`, http.StatusCreated, nil)
		var st status
		e.expect(t, "GET", "/api/instances/start-delayed", nil, http.StatusOK, &st)
		if st.Status != "Pending" {
			t.Fatalf("status %q, want Pending", st.Status)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		for id, timeout := range map[string]string{"start-timeout-s": `"90m"`, "start-timeout-n": `5400`} {
			e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Approval", "instanceId": "`+id+`", "timeout": `+timeout+`}`, http.StatusCreated, nil)
			var h struct {
				Events []struct {
					Type      string    `json:"type"`
					Timestamp time.Time `json:"timestamp"`
					FireAtMs  int64     `json:"fireAtMs"`
				} `json:"events"`
			}
			// The start event is in the history once the first turn commits:
			// wait for the instance to leave Pending, then read it once.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			for etag := ""; ; {
				st, err := e.client.WaitForStatusChange(ctx, id, etag)
				if err != nil {
					cancel()
					t.Fatalf("%s did not start: %v", id, err)
				}
				if st.State != duroxide.StatePending {
					break
				}
				etag = st.ETag
			}
			cancel()
			e.expect(t, "GET", "/api/instances/"+id+"/history", nil, http.StatusOK, &h)
			if ev := h.Events[0]; ev.Type != "OrchestrationStarted" || ev.FireAtMs-ev.Timestamp.UnixMilli() != (90*time.Minute).Milliseconds() {
				t.Fatalf("%s: first event %+v, want a start with a deadline 90m after it", id, ev)
			}
		}
	})

	bad := []struct {
		name, body string
		status     int
		errorHas   string
	}{
		{"empty body", ``, http.StatusBadRequest, "malformed"},
		{"malformed JSON", `{"orchestration": `, http.StatusBadRequest, "malformed"},
		{"not an object", `["demo.Hello"]`, http.StatusBadRequest, "malformed"},
		{"trailing data", `{"orchestration": "demo.Hello"} {}`, http.StatusBadRequest, "malformed"},
		{"unknown field", `{"orchestration": "demo.Hello", "inptu": 1}`, http.StatusBadRequest, "malformed"},
		{"wrong type", `{"orchestration": 42}`, http.StatusBadRequest, "malformed"},
		{"missing orchestration", `{"input": "Ada"}`, http.StatusBadRequest, "orchestration is required"},
		{"lockTtl without lockKey", `{"orchestration": "demo.Hello", "lockTtl": "1h"}`, http.StatusBadRequest, "lockKey is required"},
		{"queueIfLocked without lockKey", `{"orchestration": "demo.Hello", "queueIfLocked": true}`, http.StatusBadRequest, "lockKey is required"},
		{"negative lockTtl", `{"orchestration": "demo.Hello", "lockKey": "w1", "lockTtl": "-1s"}`, http.StatusBadRequest, "invalid lockTtl"},
		{"bad lockTtl", `{"orchestration": "demo.Hello", "lockKey": "w1", "lockTtl": "soon"}`, http.StatusBadRequest, "malformed"},
		{"bad startAt", `{"orchestration": "demo.Hello", "startAt": "tomorrow"}`, http.StatusBadRequest, "malformed"},
		{"negative timeout", `{"orchestration": "demo.Hello", "timeout": "-1s"}`, http.StatusBadRequest, "invalid timeout"},
		{"zero timeout", `{"orchestration": "demo.Hello", "timeout": 0}`, http.StatusBadRequest, "invalid timeout"},
		{"bad timeout", `{"orchestration": "demo.Hello", "timeout": "soon"}`, http.StatusBadRequest, "malformed"},
		{"huge timeout", `{"orchestration": "demo.Hello", "timeout": 1e300}`, http.StatusBadRequest, "malformed"},
		{"overflowing timeout", `{"orchestration": "demo.Hello", "timeout": "99999999999999h"}`, http.StatusBadRequest, "malformed"},
		{"timeout of the wrong type", `{"orchestration": "demo.Hello", "timeout": {"$ne": null}}`, http.StatusBadRequest, "malformed"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eb := e.expectError(t, "POST", "/api/instances", tc.body, tc.status)
			if !strings.Contains(eb.Error, tc.errorHas) {
				t.Fatalf("error %q does not contain %q", eb.Error, tc.errorHas)
			}
		})
	}
}

// chunked hides a body's length so the request is sent chunked and the
// server meets the limit while reading.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	small := newEnv(t, &httpapi.Options{MaxBodyBytes: 64})
	small.start(t, "limit-approval", demo.Approval, hourApproval)
	big := `{"orchestration": "demo.Hello", "input": "` + strings.Repeat("x", 100) + `"}`
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"start", "POST", "/api/instances", big},
		{"start chunked", "POST", "/api/instances", chunked{strings.NewReader(big)}},
		{"event", "POST", "/api/instances/limit-approval/events/approval", big},
		{"event chunked", "POST", "/api/instances/limit-approval/events/approval", chunked{strings.NewReader(big)}},
		{"cancel", "POST", "/api/instances/limit-approval/cancel", `{"reason": "` + strings.Repeat("x", 100) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			small.expectError(t, tc.method, tc.path, tc.body, http.StatusRequestEntityTooLarge)
		})
	}
	t.Run("under the limit", func(t *testing.T) {
		t.Parallel()
		small.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "input": "Ada"}`, http.StatusCreated, nil)
	})
	t.Run("default limit is 1 MiB", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		input := strings.Repeat("x", 1<<20)
		e.expectError(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "input": "`+input+`"}`, http.StatusRequestEntityTooLarge)
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "input": "`+input[:1<<19]+`"}`, http.StatusCreated, nil)
	})
}

func TestGetInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "get-hello", demo.Hello, "Ada")
	e.start(t, "get-fail", demo.Fail, "boom")
	e.wait(t, "get-hello")
	e.wait(t, "get-fail")

	t.Run("completed", func(t *testing.T) {
		t.Parallel()
		var raw map[string]json.RawMessage
		e.expect(t, "GET", "/api/instances/get-hello", nil, http.StatusOK, &raw)
		for _, k := range []string{"instanceId", "orchestration", "version", "status", "executionId", "input", "output", "createdAt", "updatedAt"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("status has no %q: %v", k, raw)
			}
		}
		var st status
		e.expect(t, "GET", "/api/instances/get-hello", nil, http.StatusOK, &st)
		if st.InstanceID != "get-hello" || st.Status != "Completed" || st.ExecutionID != 1 ||
			string(st.Input) != `"Ada"` || string(st.Output) != `"Hello, Ada!"` || st.CreatedAt.IsZero() {
			t.Fatalf("status %+v", st)
		}
	})
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		var st status
		e.expect(t, "GET", "/api/instances/get-fail", nil, http.StatusOK, &st)
		if st.Status != "Failed" || st.Error == nil || st.Error.Message != "boom" || st.Output != nil {
			t.Fatalf("status %+v error %+v", st, st.Error)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "GET", "/api/instances/nobody", nil, http.StatusNotFound)
		e.expectError(t, "GET", "/api/instances/nobody?wait=10s", nil, http.StatusNotFound)
	})
	t.Run("wait on a finished instance returns at once", func(t *testing.T) {
		t.Parallel()
		var st status
		e.expect(t, "GET", "/api/instances/get-hello?wait=5m", nil, http.StatusOK, &st)
		if st.Status != "Completed" {
			t.Fatalf("status %q", st.Status)
		}
	})
	for _, wait := range []string{"soon", "-1s", "-3", "1x"} {
		t.Run("bad wait "+wait, func(t *testing.T) {
			t.Parallel()
			e.expectError(t, "GET", "/api/instances/get-hello?wait="+wait, nil, http.StatusBadRequest)
		})
	}
}

func TestGetInstanceLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	t.Run("returns when the instance completes", func(t *testing.T) {
		t.Parallel()
		e.start(t, "poll-approval", demo.Approval, hourApproval)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		type result struct {
			res response
			err error
		}
		waiting := e.store.parked("poll-approval")
		got := make(chan result, 1)
		go func() {
			res, err := e.request(ctx, "GET", "/api/instances/poll-approval?wait=4m", nil)
			got <- result{res, err}
		}()
		select {
		case <-waiting:
		case r := <-got:
			t.Fatalf("long poll answered before the instance finished: %v %v", r.res, r.err)
		case <-ctx.Done():
			t.Fatal("the long poll never started waiting")
		}
		e.expect(t, "POST", "/api/instances/poll-approval/events/approval", `true`, http.StatusAccepted, nil)
		var r result
		select {
		case r = <-got:
		case <-ctx.Done():
			t.Fatal("long poll did not answer after the instance completed")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		var st status
		if r.res.status != http.StatusOK || json.Unmarshal(r.res.body, &st) != nil {
			t.Fatalf("long poll: %v", r.res)
		}
		if st.Status != "Completed" || string(st.Output) != `"approved"` {
			t.Fatalf("long poll returned %+v", st)
		}
	})

	t.Run("returns the live status when the wait runs out", func(t *testing.T) {
		t.Parallel()
		e.start(t, "poll-timeout", demo.Approval, hourApproval)
		var st status
		e.expect(t, "GET", "/api/instances/poll-timeout?wait=20ms", nil, http.StatusOK, &st)
		if st.Status != "Running" && st.Status != "Pending" {
			t.Fatalf("status %q, want a live one", st.Status)
		}
	})

	t.Run("purged while waiting", func(t *testing.T) {
		t.Parallel()
		e.start(t, "poll-purged", demo.Approval, hourApproval)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		waiting := e.store.parked("poll-purged")
		got := make(chan response, 1)
		go func() {
			res, _ := e.request(ctx, "GET", "/api/instances/poll-purged?wait=4m", nil)
			got <- res
		}()
		select {
		case <-waiting:
		case res := <-got:
			t.Fatalf("long poll answered before the purge: %v", res)
		case <-ctx.Done():
			t.Fatal("the long poll never started waiting")
		}
		e.expect(t, "DELETE", "/api/instances/poll-purged?force=true", nil, http.StatusOK, nil)
		// The store wakes the waiter on purge: it answers 404.
		select {
		case res := <-got:
			if res.status != http.StatusNotFound {
				t.Fatalf("got %v, want 404", res)
			}
		case <-ctx.Done():
			t.Fatal("long poll did not notice the purge")
		}
	})
}

func TestLongPollCanceled(t *testing.T) {
	t.Parallel()
	// A long poll whose request context ends (the client left, or the
	// server's base context ended at shutdown) still answers: 503, not an
	// empty 200.
	e := newEnv(t, nil)
	e.start(t, "poll-canceled", demo.Approval, hourApproval)
	waiting := e.store.parked("poll-canceled")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", "http://localhost/api/instances/poll-canceled?wait=4m", nil))
	}()
	select {
	case <-waiting:
	case <-time.After(testTimeout):
		t.Fatal("the long poll never started waiting")
	}
	cancel()
	<-done
	var eb errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != http.StatusServiceUnavailable || eb.Error == "" {
		t.Fatalf("got %d %s (%v), want a JSON 503", rec.Code, rec.Body, err)
	}
}

func TestListInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// Started in this order; the list is newest first.
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("list-hello-%d", i)
		e.start(t, id, demo.Hello, "n")
		ids = append(ids, id)
	}
	for i := range 2 {
		id := fmt.Sprintf("list-approval-%d", i)
		e.start(t, id, demo.Approval, hourApproval)
		ids = append(ids, id)
	}
	for _, id := range ids[:7] {
		e.wait(t, id)
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	type page struct {
		Instances  []status `json:"instances"`
		NextCursor string   `json:"nextCursor"`
	}
	// list follows nextCursor from query and returns the IDs of all pages
	// and the number of pages.
	list := func(t *testing.T, query string) ([]string, int) {
		t.Helper()
		var got []string
		cursor := ""
		for pages := 1; pages <= 20; pages++ {
			path := "/api/instances?" + query
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			var p page
			e.expect(t, "GET", path, nil, http.StatusOK, &p)
			for _, st := range p.Instances {
				got = append(got, st.InstanceID)
			}
			if p.NextCursor == "" {
				return got, pages
			}
			cursor = p.NextCursor
		}
		t.Fatalf("pagination of %q did not end", query)
		return nil, 0
	}

	t.Run("pages", func(t *testing.T) {
		t.Parallel()
		got, pages := list(t, "limit=2")
		if !slices.Equal(got, newestFirst) {
			t.Fatalf("paged list %v, want %v", got, newestFirst)
		}
		if pages < 5 {
			t.Fatalf("%d pages of 2 for 9 instances", pages)
		}
		var p page
		e.expect(t, "GET", "/api/instances?limit=4", nil, http.StatusOK, &p)
		if len(p.Instances) != 4 || p.NextCursor == "" {
			t.Fatalf("first page of 4: %d instances, cursor %q", len(p.Instances), p.NextCursor)
		}
	})
	t.Run("default page", func(t *testing.T) {
		t.Parallel()
		got, pages := list(t, "")
		if !slices.Equal(got, newestFirst) || pages != 1 {
			t.Fatalf("list %v in %d pages, want %v in 1", got, pages, newestFirst)
		}
	})

	filters := []struct {
		query string
		want  []string
	}{
		{"status=Completed", newestFirst[2:]},
		{"status=completed&limit=3", newestFirst[2:]},
		{"status=Running,Pending", newestFirst[:2]},
		{"status=%20Pending%20,%20Running", newestFirst[:2]},
		{"status=Failed,Canceled", nil},
		{"orchestration=demo.Approval", newestFirst[:2]},
		{"orchestration=demo.Hello&status=Completed&limit=5", newestFirst[2:]},
		{"orchestration=demo.Nothing", nil},
		{"prefix=list-approval-", newestFirst[:2]},
		{"prefix=list-&status=Completed&limit=2", newestFirst[2:]},
		{"prefix=list-hello-6", newestFirst[2:3]},
		{"prefix=LIST-", nil},
		{"prefix=%25", nil},
	}
	for _, tc := range filters {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			got, _ := list(t, tc.query)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("empty list is an array", func(t *testing.T) {
		t.Parallel()
		res := e.expect(t, "GET", "/api/instances?orchestration=demo.Nothing", nil, http.StatusOK, nil)
		if !strings.Contains(string(res.body), `"instances":[]`) {
			t.Fatalf("body %s", res.body)
		}
	})

	for _, query := range []string{"status=Done", "status=Running,Sleeping", "limit=0", "limit=-1", "limit=1001", "limit=ten", "cursor=not-a-cursor"} {
		t.Run("bad "+query, func(t *testing.T) {
			t.Parallel()
			e.expectError(t, "GET", "/api/instances?"+query, nil, http.StatusBadRequest)
		})
	}
}

// historyEvent is the API shape of an event, decoded loosely.
type historyEvent map[string]json.RawMessage

func (h historyEvent) str(t *testing.T, key string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(h[key], &s); err != nil {
		t.Fatalf("event field %q = %s: %v", key, h[key], err)
	}
	return s
}

func (h historyEvent) int(t *testing.T, key string) int64 {
	t.Helper()
	var n int64
	if err := json.Unmarshal(h[key], &n); err != nil {
		t.Fatalf("event field %q = %s: %v", key, h[key], err)
	}
	return n
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	before := time.Now().Add(-time.Second)
	e.start(t, "hist-hello", demo.Hello, "Ada")
	e.start(t, "hist-countdown", demo.Countdown, 2)
	e.wait(t, "hist-hello")
	e.wait(t, "hist-countdown")

	get := func(t *testing.T, path string) []historyEvent {
		t.Helper()
		var out struct {
			Events []historyEvent `json:"events"`
		}
		e.expect(t, "GET", path, nil, http.StatusOK, &out)
		return out.Events
	}
	types := func(t *testing.T, evs []historyEvent) []string {
		t.Helper()
		var ts []string
		for _, ev := range evs {
			ts = append(ts, ev.str(t, "type"))
		}
		return ts
	}

	t.Run("event shape", func(t *testing.T) {
		t.Parallel()
		evs := get(t, "/api/instances/hist-hello/history")
		want := []string{"OrchestrationStarted", "ActivityScheduled", "ActivityCompleted", "OrchestrationCompleted"}
		if got := types(t, evs); !slices.Equal(got, want) {
			t.Fatalf("event types %v, want %v", got, want)
		}
		for i, ev := range evs {
			if id := ev.int(t, "eventId"); id != int64(i+1) {
				t.Errorf("event %d has eventId %d", i, id)
			}
			if _, ok := ev["timestampMs"]; ok {
				t.Errorf("event %d has timestampMs: %v", i, ev)
			}
			ts := ev.str(t, "timestamp")
			if !timestampRE.MatchString(ts) {
				t.Errorf("event %d timestamp %q is not RFC 3339 UTC with milliseconds", i, ts)
			}
			at, err := time.Parse(time.RFC3339, ts)
			if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("event %d timestamp %q (%v) is not the time it was recorded", i, ts, err)
			}
		}
		if evs[0].str(t, "name") != demo.Hello || string(evs[0]["input"]) != `"Ada"` {
			t.Errorf("OrchestrationStarted %v", evs[0])
		}
		if evs[1].str(t, "name") != demo.ActivitySayHello || string(evs[1]["input"]) != `"Ada"` {
			t.Errorf("ActivityScheduled %v", evs[1])
		}
		if evs[2].int(t, "sourceEventId") != 2 || string(evs[2]["output"]) != `"Hello, Ada!"` {
			t.Errorf("ActivityCompleted %v", evs[2])
		}
		if string(evs[3]["output"]) != `"Hello, Ada!"` {
			t.Errorf("OrchestrationCompleted %v", evs[3])
		}
		res := e.expect(t, "GET", "/api/instances/hist-hello/history", nil, http.StatusOK, nil)
		if !strings.HasPrefix(string(res.body), `{"events":[{"eventId":1,"type":"OrchestrationStarted","timestamp":"`) {
			t.Errorf("events do not start with eventId, type, timestamp: %.120s", res.body)
		}
	})
	t.Run("executions", func(t *testing.T) {
		t.Parallel()
		first := types(t, get(t, "/api/instances/hist-countdown/history?execution=1"))
		if first[0] != "OrchestrationStarted" || first[len(first)-1] != "OrchestrationContinuedAsNew" {
			t.Fatalf("execution 1: %v", first)
		}
		cur := types(t, get(t, "/api/instances/hist-countdown/history"))
		if !slices.Equal(cur, types(t, get(t, "/api/instances/hist-countdown/history?execution=3"))) ||
			!slices.Equal(cur, types(t, get(t, "/api/instances/hist-countdown/history?execution=0"))) {
			t.Fatalf("current execution differs from execution 3")
		}
		if cur[len(cur)-1] != "OrchestrationCompleted" {
			t.Fatalf("execution 3: %v", cur)
		}
	})
	t.Run("pending instance has an empty history", func(t *testing.T) {
		t.Parallel()
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "hist-delayed", "startAt": "2999-01-01T00:00:00Z"}`, http.StatusCreated, nil)
		res := e.expect(t, "GET", "/api/instances/hist-delayed/history", nil, http.StatusOK, nil)
		if strings.TrimSpace(string(res.body)) != `{"events":[]}` {
			t.Fatalf("body %s", res.body)
		}
	})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/instances/nobody/history", http.StatusNotFound},
		{"/api/instances/hist-hello/history?execution=2", http.StatusNotFound},
		{"/api/instances/hist-hello/history?execution=-1", http.StatusBadRequest},
		{"/api/instances/hist-hello/history?execution=first", http.StatusBadRequest},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			e.expectError(t, "GET", tc.path, nil, tc.status)
		})
	}
}

func TestExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "exec-countdown", demo.Countdown, 2)
	st := e.wait(t, "exec-countdown")
	if st.ExecutionID != 3 {
		t.Fatalf("countdown 2 ended in execution %d, want 3", st.ExecutionID)
	}
	var out struct {
		Executions []struct {
			ExecutionID int64           `json:"executionId"`
			Status      string          `json:"status"`
			Input       json.RawMessage `json:"input"`
			Output      json.RawMessage `json:"output"`
			StartedAt   time.Time       `json:"startedAt"`
			CompletedAt *time.Time      `json:"completedAt"`
			EventCount  int64           `json:"eventCount"`
		} `json:"executions"`
	}
	e.expect(t, "GET", "/api/instances/exec-countdown/executions?include=input,output", nil, http.StatusOK, &out)
	want := []struct{ status, input string }{{"ContinuedAsNew", "2"}, {"ContinuedAsNew", "1"}, {"Completed", "0"}}
	if len(out.Executions) != len(want) {
		t.Fatalf("%d executions, want %d", len(out.Executions), len(want))
	}
	for i, ex := range out.Executions {
		if ex.ExecutionID != int64(i+1) || ex.Status != want[i].status || string(ex.Input) != want[i].input ||
			ex.StartedAt.IsZero() || ex.CompletedAt == nil || ex.EventCount < 2 {
			t.Errorf("execution %d: %+v, want status %s input %s", i+1, ex, want[i].status, want[i].input)
		}
	}
	if string(out.Executions[2].Output) != "0" {
		t.Errorf("last execution output %s", out.Executions[2].Output)
	}

	e.start(t, "exec-running", demo.Approval, hourApproval)
	var running struct {
		Executions []map[string]json.RawMessage `json:"executions"`
	}
	e.expect(t, "GET", "/api/instances/exec-running/executions", nil, http.StatusOK, &running)
	for _, ex := range running.Executions {
		if _, ok := ex["completedAt"]; ok {
			t.Errorf("a live execution has completedAt: %v", ex)
		}
	}
	e.expectError(t, "GET", "/api/instances/nobody/executions", nil, http.StatusNotFound)
}

func TestRaiseEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "event-done", demo.Hello, "Ada")
	e.wait(t, "event-done")

	for _, tc := range []struct {
		body, want string
	}{
		{`true`, `"approved"`},
		{" false\n", `"rejected"`},
	} {
		t.Run("approval "+tc.body, func(t *testing.T) {
			t.Parallel()
			id := "event-" + uuid.NewString()
			e.start(t, id, demo.Approval, hourApproval)
			var acc struct{ InstanceID, Event string }
			e.expect(t, "POST", "/api/instances/"+id+"/events/approval", tc.body, http.StatusAccepted, &acc)
			if acc.InstanceID != id || acc.Event != "approval" {
				t.Errorf("202 body %+v", acc)
			}
			if st := e.wait(t, id); string(st.Output) != tc.want {
				t.Fatalf("output %s, want %s", st.Output, tc.want)
			}
		})
	}
	t.Run("empty body", func(t *testing.T) {
		t.Parallel()
		e.start(t, "event-empty", demo.Approval, hourApproval)
		e.expect(t, "POST", "/api/instances/event-empty/events/nudge", nil, http.StatusAccepted, nil)
		e.expect(t, "POST", "/api/instances/event-empty/events/nudge", "  ", http.StatusAccepted, nil)
	})
	t.Run("finished instance", func(t *testing.T) {
		t.Parallel()
		before := e.wait(t, "event-done")
		eb := e.expectError(t, "POST", "/api/instances/event-done/events/approval", `true`, http.StatusConflict)
		if !strings.Contains(eb.Details, "Completed") {
			t.Errorf("409 details %q do not name the state", eb.Details)
		}
		if after := e.wait(t, "event-done"); !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("a refused event moved updatedAt from %v to %v", before.UpdatedAt, after.UpdatedAt)
		}
	})
	t.Run("unknown instance", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "POST", "/api/instances/nobody/events/approval", `true`, http.StatusNotFound)
	})
	t.Run("malformed data", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "POST", "/api/instances/event-done/events/approval", `{"approved": tru`, http.StatusBadRequest)
	})
}

// TestRaiseEventIdempotencyKey raises an event twice with one
// Idempotency-Key: the repeat answers 200 with duplicate true and delivers
// nothing. Bad keys are answered 400 without quoting them back, delivering
// nothing.
func TestRaiseEventIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "keyed-order", orderOrch, orderUpdate{Count: 2})
	raise := func(body string, h http.Header) response {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/api/instances/keyed-order/events/update", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	key := func(k ...string) http.Header { return http.Header{"Idempotency-Key": k} }
	var acc struct {
		InstanceID, Event string
		Duplicate         *bool
	}
	check := func(res response, status int, dup bool) {
		t.Helper()
		acc.Duplicate = nil
		if res.status != status || json.Unmarshal(res.body, &acc) != nil || acc.InstanceID != "keyed-order" || acc.Event != "update" ||
			(acc.Duplicate != nil) != dup || (dup && !*acc.Duplicate) {
			t.Fatalf("raise: got %s, want %d with duplicate %v", res, status, dup)
		}
	}
	check(raise(`{"amount": 1}`, key("pay-1")), http.StatusAccepted, false)
	check(raise(`{"amount": 10}`, key("pay-1")), http.StatusOK, true)
	huge := strings.Repeat("k", duroxide.MaxEventKeyLength+1)
	for what, h := range map[string]http.Header{
		"a huge key":   key(huge),
		"an empty key": key(""),
		"two keys":     key("pay-2", "pay-3"),
		"a bidi key":   key("a\u202eb"),
	} {
		res := raise(`{"amount": 1000}`, h)
		var eb errorBody
		if res.status != http.StatusBadRequest || json.Unmarshal(res.body, &eb) != nil || eb.Error != "invalid idempotency key" {
			t.Fatalf("%s: got %s, want 400 invalid idempotency key", what, res)
		}
		if what == "a huge key" && (!strings.Contains(eb.Details, strconv.Itoa(duroxide.MaxEventKeyLength)) || strings.Contains(eb.Details, huge)) {
			t.Errorf("%s: details %q do not name the limit, or quote the key", what, eb.Details)
		}
	}
	check(raise(`{"amount": 100}`, http.Header{}), http.StatusAccepted, false)
	var sum int
	if err := e.wait(t, "keyed-order").Decode(&sum); err != nil || sum != 101 {
		t.Fatalf("the order summed %d (%v), want 101: the first keyed event and the unkeyed one", sum, err)
	}
}

func TestCancelInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "cancel-done", demo.Hello, "Ada")
	e.wait(t, "cancel-done")

	for _, tc := range []struct {
		name string
		body any
	}{
		{"with reason", `{"reason": "operator said so"}`},
		{"without body", nil},
		{"empty object", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "cancel-" + uuid.NewString()
			e.start(t, id, demo.Approval, hourApproval)
			var acc struct{ InstanceID string }
			e.expect(t, "POST", "/api/instances/"+id+"/cancel", tc.body, http.StatusAccepted, &acc)
			if acc.InstanceID != id {
				t.Errorf("202 body %+v", acc)
			}
			st := e.wait(t, id)
			if st.State != "Canceled" || st.Error == nil || st.Error.Kind != "canceled" {
				t.Fatalf("after cancel: %s %+v", st.State, st.Error)
			}
			if tc.name == "with reason" && !strings.Contains(st.Error.Message, "operator said so") {
				t.Errorf("cancel message %q does not carry the reason", st.Error.Message)
			}
		})
	}
	t.Run("finished instance", func(t *testing.T) {
		t.Parallel()
		before := e.wait(t, "cancel-done")
		eb := e.expectError(t, "POST", "/api/instances/cancel-done/cancel", nil, http.StatusConflict)
		if !strings.Contains(eb.Details, "Completed") {
			t.Errorf("409 details %q do not name the state", eb.Details)
		}
		if st := e.wait(t, "cancel-done"); st.State != "Completed" || !st.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("canceling a completed instance changed it: %s, updatedAt %v -> %v", st.State, before.UpdatedAt, st.UpdatedAt)
		}
	})
	t.Run("unknown instance", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "POST", "/api/instances/nobody/cancel", nil, http.StatusNotFound)
	})
	for _, body := range []string{`{"reason": `, `{"why": "x"}`, `"stop"`} {
		t.Run("bad body "+body, func(t *testing.T) {
			t.Parallel()
			e.expectError(t, "POST", "/api/instances/cancel-done/cancel", body, http.StatusBadRequest)
		})
	}
}

func TestPurgeInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)

	t.Run("finished", func(t *testing.T) {
		t.Parallel()
		e.start(t, "purge-done", demo.Hello, "Ada")
		e.wait(t, "purge-done")
		var out struct {
			InstanceID string `json:"instanceId"`
			Purged     bool   `json:"purged"`
		}
		e.expect(t, "DELETE", "/api/instances/purge-done", nil, http.StatusOK, &out)
		if !out.Purged || out.InstanceID != "purge-done" {
			t.Fatalf("purge answered %+v", out)
		}
		e.expectError(t, "GET", "/api/instances/purge-done", nil, http.StatusNotFound)
		e.expectError(t, "DELETE", "/api/instances/purge-done", nil, http.StatusNotFound)
		// The ID can be reused.
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "purge-done"}`, http.StatusCreated, nil)
	})
	t.Run("running needs force", func(t *testing.T) {
		t.Parallel()
		e.start(t, "purge-running", demo.Approval, hourApproval)
		eb := e.expectError(t, "DELETE", "/api/instances/purge-running", nil, http.StatusConflict)
		if !strings.Contains(eb.Error, "force") {
			t.Errorf("409 error %q does not mention force", eb.Error)
		}
		e.expectError(t, "DELETE", "/api/instances/purge-running?force=false", nil, http.StatusConflict)
		e.expect(t, "GET", "/api/instances/purge-running", nil, http.StatusOK, nil)
		e.expect(t, "DELETE", "/api/instances/purge-running?force=true", nil, http.StatusOK, nil)
		e.expectError(t, "GET", "/api/instances/purge-running", nil, http.StatusNotFound)
	})
	t.Run("sub-orchestration", func(t *testing.T) {
		t.Parallel()
		e.start(t, "purge-parent", parentOrch, "Ada")
		e.wait(t, "purge-parent") // and so its child
		eb := e.expectError(t, "DELETE", "/api/instances/purge-parent-child", nil, http.StatusConflict)
		if !strings.Contains(eb.Error, "root") {
			t.Errorf("409 error %q does not point at the root", eb.Error)
		}
		e.expect(t, "DELETE", "/api/instances/purge-parent", nil, http.StatusOK, nil)
		e.expectError(t, "GET", "/api/instances/purge-parent-child", nil, http.StatusNotFound)
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "DELETE", "/api/instances/nobody", nil, http.StatusNotFound)
		e.expectError(t, "DELETE", "/api/instances/nobody?force=true", nil, http.StatusNotFound)
	})
	t.Run("bad force", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "DELETE", "/api/instances/nobody?force=please", nil, http.StatusBadRequest)
	})
}
