package provider

import (
	"context"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// PauseInfo says who paused an instance, why and when.
type PauseInfo struct {
	// Reason is the text given with the pause (may be empty).
	Reason string `json:"reason,omitempty"`
	// By names who paused it (may be empty: the Go API does not know).
	By string `json:"by,omitempty"`
	// At is when the pause was stored, by the store's clock.
	At time.Time `json:"at"`
}

// PausedUntil is the expiry a pause gives the instance lock it holds: far
// enough to never pass, near enough to encode as a JSON time.
var PausedUntil = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Pauser is a store that can hold an instance: a paused instance takes no
// turn and starts no activity until it is resumed. Both SQL stores
// implement it; the Client's Pause and Resume need it.
//
// A pause holds the instance's orchestration lock with a lock that never
// expires, so every path that takes a turn (a fetch, a work ack's taken
// turn or fused step) skips the instance, and it hides the instance's
// activities that no worker holds. What arrives meanwhile (activity
// results, events, timers that fire) queues and waits. A turn fetched
// before the pause loses its lock: its ack fails with ErrLockLost and
// writes nothing, its messages are given back with their delivery
// uncounted, and the turn is taken again after the resume. An
// activity already running finishes and its result waits; an activity
// whose worker gives it back while the instance is paused may run again.
type Pauser interface {
	// PauseInstance pauses instanceID with info (its At is set by the
	// store). ErrNotFound if the instance does not exist;
	// ErrStateConflict if it is Completed, Failed or Canceled;
	// ErrAlreadyPaused if it is paused.
	PauseInstance(ctx context.Context, instanceID string, info PauseInfo) error
	// ResumeInstance lifts the pause of instanceID: its queued messages
	// and held activities become fetchable at once. ErrNotFound if the
	// instance does not exist; ErrNotPaused if it is not paused.
	ResumeInstance(ctx context.Context, instanceID string) error
	// GetPause returns the pause of instanceID, or nil when it is not
	// paused (or does not exist).
	GetPause(ctx context.Context, instanceID string) (*PauseInfo, error)
	// ListPauses returns the pauses of those of instanceIDs that are
	// paused (at most 1000 IDs).
	ListPauses(ctx context.Context, instanceIDs []string) (map[string]PauseInfo, error)
}

// RewindRequest is a new execution that takes over from a Failed or
// Canceled one: its first events, copied from the old execution up to the
// point it resumes from, and the messages and activities that let it go
// on from there. The runtime builds it (internal/replay); the store writes
// it as it is.
type RewindRequest struct {
	// InstanceID is the instance rewound.
	InstanceID string
	// FromExecutionID is the execution rewound: it must still be the
	// instance's current execution, and the instance Failed or Canceled,
	// or the store returns ErrStateConflict.
	FromExecutionID int64
	// ExecutionID is the new execution, FromExecutionID+1.
	ExecutionID int64
	// History is the new execution's history, event IDs 1..n. Empty
	// starts it from scratch (Messages then holds its start).
	History []history.Event
	// Messages are queued for the new execution (timers with their
	// VisibleAt). None may create an instance.
	Messages []OrchestratorMessage
	// Activities are queued in the worker queue, each an ActivityExecute
	// of the new execution. None is leased.
	Activities []WorkerMessage
	// End, when set, rewinds a live instance instead: the instance must be
	// Running (not Pending, not paused, no turn in progress: its instance
	// lock free or expired, no cancel pending: no
	// OrchestrationCancelRequested in FromExecutionID's history and no
	// CancelInstance message queued, but for an instance timeout not yet
	// due) at FromExecutionID, or the store returns ErrStateConflict.
	// End, a terminal OrchestrationFailed whose EventID follows the
	// execution's last event (else ErrStateConflict: a turn committed
	// since the history was read), is appended to FromExecutionID,
	// which ends Canceled with End's error; its worker rows are deleted (a
	// worker running one loses its lock, as for a canceled activity). Its
	// queued messages stay: events raised go to the new execution, the
	// results of the old one are dropped as any stale result is.
	End *history.Event
}

// Rewinder is a store that can rewind a finished instance (or a live
// one, RewindRequest.End): in one
// transaction it checks RewindRequest.FromExecutionID, adds the new
// execution with its history, makes the instance Running again (its
// output and error cleared), deletes its queued CancelInstance messages
// (its instance timeout: a rewound instance has none) and queues the
// messages and activities.
// Earlier executions stay as they were. Both SQL stores implement it.
type Rewinder interface {
	// RewindInstance writes req. ErrNotFound if the instance does not
	// exist; ErrStateConflict if it is not Failed or Canceled (with End:
	// not Running, paused, in a turn, or its cancel pending) or its current execution is not
	// req.FromExecutionID; ErrInvalidArgument for a malformed request.
	RewindInstance(ctx context.Context, req *RewindRequest) error
}
