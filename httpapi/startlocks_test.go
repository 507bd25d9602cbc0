package httpapi_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
)

// TestStartInstanceLocks covers the lock and idempotency fields of POST
// /api/instances.
func TestStartInstanceLocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	keys := func(t *testing.T, res response) []string {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(res.body, &m); err != nil {
			t.Fatalf("decoding %s: %v", res, err)
		}
		return slices.Sorted(maps.Keys(m))
	}

	t.Run("lock", func(t *testing.T) {
		t.Parallel()
		res := e.expect(t, "POST", "/api/instances",
			`{"orchestration": "demo.Approval", "instanceId": "lk-1", "lockKey": "wf-api", "lockTtl": "90s", "input": {"timeoutSeconds": 3600}}`,
			http.StatusCreated, nil)
		if got := keys(t, res); !slices.Equal(got, []string{"instanceId"}) {
			t.Fatalf("fresh start answered %s", res)
		}
		l := e.heldBy(t, "wf-api", "lk-1")
		if ttl := l.ExpiresAt.Sub(*l.LockedSince); ttl < 90*time.Second || ttl > 90*time.Second+testTimeout {
			t.Fatalf("lock lives %v, want 90s", ttl)
		}

		var conflict struct {
			Error               string `json:"error"`
			Details             string `json:"details"`
			ExistingExecutionID string `json:"existingExecutionId"`
		}
		res = e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "lk-2", "lockKey": "wf-api"}`, http.StatusConflict, &conflict)
		if got := keys(t, res); !slices.Equal(got, []string{"details", "error", "existingExecutionId"}) ||
			conflict.Error != "Workflow currently executing" ||
			conflict.Details != "Only one execution can run at a time. Currently executing: lk-1" ||
			conflict.ExistingExecutionID != "lk-1" {
			t.Fatalf("got %s", res)
		}
		e.expectError(t, "GET", "/api/instances/lk-2", nil, http.StatusNotFound)
		if got := e.metric(t, `duroxide_lock_conflicts_total{kind="locked"}`); got != "1" {
			t.Errorf("locked conflicts %q, want 1", got)
		}

		// queueIfLocked: accepted, Pending until the lock is its turn.
		var queued httpapi.StartResponse
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "lk-3", "lockKey": "wf-api", "queueIfLocked": true, "input": "Ada"}`,
			http.StatusCreated, &queued)
		if !queued.Queued || queued.QueuePosition != 1 {
			t.Fatalf("queued start answered %+v, want queued at 1", queued)
		}
		var st status
		e.expect(t, "GET", "/api/instances/lk-3", nil, http.StatusOK, &st)
		if st.Status != "Pending" {
			t.Fatalf("queued start is %s", st.Status)
		}
		if l := e.heldBy(t, "wf-api", "lk-1"); l.Queued != 1 {
			t.Fatalf("queued %d, want 1", l.Queued)
		}
		e.approve(t, "lk-1")
		if st := e.wait(t, "lk-3"); string(st.Output) != `"Hello, Ada!"` {
			t.Fatalf("queued start ended %s %s", st.State, st.Output)
		}
		e.unlocked(t, "wf-api")
	})

	t.Run("replace", func(t *testing.T) {
		t.Parallel()
		e.expect(t, "POST", "/api/instances",
			`{"orchestration": "demo.Approval", "instanceId": "rp-1", "lockKey": "wf-replace", "replaceIfLocked": true, "input": {"timeoutSeconds": 3600}}`,
			http.StatusCreated, nil)
		e.heldBy(t, "wf-replace", "rp-1")
		var replacing httpapi.StartResponse
		res := e.expect(t, "POST", "/api/instances",
			`{"orchestration": "demo.Approval", "instanceId": "rp-2", "lockKey": "wf-replace", "replaceIfLocked": true, "input": {"timeoutSeconds": 3600}}`,
			http.StatusCreated, &replacing)
		if replacing.ReplacedInstanceID != "rp-1" || replacing.InstanceID != "rp-2" {
			t.Fatalf("replacing start answered %s, want rp-1 replaced", res)
		}
		if st := e.wait(t, "rp-1"); st.State != duroxide.StateCanceled || st.Error == nil || !strings.Contains(st.Error.Message, "replaced by rp-2") {
			t.Fatalf("replaced holder ended %s %+v", st.State, st.Error)
		}
		e.heldBy(t, "wf-replace", "rp-2")
		for _, body := range []string{
			`{"orchestration": "demo.Hello", "replaceIfLocked": true}`,
			`{"orchestration": "demo.Hello", "replaceIfLocked": "yes", "lockKey": "wf-replace"}`,
		} {
			e.expectError(t, "POST", "/api/instances", body, http.StatusBadRequest)
			e.expectError(t, "POST", "/api/instances/rp-x/signal-with-start",
				strings.Replace(body, `"orchestration"`, `"event": "go", "orchestration"`, 1), http.StatusBadRequest)
		}
		e.heldBy(t, "wf-replace", "rp-2")
		e.approve(t, "rp-2")
		e.unlocked(t, "wf-replace")
	})

	t.Run("idempotency key", func(t *testing.T) {
		t.Parallel()
		var first struct {
			InstanceID string `json:"instanceId"`
		}
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "idempotencyKey": "order-1", "input": "Ada"}`, http.StatusCreated, &first)
		for _, body := range []string{
			`{"orchestration": "demo.Hello", "idempotencyKey": "order-1", "input": "Ada"}`,
			`{"orchestration": "demo.Hello", "idempotencyKey": "order-1", "instanceId": "other-id"}`,
		} {
			var dup struct {
				InstanceID string `json:"instanceId"`
				Duplicate  bool   `json:"duplicate"`
			}
			res := e.expect(t, "POST", "/api/instances", body, http.StatusOK, &dup)
			if dup.InstanceID != first.InstanceID || !dup.Duplicate || res.header.Get("Location") != "/api/instances/"+first.InstanceID {
				t.Fatalf("got %s, want a duplicate of %s", res, first.InstanceID)
			}
		}
		e.expectError(t, "GET", "/api/instances/other-id", nil, http.StatusNotFound)
		// Another key starts another instance.
		e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "idempotencyKey": "order-2"}`, http.StatusCreated, nil)
	})
}
