package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// instanceRoutes are the management routes of instances.
func (s *server) instanceRoutes() []route {
	return []route{
		{"POST /api/instances", s.startInstance},
		{"GET /api/instances", s.listInstances},
		{"GET /api/instances/{id}", s.getInstance},
		{"DELETE /api/instances/{id}", s.purgeInstance},
		{"GET /api/instances/{id}/history", s.getHistory},
		{"GET /api/instances/{id}/executions", s.listExecutions},
		{"GET /api/instances/{id}/values", s.listValues},
		{"GET /api/instances/{id}/values/{key}", s.getValue},
		{"POST /api/instances/{id}/events/{name}", s.raiseEvent},
		{"POST /api/instances/{id}/signal-with-start", s.signalWithStart},
		{"POST /api/instances/{id}/cancel", s.cancelInstance},
	}
}

// StartRequest is the body of POST /api/instances; Go clients of the API
// (such as the duroxide CLI's --server mode) send it.
type StartRequest struct {
	Orchestration string          `json:"orchestration"`
	InstanceID    string          `json:"instanceId,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Version       string          `json:"version,omitempty"`
	// StartAt delays the start (RFC 3339).
	StartAt *time.Time `json:"startAt,omitempty"`
	// IdempotencyKey makes the start idempotent: a repeat
	// within 24 h starts nothing and answers 200 with the first instance.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// LockKey takes the execution lock of that workflow ID: a start while
	// a live instance holds it answers 409, unless QueueIfLocked.
	LockKey string `json:"lockKey,omitempty"`
	// LockTTL is the lock's TTL (default 1 h); QueueIfLocked makes a start
	// on a held lock wait its turn instead of failing. Both need LockKey.
	LockTTL       *Duration `json:"lockTtl,omitempty"`
	QueueIfLocked bool      `json:"queueIfLocked,omitempty"`
	// ReplaceIfLocked makes a start on a held lock cancel the holder and
	// wait for its end, in one transaction (duroxide.StartOptions.
	// ReplaceIfLocked); the answer names the holder canceled. Needs
	// LockKey.
	ReplaceIfLocked bool `json:"replaceIfLocked,omitempty"`
	// Timeout ends the instance Failed (kind "timeout") if it has not
	// finished that long after it started (duroxide.StartOptions.Timeout;
	// absent: no timeout).
	Timeout *Duration `json:"timeout,omitempty"`
}

// StartResponse is the answer to POST /api/instances (201, or 200 for a
// duplicate idempotency key).
type StartResponse struct {
	InstanceID string `json:"instanceId"`
	// Duplicate: the idempotency key was used before; nothing started and
	// InstanceID is the instance the key first started.
	Duplicate bool `json:"duplicate,omitempty"`
	// Purged and PurgedAt: a duplicate whose first instance was purged
	// since (the key outlives it).
	Purged   bool       `json:"purged,omitempty"`
	PurgedAt *time.Time `json:"purgedAt,omitempty"`
	// Queued and QueuePosition: a start with QueueIfLocked whose instance
	// waits (Pending) for the execution lock, at this place in its queue
	// (1 = next).
	Queued        bool `json:"queued,omitempty"`
	QueuePosition int  `json:"queuePosition,omitempty"`
	// ReplacedInstanceID is the instance a start with ReplaceIfLocked
	// canceled: the holder of the lock when the start was stored.
	ReplacedInstanceID string `json:"replacedInstanceId,omitempty"`
}

// lockOptionsError checks the lock fields of a start: "" for no lock key,
// and lockTtl, queueIfLocked and replaceIfLocked need one.
func lockOptionsError(lockKey string, ttl *Duration, queue, replace bool) error {
	switch {
	case lockKey == "" && (ttl != nil || queue || replace):
		return badRequest("lockKey is required", "lockTtl, queueIfLocked and replaceIfLocked apply to the execution lock named by lockKey")
	case ttl != nil && ttl.Duration < 0:
		return badRequest("invalid lockTtl", "lockTtl must not be negative, got %s", ttl.Duration)
	}
	return nil
}

func (s *server) startInstance(w http.ResponseWriter, r *http.Request) error {
	var req StartRequest
	if _, err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	switch {
	case req.Orchestration == "":
		return badRequest("orchestration is required", `the body must name the orchestration to start: {"orchestration": "name"}`)
	case req.Timeout != nil && req.Timeout.Duration <= 0:
		return badRequest("invalid timeout", "timeout must be positive, got %s", req.Timeout.Duration)
	}
	if err := lockOptionsError(req.LockKey, req.LockTTL, req.QueueIfLocked, req.ReplaceIfLocked); err != nil {
		return err
	}
	traceParent, err := traceParentHeader(r.Header)
	if err != nil {
		return err
	}
	input, err := compactJSON(req.Input)
	if err != nil {
		return err
	}
	id := req.InstanceID
	if id == "" {
		id = uuid.NewString()
	}
	var replaced string
	opts := &duroxide.StartOptions{Version: req.Version, IdempotencyKey: req.IdempotencyKey,
		LockKey: req.LockKey, QueueIfLocked: req.QueueIfLocked, TraceParent: traceParent,
		ReplaceIfLocked: req.ReplaceIfLocked, Replaced: &replaced}
	if req.LockTTL != nil {
		opts.LockTTL = req.LockTTL.Duration
	}
	if req.StartAt != nil {
		opts.StartAt = *req.StartAt
	}
	if req.Timeout != nil {
		opts.Timeout = req.Timeout.Duration
	}
	err = s.client.StartOrchestration(r.Context(), id, req.Orchestration, input, opts)
	var dup *duroxide.DuplicateStartError
	switch {
	case errors.As(err, &dup):
		w.Header().Set("Location", "/api/instances/"+url.PathEscape(dup.InstanceID))
		purged, purgedAt := duplicatePurge(dup)
		writeJSON(w, http.StatusOK, StartResponse{InstanceID: dup.InstanceID, Duplicate: true, Purged: purged, PurgedAt: purgedAt})
		return nil
	case err != nil:
		return err
	}
	resp := StartResponse{InstanceID: id, ReplacedInstanceID: replaced}
	if req.QueueIfLocked || req.ReplaceIfLocked {
		resp.Queued, resp.QueuePosition = s.queuedAt(w, r, id)
	}
	w.Header().Set("Location", "/api/instances/"+url.PathEscape(id))
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// headerTraceParent is the W3C trace context header: a start carrying it
// records it as the instance's trace context (StartOptions.TraceParent).
const headerTraceParent = "traceparent"

// traceParentHeader returns the request's traceparent header, "" without
// one. A malformed or repeated header is a 400 naming it; its value is not
// quoted back.
func traceParentHeader(h http.Header) (string, error) {
	vs := h.Values(headerTraceParent)
	if len(vs) == 0 {
		return "", nil
	}
	if len(vs) > 1 {
		return "", badRequest("invalid traceparent header", "send one traceparent header, got %d", len(vs))
	}
	if err := duroxide.ValidateTraceParent(vs[0]); err != nil || vs[0] == "" {
		return "", badRequest("invalid traceparent header",
			"the traceparent header must be a W3C trace context, 00-<32 hex digits>-<16 hex digits>-<2 hex digits> in lowercase (256 bytes at most)")
	}
	return vs[0], nil
}

// parseWait reads the ?wait long-poll duration: a Go duration ("30s",
// "1m") or a number of seconds ("30"), capped at limit.
func parseWait(v string, limit time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, badRequest("invalid wait", "wait must be a duration like 30s or a number of seconds, got %q", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, badRequest("invalid wait", "wait must not be negative, got %q", v)
	}
	return min(d, limit), nil
}

func (s *server) getInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	wait, err := parseWait(r.URL.Query().Get("wait"), s.maxWait)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Has("waitForChange") {
		return s.waitForChange(w, r, id, q.Get("waitForChange"), q.Has("wait"), wait)
	}
	st, err := s.client.GetStatus(r.Context(), id)
	if err != nil {
		return err
	}
	if wait > 0 && !st.State.IsTerminal() {
		wctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		// Ending or running out of wait, the answer is read below.
		if _, err := s.client.WaitForOrchestration(wctx, id); err != nil && (wctx.Err() == nil || r.Context().Err() != nil) {
			return err
		}
	}
	return s.writeInspected(w, r, id)
}

// writeInspected answers with the status of instance id as Inspect reads
// it: a live instance says what it waits for; every instance its history
// size (what it keeps in the store). The ETag header is the status's.
func (s *server) writeInspected(w http.ResponseWriter, r *http.Request, id string) error {
	st, err := s.client.Inspect(r.Context(), id, &duroxide.WaitOptions{StalledAfter: s.stalledAfter})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(st.ETag))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// defaultChangeWait is how long ?waitForChange waits without ?wait.
const defaultChangeWait = 30 * time.Second

// waitForChange is GET /api/instances/{id}?waitForChange=ETAG: a long
// poll that answers once the instance's ETag differs from the one given
// (at once when it already does, or for an empty one), or when the wait
// (?wait, default 30s, at most MaxWait) runs out, with the status as it
// is then.
func (s *server) waitForChange(w http.ResponseWriter, r *http.Request, id, etag string, waitGiven bool, wait time.Duration) error {
	if len(etag) > maxETagLength {
		return badRequest("invalid waitForChange", "waitForChange is an ETag of this API, at most %d bytes", maxETagLength)
	}
	etag = strings.Trim(etag, `"`)
	if !waitGiven {
		wait = min(defaultChangeWait, s.maxWait)
	}
	wctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// A change or the end of the wait: the answer is read below.
	if _, err := s.client.WaitForStatusChange(wctx, id, etag); err != nil && (wctx.Err() == nil || r.Context().Err() != nil) {
		return err
	}
	return s.writeInspected(w, r, id)
}

// maxETagLength bounds a ?waitForChange value: an ETag is four short fields.
const maxETagLength = 256

// states maps the accepted ?status= values, lower-cased, to states.
var states = map[string]duroxide.State{
	"pending":   duroxide.StatePending,
	"running":   duroxide.StateRunning,
	"completed": duroxide.StateCompleted,
	"failed":    duroxide.StateFailed,
	"canceled":  duroxide.StateCanceled,
}

func (s *server) listInstances(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	inc, err := parseInclude(q.Get("include"), includeInput, includeOutput, includeCustomStatus)
	if err != nil {
		return err
	}
	opts := &duroxide.ListOptions{
		Orchestration:    q.Get("orchestration"),
		ParentInstanceID: q.Get("parent"),
		IDPrefix:         q.Get("prefix"),
		Cursor:           q.Get("cursor"),
		Version:          q.Get("version"),
		ErrorKind:        q.Get("errorKind"),
		WaitKind:         duroxide.WaitKind(q.Get("waitKind")),
	}
	if err := parseTimeFilters(q, opts); err != nil {
		return err
	}
	if q.Has("stalled") {
		switch v := q.Get("stalled"); v {
		case "true", "1":
			opts.Stalled, opts.StalledAfter = true, s.stalledAfter
		case "false", "0":
		default:
			return badRequest("invalid stalled", "stalled must be true or false, got %q", v)
		}
		if opts.Stalled && opts.Cursor != "" {
			return badRequest("invalid cursor", "a list of stalled instances has one page: it takes no cursor")
		}
	}
	for _, v := range strings.Split(q.Get("status"), ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		st, ok := states[strings.ToLower(v)]
		if !ok {
			return badRequest("invalid status", "status must be a comma-separated list of Pending, Running, Completed, Failed, Canceled; got %q", v)
		}
		opts.States = append(opts.States, st)
	}
	maxLimit := MaxListLimit
	if len(inc) > 0 {
		maxLimit = MaxListLimitWithPayloads
	}
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			if len(inc) > 0 {
				return badRequest("invalid limit", "with include, limit must be an integer from 1 to %d, got %q", maxLimit, v)
			}
			return badRequest("invalid limit", "limit must be an integer from 1 to %d, got %q", maxLimit, v)
		}
		limit = n
	}
	limit = min(limit, maxLimit)
	// The store is read in chunks, each trimmed to summaries before the
	// next is read, so a page of large instances never sits whole in memory.
	out := instanceListResponse{Instances: make([]instanceSummary, 0, min(limit, listChunk))}
	for {
		opts.Limit = min(listChunk, limit-len(out.Instances))
		if opts.Stalled {
			opts.Limit = limit // one page, by definition
		}
		page, err := s.client.ListInstances(r.Context(), opts)
		if err != nil {
			return err
		}
		for i := range page.Instances {
			out.Instances = append(out.Instances, summarize(&page.Instances[i], inc))
		}
		out.NextCursor = page.NextCursor
		if opts.Stalled || page.NextCursor == "" || len(out.Instances) >= limit {
			break
		}
		opts.Cursor = page.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// eventView is the API shape of a history event: the storage JSON of
// history.Event (camelCase, unused fields omitted) with timestampMs replaced
// by an RFC 3339 timestamp, and eventId, type and timestamp first.
//
// The outer fields shadow the embedded event's fields of the same JSON name
// (encoding/json prefers the shallower field), so fields added to
// history.Event later appear here without changes.
type eventView struct {
	EventID   int64             `json:"eventId"`
	Kind      history.EventKind `json:"type"`
	Timestamp string            `json:"timestamp"`
	// TimestampMs hides the embedded field: always zero, so omitted.
	TimestampMs int64 `json:"timestampMs,omitempty"`
	*history.Event
}

// timestampLayout is RFC 3339 with milliseconds, in UTC.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func newEventView(e *history.Event) eventView {
	return eventView{
		EventID:   e.EventID,
		Kind:      e.Kind,
		Timestamp: time.UnixMilli(e.TimestampMs).UTC().Format(timestampLayout),
		Event:     e,
	}
}

type historyResponse struct {
	Events []eventView `json:"events"`
}

func (s *server) getHistory(w http.ResponseWriter, r *http.Request) error {
	var exec int64
	if v := r.URL.Query().Get("execution"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("invalid execution", "execution must be an execution ID (1, 2, ...; 0 = the current one), got %q", v)
		}
		exec = n
	}
	evs, err := s.client.GetHistory(r.Context(), r.PathValue("id"), exec)
	if err != nil {
		return err
	}
	out := historyResponse{Events: make([]eventView, len(evs))}
	for i := range evs {
		out.Events[i] = newEventView(&evs[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// executionView is the API shape of provider.ExecutionInfo. Status is one
// of Running, Completed, Failed, Canceled, ContinuedAsNew.
type executionView struct {
	ExecutionID int64                 `json:"executionId"`
	Status      provider.Status       `json:"status"`
	Input       json.RawMessage       `json:"input,omitempty"`
	Output      json.RawMessage       `json:"output,omitempty"`
	Error       *history.ErrorDetails `json:"error,omitempty"`
	StartedAt   time.Time             `json:"startedAt"`
	CompletedAt *time.Time            `json:"completedAt,omitempty"`
	EventCount  int64                 `json:"eventCount"`
	// Truncated names the included fields left out because of their size.
	Truncated []string `json:"truncated,omitempty"`
}

type executionsResponse struct {
	Executions []executionView `json:"executions"`
}

func (s *server) listExecutions(w http.ResponseWriter, r *http.Request) error {
	inc, err := parseInclude(r.URL.Query().Get("include"), includeInput, includeOutput)
	if err != nil {
		return err
	}
	exs, err := s.client.ListExecutions(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := executionsResponse{Executions: make([]executionView, len(exs))}
	for i, e := range exs {
		v := executionView{ExecutionID: e.ExecutionID, Status: e.Status,
			Error: e.Error, StartedAt: e.StartedAt, EventCount: e.EventCount}
		v.Input = includePayload(includeInput, e.Input, inc, &v.Truncated)
		v.Output = includePayload(includeOutput, e.Output, inc, &v.Truncated)
		if !e.CompletedAt.IsZero() {
			v.CompletedAt = &e.CompletedAt
		}
		out.Executions[i] = v
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type acceptedResponse struct {
	InstanceID string `json:"instanceId"`
	Event      string `json:"event,omitempty"`
}

// raiseEventResponse is the answer to POST
// /api/instances/{id}/events/{name}: 202 when the event was queued, 200
// with Duplicate for a repeated Idempotency-Key (nothing delivered).
type raiseEventResponse struct {
	InstanceID string `json:"instanceId"`
	Event      string `json:"event"`
	Duplicate  bool   `json:"duplicate,omitempty"`
}

func (s *server) raiseEvent(w http.ResponseWriter, r *http.Request) error {
	id, name := r.PathValue("id"), r.PathValue("name")
	key, err := eventKeyHeader(r.Header)
	if err != nil {
		return err
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	data, err := compactJSON(b)
	if err != nil {
		return err
	}
	dup, err := s.client.RaiseEventWithOptions(r.Context(), id, name, data, &duroxide.RaiseEventOptions{IdempotencyKey: key})
	if err != nil {
		return err
	}
	if dup {
		writeJSON(w, http.StatusOK, raiseEventResponse{InstanceID: id, Event: name, Duplicate: true})
		return nil
	}
	writeJSON(w, http.StatusAccepted, raiseEventResponse{InstanceID: id, Event: name})
	return nil
}

// eventKeyHeader returns the Idempotency-Key header of a raise, "" without
// one. A repeated header, or a key over duroxide.MaxEventKeyLength or
// breaking the text rules, is a 400 that does not quote the key back.
func eventKeyHeader(h http.Header) (string, error) {
	vs := h.Values(headerIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", badRequest("invalid idempotency key", "send one Idempotency-Key header, got %d", len(vs))
	case vs[0] == "":
		return "", badRequest("invalid idempotency key", "the Idempotency-Key header is empty; leave it out for a raise without one")
	case len(vs[0]) > duroxide.MaxEventKeyLength:
		return "", badRequest("invalid idempotency key",
			"the Idempotency-Key header is %d bytes long; the limit is %d bytes", len(vs[0]), duroxide.MaxEventKeyLength)
	}
	if err := duroxide.ValidateText("Idempotency-Key header", vs[0], duroxide.MaxEventKeyLength); err != nil {
		return "", badRequest("invalid idempotency key", "the Idempotency-Key header must be UTF-8 text without control characters")
	}
	return vs[0], nil
}

// SignalWithStartRequest is the body of POST
// /api/instances/{id}/signal-with-start: the event to deliver, and the
// orchestration to start first when the instance does not exist.
type SignalWithStartRequest struct {
	Orchestration string          `json:"orchestration"`
	Input         json.RawMessage `json:"input,omitempty"`
	Version       string          `json:"version,omitempty"`
	Event         string          `json:"event"`
	Data          json.RawMessage `json:"data,omitempty"`
	// IdempotencyKey names the delivery: a repeat within 24 h delivers
	// nothing and answers 200 with duplicate true.
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	LockKey        string    `json:"lockKey,omitempty"`
	LockTTL        *Duration `json:"lockTtl,omitempty"`
	QueueIfLocked  bool      `json:"queueIfLocked,omitempty"`
	// ReplaceIfLocked: a start of the absent instance on a held lock
	// cancels the holder, as in StartRequest.
	ReplaceIfLocked bool `json:"replaceIfLocked,omitempty"`
}

// SignalWithStartResponse is the answer to POST
// /api/instances/{id}/signal-with-start: 201 when the call started the
// instance, 202 when it delivered to the existing one, 200 for a
// repeated idempotency key (nothing delivered).
type SignalWithStartResponse struct {
	InstanceID string `json:"instanceId"`
	Event      string `json:"event"`
	Started    bool   `json:"started"`
	Duplicate  bool   `json:"duplicate,omitempty"`
	// ReplacedInstanceID is the lock holder a start with ReplaceIfLocked
	// canceled.
	ReplacedInstanceID string `json:"replacedInstanceId,omitempty"`
}

func (s *server) signalWithStart(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req SignalWithStartRequest
	if _, err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	switch {
	case req.Orchestration == "":
		return badRequest("orchestration is required", "the body must name the orchestration to start when the instance does not exist")
	case req.Event == "":
		return badRequest("event is required", "the body must name the event to deliver")
	}
	if err := lockOptionsError(req.LockKey, req.LockTTL, req.QueueIfLocked, req.ReplaceIfLocked); err != nil {
		return err
	}
	traceParent, err := traceParentHeader(r.Header)
	if err != nil {
		return err
	}
	input, err := compactJSON(req.Input)
	if err != nil {
		return err
	}
	data, err := compactJSON(req.Data)
	if err != nil {
		return err
	}
	var replaced string
	opts := &duroxide.StartOptions{Version: req.Version, IdempotencyKey: req.IdempotencyKey,
		LockKey: req.LockKey, QueueIfLocked: req.QueueIfLocked, TraceParent: traceParent,
		ReplaceIfLocked: req.ReplaceIfLocked, Replaced: &replaced}
	if req.LockTTL != nil {
		opts.LockTTL = req.LockTTL.Duration
	}
	started, err := s.client.SignalWithStart(r.Context(), id, req.Orchestration, input, req.Event, data, opts)
	var dup *duroxide.DuplicateStartError
	switch {
	case errors.As(err, &dup):
		writeJSON(w, http.StatusOK, SignalWithStartResponse{InstanceID: dup.InstanceID, Event: req.Event, Duplicate: true})
		return nil
	case err != nil:
		return err
	}
	w.Header().Set("Location", "/api/instances/"+url.PathEscape(id))
	code := http.StatusAccepted
	if started {
		code = http.StatusCreated
	}
	writeJSON(w, code, SignalWithStartResponse{InstanceID: id, Event: req.Event, Started: started, ReplacedInstanceID: replaced})
	return nil
}

// valuesResponse is the answer of GET /api/instances/{id}/values.
type valuesResponse struct {
	Values []duroxide.Value `json:"values"`
}

func (s *server) listValues(w http.ResponseWriter, r *http.Request) error {
	vs, err := s.client.ListValues(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if vs == nil {
		vs = []duroxide.Value{}
	}
	writeJSON(w, http.StatusOK, valuesResponse{Values: vs})
	return nil
}

func (s *server) getValue(w http.ResponseWriter, r *http.Request) error {
	id, key := r.PathValue("id"), r.PathValue("key")
	if err := duroxide.ValidateName(key); err != nil {
		return badRequest("invalid value key", "%v", err)
	}
	vs, err := s.client.ListValues(r.Context(), id)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if v.Key == key {
			writeJSON(w, http.StatusOK, v)
			return nil
		}
	}
	return &apiError{status: http.StatusNotFound, message: "value not found",
		details: fmt.Sprintf("instance %s holds no value %q; GET /api/instances/%s/values lists them", id, key, url.PathEscape(id))}
}

type cancelRequest struct {
	Reason string `json:"reason"`
}

func (s *server) cancelInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req cancelRequest
	if _, err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if err := s.client.CancelInstance(r.Context(), id, req.Reason); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, acceptedResponse{InstanceID: id})
	return nil
}

type purgeResponse struct {
	InstanceID string `json:"instanceId"`
	Purged     bool   `json:"purged"`
}

func (s *server) purgeInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("invalid force", "force must be true or false, got %q", v)
		}
		force = b
	}
	if err := s.client.PurgeInstance(r.Context(), id, force); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, purgeResponse{InstanceID: id, Purged: true})
	return nil
}
