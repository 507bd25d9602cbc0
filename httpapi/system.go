package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// openAPIDoc is the OpenAPI 3.0 description of the routes.
//
//go:embed openapi.json
var openAPIDoc []byte

// readyTimeout bounds the store probe of GET /readyz.
const readyTimeout = 5 * time.Second

// healthProbeID is an instance ID that no instance has: looking it up
// exercises the store with one primary-key read.
const healthProbeID = "__duroxide.readyz"

// WritableChecker is implemented by stores that can prove they are ready
// to serve: reachable, migrated and writable (provider/sqlite.Provider
// does, with a write transaction). GET /readyz uses it when the store has
// it, else a read.
type WritableChecker interface {
	CheckWritable(ctx context.Context) error
}

// systemRoutes are the routes about the server and the store rather than
// one instance.
func (s *server) systemRoutes() []route {
	return []route{
		{"GET /api/orchestrations", s.listOrchestrations},
		{"GET /api/openapi.json", s.openAPI},
		{"GET /healthz", s.healthz},
		{"GET /readyz", s.readyz},
		{"GET /metrics", s.metrics},
	}
}

type orchestrationInfo struct {
	Name string `json:"name"`
	// Versions are the registered versions, oldest first.
	Versions []string `json:"versions"`
}

type orchestrationsResponse struct {
	Orchestrations []orchestrationInfo `json:"orchestrations"`
	Activities     []string            `json:"activities"`
}

func (s *server) listOrchestrations(w http.ResponseWriter, _ *http.Request) error {
	out := orchestrationsResponse{Orchestrations: []orchestrationInfo{}, Activities: []string{}}
	if s.reg != nil {
		for _, name := range s.reg.Orchestrations() {
			out.Orchestrations = append(out.Orchestrations, orchestrationInfo{Name: name, Versions: s.reg.Versions(name)})
		}
		out.Activities = append(out.Activities, s.reg.Activities()...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", contentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
	return nil
}

type healthResponse struct {
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// healthz is liveness: the process serves HTTP. It does not touch the
// store (GET /readyz does), so a restart is not triggered by a store
// outage that a restart cannot fix.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
	return nil
}

// readyz is readiness: the store answers, is migrated and takes writes
// (WritableChecker), or, for stores without that check, answers a read (an
// instance lookup through provider.Admin, else a history read; both answer
// ErrNotFound for the probe ID when the store works).
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var err error
	switch st := s.client.Store().(type) {
	case WritableChecker:
		err = st.CheckWritable(ctx)
	case provider.Admin:
		_, err = st.GetInstance(ctx, healthProbeID)
	default:
		_, err = st.ReadHistory(ctx, healthProbeID, 0)
	}
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		// The answer names the kind of failure; the store's own message
		// (which may name hosts, schemas and users: /readyz is open
		// without a token) goes to the log under the request ID.
		id := requestID(w)
		what := readyFailure(err)
		// One line when the store stops being ready, one when it is back:
		// probes come every few seconds and would flood the log.
		if s.notReady.CompareAndSwap(false, true) {
			s.log.Error("store not ready: "+what, logKeyError, err, logKeyRequest, id)
		} else {
			s.log.Debug("store still not ready: "+what, logKeyError, err, logKeyRequest, id)
		}
		writeJSON(w, http.StatusServiceUnavailable, healthResponse{Status: "unavailable", Error: what, RequestID: id})
		return nil
	}
	if s.notReady.CompareAndSwap(true, false) {
		s.log.Warn("store ready again")
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
	return nil
}

// readyFailure says in a few words which kind of failure made a readiness
// check fail; the store's own message (the response's details) says more:
// refused, not migrated, read-only...
func readyFailure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("store did not answer within %v", readyTimeout)
	case errors.Is(err, provider.ErrUnavailable):
		return "store unreachable"
	case errors.Is(err, provider.ErrBusy):
		return "store busy"
	case errors.Is(err, provider.ErrClosed):
		return "store closed"
	}
	return "store not ready (not migrated, read-only or refusing writes: the server's log names the cause under the request ID)"
}

// instanceStates are always exposed by /metrics, zero or not, so series do
// not vanish and reappear.
var instanceStates = []provider.Status{
	provider.StatusPending, provider.StatusRunning, provider.StatusCompleted,
	provider.StatusFailed, provider.StatusCanceled,
}

// MaxStalledCount caps the duroxide_instances_stalled gauge, so that a
// scrape reads a bounded number of rows however many instances are stalled.
const MaxStalledCount = 1000

// metrics serves the Prometheus exposition (client_golang's promhttp
// negotiates the format; text 0.0.4 by default). Each scrape reads the store
// statistics under the request's context first, so a store failure is
// answered as a JSON error, then encodes them with the runtime's and the
// API's own counters from a registry made for the scrape.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	a := s.client.Store()
	counts, err := a.Counts(r.Context())
	if err != nil {
		return fmt.Errorf("counting instances: %w", err)
	}
	depths, err := a.QueueDepths(r.Context())
	if err != nil {
		return fmt.Errorf("reading queue depths: %w", err)
	}
	stalled, _, err := s.client.CountStalled(r.Context(), s.stalledAfter, MaxStalledCount)
	if err != nil {
		return err
	}

	var m metricsWriter
	byStatus := map[provider.Status]int64{}
	for st, n := range counts.ByStatus {
		if st == provider.StatusContinuedAsNew {
			st = provider.StatusRunning // as the API reports such instances
		}
		byStatus[st] += n
	}
	statuses := slices.Clone(instanceStates)
	for st := range byStatus {
		if !slices.Contains(statuses, st) {
			statuses = append(statuses, st)
		}
	}
	slices.Sort(statuses[len(instanceStates):])
	m.family("duroxide_instances", "gauge", "Instances in the store, by status.")
	for _, st := range statuses {
		m.sample("duroxide_instances", byStatus[st], "status", string(st))
	}
	m.family("duroxide_executions", "gauge", "Executions in the store (one per instance, one more per ContinueAsNew).")
	m.sample("duroxide_executions", counts.Executions)
	m.family("duroxide_history_events", "gauge", "History events in the store.")
	m.sample("duroxide_history_events", counts.HistoryEvents)
	m.family("duroxide_instances_stalled", "gauge", fmt.Sprintf(
		"Live instances that made no progress for %s while waiting on something that should progress (parked, not registered, redelivered, or due work nobody takes); counted up to %d.",
		s.stalledAfter, MaxStalledCount))
	m.sample("duroxide_instances_stalled", int64(stalled))
	m.family("duroxide_queue_messages", "gauge", "Messages in the store's queues, by queue and state (ready, delayed: not yet visible, locked: being processed).")
	for _, q := range []struct {
		queue, state string
		n            int64
	}{
		{"orchestrator", "ready", depths.OrchestratorReady},
		{"orchestrator", "delayed", depths.OrchestratorDelayed},
		{"orchestrator", "locked", depths.OrchestratorLocked},
		{"worker", "ready", depths.WorkerReady},
		{"worker", "delayed", depths.WorkerDelayed},
		{"worker", "locked", depths.WorkerLocked},
	} {
		m.sample("duroxide_queue_messages", q.n, "queue", q.queue, "state", q.state)
	}
	m.family("duroxide_queue_unserved", "gauge", "Ready messages that no live runtime serves, by queue: turns of orchestrations no runtime registers, activities no runtime registers or whose queue none serves (counted in duroxide_queue_messages{state=\"ready\"} too; they wait for a runtime that does, or fail after RuntimeOptions.UnservedTimeout).")
	m.sample("duroxide_queue_unserved", depths.OrchestratorUnserved, "queue", "orchestrator")
	m.sample("duroxide_queue_unserved", depths.WorkerUnserved, "queue", "worker")
	if rm, ok := s.runtimeMetrics(); ok {
		if s.reg != nil {
			rm.Finished = withZeroFinished(rm.Finished, s.reg.Orchestrations())
		}
		writeRuntimeMetrics(&m, rm)
	}
	s.writeLockMetrics(&m, counts.ExecutionLocks)
	s.writeWebhookAuthMetrics(&m)
	if m.err != nil {
		return fmt.Errorf("building metrics: %w", m.err)
	}

	writeBuildInfo(&m, duroxide.ReadBuildInfo())
	if m.err != nil {
		return fmt.Errorf("building metrics: %w", m.err)
	}

	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{&m, goCollector, processCollector} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.HTTPErrorOnError,
	}).ServeHTTP(w, r)
	return nil
}

// The standard collectors of the Go runtime (go_*) and of the process
// (process_*: CPU, memory, file descriptors), shared by every scrape.
var (
	goCollector      = collectors.NewGoCollector()
	processCollector = collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
)

// writeBuildInfo writes duroxide_build_info, the usual constant 1 whose
// labels say which duroxide, revision and Go toolchain the server runs.
func writeBuildInfo(m *metricsWriter, bi duroxide.BuildInfo) {
	m.family("duroxide_build_info", "gauge",
		"Always 1; its labels say which duroxide module version, version control revision and Go toolchain built this process.")
	m.sample("duroxide_build_info", 1, "version", bi.Version, "revision", bi.Revision, "goversion", bi.GoVersion)
}

// runtimeMetrics returns the metrics of the runtime of Options.Runtime, if
// the handler has one.
func (s *server) runtimeMetrics() (duroxide.RuntimeMetrics, bool) {
	if s.runtime == nil {
		return duroxide.RuntimeMetrics{}, false
	}
	return s.runtime.Metrics(), true
}

// finishedStates are the states duroxide_instances_finished_total counts.
var finishedStates = []duroxide.State{duroxide.StateCompleted, duroxide.StateFailed, duroxide.StateCanceled}

// withZeroFinished adds a zero count for each state of each registered
// orchestration that has none, so that their series exist (and a failure
// rate can be computed) before the first instance ends.
func withZeroFinished(counts []duroxide.FinishedCount, orchestrations []string) []duroxide.FinishedCount {
	type key struct {
		orchestration string
		state         duroxide.State
	}
	have := make(map[key]bool, len(counts))
	for _, c := range counts {
		have[key{c.Orchestration, c.State}] = true
	}
	out := slices.Clone(counts)
	for _, o := range orchestrations {
		for _, st := range finishedStates {
			if !have[key{o, st}] {
				out = append(out, duroxide.FinishedCount{Orchestration: o, State: st})
			}
		}
	}
	return out
}

// writeRuntimeMetrics writes the families of a runtime's metrics.
func writeRuntimeMetrics(m *metricsWriter, rm duroxide.RuntimeMetrics) {
	m.family("duroxide_turn_duration_seconds", "histogram",
		"Duration of the orchestration turns run by this process, from the fetch of the instance to the commit of the turn.")
	m.histogram("duroxide_turn_duration_seconds", rm.TurnDuration)
	m.family("duroxide_turns_total", "counter",
		"Orchestration turns run by this process, by result (committed; abandoned: given back to be retried later; lock_lost: the instance lock expired before the commit; commit_failed: the store refused the commit).")
	for _, t := range []struct {
		result string
		n      uint64
	}{
		{"committed", rm.Turns.Committed},
		{"abandoned", rm.Turns.Abandoned},
		{"lock_lost", rm.Turns.LockLost},
		{"commit_failed", rm.Turns.CommitFailed},
	} {
		m.sample("duroxide_turns_total", int64(t.n), "result", t.result)
	}
	acts := []struct {
		outcome string
		h       duroxide.Histogram
	}{
		{"completed", rm.Activities.Completed},
		{"failed", rm.Activities.Failed},
		{"canceled", rm.Activities.Canceled},
	}
	m.family("duroxide_activity_duration_seconds", "histogram",
		"Run time of the activity functions run by this process, by outcome (completed, failed: returned an error or panicked, canceled: by the runtime).")
	for _, a := range acts {
		m.histogram("duroxide_activity_duration_seconds", a.h, "outcome", a.outcome)
	}
	m.family("duroxide_instances_finished_total", "counter",
		"Instances that this process's runtime ended, by orchestration and terminal state (Completed, Failed, Canceled); a failure rate is the Failed share. Orchestration names past the first 200 are counted as \"(other)\".")
	for _, f := range rm.Finished {
		m.sample("duroxide_instances_finished_total", int64(f.Count), "orchestration", f.Orchestration, "state", string(f.State))
	}
	m.family("duroxide_activities_total", "counter",
		"Activity functions run by this process, by outcome (completed, failed: returned an error or panicked, canceled: by the runtime).")
	for _, a := range acts {
		m.sample("duroxide_activities_total", int64(a.h.Count), "outcome", a.outcome)
	}
	ret := rm.Retention
	m.family("duroxide_retention_passes_total", "counter",
		"Retention passes of this process's runtime (RuntimeOptions.Retention), by result (ran; skipped: another runtime held the lease; failed).")
	m.sample("duroxide_retention_passes_total", int64(ret.Passes), "result", "ran")
	m.sample("duroxide_retention_passes_total", int64(ret.Skipped), "result", "skipped")
	m.sample("duroxide_retention_passes_total", int64(ret.Failures), "result", "failed")
	m.family("duroxide_retention_deleted_total", "counter",
		"What this process's retention passes deleted: finished instances (with their sub-orchestrations), old executions of ContinueAsNew chains, and history events.")
	m.sample("duroxide_retention_deleted_total", int64(ret.InstancesPurged), "what", "instances")
	m.sample("duroxide_retention_deleted_total", int64(ret.ExecutionsPruned), "what", "executions")
	m.sample("duroxide_retention_deleted_total", int64(ret.EventsDeleted), "what", "events")
}

// metricsWriter gathers the metrics of one scrape as client_golang constant
// metrics, and is the prometheus.Collector of the scrape's registry. Write
// a family, then its samples: family names it, gives its type ("gauge",
// "counter" or "histogram") and help; sample and histogram add one series,
// labels being name, value pairs. The first mistake (a sample outside a
// known family, a bad name) is kept in err and fails the scrape.
type metricsWriter struct {
	families map[string]metricFamily
	descs    map[string]*prometheus.Desc // by name and label names
	metrics  []prometheus.Metric
	err      error
}

type metricFamily struct {
	typ  string
	help string
}

var _ prometheus.Collector = (*metricsWriter)(nil)

func (m *metricsWriter) family(name, typ, help string) {
	if m.families == nil {
		m.families = map[string]metricFamily{}
	}
	switch typ {
	case "gauge", "counter", "histogram":
	default:
		m.fail(fmt.Errorf("metric family %s: unknown type %q", name, typ))
		return
	}
	// Names outside the classic character set would be escaped (renamed)
	// by the text format: refuse them.
	if !model.LegacyValidation.IsValidMetricName(name) {
		m.fail(fmt.Errorf("metric family %q: invalid name", name))
		return
	}
	if _, ok := m.families[name]; ok {
		m.fail(fmt.Errorf("metric family %s written twice", name))
		return
	}
	m.families[name] = metricFamily{typ: typ, help: help}
}

// sample adds a gauge or counter sample.
func (m *metricsWriter) sample(name string, v int64, labels ...string) {
	f, desc, values, err := m.series(name, labels)
	if err != nil {
		m.fail(err)
		return
	}
	vt := prometheus.GaugeValue
	switch f.typ {
	case "counter":
		vt = prometheus.CounterValue
	case "histogram":
		m.fail(fmt.Errorf("metric %s is a histogram: add its samples with histogram", name))
		return
	}
	metric, err := prometheus.NewConstMetric(desc, vt, float64(v), values...)
	m.add(metric, err)
}

// histogram adds a histogram series.
func (m *metricsWriter) histogram(name string, h duroxide.Histogram, labels ...string) {
	f, desc, values, err := m.series(name, labels)
	if err != nil {
		m.fail(err)
		return
	}
	if f.typ != "histogram" || len(h.Counts) != len(h.Bounds) {
		m.fail(fmt.Errorf("metric %s: not a histogram family, or bounds and counts differ", name))
		return
	}
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b.Seconds()] = h.Counts[i]
	}
	metric, err := prometheus.NewConstHistogram(desc, h.Count, h.Sum.Seconds(), buckets, values...)
	m.add(metric, err)
}

// series resolves the family and descriptor of a series.
func (m *metricsWriter) series(name string, labels []string) (metricFamily, *prometheus.Desc, []string, error) {
	f, ok := m.families[name]
	if !ok {
		return f, nil, nil, fmt.Errorf("metric %s written before its family", name)
	}
	if len(labels)%2 != 0 {
		return f, nil, nil, fmt.Errorf("metric %s: labels are not name, value pairs: %q", name, labels)
	}
	names := make([]string, 0, len(labels)/2)
	values := make([]string, 0, len(labels)/2)
	for i := 0; i < len(labels); i += 2 {
		if !model.LegacyValidation.IsValidLabelName(labels[i]) {
			return f, nil, nil, fmt.Errorf("metric %s: invalid label name %q", name, labels[i])
		}
		names = append(names, labels[i])
		values = append(values, labels[i+1])
	}
	key := name + "\x00" + strings.Join(names, "\x00")
	desc, ok := m.descs[key]
	if !ok {
		if m.descs == nil {
			m.descs = map[string]*prometheus.Desc{}
		}
		desc = prometheus.NewDesc(name, f.help, names, nil)
		m.descs[key] = desc
	}
	return f, desc, values, nil
}

func (m *metricsWriter) add(metric prometheus.Metric, err error) {
	if err != nil {
		m.fail(err)
		return
	}
	m.metrics = append(m.metrics, metric)
}

func (m *metricsWriter) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// Describe sends the descriptors of the series written.
func (m *metricsWriter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect sends the series written.
func (m *metricsWriter) Collect(ch chan<- prometheus.Metric) {
	for _, metric := range m.metrics {
		ch <- metric
	}
}
