package httpapi

import (
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/duroxide/duroxide-go"
)

// lockRoutes are the routes of execution locks.
func (s *server) lockRoutes() []route {
	return []route{
		{"GET /api/workflows/{workflowId}/lock", s.getLock},
		{"DELETE /api/workflows/{workflowId}/lock", s.releaseLock},
		{"GET /api/locks", s.listLocks},
		{"POST /api/locks/cleanup", s.cleanupLocks},
	}
}

func (s *server) getLock(w http.ResponseWriter, r *http.Request) error {
	st, err := s.client.GetLock(r.Context(), r.PathValue("workflowId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

type releaseResponse struct {
	WorkflowID string `json:"workflowId"`
	// Released: there was a lock, and it is gone.
	Released bool `json:"released"`
}

func (s *server) releaseLock(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("workflowId")
	ok, err := s.client.ReleaseLock(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, releaseResponse{WorkflowID: id, Released: ok})
	return nil
}

type locksResponse struct {
	Locks []duroxide.LockStatus `json:"locks"`
}

func (s *server) listLocks(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.client.ListLocks(r.Context())
	if err != nil {
		return err
	}
	if ls == nil {
		ls = []duroxide.LockStatus{}
	}
	writeJSON(w, http.StatusOK, locksResponse{Locks: ls})
	return nil
}

type cleanupResponse struct {
	Cleaned int `json:"cleaned"`
}

func (s *server) cleanupLocks(w http.ResponseWriter, r *http.Request) error {
	n, err := s.client.CleanupExpiredLocks(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cleanupResponse{Cleaned: n})
	return nil
}

// lockConflictCounters count the starts answered 409 because of an
// execution lock, by kind.
type lockConflictCounters struct {
	// locked: the lock is held by a live instance (WorkflowLockedError).
	locked atomic.Int64
	// concurrent: another start took the lock at the same moment
	// (LockAcquisitionFailedError).
	concurrent atomic.Int64
}

// countLockConflict counts err if it is a lock conflict.
func (s *server) countLockConflict(err error) {
	var locked *duroxide.WorkflowLockedError
	var contended *duroxide.LockAcquisitionFailedError
	switch {
	case errors.As(err, &locked):
		s.lockConflicts.locked.Add(1)
	case errors.As(err, &contended):
		s.lockConflicts.concurrent.Add(1)
	}
}

// writeLockMetrics writes the lock metric families: the conflict counters
// (both kinds always) and locks, the number of locks in the store.
func (s *server) writeLockMetrics(m *metricsWriter, locks int64) {
	m.family("duroxide_lock_conflicts_total", "counter",
		"Starts (webhooks and POST /api/instances) refused with 409 by an execution lock, by kind (locked: held by a running instance; concurrent: taken by a simultaneous start).")
	m.sample("duroxide_lock_conflicts_total", s.lockConflicts.locked.Load(), "kind", "locked")
	m.sample("duroxide_lock_conflicts_total", s.lockConflicts.concurrent.Load(), "kind", "concurrent")
	m.family("duroxide_execution_locks", "gauge", "Execution locks in the store, stale and expired ones included.")
	m.sample("duroxide_execution_locks", locks)
}
