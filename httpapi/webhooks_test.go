package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// Inputs of demo.Approval: one that waits for its event for the whole
// test, as a body.
const approvalHour = `{"timeoutSeconds": 3600}`

// webhookAnswer is any answer of POST /api/webhooks/{id}.
type webhookAnswer struct {
	status int
	// keys are the body's top-level keys, sorted.
	keys                []string
	Success             bool   `json:"success"`
	ExecutionID         string `json:"executionId"`
	Duplicate           bool   `json:"duplicate"`
	Purged              bool   `json:"purged"`
	PurgedAt            string `json:"purgedAt"`
	Error               string `json:"error"`
	Details             string `json:"details"`
	ExistingExecutionID string `json:"existingExecutionId"`
	Queued              bool   `json:"queued"`
	QueuePosition       int    `json:"queuePosition"`
	ReplacedExecutionID string `json:"replacedExecutionId"`
	Event               string `json:"event"`
	Started             *bool  `json:"started"`
	// size is the body's length in bytes.
	size int
}

func (a webhookAnswer) String() string {
	return fmt.Sprintf("%d %+v", a.status, a.keys) + fmt.Sprintf(" success=%v executionId=%q duplicate=%v error=%q details=%q existingExecutionId=%q",
		a.Success, a.ExecutionID, a.Duplicate, a.Error, a.Details, a.ExistingExecutionID)
}

// callWebhook posts body to the trigger's webhook, with an Idempotency-Key
// header when key is not empty. It does not fail the test, so goroutines
// may use it.
func (e *env) callWebhook(ctx context.Context, trigger, body, key string) (webhookAnswer, error) {
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return e.callWebhookHeader(ctx, trigger, body, h)
}

// callWebhookHeader is callWebhook with the request headers h.
func (e *env) callWebhookHeader(ctx context.Context, trigger, body string, h http.Header) (webhookAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/api/webhooks/"+trigger, strings.NewReader(body))
	if err != nil {
		return webhookAnswer{}, err
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		return webhookAnswer{}, err
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return webhookAnswer{}, err
	}
	a := webhookAnswer{status: res.StatusCode, size: buf.Len()}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		return a, fmt.Errorf("Content-Type %q: %s", ct, buf.Bytes())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		return a, fmt.Errorf("decoding %s: %v", buf.Bytes(), err)
	}
	a.keys = slices.Sorted(maps.Keys(m))
	if err := json.Unmarshal(buf.Bytes(), &a); err != nil {
		return a, fmt.Errorf("decoding %s: %v", buf.Bytes(), err)
	}
	return a, nil
}

// webhook calls a webhook and checks the shape of the answer: exactly
// success, executionId and duplicate for 200, success false and an error
// otherwise.
func (e *env) webhook(t *testing.T, trigger, body, key string) webhookAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := e.callWebhook(ctx, trigger, body, key)
	if err != nil {
		t.Fatalf("webhook %s: %v", trigger, err)
	}
	checkWebhookShape(t, a)
	return a
}

func checkWebhookShape(t *testing.T, a webhookAnswer) {
	t.Helper()
	if a.status == http.StatusOK {
		keys := []string{"duplicate", "executionId", "success"}
		switch {
		case a.Purged:
			keys = []string{"duplicate", "executionId", "purged", "purgedAt", "success"}
		case a.Queued:
			keys = []string{"duplicate", "executionId", "queuePosition", "queued", "success"}
		}
		if a.ReplacedExecutionID != "" {
			keys = slices.Sorted(slices.Values(append(keys, "replacedExecutionId")))
		}
		if a.Event != "" {
			keys = slices.Sorted(slices.Values(append(keys, "event", "started")))
		}
		if !slices.Equal(a.keys, keys) || !a.Success || a.ExecutionID == "" || (a.Purged && !a.Duplicate) ||
			(a.Queued && a.QueuePosition < 1) {
			t.Fatalf("200 answer %s", a)
		}
		return
	}
	if !slices.Contains(a.keys, "success") || a.Success || a.Error == "" {
		t.Fatalf("error answer without success false and an error: %s", a)
	}
}

// started calls a webhook and returns the instance it started.
func (e *env) started(t *testing.T, trigger, body, key string) string {
	t.Helper()
	a := e.webhook(t, trigger, body, key)
	if a.status != http.StatusOK || a.Duplicate {
		t.Fatalf("webhook %s: got %s, want a fresh start", trigger, a)
	}
	if !strings.HasPrefix(a.ExecutionID, trigger+"-") {
		t.Fatalf("executionId %q does not start with the trigger ID", a.ExecutionID)
	}
	return a.ExecutionID
}

// checkLocked checks a's the 409 of a lock held by holder, exactly as the
// contract words it.
func checkLocked(t *testing.T, a webhookAnswer, holder string) {
	t.Helper()
	if a.status != http.StatusConflict ||
		!slices.Equal(a.keys, []string{"details", "error", "existingExecutionId", "success"}) ||
		a.Success || a.Error != "Workflow currently executing" ||
		a.Details != "Only one execution can run at a time. Currently executing: "+holder ||
		a.ExistingExecutionID != holder {
		t.Fatalf("got %s, want the 409 of a lock held by %s", a, holder)
	}
}

// conflicts calls a webhook and checks it is refused because holder runs.
func (e *env) conflicts(t *testing.T, trigger, body, holder string) {
	t.Helper()
	checkLocked(t, e.webhook(t, trigger, body, ""), holder)
}

// lockStatus is the JSON of GET /api/workflows/{id}/lock.
type lockStatus struct {
	WorkflowID   string     `json:"workflowId"`
	IsLocked     bool       `json:"isLocked"`
	ExecutionID  *string    `json:"executionId"`
	LockedSince  *time.Time `json:"lockedSince"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	IsStale      bool       `json:"isStale"`
	HolderStatus string     `json:"holderStatus"`
	Queued       int        `json:"queued"`
}

func (e *env) lock(t *testing.T, workflowID string) lockStatus {
	t.Helper()
	var l lockStatus
	e.expect(t, "GET", "/api/workflows/"+workflowID+"/lock", nil, http.StatusOK, &l)
	if l.WorkflowID != workflowID {
		t.Fatalf("lock of %s names %s", workflowID, l.WorkflowID)
	}
	return l
}

// heldBy checks that workflowID's lock is live and held by holder.
func (e *env) heldBy(t *testing.T, workflowID, holder string) lockStatus {
	t.Helper()
	l := e.lock(t, workflowID)
	if !l.IsLocked || l.ExecutionID == nil || *l.ExecutionID != holder || l.IsStale || l.LockedSince == nil || l.ExpiresAt == nil {
		t.Fatalf("lock of %s: %+v, want a live lock held by %s", workflowID, l, holder)
	}
	return l
}

// unlocked checks that workflowID has no lock.
func (e *env) unlocked(t *testing.T, workflowID string) {
	t.Helper()
	if l := e.lock(t, workflowID); l.IsLocked || l.ExecutionID != nil || l.LockedSince != nil || l.ExpiresAt != nil {
		t.Fatalf("lock of %s: %+v, want none", workflowID, l)
	}
}

// approve sends demo.Approval's event to id and waits until it completes.
func (e *env) approve(t *testing.T, id string) {
	t.Helper()
	if err := e.client.RaiseEvent(context.Background(), id, demo.ApprovalEvent, true); err != nil {
		t.Fatalf("approving %s: %v", id, err)
	}
	if st := e.wait(t, id); st.State != duroxide.StateCompleted || string(st.Output) != `"approved"` {
		t.Fatalf("%s ended %s %s", id, st.State, st.Output)
	}
}

func (e *env) listLocks(t *testing.T) []lockStatus {
	t.Helper()
	var out struct {
		Locks []lockStatus `json:"locks"`
	}
	res := e.expect(t, "GET", "/api/locks", nil, http.StatusOK, &out)
	if out.Locks == nil {
		t.Fatalf("GET /api/locks: %s, want a locks array", res)
	}
	return out.Locks
}

// metric returns the value of one sample of /metrics ("" if absent).
func (e *env) metric(t *testing.T, sample string) string {
	t.Helper()
	res := e.expect(t, "GET", "/metrics", nil, http.StatusOK, nil)
	for _, line := range strings.Split(string(res.body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestWebhookExclusive walks the behaviour matrix of an exclusive trigger:
// a start takes the lock, a concurrent call is refused naming the holder,
// and the lock is released when the holder completes, fails or is
// canceled, so the next call starts.
func TestWebhookExclusive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "pay", WorkflowID: "workflow_123", Orchestration: demo.Approval},
		{ID: "pay-too", WorkflowID: "workflow_123", Orchestration: demo.Hello},
		{ID: "boom", Orchestration: demo.Fail},
	}})

	// Execution starts: no lock → acquire, 200.
	h1 := e.started(t, "pay", approvalHour, "")
	l := e.heldBy(t, "workflow_123", h1)
	if l.HolderStatus != "Pending" && l.HolderStatus != "Running" {
		t.Fatalf("holder status %q", l.HolderStatus)
	}
	if ttl := l.ExpiresAt.Sub(*l.LockedSince); ttl < time.Hour || ttl > time.Hour+testTimeout {
		t.Fatalf("lock lives %v, want the default hour", ttl)
	}
	// Concurrent webhook: lock held by a running instance → 409, on any
	// trigger sharing the workflow ID; nothing is started.
	e.conflicts(t, "pay", approvalHour, h1)
	e.conflicts(t, "pay-too", `"Ada"`, h1)
	var page struct {
		Instances []status `json:"instances"`
	}
	e.expect(t, "GET", "/api/instances", nil, http.StatusOK, &page)
	if len(page.Instances) != 1 || page.Instances[0].InstanceID != h1 {
		t.Fatalf("refused calls left instances: %+v", page.Instances)
	}
	if st := e.wait0(t, h1); st.State != duroxide.StateRunning {
		t.Fatalf("holder is %s", st.State)
	}

	// Released on SUCCESS.
	e.approve(t, h1)
	e.unlocked(t, "workflow_123")
	h2 := e.started(t, "pay", approvalHour, "")
	e.heldBy(t, "workflow_123", h2)
	e.conflicts(t, "pay", approvalHour, h2)

	// Released on ABORTED (canceled).
	e.expect(t, "POST", "/api/instances/"+h2+"/cancel", `{"reason": "operator"}`, http.StatusAccepted, nil)
	if st := e.wait(t, h2); st.State != duroxide.StateCanceled {
		t.Fatalf("%s ended %s, want Canceled", h2, st.State)
	}
	e.unlocked(t, "workflow_123")
	h3 := e.started(t, "pay-too", `"Ada"`, "")
	if st := e.wait(t, h3); st.State != duroxide.StateCompleted || string(st.Output) != `"Hello, Ada!"` {
		t.Fatalf("%s ended %s %s", h3, st.State, st.Output)
	}
	e.unlocked(t, "workflow_123")

	// Released on FAILED.
	f1 := e.started(t, "boom", `"kaput"`, "")
	if st := e.wait(t, f1); st.State != duroxide.StateFailed {
		t.Fatalf("%s ended %s, want Failed", f1, st.State)
	}
	e.unlocked(t, "boom")
	f2 := e.started(t, "boom", `"again"`, "")
	if f2 == f1 {
		t.Fatalf("the retry reused %s", f1)
	}
	e.wait(t, f2)

	if got := e.listLocks(t); len(got) != 0 {
		t.Fatalf("locks left: %+v", got)
	}
	if got := e.metric(t, `duroxide_lock_conflicts_total{kind="locked"}`); got != "3" {
		t.Errorf("locked conflicts %q, want 3", got)
	}
}

// wait0 reads id's status without waiting.
func (e *env) wait0(t *testing.T, id string) *duroxide.Status {
	t.Helper()
	st, err := e.client.GetStatus(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestWebhookBurst fires 200 calls at once at an exclusive trigger: exactly
// one starts, every other is refused naming it, and no lock outlives it.
func TestWebhookBurst(t *testing.T) {
	t.Parallel()
	const calls = 200
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{ID: "burst", Orchestration: demo.Approval}}})
	if got := e.metric(t, `duroxide_lock_conflicts_total{kind="concurrent"}`); got != "0" {
		t.Fatalf("concurrent conflicts before the burst: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	answers := make([]webhookAnswer, calls)
	errs := make([]error, calls)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-gate
			answers[i], errs[i] = e.callWebhook(ctx, "burst", approvalHour, "")
		})
	}
	close(gate)
	wg.Wait()
	var holder string
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		checkWebhookShape(t, a)
		if a.status == http.StatusOK {
			if holder != "" {
				t.Fatalf("two calls started: %s and %s", holder, a.ExecutionID)
			}
			holder = a.ExecutionID
		}
	}
	if holder == "" {
		t.Fatal("no call started")
	}
	for _, a := range answers {
		if a.status != http.StatusOK {
			checkLocked(t, a, holder)
		}
	}
	var page struct {
		Instances []status `json:"instances"`
	}
	e.expect(t, "GET", "/api/instances", nil, http.StatusOK, &page)
	if len(page.Instances) != 1 {
		t.Fatalf("%d instances exist, want 1", len(page.Instances))
	}
	if got := e.metric(t, `duroxide_lock_conflicts_total{kind="locked"}`); got != fmt.Sprint(calls-1) {
		t.Errorf("locked conflicts %q, want %d", got, calls-1)
	}
	if got := e.metric(t, `duroxide_execution_locks`); got != "1" {
		t.Errorf("execution locks %q, want 1", got)
	}
	e.approve(t, holder)
	if got := e.listLocks(t); len(got) != 0 {
		t.Fatalf("locks left after the holder completed: %+v", got)
	}
	if got := e.metric(t, `duroxide_execution_locks`); got != "0" {
		t.Errorf("execution locks %q, want 0", got)
	}
}

// TestWebhookLockTTL runs on a fake clock with no runtime, so holders never
// progress (a dead executor): their locks expire after the TTL; the next
// call takes an expired lock over, and cleanup deletes the others.
func TestWebhookLockTTL(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "ttl", Orchestration: demo.Approval, LockTTL: httpapi.Duration{Duration: time.Minute}},
		{ID: "gc", Orchestration: demo.Approval, LockTTL: httpapi.Duration{Duration: time.Minute}},
	}}, newFakeClock(), false)
	h1 := e.started(t, "ttl", approvalHour, "")
	g1 := e.started(t, "gc", approvalHour, "")
	l := e.heldBy(t, "ttl", h1)
	if l.ExpiresAt.Sub(*l.LockedSince) != time.Minute || !l.LockedSince.Equal(e.clock.Now()) {
		t.Fatalf("lock %+v: want locked now (%v) for one minute", l, e.clock.Now())
	}
	if l.HolderStatus != "Pending" {
		t.Fatalf("holder status %q, want Pending (no runtime)", l.HolderStatus)
	}

	e.clock.Advance(59 * time.Second)
	e.conflicts(t, "ttl", approvalHour, h1)

	e.clock.Advance(time.Second) // ExpiresAt <= now: expired
	if l := e.lock(t, "ttl"); !l.IsLocked || !l.IsStale || l.ExecutionID == nil || *l.ExecutionID != h1 {
		t.Fatalf("lock after the TTL: %+v, want a stale lock of %s", l, h1)
	}
	if got := e.metric(t, `duroxide_execution_locks`); got != "2" {
		t.Errorf("execution locks %q, want 2", got)
	}
	// Lock expired → clean and retry: the call starts and takes the lock.
	h2 := e.started(t, "ttl", approvalHour, "")
	l = e.heldBy(t, "ttl", h2)
	if !l.LockedSince.Equal(e.clock.Now()) {
		t.Fatalf("taken-over lock %+v", l)
	}
	e.conflicts(t, "ttl", approvalHour, h2)

	// Cleanup deletes the expired gc lock, not ttl's fresh one.
	var cleaned struct {
		Cleaned *int `json:"cleaned"`
	}
	e.expect(t, "POST", "/api/locks/cleanup", nil, http.StatusOK, &cleaned)
	if cleaned.Cleaned == nil || *cleaned.Cleaned != 1 {
		t.Fatalf("cleanup: %+v, want 1", cleaned)
	}
	e.unlocked(t, "gc")
	e.heldBy(t, "ttl", h2)
	g2 := e.started(t, "gc", approvalHour, "")
	if g2 == g1 {
		t.Fatal("the same instance ID twice")
	}
	e.expect(t, "POST", "/api/locks/cleanup", nil, http.StatusOK, &cleaned)
	if *cleaned.Cleaned != 0 {
		t.Fatalf("second cleanup: %d, want 0", *cleaned.Cleaned)
	}
}

func TestWebhookIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "ex", Orchestration: demo.Approval, IdempotencyKeyPath: "/event/id"},
		{ID: "par", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel},
		{ID: "par2", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel},
		{ID: "q", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyQueue, IdempotencyKeyPath: "/id"},
	}})
	duplicate := func(t *testing.T, a webhookAnswer, first string) {
		t.Helper()
		if a.status != http.StatusOK || !a.Duplicate || a.ExecutionID != first {
			t.Fatalf("got %s, want a duplicate of %s", a, first)
		}
	}

	t.Run("header", func(t *testing.T) {
		first := e.started(t, "par", `"Ada"`, "evt-1")
		duplicate(t, e.webhook(t, "par", `"Ada"`, "evt-1"), first)
		duplicate(t, e.webhook(t, "par", `"other body"`, "evt-1"), first)
		e.wait(t, first)
		duplicate(t, e.webhook(t, "par", `"Ada"`, "evt-1"), first) // after it finished too
		// Keys are scoped per trigger.
		other := e.started(t, "par2", `"Ada"`, "evt-1")
		if other == first {
			t.Fatal("two triggers share a key")
		}
		if e.started(t, "par", `"Ada"`, "evt-2") == first {
			t.Fatal("another key is a duplicate")
		}
		if e.started(t, "par", `"Ada"`, "") == first {
			t.Fatal("no key is a duplicate")
		}
	})

	t.Run("body path", func(t *testing.T) {
		body := `{"event": {"id": "evt_7"}, "timeoutSeconds": 3600}`
		first := e.started(t, "ex", body, "")
		// A duplicate is answered while the first holds the lock: keys
		// are checked before the lock.
		duplicate(t, e.webhook(t, "ex", body, ""), first)
		e.conflicts(t, "ex", `{"event": {"id": "evt_8"}, "timeoutSeconds": 3600}`, first)
		// The header takes precedence over the path: a new key, so the
		// lock decides.
		checkLocked(t, e.webhook(t, "ex", body, "from-header"), first)
		// Numbers are keys as written.
		e.approve(t, first)
		n := e.started(t, "ex", `{"event": {"id": 42}, "timeoutSeconds": 3600}`, "")
		duplicate(t, e.webhook(t, "ex", `{"event": {"id": 42}, "timeoutSeconds": 1}`, ""), n)
		duplicate(t, e.webhook(t, "ex", body, ""), first)
		e.approve(t, n)
	})

	t.Run("missing path value", func(t *testing.T) {
		for _, body := range []string{`{"event": {}}`, `{"event": {"id": {"nested": 1}}}`, `{"event": {"id": null}}`, `[]`, ``} {
			a := e.webhook(t, "ex", body, "")
			if a.status != http.StatusBadRequest || !strings.Contains(a.Details, "/event/id") {
				t.Errorf("body %q: got %s, want 400 naming /event/id", body, a)
			}
		}
		// The header spares the body its key.
		id := e.started(t, "ex", `{"timeoutSeconds": 3600}`, "hdr-1")
		duplicate(t, e.webhook(t, "ex", `{}`, "hdr-1"), id)
		e.approve(t, id)
	})

	t.Run("queue", func(t *testing.T) {
		holder := e.started(t, "q", `{"id": "a", "timeoutSeconds": 3600}`, "")
		queued := e.started(t, "q", `{"id": "b", "timeoutSeconds": 3600}`, "")
		duplicate(t, e.webhook(t, "q", `{"id": "b"}`, ""), queued)
		duplicate(t, e.webhook(t, "q", `{"id": "a"}`, ""), holder)
		if l := e.heldBy(t, "q", holder); l.Queued != 1 {
			t.Fatalf("queued %d, want 1", l.Queued)
		}
		e.approve(t, holder)
		e.approve(t, queued)
	})
}

// TestWebhookDuplicateAfterPurge: a webhook's key outlives the purge of
// the instance it started, so a redelivery within the retention starts
// nothing and says the instance was purged, and so does POST /api/instances.
func TestWebhookDuplicateAfterPurge(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnvClock(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "pay", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, IdempotencyKeyPath: "/id"},
	}}, clock, false)
	first := e.started(t, "pay", `{"id": "evt_1"}`, "")
	if a := e.webhook(t, "pay", `{"id": "evt_1"}`, ""); !a.Duplicate || a.Purged || a.ExecutionID != first {
		t.Fatalf("repeat before the purge: %s", a)
	}
	clock.Advance(time.Minute)
	purgedAt := clock.Now()
	e.expect(t, "DELETE", "/api/instances/"+first+"?force=true", nil, http.StatusOK, nil)
	clock.Advance(time.Hour)
	a := e.webhook(t, "pay", `{"id": "evt_1"}`, "")
	if a.status != http.StatusOK || !a.Duplicate || !a.Purged || a.ExecutionID != first ||
		a.PurgedAt != purgedAt.Format("2006-01-02T15:04:05Z07:00") {
		t.Fatalf("repeat after the purge: got %s purged=%v purgedAt=%q, want a duplicate of %s purged at %s",
			a, a.Purged, a.PurgedAt, first, purgedAt)
	}
	e.expect(t, "GET", "/api/instances/"+first, nil, http.StatusNotFound, nil)

	// POST /api/instances answers the same way.
	e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "a", "idempotencyKey": "k"}`, http.StatusCreated, nil)
	e.expect(t, "DELETE", "/api/instances/a?force=true", nil, http.StatusOK, nil)
	var dup map[string]any
	e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "b", "idempotencyKey": "k"}`, http.StatusOK, &dup)
	want := map[string]any{"instanceId": "a", "duplicate": true, "purged": true, "purgedAt": clock.Now().Format(time.RFC3339)}
	if fmt.Sprint(dup) != fmt.Sprint(want) {
		t.Fatalf("duplicate start after purge: got %v, want %v", dup, want)
	}
	e.expect(t, "GET", "/api/instances/b", nil, http.StatusNotFound, nil)
}

func TestWebhookParallel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "greet", WorkflowID: "ignored", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel},
		{ID: "wait", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyParallel},
	}})
	ids := map[string]bool{}
	var waiting []string
	for i := range 5 {
		ids[e.started(t, "greet", fmt.Sprintf(`"n%d"`, i), "")] = true
		waiting = append(waiting, e.started(t, "wait", approvalHour, ""))
	}
	if len(ids) != 5 || len(slices.Compact(slices.Sorted(slices.Values(waiting)))) != 5 {
		t.Fatalf("instance IDs are not distinct: %v %v", ids, waiting)
	}
	if got := e.listLocks(t); len(got) != 0 {
		t.Fatalf("parallel triggers took locks: %+v", got)
	}
	e.unlocked(t, "ignored")
	for _, id := range waiting {
		if st := e.wait0(t, id); st.State.IsTerminal() {
			t.Fatalf("%s is %s", id, st.State)
		}
		e.approve(t, id) // five ran at once
	}
	for id := range ids {
		if st := e.wait(t, id); st.State != duroxide.StateCompleted {
			t.Fatalf("%s ended %s", id, st.State)
		}
	}
}

// TestWebhookQueue: calls made while the holder runs are all accepted and
// run one at a time, in arrival order: the lock passes from each instance
// to the next one queued.
func TestWebhookQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "jobs", WorkflowID: "reports", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyQueue},
	}})
	first := e.webhook(t, "jobs", approvalHour, "")
	if first.status != http.StatusOK || first.Queued || first.QueuePosition != 0 {
		t.Fatalf("the call that took the free lock: %s, queued=%v position=%d", first, first.Queued, first.QueuePosition)
	}
	holder := first.ExecutionID
	var queued []string
	for i := range 3 {
		// A queued start says so, with its place in the queue.
		a := e.webhook(t, "jobs", approvalHour, "")
		if a.status != http.StatusOK || !a.Queued || a.QueuePosition != i+1 {
			t.Fatalf("call %d behind the holder: %s, queued=%v position=%d, want queued at %d", i+1, a, a.Queued, a.QueuePosition, i+1)
		}
		queued = append(queued, a.ExecutionID)
	}
	if l := e.heldBy(t, "reports", holder); l.Queued != 3 {
		t.Fatalf("queued %d, want 3", l.Queued)
	}
	running := holder
	for i, next := range queued {
		for _, waiting := range queued[i:] {
			var st status
			e.expect(t, "GET", "/api/instances/"+waiting, nil, http.StatusOK, &st)
			if st.Status != "Pending" {
				t.Fatalf("%s is %s while %s holds the lock, want Pending", waiting, st.Status, running)
			}
		}
		e.approve(t, running)
		// The lock passed to the next in arrival order, in the same
		// transaction that completed the previous holder.
		if l := e.heldBy(t, "reports", next); l.Queued != len(queued)-i-1 {
			t.Fatalf("after %s: queued %d, want %d", running, l.Queued, len(queued)-i-1)
		}
		running = next
	}
	e.approve(t, running)
	e.unlocked(t, "reports")
	// Each started after the previous one completed.
	prevEnd := e.wait0(t, holder).UpdatedAt
	for _, id := range queued {
		evs, err := e.client.GetHistory(context.Background(), id, 0)
		if err != nil || len(evs) == 0 {
			t.Fatalf("history of %s: %v", id, err)
		}
		if started := time.UnixMilli(evs[0].TimestampMs); started.Before(prevEnd.Truncate(time.Millisecond)) {
			t.Fatalf("%s started at %v, before its predecessor ended at %v", id, started, prevEnd)
		}
		prevEnd = e.wait0(t, id).UpdatedAt
	}
}

func TestWebhookErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{MaxBodyBytes: 64, Triggers: []httpapi.Trigger{
		{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel},
		{ID: "keyed", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, IdempotencyKeyPath: "/id"},
	}})
	for _, tc := range []struct {
		name, trigger, body string
		status              int
		errorHas            string
	}{
		{"unknown trigger", "nope", `"Ada"`, http.StatusNotFound, "trigger not found"},
		{"malformed JSON", "greet", `{"name": `, http.StatusBadRequest, "malformed JSON"},
		{"not JSON", "greet", `Ada`, http.StatusBadRequest, "malformed JSON"},
		{"malformed JSON with a key path", "keyed", `{"id": `, http.StatusBadRequest, "malformed JSON"},
		{"missing key", "keyed", `{"name": "Ada"}`, http.StatusBadRequest, "missing idempotency key"},
		{"body too large", "greet", `"` + strings.Repeat("x", 100) + `"`, http.StatusRequestEntityTooLarge, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := e.webhook(t, tc.trigger, tc.body, "")
			if a.status != tc.status || !strings.Contains(a.Error, tc.errorHas) || a.Details == "" {
				t.Fatalf("got %s, want %d %q", a, tc.status, tc.errorHas)
			}
		})
	}
	t.Run("key too long names the sender's length", func(t *testing.T) {
		t.Parallel()
		// The key is stored as "webhook:greet:<key>" (14 bytes more): the
		// answer counts the bytes the sender sent, against what is left.
		limit := duroxide.MaxKeyLength - len("webhook:greet:")
		a := e.webhook(t, "greet", `"Ada"`, strings.Repeat("k", 600))
		want := fmt.Sprintf("the idempotency key is 600 bytes long; the limit is %d bytes", limit)
		if a.status != http.StatusBadRequest || !strings.Contains(a.Details, want) {
			t.Fatalf("got %s, want 400 with %q", a, want)
		}
		if a := e.webhook(t, "greet", `"Ada"`, strings.Repeat("k", limit)); a.status != http.StatusOK {
			t.Fatalf("a key of %d bytes: %s", limit, a)
		}
	})
	t.Run("empty body is a null input", func(t *testing.T) {
		t.Parallel()
		id := e.started(t, "greet", "", "")
		if st := e.wait(t, id); st.State != duroxide.StateCompleted || len(st.Input) != 0 && string(st.Input) != "null" {
			t.Fatalf("%s: %s input %s", id, st.State, st.Input)
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		t.Parallel()
		e.expectError(t, "GET", "/api/webhooks/greet", nil, http.StatusMethodNotAllowed)
	})
}

// TestLockRoutes covers the lock routes: status of free and held locks,
// force release, listing and cleanup.
func TestLockRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "job", WorkflowID: "wf-routes", Orchestration: demo.Approval, LockTTL: httpapi.Duration{Duration: 10 * time.Minute}},
	}})
	res := e.expect(t, "GET", "/api/workflows/free/lock", nil, http.StatusOK, nil)
	if got, want := strings.TrimSpace(string(res.body)),
		`{"workflowId":"free","isLocked":false,"executionId":null,"lockedSince":null,"expiresAt":null,"isStale":false,"queued":0}`; got != want {
		t.Fatalf("free lock:\n got %s\nwant %s", got, want)
	}
	var esc lockStatus
	if e.expect(t, "GET", "/api/workflows/a%2Fb/lock", nil, http.StatusOK, &esc); esc.WorkflowID != "a/b" {
		t.Fatalf("escaped workflow ID: %+v", esc)
	}

	h1 := e.started(t, "job", approvalHour, "")
	l := e.heldBy(t, "wf-routes", h1)
	if ttl := l.ExpiresAt.Sub(*l.LockedSince); ttl < 10*time.Minute || ttl > 10*time.Minute+testTimeout {
		t.Fatalf("lock lives %v, want the trigger's 10m", ttl)
	}
	if l.HolderStatus != "Pending" && l.HolderStatus != "Running" {
		t.Fatalf("holder status %q", l.HolderStatus)
	}
	if ls := e.listLocks(t); len(ls) != 1 || ls[0].WorkflowID != "wf-routes" || *ls[0].ExecutionID != h1 {
		t.Fatalf("locks %+v", ls)
	}

	var rel struct {
		WorkflowID string `json:"workflowId"`
		Released   bool   `json:"released"`
	}
	e.expect(t, "DELETE", "/api/workflows/wf-routes/lock", nil, http.StatusOK, &rel)
	if rel.WorkflowID != "wf-routes" || !rel.Released {
		t.Fatalf("release: %+v", rel)
	}
	e.unlocked(t, "wf-routes")
	e.expect(t, "DELETE", "/api/workflows/wf-routes/lock", nil, http.StatusOK, &rel)
	if rel.Released {
		t.Fatalf("second release: %+v", rel)
	}
	// The released lock is free for the next call, though h1 still runs.
	h2 := e.started(t, "job", approvalHour, "")
	e.heldBy(t, "wf-routes", h2)
	if st := e.wait0(t, h1); st.State.IsTerminal() {
		t.Fatalf("force release ended %s: %s", h1, st.State)
	}
	// h1 ending does not release h2's lock.
	e.approve(t, h1)
	e.heldBy(t, "wf-routes", h2)

	var cleaned struct {
		Cleaned *int `json:"cleaned"`
	}
	e.expect(t, "POST", "/api/locks/cleanup", nil, http.StatusOK, &cleaned)
	if cleaned.Cleaned == nil || *cleaned.Cleaned != 0 {
		t.Fatalf("cleanup of live locks: %+v", cleaned)
	}
	e.heldBy(t, "wf-routes", h2)
	e.approve(t, h2)
	if ls := e.listLocks(t); len(ls) != 0 {
		t.Fatalf("locks %+v", ls)
	}
	e.expectError(t, "PUT", "/api/workflows/x/lock", nil, http.StatusMethodNotAllowed)
	e.expectError(t, "GET", "/api/locks/cleanup", nil, http.StatusMethodNotAllowed)
}
