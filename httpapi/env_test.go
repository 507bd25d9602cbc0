package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// testTimeout bounds every wait of a test; tests finish far sooner.
const testTimeout = 20 * time.Second

var discard = slog.New(slog.DiscardHandler)

// Test orchestrations registered next to the demo ones.
const (
	// parentOrch runs demo.Hello as the child "<instance>-child" and
	// returns its output.
	parentOrch = "test.Parent"
	// orderOrch takes its input's count of "update" events and returns
	// the sum of their amounts.
	orderOrch = "test.Order"
	// valuesOrch sets the value "greeting" to its input and completes.
	valuesOrch = "test.Values"
	// timeoutsOrch calls an activity no runtime registers with a
	// start-to-close timeout of 30s and a schedule-to-close timeout of 1h.
	timeoutsOrch = "test.Timeouts"
)

// orderUpdate is the body of an order webhook: orderOrch's input and each
// of its events.
type orderUpdate struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Count  int    `json:"count"`
	Amount int    `json:"amount"`
}

func registerTestOrchestrations(reg *duroxide.Registry) {
	duroxide.RegisterOrchestration(reg, timeoutsOrch, func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var out string
		err := ctx.ScheduleActivityWithOptions("test.Nowhere", nil, &duroxide.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: time.Hour}).Await(&out)
		return out, err
	})
	duroxide.RegisterOrchestration(reg, valuesOrch, func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		return in, ctx.SetValue("greeting", in)
	})
	duroxide.RegisterOrchestration(reg, orderOrch, func(ctx *duroxide.OrchestrationContext, in orderUpdate) (int, error) {
		sum := 0
		for range in.Count {
			var u orderUpdate
			if err := ctx.WaitForEvent("update").Await(&u); err != nil {
				return 0, err
			}
			sum += u.Amount
		}
		return sum, nil
	})
	duroxide.RegisterOrchestration(reg, parentOrch, func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		var out string
		if err := ctx.ScheduleSubOrchestration(demo.Hello, ctx.InstanceID()+"-child", name).Await(&out); err != nil {
			return "", err
		}
		return out, nil
	})
}

// observedStore is the SQLite store with hooks on instance lookups, so a
// test can tell when the API is inside a long poll. The runtime and the
// client share it: in-process wake-ups are per store value.
type observedStore struct {
	*sqlite.Provider
	mu    sync.Mutex
	hooks map[string]func()
	// enqueue, when set, sees every Enqueue call first; an error it
	// returns fails the call, writing nothing.
	enqueue func(msgs []*provider.OrchestratorMessage) error
}

func (s *observedStore) Enqueue(ctx context.Context, msgs ...*provider.OrchestratorMessage) ([]provider.EnqueueResult, error) {
	s.mu.Lock()
	hook := s.enqueue
	s.mu.Unlock()
	if hook != nil {
		if err := hook(msgs); err != nil {
			return nil, err
		}
	}
	return s.Provider.Enqueue(ctx, msgs...)
}

// onEnqueue sets the Enqueue hook (nil: none).
func (s *observedStore) onEnqueue(hook func(msgs []*provider.OrchestratorMessage) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueue = hook
}

func (s *observedStore) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceInfo, error) {
	s.mu.Lock()
	hook := s.hooks[instanceID]
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	return s.Provider.GetInstance(ctx, instanceID)
}

// parked returns a channel closed when a long poll of instanceID is
// waiting: the handler reads the status, then the client's wait reads it
// again with its watch registered, so the second lookup means the request
// is parked.
func (s *observedStore) parked(instanceID string) <-chan struct{} {
	ch := make(chan struct{})
	var lookups atomic.Int32
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks == nil {
		s.hooks = map[string]func(){}
	}
	s.hooks[instanceID] = func() {
		if lookups.Add(1) == 2 {
			close(ch)
		}
	}
	return ch
}

// env is an API server over a real in-memory SQLite store with a runtime
// hosting the demo orchestrations.
type env struct {
	store  *observedStore
	client *duroxide.Client
	reg    *duroxide.Registry
	h      http.Handler
	srv    *httptest.Server
	// clock is the store's and the runtime's fake clock, if any (newEnvClock).
	clock *clockwork.FakeClock
	// token is the server's bearer token, sent by request (tests of the
	// token itself send raw requests).
	token string
}

// newEnv starts a store, a runtime and the API. opts may be nil; its
// Registry defaults to the runtime's and its Logger to a silent one.
func newEnv(t *testing.T, opts *httpapi.Options) *env {
	t.Helper()
	return newEnvClock(t, opts, nil, true)
}

// newFakeClock returns a fake clock at a whole second, so times survive
// the store's millisecond precision.
func newFakeClock() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC))
}

// newEnvClock is newEnv with the store and the runtime on clock (nil: the
// real one), and without a runtime unless withRuntime (instances then stay
// Pending, as under a dead executor).
func newEnvClock(t *testing.T, opts *httpapi.Options, clock *clockwork.FakeClock, withRuntime bool) *env {
	t.Helper()
	ctx := context.Background()
	so := &sqlite.Options{Logger: discard}
	ro := &duroxide.RuntimeOptions{Logger: discard}
	if clock != nil {
		so.Clock = clock.Now
		ro.Clock = clock
	}
	db, err := sqlite.Open(ctx, "", so)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	store := &observedStore{Provider: db}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	registerTestOrchestrations(reg)
	var rt *duroxide.Runtime
	if withRuntime {
		var err error
		if rt, err = duroxide.StartRuntime(ctx, store, reg, ro); err != nil {
			_ = store.Close()
			t.Fatalf("starting runtime: %v", err)
		}
	}
	e := serve(t, store, reg, rt, opts)
	e.store, e.clock = store, clock
	return e
}

// serve serves the API over store with opts, for reg and rt (nil: no
// runtime) unless opts names others; when the test ends it stops the
// server and the runtime and closes the store.
func serve(t *testing.T, store provider.Provider, reg *duroxide.Registry, rt *duroxide.Runtime, opts *httpapi.Options) *env {
	t.Helper()
	var o httpapi.Options
	if opts != nil {
		o = *opts
	}
	if o.Registry == nil {
		o.Registry = reg
	}
	if o.Runtime == nil {
		o.Runtime = rt
	}
	if o.Logger == nil {
		o.Logger = discard
	}
	client := duroxide.NewClient(store)
	h, err := httpapi.NewHandler(client, &o)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if rt != nil {
			if err := rt.Shutdown(sctx); err != nil {
				t.Errorf("runtime shutdown: %v", err)
			}
		}
		if err := store.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	return &env{client: client, reg: reg, h: h, srv: srv, token: o.AuthToken}
}

// response is a buffered HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	return fmt.Sprintf("%d %s", r.status, strings.TrimSpace(string(r.body)))
}

// request sends a request without failing the test, so goroutines may use
// it. body may be a string, an io.Reader or nil.
func (e *env) request(ctx context.Context, method, path string, body any) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		return response{}, fmt.Errorf("unsupported body %T", body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	// As a well-behaved client: JSON bodies, and every POST, PUT and
	// PATCH, say so (the API refuses them otherwise).
	if rd != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// do sends a request and checks the response is JSON (every route but
// /metrics answers JSON, errors included).
func (e *env) do(t *testing.T, method, path string, body any) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := e.request(ctx, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" && !(path == "/metrics" && res.status == http.StatusOK) {
		t.Fatalf("%s %s: Content-Type %q, want application/json (%s)", method, path, ct, res)
	}
	return res
}

// expect sends a request and fails unless it gets status; it decodes the
// body into out when out is not nil.
func (e *env) expect(t *testing.T, method, path string, body any, status int, out any) response {
	t.Helper()
	res := e.do(t, method, path, body)
	if res.status != status {
		t.Fatalf("%s %s: got %s, want status %d", method, path, res, status)
	}
	if out != nil {
		if err := json.Unmarshal(res.body, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, res, err)
		}
	}
	return res
}

// errorBody is the API's error shape.
type errorBody struct {
	Error   string `json:"error"`
	Details string `json:"details"`
}

// expectError sends a request and checks it fails with status and a
// non-empty error message.
func (e *env) expectError(t *testing.T, method, path string, body any, status int) errorBody {
	t.Helper()
	var eb errorBody
	res := e.expect(t, method, path, body, status, &eb)
	if eb.Error == "" {
		t.Fatalf("%s %s: error body without an error message: %s", method, path, res)
	}
	return eb
}

// start starts an orchestration through the Go client.
func (e *env) start(t *testing.T, id, name string, input any) {
	t.Helper()
	if err := e.client.StartOrchestration(context.Background(), id, name, input, nil); err != nil {
		t.Fatalf("starting %s as %s: %v", name, id, err)
	}
}

// wait waits until id is terminal.
func (e *env) wait(t *testing.T, id string) *duroxide.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := e.client.WaitForOrchestration(ctx, id)
	if err != nil {
		t.Fatalf("waiting for %s: %v", id, err)
	}
	return st
}

// status is the JSON shape of duroxide.Status, decoded loosely.
type status struct {
	InstanceID       string          `json:"instanceId"`
	Orchestration    string          `json:"orchestration"`
	Version          string          `json:"version"`
	Status           string          `json:"status"`
	ExecutionID      int64           `json:"executionId"`
	Input            json.RawMessage `json:"input"`
	Output           json.RawMessage `json:"output"`
	Error            *errorInfo      `json:"error"`
	CustomStatus     json.RawMessage `json:"customStatus"`
	CreatedAt        time.Time       `json:"createdAt"`
	UpdatedAt        time.Time       `json:"updatedAt"`
	ParentInstanceID string          `json:"parentInstanceId"`
}

type errorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func approvalInput(seconds float64) demo.ApprovalInput {
	return demo.ApprovalInput{TimeoutSeconds: seconds}
}
