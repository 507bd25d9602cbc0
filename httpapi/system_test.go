package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
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
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/orchestrations", nil))
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
		// Liveness does not look at the store; readiness does.
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("healthz with a closed store: got %d %s, want 200 (liveness only)", rec.Code, rec.Body)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var out struct{ Status, Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || out.Status != "unavailable" || out.Error == "" ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("readyz with a closed store: got %d %s", rec.Code, rec.Body)
		}
	})
}

// parseMetrics parses a text exposition with the Prometheus parser and
// returns its families by name, and the values of its gauge and counter
// samples by name and labels (`name{a="x",b="y"}`, labels in name order).
func parseMetrics(t *testing.T, text string) (map[string]*dto.MetricFamily, map[string]float64) {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	samples := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name
			if len(m.GetLabel()) > 0 {
				var pairs []string
				for _, l := range m.GetLabel() {
					pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(pairs, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				samples[key] = m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				samples[key] = m.GetCounter().GetValue()
			}
		}
	}
	return families, samples
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "metrics-hello", demo.Hello, "Ada")
	e.start(t, "metrics-fail", demo.Fail, "boom")
	e.wait(t, "metrics-hello")
	e.wait(t, "metrics-fail")
	e.expect(t, "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "metrics-later", "startAt": "2999-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	// An orchestration no runtime registers: its start waits, unserved.
	if err := e.client.StartOrchestration(context.Background(), "metrics-unserved", "nobody.Registers", nil, nil); err != nil {
		t.Fatal(err)
	}

	res := e.expect(t, "GET", "/metrics", nil, http.StatusOK, nil)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q, want the text format 0.0.4", ct)
	}
	if cc := res.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	families, got := parseMetrics(t, string(res.body))
	for name, typ := range map[string]dto.MetricType{
		"duroxide_instances":            dto.MetricType_GAUGE,
		"duroxide_executions":           dto.MetricType_GAUGE,
		"duroxide_history_events":       dto.MetricType_GAUGE,
		"duroxide_queue_messages":       dto.MetricType_GAUGE,
		"duroxide_queue_unserved":       dto.MetricType_GAUGE,
		"duroxide_lock_conflicts_total": dto.MetricType_COUNTER,
		// From the runtime (Options.Runtime).
		"duroxide_turn_duration_seconds":     dto.MetricType_HISTOGRAM,
		"duroxide_turns_total":               dto.MetricType_COUNTER,
		"duroxide_activity_duration_seconds": dto.MetricType_HISTOGRAM,
		"duroxide_activities_total":          dto.MetricType_COUNTER,
		"duroxide_retention_passes_total":    dto.MetricType_COUNTER,
		"duroxide_retention_deleted_total":   dto.MetricType_COUNTER,
	} {
		f := families[name]
		if f == nil || f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("family %s: %v, want a documented %s", name, f, typ)
		}
	}
	want := map[string]float64{
		`duroxide_instances{status="Pending"}`:                          2,
		`duroxide_instances{status="Running"}`:                          0,
		`duroxide_instances{status="Completed"}`:                        1,
		`duroxide_instances{status="Failed"}`:                           1,
		`duroxide_instances{status="Canceled"}`:                         0,
		`duroxide_executions`:                                           2,
		`duroxide_queue_messages{queue="orchestrator",state="delayed"}`: 1,
		`duroxide_queue_messages{queue="orchestrator",state="ready"}`:   1,
		`duroxide_queue_unserved{queue="orchestrator"}`:                 1,
		`duroxide_queue_unserved{queue="worker"}`:                       0,
		`duroxide_queue_messages{queue="worker",state="ready"}`:         0,
		`duroxide_activities_total{outcome="completed"}`:                1,
		`duroxide_activities_total{outcome="failed"}`:                   1,
		`duroxide_activities_total{outcome="canceled"}`:                 0,
		`duroxide_retention_passes_total{result="ran"}`:                 0,
		`duroxide_retention_deleted_total{what="instances"}`:            0,
	}
	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s = %v (present: %v), want %v", k, n, ok, v)
		}
	}
	// The last turn of each instance is counted just after it reads
	// Completed, so only the first turns are certain.
	if n := got[`duroxide_turns_total{result="committed"}`]; n < 3 {
		t.Errorf("committed turns = %v, want at least 3", n)
	}
	for _, k := range []string{"duroxide_history_events", `duroxide_queue_messages{queue="orchestrator",state="locked"}`,
		`duroxide_queue_messages{queue="worker",state="delayed"}`, `duroxide_queue_messages{queue="worker",state="locked"}`} {
		if _, ok := got[k]; !ok {
			t.Errorf("no sample %s", k)
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
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") || len(doc.Paths) == 0 {
		t.Fatalf("openapi %q with %d paths", doc.OpenAPI, len(doc.Paths))
	}
}
