package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// contentTypeProtobuf is the delimited protocol buffers format of
// /metrics (Prometheus negotiates it with Accept).
const contentTypeProtobuf = "application/vnd.google.protobuf"

func init() {
	// kin-openapi decodes response bodies before validating them; the
	// protocol buffers of /metrics are opaque bytes to it.
	openapi3filter.RegisterBodyDecoder(contentTypeProtobuf, openapi3filter.FileBodyDecoder)
}

// contract validates real responses against the served OpenAPI document
// with kin-openapi (an independent implementation of the specification)
// and records which answers of which operations were seen.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string]map[int]bool // by operation ID, then status
}

func newContract(t *testing.T, raw []byte) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatalf("loading the served OpenAPI document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the served OpenAPI document is invalid: %v", err)
	}
	// The test servers listen on other addresses than the documented one.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing the document: %v", err)
	}
	return &contract{doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// target is a server the contract test talks to.
type target struct {
	srv   *httptest.Server
	token string // sent as a bearer token unless the request sets Authorization
}

// do sends rr to tg, fails the test unless the answer has status want and
// validates against the document (status, headers, body), and records it.
func (c *contract) do(t *testing.T, tg target, rr rawRequest, want int) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var body io.Reader
	if rr.body != "" {
		body = strings.NewReader(rr.body)
	}
	req, err := http.NewRequestWithContext(ctx, rr.method, tg.srv.URL+rr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if rr.host != "" {
		req.Host = rr.host
	}
	for k, v := range rr.header {
		req.Header.Set(k, v)
	}
	if tg.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+tg.token)
	}
	res, err := tg.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", rr.method, rr.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := response{status: res.StatusCode, header: res.Header, body: b}
	if got.status != want {
		t.Fatalf("%s %s (Host %q, headers %v): got %s, want %d", rr.method, rr.path, rr.host, rr.header, got, want)
	}
	c.validate(t, req, got)
	return got
}

// validate checks res against the operation of req in the document.
func (c *contract) validate(t *testing.T, req *http.Request, res response) {
	t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: no operation of the document: %v", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.status,
		Header:                 res.header,
		Body:                   io.NopCloser(bytes.NewReader(res.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: the answer %s does not match the document: %v", req.Method, clip(req.URL.RequestURI()), clip(res.String()), err)
	}
	if res.header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id header", req.Method, req.URL.RequestURI())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	op := route.Operation.OperationID
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][res.status] = true
}

// clip shortens s for a failure message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// operation is one operation of the document.
type operation struct {
	id, method, path string
	statuses         []int // declared
}

func (c *contract) operations() []operation {
	var ops []operation
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := operation{id: op.OperationID, method: method, path: path}
			for code := range op.Responses.Map() {
				var n int
				if _, err := fmt.Sscan(code, &n); err == nil {
					o.statuses = append(o.statuses, n)
				}
			}
			slices.Sort(o.statuses)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.id, b.id) })
	return ops
}

// declares reports whether o documents status.
func (o operation) declares(status int) bool { return slices.Contains(o.statuses, status) }

// concrete is o's path with its parameters filled in: any instance, event
// or lock, and the trigger "greet", which every test server has.
func (o operation) concrete() string {
	return strings.NewReplacer("{id}", "x", "{name}", "e", "{triggerId}", "greet", "{workflowId}", "w", "{key}", "k", "{scheduleId}", "x", "{job}", "j").Replace(o.path)
}

// storeRequest is a request of o that reaches the store.
func (o operation) storeRequest() rawRequest {
	rr := rawRequest{method: o.method, path: o.concrete()}
	switch o.id {
	case "startInstance":
		rr.body, rr.header = `{"orchestration": "demo.Hello"}`, jsonCT
	case "signalWithStart":
		rr.body, rr.header = `{"orchestration": "demo.Hello", "event": "e"}`, jsonCT
	case "callWebhook":
		rr.body = `"Ada"`
	case "createSchedule":
		rr.body, rr.header = `{"id": "x", "interval": "5m", "orchestration": "demo.Hello"}`, jsonCT
	case "updateSchedule":
		rr.body, rr.header = `{"interval": "5m", "orchestration": "demo.Hello"}`, jsonCT
	case "startBulk":
		rr.body, rr.header = `{"action": "cancel", "dryRun": true}`, jsonCT
	}
	return rr
}

// faultyStore is a SQLite store whose reads and writes of the API's routes
// fail with err, as a broken database would.
type faultyStore struct {
	*sqlite.Provider
	err error
}

func (s *faultyStore) CheckWritable(context.Context) error { return s.err }
func (s *faultyStore) Enqueue(context.Context, ...*provider.OrchestratorMessage) ([]provider.EnqueueResult, error) {
	return nil, s.err
}
func (s *faultyStore) GetInstance(context.Context, string) (*provider.InstanceInfo, error) {
	return nil, s.err
}
func (s *faultyStore) ListValues(context.Context, string) ([]provider.Value, error) {
	return nil, s.err
}
func (s *faultyStore) ListInstances(context.Context, provider.ListInstancesOptions) (*provider.InstancePage, error) {
	return nil, s.err
}
func (s *faultyStore) ListExecutions(context.Context, string) ([]provider.ExecutionInfo, error) {
	return nil, s.err
}
func (s *faultyStore) ReadHistory(context.Context, string, int64) ([]history.Event, error) {
	return nil, s.err
}
func (s *faultyStore) GetExecutionLock(context.Context, string) (*provider.ExecutionLock, error) {
	return nil, s.err
}
func (s *faultyStore) ListExecutionLocks(context.Context) ([]provider.ExecutionLock, error) {
	return nil, s.err
}
func (s *faultyStore) ReleaseExecutionLock(context.Context, string) (bool, error) {
	return false, s.err
}
func (s *faultyStore) CleanupExecutionLocks(context.Context) (*provider.LockCleanup, error) {
	return nil, s.err
}
func (s *faultyStore) PurgeInstances(context.Context, []string, provider.PurgeOptions) (*provider.PurgeResult, error) {
	return nil, s.err
}
func (s *faultyStore) Counts(context.Context) (*provider.Counts, error)         { return nil, s.err }
func (s *faultyStore) CreateSchedule(context.Context, *provider.Schedule) error { return s.err }
func (s *faultyStore) GetSchedule(context.Context, string) (*provider.Schedule, error) {
	return nil, s.err
}
func (s *faultyStore) ListSchedules(context.Context) ([]provider.Schedule, error) { return nil, s.err }
func (s *faultyStore) ListSchedulesPage(context.Context, string, int) ([]provider.Schedule, error) {
	return nil, s.err
}
func (s *faultyStore) DeleteSchedule(context.Context, string) (bool, error) { return false, s.err }
func (s *faultyStore) PauseInstance(context.Context, string, provider.PauseInfo) error {
	return s.err
}
func (s *faultyStore) ResumeInstance(context.Context, string) error { return s.err }
func (s *faultyStore) GetBulkJob(context.Context, string) (*provider.BulkJob, error) {
	return nil, s.err
}
func (s *faultyStore) CancelBulkJob(context.Context, string) (*provider.BulkJob, error) {
	return nil, s.err
}
func (s *faultyStore) ListBulkJobs(context.Context, provider.BulkJobListOptions) ([]provider.BulkJob, error) {
	return nil, s.err
}

// storeSecret is in the text of faultyStore's errors: it must reach the
// server's log, never a client.
const storeSecret = "SELECT secret FROM /var/lib/duroxide/prod.db at 10.1.2.3"

// retryableError is a store failure marked retryable (503).
type retryableError struct{}

func (retryableError) Error() string   { return "database is locked: " + storeSecret }
func (retryableError) Retryable() bool { return true }

// syncBuffer is a log destination shared by a server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newFaultyServer serves the API over a store failing with err, logging
// to log.
func newFaultyServer(t *testing.T, err error, log io.Writer) *httptest.Server {
	t.Helper()
	db, oerr := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if oerr != nil {
		t.Fatal(oerr)
	}
	store := &faultyStore{Provider: db, err: err}
	h, herr := httpapi.NewHandler(duroxide.NewClient(store), &httpapi.Options{
		Logger:   slog.New(slog.NewTextHandler(log, nil)),
		Triggers: []httpapi.Trigger{{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel}},
	})
	if herr != nil {
		t.Fatal(herr)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = db.Close()
	})
	return srv
}

// contractTriggers are the triggers of the contract test's main server.
func contractTriggers() []httpapi.Trigger {
	return []httpapi.Trigger{
		{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel},
		{ID: "excl", Orchestration: demo.Approval},
		{ID: "jobs", WorkflowID: "excl", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyQueue},
		{ID: "keyed", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, IdempotencyKeyPath: "/id"},
		{ID: "swap", WorkflowID: "swap-{/k}", InstanceID: "swap-{/n}", Orchestration: demo.Approval,
			Concurrency: httpapi.ConcurrencyReplace, IdempotencyKey: "{header:X-Delivery}"},
		{ID: "orders", InstanceID: "order-{/id}", WorkflowID: "cust-{/customer}", Orchestration: demo.Approval,
			Deliver: httpapi.DeliverEvent, Event: "{/type}"},
		{ID: "signed", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel,
			Auth: &httpapi.TriggerAuth{Type: httpapi.AuthToken, SecretEnv: "CONTRACT_TOKEN", Header: "X-Token"}},
	}
}

// TestOpenAPIContract drives every operation of the served OpenAPI
// document through real servers, success and error answers alike (400,
// 401, 403, 404, 408, 409, 413, 415, 500, 503), and validates each answer
// (status, headers, body) against the document with kin-openapi's
// openapi3filter.ValidateResponse. It fails if the document declares an
// answer that no request produced, or a request gets an undeclared one.
func TestOpenAPIContract(t *testing.T) {
	t.Parallel()
	lookup := func(k string) (string, bool) {
		if k == "CONTRACT_TOKEN" {
			return "contract-secret", true
		}
		return "", false
	}
	e := newEnv(t, &httpapi.Options{Triggers: contractTriggers(), LookupEnv: lookup, MaxBodyBytes: 4096})
	main := target{srv: e.srv}
	var doc []byte
	{
		res := e.expect(t, "GET", "/api/openapi.json", nil, http.StatusOK, nil)
		doc = res.body
	}
	c := newContract(t, doc)
	ops := c.operations()
	if len(ops) == 0 {
		t.Fatal("the document has no operations")
	}

	// Success answers, and the errors each route detects itself.
	e.start(t, "c-done", demo.Hello, "Ada")
	e.wait(t, "c-done")
	e.start(t, "c-purge", demo.Hello, "Ada")
	e.wait(t, "c-purge")
	e.start(t, "c-live", demo.Approval, approvalInput(3600))
	e.start(t, "c-cancel", demo.Approval, approvalInput(3600))
	e.start(t, "c-cancel2", demo.Approval, approvalInput(3600))
	e.start(t, "c-pause", demo.Approval, approvalInput(3600))
	e.start(t, "c-fail", demo.Fail, "contract")
	e.wait(t, "c-fail")
	get := func(path string, status int) response {
		t.Helper()
		return c.do(t, main, rawRequest{method: "GET", path: path}, status)
	}
	post := func(path, body string, status int) response {
		t.Helper()
		rr := rawRequest{method: "POST", path: path, body: body}
		if body != "" {
			rr.header = jsonCT
		}
		return c.do(t, main, rr, status)
	}
	del := func(path string, status int) response {
		t.Helper()
		return c.do(t, main, rawRequest{method: "DELETE", path: path}, status)
	}

	// Instances.
	post("/api/instances", `{"orchestration": "demo.Hello", "instanceId": "c-new", "input": "Ada"}`, http.StatusCreated)
	post("/api/instances", `{"orchestration": "demo.Hello", "instanceId": "c-new"}`, http.StatusConflict)
	post("/api/instances", `{"orchestration": "demo.Hello", "idempotencyKey": "k1"}`, http.StatusCreated)
	post("/api/instances", `{"orchestration": "demo.Hello", "idempotencyKey": "k1"}`, http.StatusOK)
	post("/api/instances", `{}`, http.StatusBadRequest)
	c.do(t, main, rawRequest{method: "POST", path: "/api/instances", body: `{"orchestration": "demo.Hello"}`,
		header: map[string]string{"Content-Type": "application/json", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, http.StatusCreated)
	c.do(t, main, rawRequest{method: "POST", path: "/api/instances", body: `{"orchestration": "demo.Hello"}`,
		header: map[string]string{"Content-Type": "application/json", "traceparent": "01-xyz"}}, http.StatusBadRequest)
	post("/api/instances", `{"orchestration": "demo.Hello", "lockTtl": 30}`, http.StatusBadRequest)
	get("/api/instances", http.StatusOK)
	get("/api/instances?include=input,output,customStatus&limit=2", http.StatusOK)
	get("/api/instances?stalled=true", http.StatusOK)
	get("/api/instances?limit=0", http.StatusBadRequest)
	get("/api/instances/c-done", http.StatusOK)
	get("/api/instances/c-live", http.StatusOK)
	get("/api/instances/c-live?wait=x", http.StatusBadRequest)
	get("/api/instances/nobody", http.StatusNotFound)
	get("/api/instances/c-done/history", http.StatusOK)
	get("/api/instances/c-done/history?execution=-1", http.StatusBadRequest)
	get("/api/instances/nobody/history", http.StatusNotFound)
	get("/api/instances/c-done/executions?include=input,output", http.StatusOK)
	get("/api/instances/c-done/executions?include=bogus", http.StatusBadRequest)
	get("/api/instances/nobody/executions", http.StatusNotFound)
	e.start(t, "c-values", valuesOrch, "hi")
	e.wait(t, "c-values")
	get("/api/instances/c-values/values", http.StatusOK)
	get("/api/instances/c-values/values/greeting", http.StatusOK)
	get("/api/instances/a%00b/values", http.StatusBadRequest)
	get("/api/instances/c-done/values", http.StatusOK)
	get("/api/instances/nobody/values", http.StatusNotFound)
	get("/api/instances/c-done/values/none", http.StatusNotFound)
	get("/api/instances/c-done/values/a%00b", http.StatusBadRequest)
	get("/api/instances/nobody/values/k", http.StatusNotFound)
	if res := get("/api/instances/c-done?waitForChange=stale&wait=1s", http.StatusOK); res.header.Get("ETag") == "" {
		t.Errorf("waitForChange answered without an ETag: %s", res)
	}
	get("/api/instances/c-done?waitForChange="+strings.Repeat("e", 300), http.StatusBadRequest)
	post("/api/instances/c-live/events/other", `{"any": ["json"]}`, http.StatusAccepted)
	post("/api/instances/c-live/events/other", "", http.StatusAccepted) // no body, no Content-Type
	post("/api/instances/c-live/events/other", `{`, http.StatusBadRequest)
	post("/api/instances/nobody/events/other", "", http.StatusNotFound)
	post("/api/instances/c-done/events/other", "", http.StatusConflict)
	keyed := func(key string, want int) {
		t.Helper()
		c.do(t, main, rawRequest{method: "POST", path: "/api/instances/c-live/events/other", body: `1`,
			header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}}, want)
	}
	keyed("e1", http.StatusAccepted)
	keyed("e1", http.StatusOK)
	keyed(strings.Repeat("k", duroxide.MaxEventKeyLength), http.StatusAccepted)
	keyed(strings.Repeat("k", duroxide.MaxEventKeyLength+1), http.StatusBadRequest)
	if p := c.doc.Paths.Find("/api/instances/{id}/events/{name}").Post.Parameters.GetByInAndName("header", "Idempotency-Key"); p == nil ||
		p.Schema.Value.MaxLength == nil || *p.Schema.Value.MaxLength != uint64(duroxide.MaxEventKeyLength) {
		t.Errorf("the document's Idempotency-Key of raiseEvent does not say maxLength %d", duroxide.MaxEventKeyLength)
	}
	sws := `{"orchestration": "demo.Approval", "input": {"timeoutSeconds": 3600}, "event": "note", "data": 1}`
	post("/api/instances/c-sws/signal-with-start", sws, http.StatusCreated)
	post("/api/instances/c-sws/signal-with-start", sws, http.StatusAccepted)
	post("/api/instances/c-sws2/signal-with-start",
		`{"orchestration": "demo.Approval", "input": {"timeoutSeconds": 3600}, "event": "note", "idempotencyKey": "d1"}`, http.StatusCreated)
	post("/api/instances/c-sws2/signal-with-start",
		`{"orchestration": "demo.Approval", "input": {"timeoutSeconds": 3600}, "event": "note", "idempotencyKey": "d1"}`, http.StatusOK)
	post("/api/instances/c-sws/signal-with-start", `{"orchestration": "demo.Approval"}`, http.StatusBadRequest)
	post("/api/instances/c-done/signal-with-start", `{"orchestration": "demo.Hello", "event": "note"}`, http.StatusConflict)
	post("/api/instances/c-cancel/cancel", "", http.StatusAccepted) // no body, no Content-Type
	post("/api/instances/c-cancel2/cancel", `{"reason": "contract"}`, http.StatusAccepted)
	post("/api/instances/c-live/cancel", `{"nope": 1}`, http.StatusBadRequest)
	post("/api/instances/nobody/cancel", "", http.StatusNotFound)
	post("/api/instances/c-done/cancel", "", http.StatusConflict)
	post("/api/instances/c-pause/pause", `{"reason": "contract", "by": "tester"}`, http.StatusOK)
	post("/api/instances/c-pause/pause", "", http.StatusConflict)
	post("/api/instances/c-pause/resume", "", http.StatusOK)
	post("/api/instances/c-pause/resume", `{}`, http.StatusConflict)
	post("/api/instances/c-pause/pause", "", http.StatusOK) // no body: by "http api"
	post("/api/instances/c-pause/pause", `{"nope": 1}`, http.StatusBadRequest)
	post("/api/instances/c-pause/resume", `{"reason": "x"}`, http.StatusBadRequest)
	post("/api/instances/nobody/pause", "", http.StatusNotFound)
	post("/api/instances/nobody/resume", "", http.StatusNotFound)
	post("/api/instances/c-done/pause", "", http.StatusConflict)
	post("/api/instances/c-fail/rewind", `{"reason": "contract"}`, http.StatusOK)
	post("/api/instances/c-live/rewind", "", http.StatusConflict)
	post("/api/instances/c-done/rewind", "", http.StatusConflict)
	post("/api/instances/nobody/rewind", "", http.StatusNotFound)
	post("/api/instances/c-fail/rewind", `{"by": 7}`, http.StatusBadRequest)
	// Bulk actions: a preview, a job and its progress.
	e.start(t, "c-bulk-1", demo.Approval, approvalInput(3600))
	e.start(t, "c-bulk-2", demo.Approval, approvalInput(3600))
	if res := post("/api/bulk", `{"action": "cancel", "filter": {"prefix": "c-bulk-", "states": ["running", "Pending"]}, "dryRun": true}`,
		http.StatusOK); !strings.Contains(string(res.body), `"count":2`) {
		t.Errorf("bulk preview answered %s", res)
	}
	job := post("/api/bulk", `{"action": "cancel", "filter": {"prefix": "c-bulk-"}, "reason": "contract", "chunkSize": 1}`, http.StatusAccepted)
	var started struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if err := json.Unmarshal(job.body, &started); err != nil || started.Job.ID == "" || job.header.Get("Location") != "/api/bulk/"+started.Job.ID {
		t.Fatalf("bulk job answer %s (%v)", job, err)
	}
	get("/api/bulk/"+started.Job.ID, http.StatusOK)
	get("/api/bulk", http.StatusOK)
	// A server without a runtime keeps its job Pending until canceled.
	idle := newEnvClock(t, nil, nil, false)
	pending, err := idle.client.BulkAction(context.Background(), &duroxide.BulkRequest{Action: duroxide.BulkPause})
	if err != nil {
		t.Fatal(err)
	}
	c.do(t, target{srv: idle.srv}, rawRequest{method: "POST", path: "/api/bulk/" + pending.Job.ID + "/cancel"}, http.StatusOK)
	c.do(t, target{srv: idle.srv}, rawRequest{method: "POST", path: "/api/bulk/" + pending.Job.ID + "/cancel"}, http.StatusConflict)
	post("/api/bulk/nope/cancel", "", http.StatusNotFound)
	post("/api/bulk/a%01b/cancel", "", http.StatusBadRequest)
	get("/api/bulk/nope", http.StatusNotFound)
	get("/api/bulk/a%01b", http.StatusBadRequest)
	post("/api/bulk", `{"action": "explode"}`, http.StatusBadRequest)
	post("/api/bulk", `{"filter": {}}`, http.StatusBadRequest)
	post("/api/bulk", `{"action": "cancel", "filter": {"states": ["sleeping"]}}`, http.StatusBadRequest)
	del("/api/instances/c-purge", http.StatusOK)
	del("/api/instances/c-live?force=maybe", http.StatusBadRequest)
	del("/api/instances/c-live", http.StatusConflict)
	del("/api/instances/nobody", http.StatusNotFound)

	// Webhooks and locks: "excl" holds the lock "excl", "jobs" queues
	// behind it.
	held := post("/api/webhooks/excl", approvalHour, http.StatusOK)
	var holder struct {
		ExecutionID string `json:"executionId"`
	}
	if err := json.Unmarshal(held.body, &holder); err != nil {
		t.Fatal(err)
	}
	post("/api/webhooks/excl", approvalHour, http.StatusConflict)
	post("/api/instances", `{"orchestration": "demo.Hello", "lockKey": "excl"}`, http.StatusConflict)
	if res := post("/api/webhooks/jobs", approvalHour, http.StatusOK); !strings.Contains(string(res.body), `"queued":true`) {
		t.Errorf("a queued webhook start answered %s", res)
	}
	if res := post("/api/instances", `{"orchestration": "demo.Hello", "lockKey": "excl", "queueIfLocked": true}`,
		http.StatusCreated); !strings.Contains(string(res.body), `"queuePosition":2`) {
		t.Errorf("a queued start answered %s", res)
	}
	post("/api/webhooks/greet", `"Ada"`, http.StatusOK)
	post("/api/webhooks/greet", "", http.StatusOK)
	post("/api/webhooks/keyed", `{"id": "evt-1"}`, http.StatusOK)
	post("/api/webhooks/keyed", `{"id": "evt-1"}`, http.StatusOK) // duplicate
	post("/api/webhooks/keyed", `{"name": "no key"}`, http.StatusBadRequest)
	post("/api/webhooks/greet", `{`, http.StatusBadRequest)
	swap := func(n int, status int) response {
		t.Helper()
		return c.do(t, main, rawRequest{method: "POST", path: "/api/webhooks/swap",
			body:   fmt.Sprintf(`{"k": "a", "n": %d, "timeoutSeconds": 3600}`, n),
			header: withHeaders("Content-Type", "application/json", "X-Delivery", fmt.Sprint("d", n))}, status)
	}
	swap(1, http.StatusOK)
	if res := swap(2, http.StatusOK); !strings.Contains(string(res.body), `"replacedExecutionId":"swap-1"`) {
		t.Errorf("a replace answered %s", res)
	}
	c.do(t, main, rawRequest{method: "POST", path: "/api/webhooks/swap", body: `{"k": "a", "n": 3}`, header: jsonCT},
		http.StatusBadRequest) // no X-Delivery
	order := `{"id": "7", "customer": "c1", "type": "paid", "timeoutSeconds": 3600}`
	if res := post("/api/webhooks/orders", order, http.StatusOK); !strings.Contains(string(res.body), `"started":true`) {
		t.Errorf("a deliver-event webhook for a new order answered %s", res)
	}
	if res := post("/api/webhooks/orders", order, http.StatusOK); !strings.Contains(string(res.body), `"started":false`) {
		t.Errorf("a deliver-event webhook for a live order answered %s", res)
	}
	post("/api/webhooks/orders", `{"customer": "c1", "type": "paid"}`, http.StatusBadRequest) // no id
	post("/api/webhooks/nope", `"Ada"`, http.StatusNotFound)
	post("/api/webhooks/signed", `"Ada"`, http.StatusUnauthorized)
	c.do(t, main, rawRequest{method: "POST", path: "/api/webhooks/signed", body: `"Ada"`,
		header: withHeaders("X-Token", "contract-secret")}, http.StatusOK)
	get("/api/triggers", http.StatusOK)
	get("/api/workflows/excl/lock", http.StatusOK)
	get("/api/workflows/free/lock", http.StatusOK)
	get("/api/workflows/"+strings.Repeat("w", duroxide.MaxKeyLength+1)+"/lock", http.StatusBadRequest)
	get("/api/locks", http.StatusOK)
	post("/api/locks/cleanup", "", http.StatusOK) // no body, no Content-Type
	del("/api/workflows/free/lock", http.StatusOK)
	del("/api/workflows/"+strings.Repeat("w", duroxide.MaxKeyLength+1)+"/lock", http.StatusBadRequest)
	del("/api/workflows/excl/lock", http.StatusOK)
	_ = holder

	// Schedules.
	put := func(path, body string, status int) response {
		t.Helper()
		return c.do(t, main, rawRequest{method: "PUT", path: path, body: body, header: jsonCT}, status)
	}
	longSchedule := "/api/schedules/" + strings.Repeat("s", duroxide.MaxScheduleIDLength+1)
	post("/api/schedules", `{"id": "nightly", "cron": "0 2 * * *", "timeZone": "Europe/Paris", "orchestration": "demo.Hello", "input": "Ada"}`, http.StatusCreated)
	post("/api/schedules", `{"id": "nightly", "interval": "5m", "orchestration": "demo.Hello"}`, http.StatusConflict)
	post("/api/schedules", `{"id": "bad", "cron": "61 * * * *", "orchestration": "demo.Hello"}`, http.StatusBadRequest)
	get("/api/schedules", http.StatusOK)
	get("/api/schedules?limit=0", http.StatusBadRequest)
	get("/api/schedules/nightly", http.StatusOK)
	get("/api/schedules/nobody", http.StatusNotFound)
	get(longSchedule, http.StatusBadRequest)
	put("/api/schedules/nightly", `{"interval": "1h", "orchestration": "demo.Hello"}`, http.StatusOK)
	put("/api/schedules/nobody", `{"interval": "1h", "orchestration": "demo.Hello"}`, http.StatusNotFound)
	put("/api/schedules/nightly", `{"id": "other", "interval": "1h", "orchestration": "demo.Hello"}`, http.StatusBadRequest)
	for _, action := range []string{"pause", "resume", "trigger"} {
		post("/api/schedules/nightly/"+action, "", http.StatusOK)
		post("/api/schedules/nobody/"+action, "", http.StatusNotFound)
		post(longSchedule+"/"+action, "", http.StatusBadRequest)
	}
	del("/api/schedules/nightly", http.StatusOK)
	del(longSchedule, http.StatusBadRequest)

	// System.
	get("/api/orchestrations", http.StatusOK)
	get("/api/openapi.json", http.StatusOK)
	get("/healthz", http.StatusOK)
	get("/readyz", http.StatusOK)
	if res := get("/metrics", http.StatusOK); !strings.HasPrefix(res.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q", res.header.Get("Content-Type"))
	}
	c.do(t, main, rawRequest{method: "GET", path: "/metrics",
		header: withHeaders("Accept", contentTypeProtobuf+";proto=io.prometheus.client.MetricFamily;encoding=delimited")}, http.StatusOK)

	// The checks every route shares, for every operation that declares
	// them.
	te := newEnv(t, &httpapi.Options{AuthToken: testToken})
	tokenless := target{srv: te.srv}
	slow := newEnv(t, &httpapi.Options{ReadTimeout: time.Nanosecond,
		Triggers: []httpapi.Trigger{{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel}}})
	var permanentLog, retryableLog syncBuffer
	broken := target{srv: newFaultyServer(t, errors.New("disk I/O error: "+storeSecret), &permanentLog)}
	busy := target{srv: newFaultyServer(t, retryableError{}, &retryableLog)}
	big := `"` + strings.Repeat("x", 5000) + `"`
	for _, o := range ops {
		t.Run(o.id, func(t *testing.T) {
			path := o.concrete()
			if o.declares(http.StatusUnauthorized) && o.id != "callWebhook" {
				c.do(t, tokenless, rawRequest{method: o.method, path: path}, http.StatusUnauthorized)
			}
			if o.declares(http.StatusForbidden) {
				c.do(t, main, rawRequest{method: o.method, path: path, host: "evil.example"}, http.StatusForbidden)
			}
			if o.declares(http.StatusUnsupportedMediaType) {
				c.do(t, main, rawRequest{method: o.method, path: path, body: "x",
					header: withHeaders("Content-Type", "text/plain")}, http.StatusUnsupportedMediaType)
			}
			if o.declares(http.StatusRequestEntityTooLarge) {
				c.do(t, main, rawRequest{method: o.method, path: path, body: big, header: jsonCT}, http.StatusRequestEntityTooLarge)
			}
			if o.declares(http.StatusRequestTimeout) {
				c.slowBody(t, slow.srv, o.method, path)
			}
			for _, f := range []struct {
				tg     target
				status int
				log    *syncBuffer
			}{{broken, http.StatusInternalServerError, &permanentLog}, {busy, http.StatusServiceUnavailable, &retryableLog}} {
				if !o.declares(f.status) || (o.id == "readyz" && f.status == http.StatusServiceUnavailable && f.tg == busy) {
					continue
				}
				res := c.do(t, f.tg, o.storeRequest(), f.status)
				checkServerError(t, res, f.log)
			}
			if o.id == "readyz" {
				res := c.do(t, broken, o.storeRequest(), http.StatusServiceUnavailable)
				checkServerError(t, res, &permanentLog)
			}
		})
	}

	// Every answer the document declares was produced and validated.
	for _, o := range ops {
		for _, s := range o.statuses {
			if !c.seen[o.id][s] {
				t.Errorf("%s %s (%s): the declared answer %d was never produced", o.method, o.path, o.id, s)
			}
		}
	}
}

// checkServerError checks a 5xx answer: a request ID in the body and the
// X-Request-Id header, and nothing of the store's error, which the log has
// under that ID.
func checkServerError(t *testing.T, res response, log *syncBuffer) {
	t.Helper()
	var body struct {
		Details   *string `json:"details"`
		RequestID string  `json:"requestId"`
	}
	if err := json.Unmarshal(res.body, &body); err != nil {
		t.Fatalf("decoding %s: %v", res, err)
	}
	if body.Details != nil || body.RequestID == "" || res.header.Get("X-Request-Id") != body.RequestID {
		t.Errorf("5xx answer %s (X-Request-Id %q): want a requestId matching the header and no details", res, res.header.Get("X-Request-Id"))
	}
	if strings.Contains(string(res.body), "secret") || strings.Contains(string(res.body), "10.1.2.3") {
		t.Errorf("5xx answer carries the store's error: %s", res)
	}
	if logs := log.String(); !strings.Contains(logs, body.RequestID) || !strings.Contains(logs, storeSecret) {
		t.Errorf("the log does not name request %s with the store's error:\n%s", body.RequestID, logs)
	}
}

// slowBody sends a request whose body never arrives whole over a raw
// connection to srv (whose read timeout is a nanosecond), expects 408 and
// validates it.
func (c *contract) slowBody(t *testing.T, srv *httptest.Server, method, path string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
		method, path, srv.Listener.Addr()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := response{status: res.StatusCode, header: res.Header, body: b}
	if got.status != http.StatusRequestTimeout {
		t.Fatalf("%s %s with a body that never arrives: got %s, want 408", method, path, got)
	}
	c.validate(t, req, got)
}
