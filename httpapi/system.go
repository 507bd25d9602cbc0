package httpapi

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// openAPIDoc is the OpenAPI 3.1 description of the routes.
//
//go:embed openapi.json
var openAPIDoc []byte

// healthTimeout bounds the store ping of GET /healthz.
const healthTimeout = 5 * time.Second

// healthProbeID is an instance ID that no instance has: looking it up
// exercises the store with one primary-key read.
const healthProbeID = "__duroxide.healthz"

// systemRoutes are the routes about the server and the store rather than
// one instance.
func (s *server) systemRoutes() []route {
	return []route{
		{"GET /api/orchestrations", s.listOrchestrations},
		{"GET /api/openapi.json", s.openAPI},
		{"GET /healthz", s.healthz},
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
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	Details string `json:"details,omitempty"`
}

// healthz pings the store: an instance lookup through provider.Admin when
// the store has it, else a history read. Both answer ErrNotFound for the
// probe ID when the store works.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var err error
	if a, ok := s.client.Store().(provider.Admin); ok {
		_, err = a.GetInstance(ctx, healthProbeID)
	} else {
		_, err = s.client.Store().ReadHistory(ctx, healthProbeID, 0)
	}
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		s.log.Error("health check failed", logKeyError, err)
		writeJSON(w, http.StatusServiceUnavailable, healthResponse{Status: "unavailable", Error: "store unavailable", Details: err.Error()})
		return nil
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
	return nil
}

// contentTypeMetrics is the Prometheus text exposition format, version 0.0.4.
// Prometheus rejects other content types, so /metrics is the one route that
// does not answer application/json (except for its errors).
const contentTypeMetrics = "text/plain; version=0.0.4; charset=utf-8"

// instanceStates are always exposed by /metrics, zero or not, so series do
// not vanish and reappear.
var instanceStates = []provider.Status{
	provider.StatusPending, provider.StatusRunning, provider.StatusCompleted,
	provider.StatusFailed, provider.StatusCanceled,
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	a, ok := s.client.Store().(provider.Admin)
	if !ok {
		return fmt.Errorf("metrics need store statistics: %w", duroxide.ErrNotSupported)
	}
	counts, err := a.Counts(r.Context())
	if err != nil {
		return fmt.Errorf("counting instances: %w", err)
	}
	depths, err := a.QueueDepths(r.Context())
	if err != nil {
		return fmt.Errorf("reading queue depths: %w", err)
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

	h := w.Header()
	h.Set("Content-Type", contentTypeMetrics)
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(m.buf.Bytes())
	return nil
}

// metricsWriter writes the Prometheus text exposition format.
type metricsWriter struct {
	buf bytes.Buffer
}

func (m *metricsWriter) family(name, typ, help string) {
	fmt.Fprintf(&m.buf, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one sample; labels are name, value pairs.
func (m *metricsWriter) sample(name string, v int64, labels ...string) {
	m.buf.WriteString(name)
	if len(labels) > 0 {
		m.buf.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				m.buf.WriteByte(',')
			}
			fmt.Fprintf(&m.buf, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
		}
		m.buf.WriteByte('}')
	}
	m.buf.WriteByte(' ')
	m.buf.WriteString(strconv.FormatInt(v, 10))
	m.buf.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
