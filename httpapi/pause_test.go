package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/httpapi"
)

// TestPauseResumeRoutes pauses an instance over HTTP, reads the pause in
// its status and waits, and resumes it.
func TestPauseResumeRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "held", demo.Approval, approvalInput(3600))
	var st duroxide.Status
	e.expect(t, "POST", "/api/instances/held/pause", `{"reason": "db down", "by": "alice"}`, http.StatusOK, &st)
	if st.Paused == nil || st.Paused.Reason != "db down" || st.Paused.By != "alice" || st.Paused.At.IsZero() {
		t.Fatalf("pause answer: paused %+v", st.Paused)
	}
	st = duroxide.Status{}
	e.expect(t, "GET", "/api/instances/held", nil, http.StatusOK, &st)
	if st.Paused == nil || len(st.WaitingFor) == 0 || st.WaitingFor[0].Kind != duroxide.WaitPaused ||
		st.WaitingFor[0].By != "alice" || st.Stalled {
		t.Fatalf("status of a paused instance: paused %+v, waits %+v, stalled %v", st.Paused, st.WaitingFor, st.Stalled)
	}
	if eb := e.expectError(t, "POST", "/api/instances/held/pause", "", http.StatusConflict); !strings.Contains(eb.Details, "paused") {
		t.Fatalf("second pause: %+v", eb)
	}
	st = duroxide.Status{}
	e.expect(t, "POST", "/api/instances/held/resume", nil, http.StatusOK, &st)
	if st.Paused != nil {
		t.Fatalf("resume answer still paused: %+v", st.Paused)
	}
	// Without a by, the API is the actor.
	st = duroxide.Status{}
	e.expect(t, "POST", "/api/instances/held/pause", nil, http.StatusOK, &st)
	if st.Paused == nil || st.Paused.By != "http api" {
		t.Fatalf("pause without by: %+v", st.Paused)
	}
}

// TestRewindRoute rewinds a failed instance over HTTP and refuses to
// rewind a live one.
func TestRewindRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "failing", demo.Fail, "boom")
	e.wait(t, "failing")
	var st duroxide.Status
	e.expect(t, "POST", "/api/instances/failing/rewind", `{"reason": "retry"}`, http.StatusOK, &st)
	if st.ExecutionID != 2 {
		t.Fatalf("rewind answer: execution %d, want 2", st.ExecutionID)
	}
	if st := e.wait(t, "failing"); st.State != duroxide.StateFailed || st.ExecutionID != 2 {
		t.Fatalf("rewound demo.Fail: %s at execution %d, want Failed at 2", st.State, st.ExecutionID)
	}
	e.start(t, "live", demo.Approval, approvalInput(3600))
	if eb := e.expectError(t, "POST", "/api/instances/live/rewind", nil, http.StatusConflict); !strings.Contains(eb.Details, "with force") {
		t.Fatalf("rewind of a live instance: %+v", eb)
	}
	// With force, a Running instance waiting in its first turn starts over
	// at a new execution; the old one ends Canceled, the rewind recorded.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for etag := ""; ; {
		live, err := e.client.WaitForStatusChange(ctx, "live", etag)
		if err != nil {
			t.Fatalf("waiting for live to run its first turn: %v", err)
		}
		if live.State == duroxide.StateRunning {
			break // its first turn committed: it waits, holding no lock
		}
		etag = live.ETag
	}
	st = duroxide.Status{}
	e.expect(t, "POST", "/api/instances/live/rewind", `{"reason": "stuck", "by": "ops", "force": true}`, http.StatusOK, &st)
	if st.ExecutionID != 2 || st.State != duroxide.StateRunning {
		t.Fatalf("forced rewind answer: %s at execution %d", st.State, st.ExecutionID)
	}
	old, err := e.client.GetHistory(ctx, "live", 1)
	if err != nil {
		t.Fatal(err)
	}
	if end := old[len(old)-1]; end.Kind != history.OrchestrationFailed || end.Error == nil ||
		end.Error.Code != history.CodeRewound || end.Error.Message != "rewound by ops: stuck" {
		t.Fatalf("the old execution's end: %+v", end)
	}
	e.expectError(t, "POST", "/api/instances/live/rewind", `{"force": "yes"}`, http.StatusBadRequest)
}

// TestPauseRoutesHostileInput sends bad, huge and hostile input to the
// pause, resume and rewind routes: each is refused and changes nothing.
func TestPauseRoutesHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "target", demo.Approval, approvalInput(3600))
	e.start(t, "failed", demo.Fail, "boom")
	e.wait(t, "failed")
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, route := range []string{"pause", "resume", "rewind"} {
		id := "target"
		if route == "rewind" {
			id = "failed"
		}
		base := "/api/instances/" + id + "/" + route
		for _, tc := range []struct {
			name, path, body string
			status           int
		}{
			{"unknown field", base, `{"everything": true}`, http.StatusBadRequest},
			{"not an object", base, `["pause"]`, http.StatusBadRequest},
			{"deep nesting", base, deep, http.StatusBadRequest},
			{"trailing data", base, `{} {}`, http.StatusBadRequest},
			{"invalid UTF-8", base, "{\"reason\": \"\xff\"}", http.StatusBadRequest},
			{"lone surrogate", base, `{"reason": "\ud800"}`, http.StatusBadRequest},
			{"huge body", base, `{"reason": "` + strings.Repeat("x", 2<<20) + `"}`, http.StatusRequestEntityTooLarge},
			{"NUL in path ID", "/api/instances/a%00b/" + route, "", http.StatusBadRequest},
			{"invalid UTF-8 in path ID", "/api/instances/%FF%FE/" + route, "", http.StatusBadRequest},
			// Lookups take any ID a start could not create: such an
			// instance does not exist.
			{"dot-dot path ID", "/api/instances/%2E%2E/" + route, "", http.StatusNotFound},
			{"long path ID", "/api/instances/" + strings.Repeat("x", duroxide.MaxInstanceIDLength+1) + "/" + route, "", http.StatusNotFound},
		} {
			t.Run(route+"/"+tc.name, func(t *testing.T) {
				e.expectRaw(t, rawRequest{method: "POST", path: tc.path, body: tc.body, header: jsonCT}, tc.status)
			})
		}
	}
	for _, tc := range []struct{ name, route, body string }{
		{"NUL in reason", "pause", `{"reason": "a\u0000b"}`},
		{"escape in reason", "pause", `{"reason": "\u001b[31mred"}`},
		{"bidi override in by", "pause", `{"by": "\u202eadmin"}`},
		{"long reason", "pause", `{"reason": "` + strings.Repeat("r", duroxide.MaxReasonLength+1) + `"}`},
		{"long by", "pause", `{"by": "` + strings.Repeat("b", duroxide.MaxNameLength+1) + `"}`},
		{"wrong type", "pause", `{"reason": 7}`},
		{"NUL in rewind reason", "rewind", `{"reason": "a\u0000b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "target"
			if tc.route == "rewind" {
				id = "failed"
			}
			e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances/" + id + "/" + tc.route, body: tc.body, header: jsonCT},
				http.StatusBadRequest)
		})
	}
	ctx := context.Background()
	if st, err := e.client.GetStatus(ctx, "target"); err != nil || st.Paused != nil || st.State.IsTerminal() {
		t.Fatalf("the target changed: %+v, %v", st, err)
	}
	if st, err := e.client.GetStatus(ctx, "failed"); err != nil || st.ExecutionID != 1 || st.State != duroxide.StateFailed {
		t.Fatalf("the failed instance changed: %+v, %v", st, err)
	}
}

// TestPauseRoutesNeedTheToken checks that nothing unauthenticated pauses,
// resumes or rewinds an instance.
func TestPauseRoutesNeedTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{AuthToken: testToken})
	e.token = testToken
	e.start(t, "live", demo.Approval, approvalInput(3600))
	e.start(t, "paused", demo.Approval, approvalInput(3600))
	e.start(t, "failed", demo.Fail, "boom")
	e.wait(t, "failed")
	e.expect(t, "POST", "/api/instances/paused/pause", nil, http.StatusOK, nil)
	for _, tc := range []struct{ path, authorization string }{
		{"/api/instances/live/pause", ""},
		{"/api/instances/live/pause", "Bearer wrong"},
		{"/api/instances/paused/resume", ""},
		{"/api/instances/paused/resume", "Basic " + testToken},
		{"/api/instances/failed/rewind", ""},
		{"/api/instances/failed/rewind", "Bearer " + testToken + "x"},
	} {
		h := withHeaders("Content-Type", "application/json")
		if tc.authorization != "" {
			h["Authorization"] = tc.authorization
		}
		e.expectRaw(t, rawRequest{method: "POST", path: tc.path, header: h, body: `{"reason": "sneaky"}`}, http.StatusUnauthorized)
	}
	ctx := context.Background()
	if st, err := e.client.GetStatus(ctx, "live"); err != nil || st.Paused != nil {
		t.Fatalf("an unauthenticated pause got through: %+v, %v", st, err)
	}
	if st, err := e.client.GetStatus(ctx, "paused"); err != nil || st.Paused == nil {
		t.Fatalf("an unauthenticated resume got through: %+v, %v", st, err)
	}
	if st, err := e.client.GetStatus(ctx, "failed"); err != nil || st.ExecutionID != 1 {
		t.Fatalf("an unauthenticated rewind got through: %+v, %v", st, err)
	}
}
