package provider

import (
	"context"
	"encoding/json"
	"time"
)

// The optional capabilities below serve operations at volume: retention
// (Leaser, ExecutionPruner) and bulk actions (BulkJobStore). Both SQL
// stores implement them; callers test with a type assertion, as for the
// capabilities in optional.go.

// Leaser is a store that hands out named leases, so that one process of
// many sharing the store does a periodic job at a time (the runtime's
// retention sweep takes the lease "duroxide/retention").
type Leaser interface {
	// AcquireLease takes the lease name for owner until now + ttl, or
	// extends it when owner already holds it. It reports false, changing
	// nothing, while another owner holds it unexpired. Empty name or
	// owner, or a ttl below one millisecond, is ErrInvalidArgument.
	AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up if owner holds it; otherwise it
	// does nothing.
	ReleaseLease(ctx context.Context, name, owner string) error
}

// ExecutionPruner is a store that can delete the old executions of
// ContinueAsNew chains.
type ExecutionPruner interface {
	// PruneExecutions deletes, for at most opts.Limit instances, every
	// execution (row and history) but the last opts.Keep of the
	// instance, in one transaction. The current execution is always
	// kept. With opts.DryRun it deletes nothing and counts what it would
	// delete. Keep below 1 is ErrInvalidArgument.
	PruneExecutions(ctx context.Context, opts PruneExecutionsOptions) (*PruneExecutionsResult, error)
}

// PruneExecutionsOptions tunes ExecutionPruner.PruneExecutions.
type PruneExecutionsOptions struct {
	// Keep is how many of the newest executions of each instance stay
	// (>= 1).
	Keep int
	// Limit bounds the instances pruned by one call: 0 means 100; at
	// most 1000.
	Limit int
	// DryRun counts without deleting.
	DryRun bool
}

// PruneExecutionsResult counts what PruneExecutions deleted (or, in a
// dry run, would delete).
type PruneExecutionsResult struct {
	// InstanceIDs are the instances whose old executions were pruned.
	InstanceIDs []string
	Executions  int64
	Events      int64
	// More reports that more instances have executions to prune than
	// Limit allowed.
	More bool
}

// BulkJobStore is a store that keeps the records of bulk actions (see
// duroxide.Client.StartBulkAction): a job's specification, opaque to the
// store, its cursor and progress, and a lease naming the process that
// runs it, so that a job outlives the process that started it and is
// continued, from its cursor, by another.
type BulkJobStore interface {
	// CreateBulkJob stores a new job in state BulkJobPending with no
	// owner. ErrInstanceExists if job.ID is taken; ErrInvalidArgument for
	// an empty or over-long ID (the instance ID rules apply).
	CreateBulkJob(ctx context.Context, job *BulkJob) error
	// GetBulkJob returns one job, or ErrNotFound.
	GetBulkJob(ctx context.Context, id string) (*BulkJob, error)
	// ListBulkJobs returns jobs, newest first, at most opts.Limit (0
	// means 100; at most 1000); with opts.Unfinished only those not
	// Done, Failed or Canceled.
	ListBulkJobs(ctx context.Context, opts BulkJobListOptions) ([]BulkJob, error)
	// ClaimBulkJob makes owner the job's runner until now + ttl (or
	// extends its lease) and returns the job. ErrNotFound for an unknown
	// job; ErrLockLost while another owner's lease is unexpired;
	// ErrInstanceTerminal (changing nothing) for a finished job.
	ClaimBulkJob(ctx context.Context, id, owner string, ttl time.Duration) (*BulkJob, error)
	// UpdateBulkJob records the progress of a job whose lease owner holds
	// (unexpired), extends the lease to now + ttl, and, when u.State is a
	// final state, releases it. ErrLockLost, changing nothing, when owner
	// does not hold the lease.
	//
	// On a job canceled meanwhile (CancelBulkJob), it records u's cursor,
	// counts and error but keeps the state Canceled, releases the lease
	// and returns ErrBulkJobCanceled, so that the runner stops; when owner
	// no longer holds the lease it records nothing and still returns
	// ErrBulkJobCanceled.
	UpdateBulkJob(ctx context.Context, id, owner string, ttl time.Duration, u BulkJobUpdate) error
	// CancelBulkJob sets a Pending or Running job Canceled and returns it.
	// A runner holding the job's unexpired lease keeps it, so that its
	// next UpdateBulkJob records the counts it reached (and learns of the
	// cancellation, ErrBulkJobCanceled); an expired lease is released.
	// ErrNotFound for an unknown job; ErrStateConflict, changing nothing,
	// for a job already Done, Failed or Canceled.
	CancelBulkJob(ctx context.Context, id string) (*BulkJob, error)
}

// BulkJobState is the state of a bulk job.
type BulkJobState string

// Bulk job states.
const (
	BulkJobPending  BulkJobState = "Pending"
	BulkJobRunning  BulkJobState = "Running"
	BulkJobDone     BulkJobState = "Done"
	BulkJobFailed   BulkJobState = "Failed"
	BulkJobCanceled BulkJobState = "Canceled"
)

// IsFinal reports whether s is Done, Failed or Canceled.
func (s BulkJobState) IsFinal() bool {
	return s == BulkJobDone || s == BulkJobFailed || s == BulkJobCanceled
}

// Valid reports whether s is one of the states above.
func (s BulkJobState) Valid() bool {
	return s == BulkJobPending || s == BulkJobRunning || s.IsFinal()
}

// BulkJob is the stored record of a bulk action.
type BulkJob struct {
	ID string
	// Spec is what the job does, as its runner encoded it; the store
	// keeps it as it is (at most 1 MiB).
	Spec  json.RawMessage
	State BulkJobState
	// Cursor is where the runner continues: opaque to the store.
	Cursor string
	// Progress counts.
	Total, Processed, Succeeded, Skipped, Failed int64
	// Error is why the job failed, or the last item error.
	Error string
	// Owner holds the lease until LeaseUntil ("" and zero: nobody). A
	// job that has ended (Done, Failed, Canceled) has no owner once its
	// lease has expired: a job canceled while its runner held the lease
	// names the runner until it records its last progress or, if it
	// died, until the lease runs out.
	Owner      string
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// BulkJobUpdate is the progress UpdateBulkJob records.
type BulkJobUpdate struct {
	State                                        BulkJobState
	Cursor                                       string
	Total, Processed, Succeeded, Skipped, Failed int64
	Error                                        string
}

// BulkJobListOptions filters ListBulkJobs.
type BulkJobListOptions struct {
	Unfinished bool
	Limit      int
}
