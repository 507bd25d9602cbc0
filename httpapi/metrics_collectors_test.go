package httpapi_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// TestMetricsFinishedBuildInfoAndCollectors: /metrics counts finished
// instances by orchestration and state, says which build serves it, and
// has the standard Go runtime and process metrics.
func TestMetricsFinishedBuildInfoAndCollectors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "finished-hello", demo.Hello, "Ada")
	e.start(t, "finished-fail", demo.Fail, "boom")
	e.wait(t, "finished-hello")
	e.wait(t, "finished-fail")

	// A finished instance is counted just after its final turn commits, so
	// just after a waiter sees it end: read until both are counted.
	var (
		body     []byte
		families map[string]*dto.MetricFamily
		got      map[string]float64
	)
	hello := `duroxide_instances_finished_total{orchestration="demo.Hello",state="Completed"}`
	fail := `duroxide_instances_finished_total{orchestration="demo.Fail",state="Failed"}`
	for giveUp := time.Now().Add(testTimeout); ; runtime.Gosched() {
		body = e.expect(t, "GET", "/metrics", nil, http.StatusOK, nil).body
		families, got = parseMetrics(t, string(body))
		if got[hello] == 1 && got[fail] == 1 {
			break
		}
		if time.Now().After(giveUp) {
			t.Fatalf("finished counts never reached 1: %s = %v, %s = %v", hello, got[hello], fail, got[fail])
		}
	}
	if f := families["duroxide_instances_finished_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() == "" {
		t.Fatalf("duroxide_instances_finished_total: %v", f)
	}
	// Every registered orchestration has its series, zero until one ends.
	for _, st := range []string{"Completed", "Failed", "Canceled"} {
		k := `duroxide_instances_finished_total{orchestration="demo.Countdown",state="` + st + `"}`
		if n, ok := got[k]; !ok || n != 0 {
			t.Errorf("%s = %v (present: %v), want 0", k, n, ok)
		}
	}
	if n, ok := got[`duroxide_instances_finished_total{orchestration="demo.Hello",state="Failed"}`]; !ok || n != 0 {
		t.Errorf("demo.Hello has no zero Failed series (%v, %v)", n, ok)
	}

	bi := duroxide.ReadBuildInfo()
	build := `duroxide_build_info{goversion="` + bi.GoVersion + `",revision="` + bi.Revision + `",version="` + bi.Version + `"}`
	if got[build] != 1 || bi.GoVersion != runtime.Version() {
		t.Fatalf("%s = %v (build info %+v)", build, got[build], bi)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_info", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if families[name] == nil {
			t.Errorf("no %s: the Go runtime and process collectors are missing", name)
		}
	}

	// promtool, Prometheus's own checker, accepts the exposition.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus): the exposition was checked with the expfmt parser only")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
