package provider

import (
	"context"
	"encoding/json"
	"time"
)

// Heartbeater is a store that keeps activity heartbeats: the latest
// progress report of a running attempt, on its worker-queue row, where it
// survives a crash of the worker. Both SQL stores implement it.
type Heartbeater interface {
	// HeartbeatWorkItem renews a valid worker lock to now+extendFor, as
	// RenewWorkItemLock does, and records now and details (nil keeps the
	// details recorded before) as the row's latest heartbeat. An unknown,
	// expired or deleted row returns ErrLockLost.
	HeartbeatWorkItem(ctx context.Context, lockToken string, extendFor time.Duration, details json.RawMessage) error
	// WorkItemHeartbeat returns the latest heartbeat recorded on the row
	// lockToken holds: by this delivery, or by an earlier delivery of the
	// same row (one whose worker crashed). The zero WorkHeartbeat when none
	// was recorded; ErrLockLost when the lock is not held.
	WorkItemHeartbeat(ctx context.Context, lockToken string) (WorkHeartbeat, error)
}

// WorkHeartbeat is the latest heartbeat of an activity attempt.
type WorkHeartbeat struct {
	// At is when it was recorded (zero: never).
	At time.Time
	// Details are the details it carried (nil: none).
	Details json.RawMessage
}

// Router is a store that knows which runtimes serve which work, so the
// work nobody serves can be reported and, after a while, failed. Both SQL
// stores implement it.
type Router interface {
	// AnnounceRoutes records that r.WorkerID serves r's activities and
	// queues until now+ttl (replacing what it announced before). A runtime
	// announces on start and again before the ttl lapses.
	AnnounceRoutes(ctx context.Context, r WorkerRoutes, ttl time.Duration) error
	// WithdrawRoutes forgets what workerID announced (a runtime shutting
	// down). Unknown IDs are ignored.
	WithdrawRoutes(ctx context.Context, workerID string) error
	// FetchUnservedWorkItems locks, as FetchWorkItems does, up to max
	// visible, unlocked rows enqueued at least olderThan ago that no live
	// announcement serves (by activity name and queue), so the caller can
	// fail them. It counts no attempt. While no announcement is live at
	// all, nothing counts as unserved (nothing is known).
	FetchUnservedWorkItems(ctx context.Context, olderThan, lockTimeout time.Duration, max int) ([]*WorkItemLease, error)
	// FetchUnservedOrchestrationItems locks, as FetchOrchestrationItems
	// does, up to max instances ready for at least olderThan whose
	// orchestration no live announcement registers
	// (WorkerRoutes.Orchestrations, and for an instance pinned to a
	// version, WorkerRoutes.OrchestrationVersions; an announcement without
	// a list registers every name), so the caller can fail them. It counts no
	// delivery (AttemptCount is what earlier fetches counted). While no
	// announcement is live, nothing counts as unserved; an instance
	// without a row or a name never does.
	FetchUnservedOrchestrationItems(ctx context.Context, olderThan, lockTimeout time.Duration, max int) ([]*OrchestrationItem, error)
}

// WorkerRoutes is what one runtime serves.
type WorkerRoutes struct {
	WorkerID string
	// Activities are the activity names it registers.
	Activities []string
	// Queues are the queues it serves ("" is the default queue).
	Queues []string
	// Orchestrations are the orchestration names it registers (it fetches
	// the turns of those only: FetchOptions.Orchestrations); nil announces
	// none, and the runtime counts as serving every orchestration.
	Orchestrations []string
	// OrchestrationVersions are the versions it registers of its
	// orchestrations, as FetchOptions.OrchestrationVersions: an instance
	// pinned to a version no live runtime registers is unserved. A name
	// without an entry, and every name when nil, is announced in every
	// version.
	OrchestrationVersions map[string][]string
}
