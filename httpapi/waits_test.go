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
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// waitsOf polls GET /api/instances/{id} until its waitingFor satisfies
// done, waking on the store's change notifications, within testTimeout.
func (e *env) waitsOf(t *testing.T, id string, done func([]map[string]any) bool) map[string]any {
	t.Helper()
	changed, stop := e.store.WatchInstance(id)
	defer stop()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		var st map[string]any
		e.expect(t, "GET", "/api/instances/"+url.PathEscape(id), nil, http.StatusOK, &st)
		raw, _ := json.Marshal(st["waitingFor"])
		var waits []map[string]any
		_ = json.Unmarshal(raw, &waits)
		if done(waits) {
			return st
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waitingFor of %s never matched; last %s", id, raw)
		}
	}
}

func TestWaitingForShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "waits-approval", demo.Approval, hourApproval)
	st := e.waitsOf(t, "waits-approval", func(w []map[string]any) bool { return len(w) == 2 })
	raw, _ := json.Marshal(st["waitingFor"])
	var waits []map[string]any
	_ = json.Unmarshal(raw, &waits)
	if waits[0]["kind"] != "event" || waits[0]["name"] != demo.ApprovalEvent || waits[0]["since"] == nil {
		t.Fatalf("first wait %s, want the event %q with since", raw, demo.ApprovalEvent)
	}
	if waits[1]["kind"] != "timer" || waits[1]["firesAt"] == nil {
		t.Fatalf("second wait %s, want a timer with firesAt", raw)
	}
	fires, err := time.Parse(time.RFC3339Nano, waits[1]["firesAt"].(string))
	since, err2 := time.Parse(time.RFC3339Nano, waits[1]["since"].(string))
	if err != nil || err2 != nil || fires.Sub(since) != time.Hour {
		t.Fatalf("timer firesAt %v since %v (%v, %v), want an hour apart", fires, since, err, err2)
	}
	for _, w := range waits {
		for k := range w {
			if !strings.Contains("kind name since firesAt", k) {
				t.Errorf("wait %v has unexpected key %q (unset fields are omitted)", w, k)
			}
		}
	}
	if _, ok := st["stalled"]; ok {
		t.Fatalf("a fresh instance reports stalled: %v", st)
	}
	// Terminal instances wait for nothing: the field is absent.
	e.start(t, "waits-hello", demo.Hello, "Ada")
	e.wait(t, "waits-hello")
	var done map[string]any
	e.expect(t, "GET", "/api/instances/waits-hello", nil, http.StatusOK, &done)
	if _, ok := done["waitingFor"]; ok {
		t.Fatalf("completed instance has waitingFor: %v", done)
	}
}

func TestStalledInstances(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	// No runtime: starts are never taken, as under a dead executor.
	e := newEnvClock(t, &httpapi.Options{StalledAfter: 3 * time.Minute}, clock, false)
	e.start(t, "stall-a", demo.Hello, "a")
	e.start(t, "stall-b", demo.Hello, "b")
	if err := e.client.StartOrchestration(context.Background(), "stall-later", demo.Hello, "c",
		&duroxide.StartOptions{StartAt: clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	list := func(query string) []string {
		t.Helper()
		var out struct {
			Instances []struct {
				InstanceID string           `json:"instanceId"`
				Stalled    bool             `json:"stalled"`
				WaitingFor []map[string]any `json:"waitingFor"`
			} `json:"instances"`
			NextCursor string `json:"nextCursor"`
		}
		e.expect(t, "GET", "/api/instances"+query, nil, http.StatusOK, &out)
		ids := []string{}
		for _, in := range out.Instances {
			if query != "" && strings.Contains(query, "stalled=true") && (!in.Stalled || len(in.WaitingFor) == 0) {
				t.Fatalf("stalled instance %s without its reasons: %+v", in.InstanceID, in)
			}
			ids = append(ids, in.InstanceID)
		}
		return ids
	}
	gauge := func() string {
		t.Helper()
		res := e.do(t, "GET", "/metrics", nil)
		for line := range strings.SplitSeq(string(res.body), "\n") {
			if strings.HasPrefix(line, "duroxide_instances_stalled ") {
				return strings.TrimPrefix(line, "duroxide_instances_stalled ")
			}
		}
		t.Fatalf("no duroxide_instances_stalled sample in\n%s", res.body)
		return ""
	}

	clock.Advance(2 * time.Minute)
	if got := list("?stalled=true"); len(got) != 0 {
		t.Fatalf("stalled after 2m with a 3m threshold: %v", got)
	}
	if g := gauge(); g != "0" {
		t.Fatalf("gauge %s, want 0", g)
	}
	clock.Advance(time.Minute)
	if got := strings.Join(list("?stalled=true"), ","); got != "stall-b,stall-a" {
		t.Fatalf("stalled = %s, want stall-b,stall-a (the delayed start is not due)", got)
	}
	if got := strings.Join(list("?stalled=true&limit=1"), ","); got != "stall-b" {
		t.Fatalf("stalled with limit 1 = %s", got)
	}
	if got := list("?stalled=true&status=Completed"); len(got) != 0 {
		t.Fatalf("stalled Completed instances: %v", got)
	}
	if got := len(list("?stalled=false")); got != 3 {
		t.Fatalf("stalled=false lists %d instances, want all 3", got)
	}
	if g := gauge(); g != "2" {
		t.Fatalf("gauge %s, want 2", g)
	}
	st := e.waitsOf(t, "stall-a", func(w []map[string]any) bool { return len(w) == 1 })
	w := st["waitingFor"].([]any)[0].(map[string]any)
	if st["stalled"] != true || w["kind"] != "turn" || w["stalled"] != true ||
		!strings.Contains(w["stalledReason"].(string), "no runtime took them") {
		t.Fatalf("stalled instance %v", st)
	}

	for _, bad := range []string{"yes", "TRUE%20", "2", "", "%00", "true%0A", "%E2%80%AE", strings.Repeat("t", 5000)} {
		eb := e.expectError(t, "GET", "/api/instances?stalled="+bad, nil, http.StatusBadRequest)
		if eb.Error != "invalid stalled" {
			t.Errorf("?stalled=%.20q: error %q", bad, eb.Error)
		}
	}
	e.expectError(t, "GET", "/api/instances?stalled=true&cursor=abc", nil, http.StatusBadRequest)
	e.expectError(t, "GET", "/api/instances?stalled=true&limit=0", nil, http.StatusBadRequest)
}

func TestStalledAfterOption(t *testing.T) {
	t.Parallel()
	_, err := httpapi.NewHandler(duroxide.NewClient(nil), &httpapi.Options{StalledAfter: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "StalledAfter") {
		t.Fatalf("NewHandler with a negative StalledAfter: %v", err)
	}
}

// A waiting activity's options reach waitingFor: its start-to-close and
// schedule-to-close timeouts, and that no runtime serves it.
func TestWaitingForShowsActivityTimeouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "waits-timeouts", timeoutsOrch, struct{}{})
	var act map[string]any
	e.waitsOf(t, "waits-timeouts", func(w []map[string]any) bool {
		for _, x := range w {
			if x["kind"] == "activity" && x["unserved"] == true {
				act = x
				return true
			}
		}
		return false
	})
	if act["name"] != "test.Nowhere" || act["startToCloseTimeoutMs"] != float64(30000) || act["scheduleToCloseTimeoutMs"] != float64(3600000) {
		t.Fatalf("activity wait %v, want test.Nowhere with startToCloseTimeoutMs 30000 and scheduleToCloseTimeoutMs 3600000", act)
	}
}
