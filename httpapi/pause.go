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

// defaultActor names the HTTP API as the actor of a pause that names none.
const defaultActor = "http api"

func (s *server) actionContext(r *http.Request, w http.ResponseWriter) (*http.Request, ActionRequest, error) {
	var req ActionRequest
	if _, err := s.decodeBody(w, r, &req, true); err != nil {
		return nil, req, err
	}
	by := req.By
	if by == "" {
		by = defaultActor
	} else if err := duroxide.ValidateText("by", by, duroxide.MaxNameLength); err != nil {
		return nil, req, err
	}
	return r.WithContext(duroxide.WithActor(r.Context(), by)), req, nil
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
	r, req, err := s.actionContext(r, w)
	if err != nil {
		return err
	}
	if err := s.client.Rewind(r.Context(), id, req.Reason); err != nil {
		return err
	}
	return s.respondStatus(w, r, id)
}
