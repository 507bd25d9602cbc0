package httpapi

import (
	"net/http"

	"github.com/duroxide/duroxide-go"
)

// pauseRoutes are the routes that hold, resume and rewind an instance.
func (s *server) pauseRoutes() []route {
	return []route{
		{"POST /api/instances/{id}/pause", s.pauseInstance},
		{"POST /api/instances/{id}/resume", s.resumeInstance},
		{"POST /api/instances/{id}/rewind", s.rewindInstance},
	}
}

// ActionRequest is the body of POST /api/instances/{id}/pause and
// /rewind (both optional).
type ActionRequest struct {
	// Reason is recorded with a pause (and shown with it).
	Reason string `json:"reason,omitempty"`
	// By names who acts, recorded with a pause ("http api" when empty).
	By string `json:"by,omitempty"`
}

// RewindRequest is the body of POST /api/instances/{id}/rewind
// (optional).
type RewindRequest struct {
	// Reason says why; a forced rewind records it in the error that ends
	// the Running execution.
	Reason string `json:"reason,omitempty"`
	// By names who acts ("http api" when empty); a forced rewind records
	// it with the reason.
	By string `json:"by,omitempty"`
	// Force rewinds a stuck Running instance (duroxide.RewindOptions.Force).
	Force bool `json:"force,omitempty"`
}

// defaultActor names the HTTP API as the actor of a pause that names none.
const defaultActor = "http api"

func (s *server) actionContext(r *http.Request, w http.ResponseWriter) (*http.Request, ActionRequest, error) {
	var req ActionRequest
	if _, err := s.decodeBody(w, r, &req, true); err != nil {
		return nil, req, err
	}
	r, err := withActor(r, req.By)
	return r, req, err
}

// withActor names by ("http api" when empty) as the actor of r.
func withActor(r *http.Request, by string) (*http.Request, error) {
	if by == "" {
		by = defaultActor
	} else if err := duroxide.ValidateText("by", by, duroxide.MaxNameLength); err != nil {
		return nil, err
	}
	return r.WithContext(duroxide.WithActor(r.Context(), by)), nil
}

// respondStatus answers 200 with the instance's status after an action.
func (s *server) respondStatus(w http.ResponseWriter, r *http.Request, id string) error {
	st, err := s.client.GetStatus(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *server) pauseInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	r, req, err := s.actionContext(r, w)
	if err != nil {
		return err
	}
	if err := s.client.Pause(r.Context(), id, req.Reason); err != nil {
		return err
	}
	return s.respondStatus(w, r, id)
}

func (s *server) resumeInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req struct{}
	if _, err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if err := s.client.Resume(r.Context(), id); err != nil {
		return err
	}
	return s.respondStatus(w, r, id)
}

func (s *server) rewindInstance(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var req RewindRequest
	if _, err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	r, err := withActor(r, req.By)
	if err != nil {
		return err
	}
	if err := s.client.RewindWithOptions(r.Context(), id, &duroxide.RewindOptions{Reason: req.Reason, Force: req.Force}); err != nil {
		return err
	}
	return s.respondStatus(w, r, id)
}
