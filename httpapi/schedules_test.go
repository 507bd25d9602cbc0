package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
)

// TestSchedulesRoutes creates, reads, updates, pauses, resumes, triggers
// and deletes a schedule through the API and checks each answer.
func TestSchedulesRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	type schedule struct {
		ID, Cron, TimeZone, Overlap, CatchUp, LockKey, Interval string
		Paused                                                  bool
		NextFireAt                                              *string
		Revision                                                int64
		Input                                                   json.RawMessage
	}
	var s schedule
	e.expect(t, "POST", "/api/schedules", `{"id": "nightly", "cron": "0 2 * * *", "timeZone": "Europe/Paris",
		"orchestration": "demo.Hello", "input": "Ada"}`, http.StatusCreated, &s)
	if s.ID != "nightly" || s.Overlap != "skip" || s.CatchUp != "last" || s.LockKey != "schedule:nightly" ||
		s.NextFireAt == nil || s.Revision != 1 || string(s.Input) != `"Ada"` || s.Paused {
		t.Fatalf("created schedule: %+v", s)
	}
	var list struct {
		Schedules []json.RawMessage `json:"schedules"`
	}
	e.expect(t, "GET", "/api/schedules", nil, http.StatusOK, &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("list: %d schedules", len(list.Schedules))
	}
	s = schedule{}
	e.expect(t, "PUT", "/api/schedules/nightly", `{"interval": "1h", "orchestration": "demo.Hello", "overlap": "allow"}`, http.StatusOK, &s)
	if s.Cron != "" || s.Interval != "1h" || s.Overlap != "allow" || s.LockKey != "" || s.Revision != 2 {
		t.Fatalf("updated schedule: %+v", s)
	}
	s = schedule{}
	e.expect(t, "POST", "/api/schedules/nightly/pause", nil, http.StatusOK, &s)
	if !s.Paused || s.NextFireAt != nil {
		t.Fatalf("paused schedule: %+v", s)
	}
	var f struct{ InstanceID, Outcome string }
	e.expect(t, "POST", "/api/schedules/nightly/trigger", nil, http.StatusOK, &f)
	if f.Outcome != "triggered" || !strings.HasPrefix(f.InstanceID, "nightly-") {
		t.Fatalf("trigger: %+v", f)
	}
	e.wait(t, f.InstanceID)
	s = schedule{}
	e.expect(t, "POST", "/api/schedules/nightly/resume", nil, http.StatusOK, &s)
	if s.Paused || s.NextFireAt == nil {
		t.Fatalf("resumed schedule: %+v", s)
	}
	var d struct {
		Deleted bool `json:"deleted"`
	}
	e.expect(t, "DELETE", "/api/schedules/nightly", nil, http.StatusOK, &d)
	if !d.Deleted {
		t.Fatal("delete: not deleted")
	}
	e.expect(t, "DELETE", "/api/schedules/nightly", nil, http.StatusOK, &d)
	if d.Deleted {
		t.Fatal("second delete: deleted")
	}
}

// TestSchedulesHostileInput sends bad, huge and hostile schedules: each is
// refused with a bounded 4xx answer and creates nothing.
func TestSchedulesHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{MaxBodyBytes: 64 << 10})
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"empty", ``, http.StatusBadRequest},
		{"not an object", `[1]`, http.StatusBadRequest},
		{"no id", `{"interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"unknown field", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "every": 5}`, http.StatusBadRequest},
		{"neither cron nor interval", `{"id": "a", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"both", `{"id": "a", "cron": "* * * * *", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"bad cron", `{"id": "a", "cron": "every day", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"huge cron", `{"id": "a", "cron": "` + strings.Repeat("1,", 5000) + `1 * * * *", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"@every", `{"id": "a", "cron": "@every 1s", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"unknown zone", `{"id": "a", "cron": "* * * * *", "timeZone": "../../etc/passwd", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"tiny interval", `{"id": "a", "interval": "1ms", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"negative interval", `{"id": "a", "interval": -5, "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"bad duration", `{"id": "a", "interval": "soon", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"bad overlap", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "overlap": "<script>"}`, http.StatusBadRequest},
		{"bad catch-up", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "catchUp": "sometimes"}`, http.StatusBadRequest},
		{"slash in id", `{"id": "a/b", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"dot id", `{"id": "..", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"control in id", `{"id": "a\u0000b", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"bidi in id", `{"id": "a\u202eb", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"lone surrogate", `{"id": "a\ud800", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"long id", `{"id": "` + strings.Repeat("i", duroxide.MaxScheduleIDLength+1) + `", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusBadRequest},
		{"no orchestration", `{"id": "a", "interval": "5m"}`, http.StatusBadRequest},
		{"lock key with allow", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "overlap": "allow", "lockKey": "k"}`, http.StatusBadRequest},
		{"huge input", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "input": "` + strings.Repeat("x", 70<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{"deep input", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello", "input": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, http.StatusBadRequest},
		{"trailing data", `{"id": "a", "interval": "5m", "orchestration": "demo.Hello"} {}`, http.StatusBadRequest},
	} {
		res := e.send(t, rawRequest{method: "POST", path: "/api/schedules", body: tc.body, header: jsonCT})
		if res.status != tc.status || len(res.body) > maxErrorAnswer {
			t.Errorf("%s: got %s, want %d (bounded)", tc.name, clip(res.String()), tc.status)
		}
	}
	for _, path := range []string{"/api/schedules/" + url.PathEscape("a\x00b"), "/api/schedules/" + strings.Repeat("i", 10000)} {
		for _, m := range []string{"GET", "DELETE"} {
			if res := e.send(t, rawRequest{method: m, path: path}); res.status != http.StatusBadRequest || len(res.body) > maxErrorAnswer {
				t.Errorf("%s %s: got %s, want 400 (bounded)", m, clip(path), clip(res.String()))
			}
		}
	}
	if list, err := e.client.ListSchedules(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("after hostile input: %d schedules, %v", len(list), err)
	}
}

// TestSchedulesNeedTheToken: without the token, nothing reads or changes
// schedules.
func TestSchedulesNeedTheToken(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{AuthToken: testToken}, nil, false) // no runtime: nothing fires
	if _, err := e.client.CreateSchedule(context.Background(), "s", &duroxide.ScheduleDefinition{Interval: time.Hour, Orchestration: "demo.Hello"}, false); err != nil {
		t.Fatal(err)
	}
	for _, rr := range []rawRequest{
		{method: "GET", path: "/api/schedules"},
		{method: "POST", path: "/api/schedules", body: `{"id": "b", "interval": "5m", "orchestration": "demo.Hello"}`, header: jsonCT},
		{method: "PUT", path: "/api/schedules/s", body: `{"interval": "5m", "orchestration": "demo.Hello"}`, header: jsonCT},
		{method: "DELETE", path: "/api/schedules/s"},
		{method: "POST", path: "/api/schedules/s/pause"},
		{method: "POST", path: "/api/schedules/s/trigger"},
	} {
		if res := e.send(t, rr); res.status != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: got %s, want 401", rr.method, rr.path, clip(res.String()))
		}
	}
	list, err := e.client.ListSchedules(context.Background())
	if err != nil || len(list) != 1 || list[0].Revision != 1 || list[0].LastOutcome != "" {
		t.Fatalf("after unauthenticated calls: %+v, %v", list, err)
	}
}

// TestSchedulesListPages pages GET /api/schedules with limit and cursor,
// caps a huge limit and refuses a bad limit or cursor.
func TestSchedulesListPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, id := range []string{"c", "a", "b"} {
		e.expect(t, "POST", "/api/schedules", `{"id": "`+id+`", "cron": "@daily", "orchestration": "demo.Hello"}`, http.StatusCreated, nil)
	}
	type page struct {
		Schedules []struct {
			ID string `json:"id"`
		} `json:"schedules"`
		NextCursor string `json:"nextCursor"`
	}
	var got []string
	path := "/api/schedules?limit=2"
	for n := 0; ; n++ {
		if n > 3 {
			t.Fatal("too many pages")
		}
		var p page
		e.expect(t, "GET", path, nil, http.StatusOK, &p)
		for _, s := range p.Schedules {
			got = append(got, s.ID)
		}
		if p.NextCursor == "" {
			break
		}
		path = "/api/schedules?limit=2&cursor=" + url.QueryEscape(p.NextCursor)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("paged %v, want a, b, c", got)
	}
	for _, limit := range []string{"1000000", "99999999999999999999999"} {
		var p page
		e.expect(t, "GET", "/api/schedules?limit="+limit, nil, http.StatusOK, &p)
		if len(p.Schedules) != 3 || p.NextCursor != "" {
			t.Fatalf("limit=%s: %+v", limit, p)
		}
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=ten", "limit=-99999999999999999999999", "cursor=nonsense", "cursor=s1.%21"} {
		e.expect(t, "GET", "/api/schedules?"+q, nil, http.StatusBadRequest, nil)
	}
}
