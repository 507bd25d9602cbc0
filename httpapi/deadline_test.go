package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// GET /api/instances/{id} carries the deadline of an instance started with
// a timeout ("deadline", the start's time plus the timeout, by the store's
// clock) while it runs; none without a timeout, and none once it ended.
func TestGetInstanceShowsTheDeadline(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnvClock(t, nil, clock, true)
	e.expect(t, "POST", "/api/instances", `{"orchestration": "`+orderOrch+`", "instanceId": "dl-timed", "input": {"count": 1}, "timeout": "90m"}`, http.StatusCreated, nil)
	e.expect(t, "POST", "/api/instances", `{"orchestration": "`+orderOrch+`", "instanceId": "dl-untimed", "input": {"count": 1}}`, http.StatusCreated, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, id := range []string{"dl-timed", "dl-untimed"} {
		// The first turn arms the timeout: wait for the instance to leave Pending.
		for etag := ""; ; {
			st, err := e.client.WaitForStatusChange(ctx, id, etag)
			if err != nil {
				t.Fatalf("%s did not start: %v", id, err)
			}
			if st.State != duroxide.StatePending {
				break
			}
			etag = st.ETag
		}
	}
	deadlineOf := func(id string) (time.Time, bool) {
		t.Helper()
		var raw map[string]json.RawMessage
		e.expect(t, "GET", "/api/instances/"+id, nil, http.StatusOK, &raw)
		v, ok := raw["deadline"]
		if !ok {
			return time.Time{}, false
		}
		var at time.Time
		if err := json.Unmarshal(v, &at); err != nil {
			t.Fatalf("%s: deadline %s: %v", id, v, err)
		}
		return at, true
	}
	if at, ok := deadlineOf("dl-timed"); !ok || !at.Equal(clock.Now().Add(90*time.Minute)) {
		t.Fatalf("dl-timed: deadline %v (present %v), want %v", at, ok, clock.Now().Add(90*time.Minute))
	}
	if at, ok := deadlineOf("dl-untimed"); ok {
		t.Fatalf("dl-untimed: deadline %v, want none", at)
	}
	e.expect(t, "POST", "/api/instances/dl-timed/events/update", `{"amount": 3}`, http.StatusAccepted, nil)
	if st := e.wait(t, "dl-timed"); st.State != duroxide.StateCompleted {
		t.Fatalf("dl-timed ended %s", st.State)
	}
	if at, ok := deadlineOf("dl-timed"); ok {
		t.Fatalf("dl-timed once completed: deadline %v, want none", at)
	}
}
