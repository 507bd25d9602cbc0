package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
)

// bulkRoutes are the routes of bulk actions: a preview (dryRun) or a job,
// and the jobs' progress.
func (s *server) bulkRoutes() []route {
	return []route{
		{"POST /api/bulk", s.startBulk},
		{"GET /api/bulk", s.listBulk},
		{"GET /api/bulk/{job}", s.getBulk},
		{"POST /api/bulk/{job}/cancel", s.cancelBulk},
	}
}

// BulkFilter is the filter of a bulk action: the filters of
// GET /api/instances (duroxide.ListOptions), as a JSON object.
type BulkFilter struct {
	// States are instance states (Pending, Running, Completed, Failed,
	// Canceled; any case).
	States         []string   `json:"states,omitempty"`
	Orchestration  string     `json:"orchestration,omitempty"`
	Version        string     `json:"version,omitempty"`
	Parent         string     `json:"parent,omitempty"`
	Prefix         string     `json:"prefix,omitempty"`
	CreatedAfter   *time.Time `json:"createdAfter,omitempty"`
	CreatedBefore  *time.Time `json:"createdBefore,omitempty"`
	FinishedAfter  *time.Time `json:"finishedAfter,omitempty"`
	FinishedBefore *time.Time `json:"finishedBefore,omitempty"`
	ErrorKind      string     `json:"errorKind,omitempty"`
	WaitKind       string     `json:"waitKind,omitempty"`
	// Stalled keeps stalled instances (the server's stall threshold).
	Stalled bool `json:"stalled,omitempty"`
}

// BulkRequest is the body of POST /api/bulk.
type BulkRequest struct {
	// Action is cancel, purge, raiseEvent, rewind, pause or resume.
	Action string     `json:"action"`
	Filter BulkFilter `json:"filter"`
	// DryRun previews: the count and the first instances, nothing changed.
	DryRun bool   `json:"dryRun,omitempty"`
	Reason string `json:"reason,omitempty"`
	// By names who asks (recorded by pause; "http api" when empty).
	By        string          `json:"by,omitempty"`
	EventName string          `json:"eventName,omitempty"`
	EventData json.RawMessage `json:"eventData,omitempty"`
	// Force lets purge delete live instances.
	Force     bool `json:"force,omitempty"`
	ChunkSize int  `json:"chunkSize,omitempty"`
}

// BulkJobView is a bulk job's progress (GET /api/bulk/{job}).
type BulkJobView struct {
	ID        string    `json:"id"`
	Action    string    `json:"action"`
	State     string    `json:"state"`
	Total     int64     `json:"total"`
	Processed int64     `json:"processed"`
	Succeeded int64     `json:"succeeded"`
	Skipped   int64     `json:"skipped"`
	Failed    int64     `json:"failed"`
	Error     string    `json:"error,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// BulkResponse answers POST /api/bulk: 200 for a dry run, 202 with the
// job otherwise.
type BulkResponse struct {
	DryRun    bool              `json:"dryRun,omitempty"`
	Count     int64             `json:"count"`
	Instances []instanceSummary `json:"instances"`
	Job       *BulkJobView      `json:"job,omitempty"`
}

// bulkJobsResponse answers GET /api/bulk.
type bulkJobsResponse struct {
	Jobs []BulkJobView `json:"jobs"`
}

func viewOf(j *duroxide.BulkJob) BulkJobView {
	return BulkJobView{ID: j.ID, Action: string(j.Action), State: string(j.State), Total: j.Total, Processed: j.Processed,
		Succeeded: j.Succeeded, Skipped: j.Skipped, Failed: j.Failed, Error: j.Error, Owner: j.Owner,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

// listOptions turns f into the Client's filter.
func (f *BulkFilter) listOptions(stalledAfter time.Duration) (duroxide.ListOptions, error) {
	o := duroxide.ListOptions{Orchestration: f.Orchestration, Version: f.Version, ParentInstanceID: f.Parent,
		IDPrefix: f.Prefix, ErrorKind: f.ErrorKind, WaitKind: duroxide.WaitKind(f.WaitKind), Stalled: f.Stalled}
	if f.Stalled {
		o.StalledAfter = stalledAfter
	}
	for _, v := range f.States {
		st, ok := states[strings.ToLower(v)]
		if !ok {
			return o, badRequest("invalid state", "states are Pending, Running, Completed, Failed, Canceled; got %q", v)
		}
		o.States = append(o.States, st)
	}
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{f.CreatedAfter, &o.CreatedAfter}, {f.CreatedBefore, &o.CreatedBefore},
		{f.FinishedAfter, &o.FinishedAfter}, {f.FinishedBefore, &o.FinishedBefore}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return o, nil
}

func (s *server) startBulk(w http.ResponseWriter, r *http.Request) error {
	var req BulkRequest
	if _, err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Action == "" {
		return badRequest("action is required", `the body must name the action: {"action": "cancel", "filter": {...}}`)
	}
	filter, err := req.Filter.listOptions(s.stalledAfter)
	if err != nil {
		return err
	}
	by := req.By
	if by == "" {
		by = defaultActor
	}
	res, err := s.client.BulkAction(r.Context(), &duroxide.BulkRequest{Action: duroxide.BulkAction(req.Action),
		Filter: filter, DryRun: req.DryRun, Reason: req.Reason, By: by, EventName: req.EventName,
		EventData: req.EventData, Force: req.Force, ChunkSize: req.ChunkSize})
	if err != nil {
		return err
	}
	out := BulkResponse{DryRun: res.DryRun, Count: res.Count, Instances: make([]instanceSummary, 0, len(res.Instances))}
	for i := range res.Instances {
		out.Instances = append(out.Instances, summarize(&res.Instances[i], nil))
	}
	if res.Job == nil {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	v := viewOf(res.Job)
	out.Job = &v
	if s.runtime != nil {
		s.runtime.WakeBulkJobs()
	}
	w.Header().Set("Location", "/api/bulk/"+url.PathEscape(v.ID))
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func (s *server) getBulk(w http.ResponseWriter, r *http.Request) error {
	j, err := s.client.GetBulkJob(r.Context(), r.PathValue("job"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewOf(j))
	return nil
}

// cancelBulk cancels a Pending or Running job (409 for one that ended)
// and answers it, Canceled.
func (s *server) cancelBulk(w http.ResponseWriter, r *http.Request) error {
	j, err := s.client.CancelBulkJob(r.Context(), r.PathValue("job"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewOf(j))
	return nil
}

func (s *server) listBulk(w http.ResponseWriter, r *http.Request) error {
	jobs, err := s.client.ListBulkJobs(r.Context(), false)
	if err != nil {
		return err
	}
	out := bulkJobsResponse{Jobs: make([]BulkJobView, 0, len(jobs))}
	for i := range jobs {
		out.Jobs = append(out.Jobs, viewOf(&jobs[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseTimeFilters reads the time-range filters of GET /api/instances
// (RFC 3339) into opts.
func parseTimeFilters(q url.Values, opts *duroxide.ListOptions) error {
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"createdAfter", &opts.CreatedAfter}, {"createdBefore", &opts.CreatedBefore},
		{"finishedAfter", &opts.FinishedAfter}, {"finishedBefore", &opts.FinishedBefore}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return badRequest("invalid "+f.name, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", f.name, v)
		}
		*f.dst = t
	}
	return nil
}
