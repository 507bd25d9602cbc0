package sqlstore

import (
	"context"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// ReadDB is a store's read side as Reads uses it.
type ReadDB interface {
	// Read runs fn with a Querier whose statements each run on their own
	// (no transaction). ReadTx runs fn in one read transaction, so its
	// statements see one snapshot. Both fail with ErrClosed after Close
	// and return fn's error translated into the provider sentinels and
	// wrapped for the call op.
	Read(ctx context.Context, op string, fn func(Querier) error) error
	ReadTx(ctx context.Context, op string, fn func(Querier) error) error
	// Fail translates and wraps, for the call op, an error found before
	// any statement ran (an invalid argument).
	Fail(op string, err error) error
	// Now is the store clock's time in Unix milliseconds.
	Now() int64
}

// Reads implements the store calls that only read, written once for
// every SQL store over its ReadDB: each store embeds it in its Provider.
type Reads struct {
	DB ReadDB
}

// read runs fn through r.DB (in one read transaction when tx), after
// check, and returns what it produced.
func read[T any](ctx context.Context, r Reads, op string, tx bool, check error, fn func(Querier) (T, error)) (T, error) {
	var out T
	if check != nil {
		return out, r.DB.Fail(op, check)
	}
	run := r.DB.Read
	if tx {
		run = r.DB.ReadTx
	}
	err := run(ctx, op, func(q Querier) error {
		var err error
		out, err = fn(q)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// ReadHistory returns one execution's events; see provider.Provider.
func (r Reads) ReadHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error) {
	return read(ctx, r, "reading history", true, CheckHistoryArgs(instanceID, executionID), func(q Querier) ([]history.Event, error) {
		return ReadHistory(ctx, q, instanceID, executionID)
	})
}

// GetInstance returns one instance; see provider.Admin.
func (r Reads) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceInfo, error) {
	return read(ctx, r, "getting instance", false, CheckInstanceID(instanceID), func(q Querier) (*provider.InstanceInfo, error) {
		return GetInstance(ctx, q, instanceID)
	})
}

// ListExecutions returns an instance's executions in order; see provider.Admin.
func (r Reads) ListExecutions(ctx context.Context, instanceID string) ([]provider.ExecutionInfo, error) {
	return read(ctx, r, "listing executions", true, CheckInstanceID(instanceID), func(q Querier) ([]provider.ExecutionInfo, error) {
		return ListExecutions(ctx, q, instanceID)
	})
}

// GetExecution returns one execution; see provider.Admin.
func (r Reads) GetExecution(ctx context.Context, instanceID string, executionID int64) (*provider.ExecutionInfo, error) {
	return read(ctx, r, "getting execution", false, CheckInstanceID(instanceID), func(q Querier) (*provider.ExecutionInfo, error) {
		return GetExecution(ctx, q, instanceID, executionID)
	})
}

// ListChildren returns the IDs of an instance's direct sub-orchestrations;
// see provider.Admin.
func (r Reads) ListChildren(ctx context.Context, instanceID string) ([]string, error) {
	return read(ctx, r, "listing children", true, CheckInstanceID(instanceID), func(q Querier) ([]string, error) {
		return ListChildren(ctx, q, instanceID)
	})
}

// InstanceQueue returns one instance's queue state, read in one snapshot;
// see provider.Admin.
func (r Reads) InstanceQueue(ctx context.Context, instanceID string) (*provider.InstanceQueueState, error) {
	return read(ctx, r, "reading instance queue", true, CheckInstanceID(instanceID), func(q Querier) (*provider.InstanceQueueState, error) {
		return InstanceQueue(ctx, q, instanceID, MsTime(r.DB.Now()))
	})
}

// GetExecutionLock returns the lock on key; see provider.LockStore.
func (r Reads) GetExecutionLock(ctx context.Context, key string) (*provider.ExecutionLock, error) {
	return read(ctx, r, "getting execution lock", false, CheckLockKey(key), func(q Querier) (*provider.ExecutionLock, error) {
		return GetExecutionLock(ctx, q, key, r.DB.Now())
	})
}

// ListExecutionLocks returns every lock by key; see provider.LockStore.
func (r Reads) ListExecutionLocks(ctx context.Context) ([]provider.ExecutionLock, error) {
	return read(ctx, r, "listing execution locks", false, nil, func(q Querier) ([]provider.ExecutionLock, error) {
		return ListExecutionLocks(ctx, q, r.DB.Now())
	})
}

// NextVisible returns the earliest time a fetch of queue q may find work
// it cannot find now, or the zero time when the queue is empty; see
// provider.Waker. It is one statement and locks nothing (QNextVisibleOrch,
// QNextVisibleWork).
func (r Reads) NextVisible(ctx context.Context, queue provider.Queue) (time.Time, error) {
	const op = "reading next visible time"
	var id Query
	switch queue {
	case provider.QueueOrchestrator:
		id = QNextVisibleOrch
	case provider.QueueWorker:
		id = QNextVisibleWork
	default:
		return time.Time{}, r.DB.Fail(op, sqlenc.Invalid("unknown queue %d", queue))
	}
	return read(ctx, r, op, false, nil, func(q Querier) (time.Time, error) {
		var at *int64
		if err := q.QueryRow(ctx, id).Scan(&at); err != nil || at == nil {
			return time.Time{}, err
		}
		return MsTime(*at), nil
	})
}

// MaxStalledCandidates caps the rows each stall rule of QStalled reads.
const MaxStalledCandidates = 10000

// StalledInstances lists stalled instances, newest first, in one
// statement (QStalled); see provider.Admin.
func (r Reads) StalledInstances(ctx context.Context, opts provider.StalledOptions) (*provider.StalledPage, error) {
	var check error
	switch {
	case opts.After <= 0:
		check = sqlenc.Invalid("After %v must be positive", opts.After)
	case opts.MinAttempts < 2:
		check = sqlenc.Invalid("MinAttempts %d must be at least 2", opts.MinAttempts)
	}
	limit, err := PageLimit("Limit", opts.Limit)
	if check == nil {
		check = err
	}
	return read(ctx, r, "listing stalled instances", false, check, func(q Querier) (*provider.StalledPage, error) {
		page := &provider.StalledPage{InstanceIDs: []string{}}
		cutoff := r.DB.Now() - sqlenc.DurMs(opts.After)
		err := q.Each(ctx, QStalled, func(row Row) error {
			var id string
			if err := row.Scan(&id); err != nil {
				return err
			}
			page.InstanceIDs = append(page.InstanceIDs, id)
			return nil
		}, cutoff, opts.MinAttempts, limit+1, MaxStalledCandidates)
		if err != nil {
			return nil, err
		}
		if len(page.InstanceIDs) > limit {
			page.InstanceIDs, page.More = page.InstanceIDs[:limit], true
		}
		return page, nil
	})
}

// QueueDepths counts the messages of both queues (QQueueDepths); see
// provider.Admin.
func (r Reads) QueueDepths(ctx context.Context) (*provider.QueueDepths, error) {
	return read(ctx, r, "reading queue depths", false, nil, func(q Querier) (*provider.QueueDepths, error) {
		d := &provider.QueueDepths{}
		err := q.QueryRow(ctx, QQueueDepths, r.DB.Now()).Scan(
			&d.OrchestratorReady, &d.OrchestratorDelayed, &d.OrchestratorLocked,
			&d.WorkerReady, &d.WorkerDelayed, &d.WorkerLocked, &d.WorkerUnserved, &d.OrchestratorUnserved)
		if err != nil {
			return nil, err
		}
		return d, nil
	})
}

// Counts returns store-wide totals, read in one snapshot (QCounts,
// QCountsByStatus); see provider.Admin.
func (r Reads) Counts(ctx context.Context) (*provider.Counts, error) {
	return read(ctx, r, "counting", true, nil, func(q Querier) (*provider.Counts, error) {
		c := &provider.Counts{ByStatus: map[provider.Status]int64{}}
		if err := q.QueryRow(ctx, QCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents, &c.ExecutionLocks); err != nil {
			return nil, err
		}
		err := q.Each(ctx, QCountsByStatus, func(row Row) error {
			var s string
			var n int64
			if err := row.Scan(&s, &n); err != nil {
				return err
			}
			c.ByStatus[provider.Status(s)] = n
			return nil
		})
		if err != nil {
			return nil, err
		}
		return c, nil
	})
}

// ListDeadLetters returns dead-lettered messages, newest first
// (QDeadLetters); see provider.Admin.
func (r Reads) ListDeadLetters(ctx context.Context, limit int) ([]provider.DeadLetter, error) {
	limit, check := PageLimit("limit", limit)
	return read(ctx, r, "listing dead letters", false, check, func(q Querier) ([]provider.DeadLetter, error) {
		out := []provider.DeadLetter{}
		err := q.Each(ctx, QDeadLetters, func(row Row) error {
			var d provider.DeadLetter
			var at int64
			if err := row.Scan(&d.ID, &d.Queue, &d.InstanceID, &d.Payload, &d.Error, &at); err != nil {
				return err
			}
			d.DeadAt = MsTime(at)
			out = append(out, d)
			return nil
		}, limit)
		if err != nil {
			return nil, err
		}
		return out, nil
	})
}

// ListValues returns an instance's values; see provider.Admin.
func (r Reads) ListValues(ctx context.Context, instanceID string) ([]provider.Value, error) {
	return read(ctx, r, "listing values", false, CheckInstanceID(instanceID), func(q Querier) ([]provider.Value, error) {
		return ListValues(ctx, q, instanceID)
	})
}

// GetValue returns one value of an instance; see provider.Admin.
func (r Reads) GetValue(ctx context.Context, instanceID, key string) (*provider.Value, error) {
	return read(ctx, r, "getting value", false, CheckInstanceID(instanceID), func(q Querier) (*provider.Value, error) {
		return GetValue(ctx, q, instanceID, key)
	})
}
