package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
)

// scheduleRoutes are the routes of schedules (duroxide.Client's schedule
// calls).
func (s *server) scheduleRoutes() []route {
	return []route{
		{"GET /api/schedules", s.listSchedules},
		{"POST /api/schedules", s.createSchedule},
		{"GET /api/schedules/{scheduleId}", s.getSchedule},
		{"PUT /api/schedules/{scheduleId}", s.updateSchedule},
		{"DELETE /api/schedules/{scheduleId}", s.deleteSchedule},
		{"POST /api/schedules/{scheduleId}/pause", s.pauseSchedule},
		{"POST /api/schedules/{scheduleId}/resume", s.resumeSchedule},
		{"POST /api/schedules/{scheduleId}/trigger", s.triggerSchedule},
	}
}

// scheduleSpec is the definition of a schedule as the API reads and
// answers it: the common part of scheduleRequest and scheduleView. Overlap
// and catchUp are never empty in an answer (the defaults are filled in).
type scheduleSpec struct {
	Cron          string          `json:"cron,omitempty"`
	TimeZone      string          `json:"timeZone,omitempty"`
	Interval      *Duration       `json:"interval,omitempty"`
	Start         *time.Time      `json:"start,omitempty"`
	Orchestration string          `json:"orchestration"`
	Version       string          `json:"version,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Overlap       string          `json:"overlap,omitempty"`
	LockKey       string          `json:"lockKey,omitempty"`
	LockTTL       *Duration       `json:"lockTtl,omitempty"`
	CatchUp       string          `json:"catchUp,omitempty"`
	CatchUpWindow *Duration       `json:"catchUpWindow,omitempty"`
}

// scheduleRequest is the body of POST /api/schedules (with id and paused)
// and PUT /api/schedules/{scheduleId} (without).
type scheduleRequest struct {
	ID string `json:"id,omitempty"`
	scheduleSpec
	Paused bool `json:"paused,omitempty"`
}

func (q *scheduleSpec) definition() *duroxide.ScheduleDefinition {
	d := &duroxide.ScheduleDefinition{Cron: q.Cron, TimeZone: q.TimeZone, Orchestration: q.Orchestration,
		Version: q.Version, Input: q.Input, Overlap: duroxide.ScheduleOverlap(q.Overlap), LockKey: q.LockKey,
		CatchUp: duroxide.ScheduleCatchUp(q.CatchUp)}
	if q.Interval != nil {
		d.Interval = q.Interval.Duration
	}
	if q.Start != nil {
		d.Start = *q.Start
	}
	if q.LockTTL != nil {
		d.LockTTL = q.LockTTL.Duration
	}
	if q.CatchUpWindow != nil {
		d.CatchUpWindow = q.CatchUpWindow.Duration
	}
	return d
}

// specOf is the API form of a definition.
func specOf(d *duroxide.ScheduleDefinition) scheduleSpec {
	return scheduleSpec{Cron: d.Cron, TimeZone: d.TimeZone, Interval: optDuration(d.Interval), Start: optTime(d.Start),
		Orchestration: d.Orchestration, Version: d.Version, Input: d.Input, Overlap: string(d.Overlap), LockKey: d.LockKey,
		LockTTL: optDuration(d.LockTTL), CatchUp: string(d.CatchUp), CatchUpWindow: optDuration(d.CatchUpWindow)}
}

// scheduleView is a schedule as the API answers it, defaults filled in.
type scheduleView struct {
	ID string `json:"id"`
	scheduleSpec
	Paused         bool       `json:"paused"`
	NextFireAt     *time.Time `json:"nextFireAt"`
	LastFireAt     *time.Time `json:"lastFireAt"`
	LastInstanceID string     `json:"lastInstanceId,omitempty"`
	LastOutcome    string     `json:"lastOutcome,omitempty"`
	Revision       int64      `json:"revision"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func optDuration(d time.Duration) *Duration {
	if d == 0 {
		return nil
	}
	return &Duration{d}
}

func viewSchedule(in *duroxide.ScheduleInfo) scheduleView {
	return scheduleView{ID: in.ID, scheduleSpec: specOf(&in.ScheduleDefinition), Paused: in.Paused,
		NextFireAt: optTime(in.NextFireAt), LastFireAt: optTime(in.LastFireAt), LastInstanceID: in.LastInstanceID,
		LastOutcome: in.LastOutcome, Revision: in.Revision, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt}
}

type schedulesResponse struct {
	Schedules  []scheduleView `json:"schedules"`
	NextCursor string         `json:"nextCursor,omitempty"`
}

// listSchedules answers a page of schedules: ?limit (default
// duroxide.DefaultScheduleListLimit, a larger one than
// duroxide.MaxScheduleListLimit reads that many) and ?cursor.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	opts := &duroxide.ScheduleListOptions{Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil && errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
			n, err = duroxide.MaxScheduleListLimit, nil // a huge limit reads the most a page holds
		}
		if err != nil || n < 1 {
			return badRequest("invalid limit", "limit must be a positive integer, got %q", v)
		}
		opts.Limit = n
	}
	page, err := s.client.ListSchedulesPage(r.Context(), opts)
	if err != nil {
		if errors.Is(err, duroxide.ErrInvalidArgument) && opts.Cursor != "" {
			return badRequest("invalid cursor", "cursor must be the nextCursor of a previous page, got %q", opts.Cursor)
		}
		return err
	}
	out := schedulesResponse{Schedules: make([]scheduleView, len(page.Schedules)), NextCursor: page.NextCursor}
	for i := range page.Schedules {
		out.Schedules[i] = viewSchedule(&page.Schedules[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var q scheduleRequest
	if _, err := s.decodeBody(w, r, &q, false); err != nil {
		return err
	}
	if q.ID == "" {
		return badRequest("invalid argument", "id is required")
	}
	info, err := s.client.CreateSchedule(r.Context(), q.ID, q.definition(), q.Paused)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewSchedule(info))
	return nil
}

func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	info, err := s.client.GetSchedule(r.Context(), r.PathValue("scheduleId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(info))
	return nil
}

func (s *server) updateSchedule(w http.ResponseWriter, r *http.Request) error {
	var q scheduleRequest
	if _, err := s.decodeBody(w, r, &q, false); err != nil {
		return err
	}
	if q.ID != "" || q.Paused {
		return badRequest("invalid argument", "id and paused cannot be changed here: the ID is in the path; use /pause and /resume")
	}
	info, err := s.client.UpdateSchedule(r.Context(), r.PathValue("scheduleId"), q.definition())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(info))
	return nil
}

type scheduleDeleteResponse struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("scheduleId")
	ok, err := s.client.DeleteSchedule(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleDeleteResponse{ID: id, Deleted: ok})
	return nil
}

func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	info, err := s.client.PauseSchedule(r.Context(), r.PathValue("scheduleId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(info))
	return nil
}

func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	info, err := s.client.ResumeSchedule(r.Context(), r.PathValue("scheduleId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(info))
	return nil
}

type scheduleFireResponse struct {
	FireAt             time.Time `json:"fireAt"`
	InstanceID         string    `json:"instanceId,omitempty"`
	Outcome            string    `json:"outcome"`
	ReplacedInstanceID string    `json:"replacedInstanceId,omitempty"`
}

func (s *server) triggerSchedule(w http.ResponseWriter, r *http.Request) error {
	f, err := s.client.TriggerSchedule(r.Context(), r.PathValue("scheduleId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleFireResponse{FireAt: f.FireAt, InstanceID: f.InstanceID, Outcome: f.Outcome,
		ReplacedInstanceID: f.ReplacedInstanceID})
	return nil
}
