package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// The maintenance calls (provider.Leaser, provider.ExecutionPruner,
// provider.BulkJobStore) are written here once over MaintTx: each store
// maps the statements (MQuery) to its SQL text and runs each call in one
// of its transactions.

// MQuery names one statement of the maintenance calls; the arguments are
// listed in the order the comment gives.
type MQuery int

// The maintenance statements.
const (
	// MLeaseAcquire (name, owner, expires_at, now) inserts the lease, or
	// takes it over when owner holds it or it expired at or before now;
	// one row affected when taken.
	MLeaseAcquire MQuery = iota
	// MLeaseRelease (name, owner) deletes the lease if owner holds it.
	MLeaseRelease
	// MJobInsert (job_id, spec, state, now) inserts a job; a taken ID is
	// a unique violation (the store maps it to ErrInstanceExists).
	MJobInsert
	// MJobGet (job_id) returns one job as ScanBulkJob reads it.
	MJobGet
	// MJobList (limit) and MJobListUnfinished (limit) return jobs, newest
	// first; the second only Pending and Running ones.
	MJobList
	MJobListUnfinished
	// MJobClaim (job_id, owner, lease_until, now) makes owner the runner
	// of an unfinished job whose lease is free, expired at or before now,
	// or already owner's, and sets a Pending job Running.
	MJobClaim
	// MJobUpdate (job_id, owner, now, lease_until, state, cursor, total,
	// processed, succeeded, skipped, failed, error) records progress if
	// owner holds an unexpired lease of a job not Canceled; lease_until 0
	// releases it (owner set to '').
	MJobUpdate
	// MJobCancel (job_id, now) sets a Pending or Running job Canceled,
	// releasing its lease unless it is unexpired at now.
	MJobCancel
	// MJobCanceledProgress (job_id, owner, now, cursor, total, processed,
	// succeeded, skipped, failed, error) records the last progress of a
	// Canceled job that owner still holds, releasing the lease.
	MJobCanceledProgress
	// MPruneCandidates (keep, limit) returns instance_id of instances
	// with an execution older than their last keep, at most limit, in
	// seq order.
	MPruneCandidates
	// MPruneCountExecutions and MPruneCountEvents (instance_id,
	// last_execution_to_delete) count what pruning would delete;
	// MPruneDeleteHistory and MPruneDeleteExecutions delete it.
	MPruneCountExecutions
	MPruneCountEvents
	MPruneDeleteHistory
	MPruneDeleteExecutions
	// MInstanceCurrent (instance_id) returns current_execution_id.
	MInstanceCurrent

	// NumMQueries is the size of a store's table of maintenance statements.
	NumMQueries
)

// MaintTx runs maintenance statements in one transaction of a store.
// Errors come back untranslated, except no rows (ErrNoRows) and a unique
// violation of an insert, which is provider.ErrInstanceExists.
type MaintTx interface {
	Exec(q MQuery, args ...any) (int64, error)
	Each(q MQuery, scan func(Row) error, args ...any) error
}

// MaxBulkJobSpec bounds a job's stored spec.
const MaxBulkJobSpec = 1 << 20

// CheckLeaseArgs validates AcquireLease's arguments.
func CheckLeaseArgs(name, owner string, ttl time.Duration) error {
	switch {
	case name == "" || owner == "":
		return sqlenc.Invalid("empty lease name or owner")
	case ttl < time.Millisecond:
		return sqlenc.Invalid("lease TTL %s is below 1ms", ttl)
	}
	return nil
}

// AcquireLease is the body of provider.Leaser.AcquireLease at store time
// now (epoch ms).
func AcquireLease(tx MaintTx, name, owner string, ttl time.Duration, now int64) (bool, error) {
	n, err := tx.Exec(MLeaseAcquire, name, owner, now+ttl.Milliseconds(), now)
	return n > 0, err
}

// ReleaseLease is the body of provider.Leaser.ReleaseLease.
func ReleaseLease(tx MaintTx, name, owner string) error {
	_, err := tx.Exec(MLeaseRelease, name, owner)
	return err
}

// CheckBulkJob validates a job CreateBulkJob is to store.
func CheckBulkJob(job *provider.BulkJob) error {
	switch {
	case job == nil:
		return sqlenc.Invalid("nil job")
	case job.ID == "":
		return sqlenc.Invalid("empty job ID")
	case len(job.ID) > 256:
		return sqlenc.Invalid("job ID longer than 256 bytes")
	case len(job.Spec) == 0:
		return sqlenc.Invalid("empty job spec")
	case len(job.Spec) > MaxBulkJobSpec:
		return sqlenc.Invalid("job spec over %d bytes", MaxBulkJobSpec)
	}
	return nil
}

// CreateBulkJob is the body of provider.BulkJobStore.CreateBulkJob.
func CreateBulkJob(tx MaintTx, job *provider.BulkJob, now int64) error {
	_, err := tx.Exec(MJobInsert, job.ID, string(job.Spec), string(provider.BulkJobPending), now)
	return err
}

// BulkJobColumns is the column list ScanBulkJob reads, for the stores'
// SQL text.
const BulkJobColumns = `job_id, spec, state, cursor, total, processed, succeeded, skipped, failed, error, owner, lease_until, created_at, updated_at`

// ScanBulkJob reads one row of BulkJobColumns.
func ScanBulkJob(r Row) (*provider.BulkJob, error) {
	var j provider.BulkJob
	var spec, state string
	var lease, created, updated int64
	err := r.Scan(&j.ID, &spec, &state, &j.Cursor, &j.Total, &j.Processed, &j.Succeeded, &j.Skipped, &j.Failed,
		&j.Error, &j.Owner, &lease, &created, &updated)
	if err != nil {
		return nil, err
	}
	j.Spec, j.State = []byte(spec), provider.BulkJobState(state)
	if lease > 0 {
		j.LeaseUntil = time.UnixMilli(lease).UTC()
	}
	j.CreatedAt, j.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &j, nil
}

// settle clears the owner and lease of a job that has ended (Done,
// Failed, Canceled) once its lease has expired at now (epoch ms). A
// Canceled job keeps its runner's unexpired lease so that the runner, if
// alive, records the counts it reached (UpdateBulkJob); a runner that died
// never does, and its job, ended, must not name it as its owner for ever.
func settle(j *provider.BulkJob, now int64) {
	if j.State.IsFinal() && j.LeaseUntil.UnixMilli() <= now {
		j.Owner, j.LeaseUntil = "", time.Time{}
	}
}

// GetBulkJob is the body of provider.BulkJobStore.GetBulkJob at now
// (epoch ms).
func GetBulkJob(tx MaintTx, id string, now int64) (*provider.BulkJob, error) {
	var job *provider.BulkJob
	err := tx.Each(MJobGet, func(r Row) error {
		var err error
		if job, err = ScanBulkJob(r); err == nil {
			settle(job, now)
		}
		return err
	}, id)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return nil, fmt.Errorf("bulk job %q: %w", id, provider.ErrNotFound)
	}
	return job, nil
}

// ListBulkJobs is the body of provider.BulkJobStore.ListBulkJobs at now
// (epoch ms).
func ListBulkJobs(tx MaintTx, opts provider.BulkJobListOptions, now int64) ([]provider.BulkJob, error) {
	limit, err := pageSize(opts.Limit)
	if err != nil {
		return nil, err
	}
	q := MJobList
	if opts.Unfinished {
		q = MJobListUnfinished
	}
	out := []provider.BulkJob{}
	err = tx.Each(q, func(r Row) error {
		j, err := ScanBulkJob(r)
		if err != nil {
			return err
		}
		settle(j, now)
		out = append(out, *j)
		return nil
	}, limit)
	return out, err
}

func pageSize(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, sqlenc.Invalid("limit %d is negative", limit)
	case limit == 0:
		return DefaultPageSize, nil
	case limit > MaxPageSize:
		return MaxPageSize, nil
	}
	return limit, nil
}

// CheckClaimArgs validates ClaimBulkJob's and UpdateBulkJob's arguments.
func CheckClaimArgs(id, owner string, ttl time.Duration) error {
	switch {
	case id == "" || owner == "":
		return sqlenc.Invalid("empty job ID or owner")
	case ttl < time.Millisecond:
		return sqlenc.Invalid("lease TTL %s is below 1ms", ttl)
	}
	return nil
}

// ClaimBulkJob is the body of provider.BulkJobStore.ClaimBulkJob. A
// finished job is returned unchanged.
func ClaimBulkJob(tx MaintTx, id, owner string, ttl time.Duration, now int64) (*provider.BulkJob, error) {
	n, err := tx.Exec(MJobClaim, id, owner, now+ttl.Milliseconds(), now)
	if err != nil {
		return nil, err
	}
	job, err := GetBulkJob(tx, id, now)
	if err != nil {
		return nil, err
	}
	if n == 0 && !job.State.IsFinal() {
		return nil, fmt.Errorf("bulk job %q is run by %s: %w", id, job.Owner, provider.ErrLockLost)
	}
	return job, nil
}

// UpdateBulkJob is the body of provider.BulkJobStore.UpdateBulkJob. It
// reports a canceled job with canceled true and a nil error, so that the
// transaction commits the progress recorded; the caller returns
// ErrBulkJobCanceled.
func UpdateBulkJob(tx MaintTx, id, owner string, ttl time.Duration, u provider.BulkJobUpdate, now int64) (canceled bool, err error) {
	if !u.State.Valid() {
		return false, sqlenc.Invalid("unknown job state %q", u.State)
	}
	until := now + ttl.Milliseconds()
	if u.State.IsFinal() {
		until = 0
	}
	n, err := tx.Exec(MJobUpdate, id, owner, now, until, string(u.State), u.Cursor,
		u.Total, u.Processed, u.Succeeded, u.Skipped, u.Failed, u.Error)
	if err != nil {
		return false, err
	}
	if n == 0 {
		job, err := GetBulkJob(tx, id, now)
		if err != nil {
			return false, err
		}
		if job.State == provider.BulkJobCanceled {
			_, err := tx.Exec(MJobCanceledProgress, id, owner, now, u.Cursor,
				u.Total, u.Processed, u.Succeeded, u.Skipped, u.Failed, u.Error)
			return err == nil, err
		}
		return false, fmt.Errorf("bulk job %q: %s does not hold its lease: %w", id, owner, provider.ErrLockLost)
	}
	return false, nil
}

// CancelBulkJob is the body of provider.BulkJobStore.CancelBulkJob.
func CancelBulkJob(tx MaintTx, id string, now int64) (*provider.BulkJob, error) {
	n, err := tx.Exec(MJobCancel, id, now)
	if err != nil {
		return nil, err
	}
	job, err := GetBulkJob(tx, id, now)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("bulk job %q is %s: %w", id, job.State, provider.ErrStateConflict)
	}
	return job, nil
}

// CheckPruneArgs validates PruneExecutions' options and returns the limit.
func CheckPruneArgs(opts provider.PruneExecutionsOptions) (int, error) {
	if opts.Keep < 1 {
		return 0, sqlenc.Invalid("Keep %d is below 1", opts.Keep)
	}
	return pageSize(opts.Limit)
}

// PruneExecutions is the body of provider.ExecutionPruner.PruneExecutions
// (limit from CheckPruneArgs).
func PruneExecutions(tx MaintTx, opts provider.PruneExecutionsOptions, limit int) (*provider.PruneExecutionsResult, error) {
	res := &provider.PruneExecutionsResult{InstanceIDs: []string{}}
	var ids []string
	err := tx.Each(MPruneCandidates, func(r Row) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	}, opts.Keep, limit+1)
	if err != nil {
		return nil, err
	}
	if len(ids) > limit {
		ids, res.More = ids[:limit], true
	}
	for _, id := range ids {
		var current int64
		err := tx.Each(MInstanceCurrent, func(r Row) error { return r.Scan(&current) }, id)
		if err != nil {
			return nil, err
		}
		last := current - int64(opts.Keep)
		if last < 1 {
			continue
		}
		var execs, events int64
		if opts.DryRun {
			if err := tx.Each(MPruneCountExecutions, func(r Row) error { return r.Scan(&execs) }, id, last); err != nil {
				return nil, err
			}
			if err := tx.Each(MPruneCountEvents, func(r Row) error { return r.Scan(&events) }, id, last); err != nil {
				return nil, err
			}
		} else {
			if events, err = tx.Exec(MPruneDeleteHistory, id, last); err != nil {
				return nil, err
			}
			if execs, err = tx.Exec(MPruneDeleteExecutions, id, last); err != nil {
				return nil, err
			}
		}
		if execs > 0 {
			res.InstanceIDs = append(res.InstanceIDs, id)
			res.Executions += execs
			res.Events += events
		}
	}
	return res, nil
}

// Maintenance implements the maintenance calls of a store over its
// transaction runners; each store embeds one (NewMaintenance), so its
// methods are the store's.
type Maintenance struct {
	write func(ctx context.Context, op string, fn func(tx MaintTx, now int64) error) error
	read  func(ctx context.Context, op string, fn func(tx MaintTx, now int64) error) error
	fail  func(op string, err error) error
}

// NewMaintenance returns the maintenance calls of a store: write runs fn
// in a write transaction at store time now (epoch ms), read runs fn on a
// read snapshot (or the read pool) at store time now, both translating the error fn
// returns as the store's own calls do; fail translates an argument error
// of op found before any transaction.
func NewMaintenance(
	write func(ctx context.Context, op string, fn func(tx MaintTx, now int64) error) error,
	read func(ctx context.Context, op string, fn func(tx MaintTx, now int64) error) error,
	fail func(op string, err error) error,
) Maintenance {
	return Maintenance{write: write, read: read, fail: fail}
}

// AcquireLease implements provider.Leaser.
func (m Maintenance) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	const op = "acquiring lease"
	if err := CheckLeaseArgs(name, owner, ttl); err != nil {
		return false, m.fail(op, err)
	}
	var ok bool
	err := m.write(ctx, op, func(tx MaintTx, now int64) (err error) {
		ok, err = AcquireLease(tx, name, owner, ttl, now)
		return err
	})
	return ok, err
}

// ReleaseLease implements provider.Leaser.
func (m Maintenance) ReleaseLease(ctx context.Context, name, owner string) error {
	return m.write(ctx, "releasing lease", func(tx MaintTx, _ int64) error {
		return ReleaseLease(tx, name, owner)
	})
}

// PruneExecutions implements provider.ExecutionPruner.
func (m Maintenance) PruneExecutions(ctx context.Context, opts provider.PruneExecutionsOptions) (*provider.PruneExecutionsResult, error) {
	const op = "pruning executions"
	limit, err := CheckPruneArgs(opts)
	if err != nil {
		return nil, m.fail(op, err)
	}
	var res *provider.PruneExecutionsResult
	err = m.write(ctx, op, func(tx MaintTx, _ int64) (err error) {
		res, err = PruneExecutions(tx, opts, limit)
		return err
	})
	return res, err
}

// CancelBulkJob implements provider.BulkJobStore.
func (m Maintenance) CancelBulkJob(ctx context.Context, id string) (*provider.BulkJob, error) {
	const op = "canceling bulk job"
	if id == "" {
		return nil, m.fail(op, sqlenc.Invalid("empty job ID"))
	}
	var job *provider.BulkJob
	err := m.write(ctx, op, func(tx MaintTx, now int64) (err error) {
		job, err = CancelBulkJob(tx, id, now)
		return err
	})
	return job, err
}

// CreateBulkJob implements provider.BulkJobStore.
func (m Maintenance) CreateBulkJob(ctx context.Context, job *provider.BulkJob) error {
	const op = "creating bulk job"
	if err := CheckBulkJob(job); err != nil {
		return m.fail(op, err)
	}
	return m.write(ctx, op, func(tx MaintTx, now int64) error { return CreateBulkJob(tx, job, now) })
}

// GetBulkJob implements provider.BulkJobStore.
func (m Maintenance) GetBulkJob(ctx context.Context, id string) (*provider.BulkJob, error) {
	var job *provider.BulkJob
	err := m.read(ctx, "getting bulk job", func(tx MaintTx, now int64) (err error) {
		job, err = GetBulkJob(tx, id, now)
		return err
	})
	return job, err
}

// ListBulkJobs implements provider.BulkJobStore.
func (m Maintenance) ListBulkJobs(ctx context.Context, opts provider.BulkJobListOptions) ([]provider.BulkJob, error) {
	var out []provider.BulkJob
	err := m.read(ctx, "listing bulk jobs", func(tx MaintTx, now int64) (err error) {
		out, err = ListBulkJobs(tx, opts, now)
		return err
	})
	return out, err
}

// ClaimBulkJob implements provider.BulkJobStore.
func (m Maintenance) ClaimBulkJob(ctx context.Context, id, owner string, ttl time.Duration) (*provider.BulkJob, error) {
	const op = "claiming bulk job"
	if err := CheckClaimArgs(id, owner, ttl); err != nil {
		return nil, m.fail(op, err)
	}
	var job *provider.BulkJob
	err := m.write(ctx, op, func(tx MaintTx, now int64) (err error) {
		job, err = ClaimBulkJob(tx, id, owner, ttl, now)
		return err
	})
	return job, err
}

// UpdateBulkJob implements provider.BulkJobStore.
func (m Maintenance) UpdateBulkJob(ctx context.Context, id, owner string, ttl time.Duration, u provider.BulkJobUpdate) error {
	const op = "updating bulk job"
	if err := CheckClaimArgs(id, owner, ttl); err != nil {
		return m.fail(op, err)
	}
	var canceled bool
	err := m.write(ctx, op, func(tx MaintTx, now int64) (err error) {
		canceled, err = UpdateBulkJob(tx, id, owner, ttl, u, now)
		return err
	})
	if err == nil && canceled {
		err = fmt.Errorf("%s: bulk job %q: %w", op, id, provider.ErrBulkJobCanceled)
	}
	return err
}
