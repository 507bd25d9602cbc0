package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// expose runs m through the pipeline of GET /metrics (a registry of its own,
// the text encoder) and parses the result back.
func expose(t *testing.T, m *metricsWriter) map[string]*dto.MetricFamily {
	t.Helper()
	if m.err != nil {
		t.Fatalf("writing metrics: %v", m.err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	return families
}

// runtimeMetricsOf runs demo.Hello hellos times and demo.Fail fails times
// on a runtime and returns its metrics once it has stopped.
func runtimeMetricsOf(t *testing.T, hellos, fails int) duroxide.RuntimeMetrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "metrics.db"), &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	var ids []string
	for i := range hellos + fails {
		name, input := demo.Hello, "Ada"
		if i >= hellos {
			name, input = demo.Fail, "boom"
		}
		ids = append(ids, fmt.Sprint("m-", i))
		if err := c.StartOrchestration(ctx, ids[i], name, input, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if _, err := c.WaitForOrchestration(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return rt.Metrics()
}

func TestRuntimeMetricsExposition(t *testing.T) {
	t.Parallel()
	const hellos, fails = 3, 2
	var m metricsWriter
	writeRuntimeMetrics(&m, runtimeMetricsOf(t, hellos, fails))
	families := expose(t, &m)

	byLabel := func(name, label string) map[string]*dto.Metric {
		t.Helper()
		f := families[name]
		if f == nil || f.GetHelp() == "" {
			t.Fatalf("no documented family %s", name)
		}
		out := map[string]*dto.Metric{}
		for _, s := range f.GetMetric() {
			v := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					v = l.GetValue()
				}
			}
			out[v] = s
		}
		return out
	}
	checkHistogram := func(what string, h *dto.Histogram, count uint64) {
		t.Helper()
		if h == nil {
			t.Fatalf("%s: not a histogram", what)
		}
		if h.GetSampleCount() != count {
			t.Errorf("%s: count %d, want %d", what, h.GetSampleCount(), count)
		}
		if (count > 0) != (h.GetSampleSum() > 0) {
			t.Errorf("%s: sum %v for count %d", what, h.GetSampleSum(), count)
		}
		// The parser keeps the +Inf bucket the encoder writes.
		bs := h.GetBucket()
		if len(bs) < 3 || bs[0].GetUpperBound() != 0.0005 || bs[len(bs)-2].GetUpperBound() != 10 ||
			!math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
			t.Fatalf("%s: buckets %v, want 0.5ms to 10s and +Inf", what, bs)
		}
		for i := 1; i < len(bs); i++ {
			if bs[i].GetUpperBound() <= bs[i-1].GetUpperBound() || bs[i].GetCumulativeCount() < bs[i-1].GetCumulativeCount() {
				t.Errorf("%s: bucket %d not ascending: %v", what, i, bs)
			}
		}
		if bs[len(bs)-1].GetCumulativeCount() != count {
			t.Errorf("%s: +Inf bucket %d, want the count %d", what, bs[len(bs)-1].GetCumulativeCount(), count)
		}
	}

	turns := byLabel("duroxide_turn_duration_seconds", "")
	checkHistogram("turns", turns[""].GetHistogram(), 2*(hellos+fails))
	for result, want := range map[string]float64{"committed": 2 * (hellos + fails), "abandoned": 0, "lock_lost": 0, "commit_failed": 0} {
		s := byLabel("duroxide_turns_total", "result")[result]
		if s.GetCounter() == nil || s.GetCounter().GetValue() != want {
			t.Errorf("turns_total{result=%q} = %v, want %v", result, s, want)
		}
	}
	acts := byLabel("duroxide_activity_duration_seconds", "outcome")
	totals := byLabel("duroxide_activities_total", "outcome")
	for outcome, want := range map[string]uint64{"completed": hellos, "failed": fails, "canceled": 0} {
		checkHistogram("activities "+outcome, acts[outcome].GetHistogram(), want)
		if s := totals[outcome]; s.GetCounter() == nil || s.GetCounter().GetValue() != float64(want) {
			t.Errorf("activities_total{outcome=%q} = %v, want %d", outcome, s, want)
		}
	}
}

func TestMetricsWriterMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(m *metricsWriter)
	}{
		{"sample before family", func(m *metricsWriter) { m.sample("x", 1) }},
		{"unknown type", func(m *metricsWriter) { m.family("x", "summary", "X.") }},
		{"family twice", func(m *metricsWriter) { m.family("x", "gauge", "X."); m.family("x", "gauge", "X.") }},
		{"odd labels", func(m *metricsWriter) { m.family("x", "gauge", "X."); m.sample("x", 1, "a") }},
		{"bad name", func(m *metricsWriter) { m.family("x-y", "gauge", "X."); m.sample("x-y", 1) }},
		{"bad label name", func(m *metricsWriter) { m.family("x", "gauge", "X."); m.sample("x", 1, "a-b", "v") }},
		{"gauge sample of a histogram", func(m *metricsWriter) { m.family("x", "histogram", "X."); m.sample("x", 1) }},
		{"histogram sample of a gauge", func(m *metricsWriter) {
			m.family("x", "gauge", "X.")
			m.histogram("x", duroxide.Histogram{})
		}},
	} {
		var m metricsWriter
		tc.write(&m)
		if m.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}

	// Written right, label values are escaped by the encoder.
	var m metricsWriter
	m.family("x", "counter", "Help with \\ and\nnewline.")
	m.sample("x", 3, "a", "quote \" backslash \\ newline \n")
	m.sample("x", 4, "a", "plain")
	f := expose(t, &m)["x"]
	if f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 2 || !strings.Contains(f.GetHelp(), "\n") {
		t.Fatalf("got %v", f)
	}
}
