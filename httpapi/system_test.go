package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestNewHandlerOptions(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	client := duroxide.NewClient(store)
	if _, err := httpapi.NewHandler(nil, nil); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Errorf("nil client: %v, want ErrInvalidArgument", err)
	}
	if _, err := httpapi.NewHandler(client, &httpapi.Options{MaxBodyBytes: -1}); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Errorf("negative MaxBodyBytes: %v, want ErrInvalidArgument", err)
	}
	if h, err := httpapi.NewHandler(client, nil); err != nil || h == nil {
		t.Errorf("nil options: %v", err)
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        []string
	}{
		{"GET", "/api/nothing", http.StatusNotFound, nil},
		{"GET", "/", http.StatusNotFound, nil},
		{"GET", "/api/instances/x/y", http.StatusNotFound, nil},
		{"PUT", "/api/instances/x", http.StatusMethodNotAllowed, []string{"GET", "DELETE"}},
		{"DELETE", "/api/instances", http.StatusMethodNotAllowed, []string{"GET", "POST"}},
		{"POST", "/healthz", http.StatusMethodNotAllowed, []string{"GET"}},
		{"GET", "/api/instances/x/cancel", http.StatusMethodNotAllowed, []string{"POST"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			res := e.do(t, tc.method, tc.path, nil)
			if res.status != tc.status {
				t.Fatalf("got %s, want %d", res, tc.status)
			}
			var eb errorBody
			if err := json.Unmarshal(res.body, &eb); err != nil || eb.Error == "" {
				t.Fatalf("body %s is not a JSON error (%v)", res.body, err)
			}
			for _, m := range tc.allow {
				if !strings.Contains(res.header.Get("Allow"), m) {
					t.Errorf("Allow %q lacks %s", res.header.Get("Allow"), m)
				}
			}
		})
	}
}

func TestOrchestrations(t *testing.T) {
	t.Parallel()
	type listing struct {
		Orchestrations []struct {
			Name     string   `json:"name"`
			Versions []string `json:"versions"`
		} `json:"orchestrations"`
		Activities []string `json:"activities"`
	}
	serve := func(t *testing.T, reg *duroxide.Registry) *httptest.ResponseRecorder {
		t.Helper()
		store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		h, err := httpapi.NewHandler(duroxide.NewClient(store), &httpapi.Options{Logger: discard, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/orchestrations", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("got %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		return rec
	}
	t.Run("with registry", func(t *testing.T) {
		t.Parallel()
		reg := duroxide.NewRegistry()
		demo.Register(reg)
		duroxide.RegisterOrchestrationVersion(reg, demo.Hello, "2.0.0", func(*duroxide.OrchestrationContext, string) (string, error) {
			return "v2", nil
		})
		rec := serve(t, reg)
		var out listing
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range out.Orchestrations {
			names = append(names, o.Name)
			if o.Name == demo.Hello && !slices.Equal(o.Versions, []string{"1.0.0", "2.0.0"}) {
				t.Errorf("%s versions %v", o.Name, o.Versions)
			}
			if o.Name == demo.Fail && !slices.Equal(o.Versions, []string{"1.0.0"}) {
				t.Errorf("%s versions %v", o.Name, o.Versions)
			}
		}
		for _, n := range []string{demo.Hello, demo.Sequence, demo.FanOut, demo.Approval, demo.Countdown, demo.Fail} {
			if !slices.Contains(names, n) {
				t.Errorf("orchestrations %v lack %s", names, n)
			}
		}
		if !slices.IsSorted(names) {
			t.Errorf("orchestrations not sorted: %v", names)
		}
		if !slices.Contains(out.Activities, demo.ActivitySayHello) {
			t.Errorf("activities %v lack %s", out.Activities, demo.ActivitySayHello)
		}
	})
	t.Run("without registry", func(t *testing.T) {
		t.Parallel()
		rec := serve(t, nil)
		if strings.TrimSpace(rec.Body.String()) != `{"orchestrations":[],"activities":[]}` {
			t.Fatalf("got %s", rec.Body)
		}
	})
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		var out struct{ Status string }
		e.expect(t, "GET", "/healthz", nil, http.StatusOK, &out)
		if out.Status != "ok" {
			t.Fatalf("status %q", out.Status)
		}
	})
	t.Run("closed store", func(t *testing.T) {
		t.Parallel()
		store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		h, err := httpapi.NewHandler(duroxide.NewClient(store), &httpapi.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		var out struct{ Status, Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || out.Status != "unavailable" || out.Error == "" ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("got %d %s", rec.Code, rec.Body)
		}
	})
}

// metricLine is one sample of the text exposition format (integers only here).
var metricLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*\})? (-?[0-9]+)$`)

// parseMetrics checks the exposition format (every family has one HELP and
// one TYPE line before its samples, families are not split) and returns the
// samples by name and labels.
func parseMetrics(t *testing.T, text string) map[string]string {
	t.Helper()
	samples := map[string]string{}
	help, typ := map[string]bool{}, map[string]bool{}
	done := map[string]bool{}
	current := ""
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if f, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(f, " ")
			if help[name] {
				t.Fatalf("two HELP lines for %s", name)
			}
			help[name] = true
			if current != "" {
				done[current] = true
			}
			current = name
			continue
		}
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(f, " ")
			if typ[name] || name != current || (kind != "gauge" && kind != "counter") {
				t.Fatalf("bad TYPE line %q", line)
			}
			typ[name] = true
			continue
		}
		m := metricLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("malformed sample line %q", line)
		}
		if m[1] != current || !typ[m[1]] || done[m[1]] {
			t.Fatalf("sample %q outside its family", line)
		}
		samples[m[1]+m[2]] = m[4]
	}
	return samples
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "metrics-hello", demo.Hello, "Ada")
	e.start(t, "metrics-fail", demo.Fail, "boom")
	e.wait(t, "metrics-hello")
	e.wait(t, "metrics-fail")
	e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "metrics-later", "startAt": "2999-01-01T00:00:00Z"}`, http.StatusCreated, nil)

	res := e.expect(t, "GET", "/metrics", nil, http.StatusOK, nil)
	if ct := res.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	got := parseMetrics(t, string(res.body))
	want := map[string]string{
		`duroxide_instances{status="Pending"}`:                          "1",
		`duroxide_instances{status="Running"}`:                          "0",
		`duroxide_instances{status="Completed"}`:                        "1",
		`duroxide_instances{status="Failed"}`:                           "1",
		`duroxide_instances{status="Canceled"}`:                         "0",
		`duroxide_executions`:                                           "2",
		`duroxide_queue_messages{queue="orchestrator",state="delayed"}`: "1",
		`duroxide_queue_messages{queue="orchestrator",state="ready"}`:   "0",
		`duroxide_queue_messages{queue="worker",state="ready"}`:         "0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
	for _, k := range []string{"duroxide_history_events", `duroxide_queue_messages{queue="orchestrator",state="locked"}`,
		`duroxide_queue_messages{queue="worker",state="delayed"}`, `duroxide_queue_messages{queue="worker",state="locked"}`} {
		if _, ok := got[k]; !ok {
			t.Errorf("no sample %s", k)
		}
	}
}

// noAdmin hides the provider.Admin capability of a store.
type noAdmin struct{ provider.Provider }

func TestStoreWithoutAdmin(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h, err := httpapi.NewHandler(duroxide.NewClient(noAdmin{store}), &httpapi.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/healthz", "", http.StatusOK},
		{"POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "a"}`, http.StatusCreated},
		{"GET", "/api/instances", "", http.StatusNotImplemented},
		{"GET", "/api/instances/a", "", http.StatusNotImplemented},
		{"DELETE", "/api/instances/a", "", http.StatusNotImplemented},
		{"GET", "/metrics", "", http.StatusNotImplemented},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: got %d %q %s, want %d", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.status)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	e.expect(t, "GET", "/api/openapi.json", nil, http.StatusOK, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") || len(doc.Paths) == 0 {
		t.Fatalf("openapi %q with %d paths", doc.OpenAPI, len(doc.Paths))
	}
}
