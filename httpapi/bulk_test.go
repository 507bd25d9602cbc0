package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// TestBulkRoute previews a cancel by filter (nothing changes), starts the
// job, which the server's runtime runs at once, and follows it to Done.
func TestBulkRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 3 {
		e.start(t, fmt.Sprintf("b-%d", i), demo.Approval, approvalInput(3600))
	}
	e.start(t, "other", demo.Approval, approvalInput(3600))
	filter := `"filter": {"prefix": "b-", "orchestration": "` + demo.Approval + `"}`
	var prev httpapi.BulkResponse
	e.expect(t, "POST", "/api/bulk", `{"action": "cancel", "dryRun": true, `+filter+`}`, http.StatusOK, &prev)
	if prev.Count != 3 || len(prev.Instances) != 3 || prev.Job != nil || !prev.DryRun {
		t.Fatalf("preview %+v", prev)
	}
	ctx := context.Background()
	for i := range 3 {
		if st, err := e.client.GetStatus(ctx, fmt.Sprintf("b-%d", i)); err != nil || st.State.IsTerminal() {
			t.Fatalf("the preview changed b-%d: %+v, %v", i, st, err)
		}
	}
	var res httpapi.BulkResponse
	e.expect(t, "POST", "/api/bulk", `{"action": "cancel", "reason": "incident 42", `+filter+`}`, http.StatusAccepted, &res)
	if res.Job == nil || res.Job.Total != 3 {
		t.Fatalf("job answer %+v", res)
	}
	for i := range 3 {
		if st := e.wait(t, fmt.Sprintf("b-%d", i)); st.State != duroxide.StateCanceled {
			t.Fatalf("b-%d: %s", i, st.State)
		}
	}
	var job httpapi.BulkJobView
	deadline := time.Now().Add(testTimeout)
	for job.State != "Done" {
		if time.Now().After(deadline) {
			t.Fatalf("job %+v not done", job)
		}
		e.expect(t, "GET", "/api/bulk/"+res.Job.ID, nil, http.StatusOK, &job)
	}
	if job.Succeeded != 3 || job.Processed != 3 || job.Action != "cancel" {
		t.Fatalf("job %+v", job)
	}
	if st, err := e.client.GetStatus(ctx, "other"); err != nil || st.State.IsTerminal() {
		t.Fatalf("an instance outside the filter changed: %+v, %v", st, err)
	}
	var list struct {
		Jobs []httpapi.BulkJobView `json:"jobs"`
	}
	e.expect(t, "GET", "/api/bulk", nil, http.StatusOK, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != res.Job.ID {
		t.Fatalf("jobs %+v", list.Jobs)
	}
}

// TestBulkRouteHostileInput sends bad, huge and hostile bodies and job IDs:
// each is refused, and no job is stored and no instance touched.
func TestBulkRouteHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "target", demo.Approval, approvalInput(3600))
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"empty", "", http.StatusBadRequest},
		{"no action", `{"filter": {}}`, http.StatusBadRequest},
		{"unknown action", `{"action": "drop table"}`, http.StatusBadRequest},
		{"unknown field", `{"action": "cancel", "everything": true}`, http.StatusBadRequest},
		{"unknown filter field", `{"action": "cancel", "filter": {"cursor": "x"}}`, http.StatusBadRequest},
		{"not an object", `["cancel"]`, http.StatusBadRequest},
		{"deep nesting", deep, http.StatusBadRequest},
		{"deep event data", `{"action": "raiseEvent", "eventName": "e", "eventData": ` + deep + `}`, http.StatusBadRequest},
		{"trailing data", `{"action": "cancel"} {}`, http.StatusBadRequest},
		{"invalid UTF-8", "{\"action\": \"cancel\", \"reason\": \"\xff\"}", http.StatusBadRequest},
		{"lone surrogate", `{"action": "cancel", "reason": "\ud800"}`, http.StatusBadRequest},
		{"NUL in reason", `{"action": "cancel", "reason": "a\u0000b"}`, http.StatusBadRequest},
		{"bidi override in by", `{"action": "pause", "by": "\u202eadmin"}`, http.StatusBadRequest},
		{"long reason", `{"action": "cancel", "reason": "` + strings.Repeat("r", duroxide.MaxReasonLength+1) + `"}`, http.StatusBadRequest},
		{"unknown state", `{"action": "cancel", "filter": {"states": ["sleeping"]}}`, http.StatusBadRequest},
		{"unknown wait kind", `{"action": "cancel", "filter": {"waitKind": "godot"}}`, http.StatusBadRequest},
		{"bad time", `{"action": "purge", "filter": {"finishedBefore": "yesterday"}}`, http.StatusBadRequest},
		{"negative chunk", `{"action": "cancel", "chunkSize": -1}`, http.StatusBadRequest},
		{"raise without a name", `{"action": "raiseEvent"}`, http.StatusBadRequest},
		{"wrong type", `{"action": 7}`, http.StatusBadRequest},
		{"huge body", `{"action": "cancel", "reason": "` + strings.Repeat("x", 2<<20) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.expectRaw(t, rawRequest{method: "POST", path: "/api/bulk", body: tc.body, header: jsonCT}, tc.status)
		})
	}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"NUL in job ID", "/api/bulk/a%00b", http.StatusBadRequest},
		{"invalid UTF-8 in job ID", "/api/bulk/%FF%FE", http.StatusBadRequest},
		{"unknown job", "/api/bulk/" + strings.Repeat("j", 300), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.expectRaw(t, rawRequest{method: "GET", path: tc.path}, tc.status)
		})
	}
	ctx := context.Background()
	if jobs, err := e.client.ListBulkJobs(ctx, false); err != nil || len(jobs) != 0 {
		t.Fatalf("refused requests stored jobs: %+v, %v", jobs, err)
	}
	if st, err := e.client.GetStatus(ctx, "target"); err != nil || st.State.IsTerminal() {
		t.Fatalf("the target changed: %+v, %v", st, err)
	}
}

// TestBulkRouteNeedsTheToken checks that nothing unauthenticated previews,
// starts or reads a bulk job.
func TestBulkRouteNeedsTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{AuthToken: testToken})
	e.token = testToken
	e.start(t, "live", demo.Approval, approvalInput(3600))
	for _, tc := range []struct{ method, path, body, authorization string }{
		{"POST", "/api/bulk", `{"action": "cancel"}`, ""},
		{"POST", "/api/bulk", `{"action": "purge", "force": true}`, "Bearer wrong"},
		{"POST", "/api/bulk", `{"action": "cancel", "dryRun": true}`, "Basic " + testToken},
		{"GET", "/api/bulk", "", ""},
		{"GET", "/api/bulk/x", "", "Bearer " + testToken + "x"},
	} {
		h := withHeaders("Content-Type", "application/json")
		if tc.authorization != "" {
			h["Authorization"] = tc.authorization
		}
		e.expectRaw(t, rawRequest{method: tc.method, path: tc.path, header: h, body: tc.body}, http.StatusUnauthorized)
	}
	ctx := context.Background()
	if st, err := e.client.GetStatus(ctx, "live"); err != nil || st.State.IsTerminal() {
		t.Fatalf("an unauthenticated bulk action got through: %+v, %v", st, err)
	}
	if jobs, err := e.client.ListBulkJobs(ctx, false); err != nil || len(jobs) != 0 {
		t.Fatalf("an unauthenticated request stored jobs: %+v, %v", jobs, err)
	}
}

// TestBulkCancelRoute cancels a pending job (it never runs), then is
// refused a second cancel (409) and the cancel of an unknown job (404);
// without the token the cancel is refused and the job keeps running.
func TestBulkCancelRoute(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{AuthToken: testToken}, nil, false)
	e.token = testToken
	e.start(t, "bc-1", demo.Approval, approvalInput(3600))
	var res httpapi.BulkResponse
	e.expect(t, "POST", "/api/bulk", `{"action": "pause", "filter": {"prefix": "bc-"}}`, http.StatusAccepted, &res)
	if res.Job == nil || res.Job.State != "Pending" {
		t.Fatalf("job answer %+v", res)
	}
	path := "/api/bulk/" + res.Job.ID + "/cancel"
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken} {
		h := withHeaders()
		if auth != "" {
			h["Authorization"] = auth
		}
		e.expectRaw(t, rawRequest{method: "POST", path: path, header: h}, http.StatusUnauthorized)
	}
	ctx := context.Background()
	if j, err := e.client.GetBulkJob(ctx, res.Job.ID); err != nil || j.State != duroxide.BulkJobPending {
		t.Fatalf("an unauthenticated cancel got through: %+v, %v", j, err)
	}
	var job httpapi.BulkJobView
	e.expect(t, "POST", path, nil, http.StatusOK, &job)
	if job.State != "Canceled" || job.ID != res.Job.ID || job.Processed != 0 {
		t.Fatalf("canceled job %+v", job)
	}
	eb := e.expectError(t, "POST", path, nil, http.StatusConflict)
	if eb.Error != "bulk job has already ended" {
		t.Fatalf("second cancel: %+v", eb)
	}
	e.expectError(t, "POST", "/api/bulk/nope/cancel", nil, http.StatusNotFound)
	e.expectError(t, "POST", "/api/bulk/a%01b/cancel", nil, http.StatusBadRequest)
	if j, err := e.client.RunBulkJob(ctx, res.Job.ID, nil); err != nil || j.State != duroxide.BulkJobCanceled || j.Processed != 0 {
		t.Fatalf("the canceled job ran: %+v, %v", j, err)
	}
	if st, err := e.client.GetStatus(ctx, "bc-1"); err != nil || st.Paused != nil {
		t.Fatalf("the canceled job touched bc-1: %+v, %v", st, err)
	}
}
