package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// InstanceQueue returns one instance's queue state in one read
// transaction; see provider.Admin.
func (p *Provider) InstanceQueue(ctx context.Context, instanceID string) (*provider.InstanceQueueState, error) {
	const op = "reading instance queue"
	if instanceID == "" {
		return nil, p.fail(op, sqlenc.Invalid("empty instance ID"))
	}
	var st *provider.InstanceQueueState
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		q := func(id stmtID, scan func(*sql.Rows) error) error {
			return queryRows(ctx, tx.StmtContext(ctx, p.rstmts[id]), scan, instanceID)
		}
		s := &provider.InstanceQueueState{Now: msTime(p.now())}
		var execID, created int64
		var errSince sql.NullInt64
		err := tx.StmtContext(ctx, p.rstmts[rQueueInstance]).QueryRowContext(ctx, instanceID).Scan(&execID, &created, &errSince)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
		}
		if err != nil {
			return interpretError(err, nil)
		}
		s.LastProgressAt = msTime(created)
		if errSince.Valid {
			s.LastErrorSince = msTime(errSince.Int64)
		}
		if execID > 0 {
			var last int64
			err := tx.StmtContext(ctx, p.rstmts[rQueueProgress]).QueryRowContext(ctx, instanceID, execID).Scan(&last)
			switch {
			case err == nil:
				s.LastProgressAt = msTime(last)
			case !errors.Is(err, sql.ErrNoRows):
				return interpretError(err, nil)
			}
		}
		err = q(rQueueMessages, func(r *sql.Rows) error {
			var m provider.QueuedMessage
			var item []byte
			var enq, vis int64
			if err := r.Scan(&item, &enq, &vis, &m.Attempts, &m.Locked); err != nil {
				return err
			}
			m.EnqueuedAt, m.VisibleAt = msTime(enq), msTime(vis)
			if wi, err := history.DecodeWorkItem(item); err != nil {
				m.DecodeError = err.Error()
			} else {
				m.Item = wi
			}
			s.Messages = append(s.Messages, m)
			return nil
		})
		if err != nil {
			return err
		}
		err = q(rQueueWork, func(r *sql.Rows) error {
			var a provider.QueuedActivity
			var item []byte
			var enq, vis int64
			var locked, errAt sql.NullInt64
			var errJ sql.NullString
			if err := r.Scan(&a.ExecutionID, &a.ActivityID, &a.SessionID, &item, &enq, &vis, &a.Attempts, &locked, &errJ, &errAt); err != nil {
				return err
			}
			a.EnqueuedAt, a.VisibleAt = msTime(enq), msTime(vis)
			if locked.Valid {
				a.LockedUntil = msTime(locked.Int64)
			}
			if wi, err := history.DecodeWorkItem(item); err == nil {
				a.Name = wi.Name
			}
			if errJ.Valid {
				var d history.ErrorDetails
				if err := json.Unmarshal([]byte(errJ.String), &d); err == nil {
					a.Error = &d
				} else {
					a.Error = &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: "corrupt stored error: " + err.Error()}
				}
				if errAt.Valid {
					a.ErrorSince = msTime(errAt.Int64)
				}
			}
			s.Activities = append(s.Activities, a)
			return nil
		})
		if err != nil {
			return err
		}
		err = q(rQueueLock, func(r *sql.Rows) error {
			var at, until int64
			if err := r.Scan(&at, &until); err != nil {
				return err
			}
			s.InstanceLock = &provider.InstanceLockState{LockedAt: msTime(at), LockedUntil: msTime(until)}
			return nil
		})
		if err != nil {
			return err
		}
		err = q(rQueueHeldLocks, func(r *sql.Rows) error {
			var k string
			if err := r.Scan(&k); err != nil {
				return err
			}
			s.HeldLocks = append(s.HeldLocks, k)
			return nil
		})
		if err != nil {
			return err
		}
		err = q(rQueueStart, func(r *sql.Rows) error {
			var qs provider.QueuedStart
			var at, vis int64
			if err := r.Scan(&qs.LockKey, &qs.Holder, &at, &vis, &qs.Position); err != nil {
				return err
			}
			qs.QueuedAt = msTime(at)
			if vis > at {
				qs.StartAt = msTime(vis)
			}
			s.QueuedStart = &qs
			return nil
		})
		if err != nil {
			return err
		}
		st = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// maxStalledCandidates caps the rows each stall rule reads.
const maxStalledCandidates = 10000

// StalledInstances lists stalled instances, newest first; see provider.Admin.
func (p *Provider) StalledInstances(ctx context.Context, opts provider.StalledOptions) (*provider.StalledPage, error) {
	const op = "listing stalled instances"
	switch {
	case opts.After <= 0:
		return nil, p.fail(op, sqlenc.Invalid("After %v must be positive", opts.After))
	case opts.MinAttempts < 2:
		return nil, p.fail(op, sqlenc.Invalid("MinAttempts %d must be at least 2", opts.MinAttempts))
	case opts.Limit < 0:
		return nil, p.fail(op, sqlenc.Invalid("Limit %d is negative", opts.Limit))
	}
	limit := opts.Limit
	if limit == 0 {
		limit = sqlstore.DefaultPageSize
	}
	limit = min(limit, sqlstore.MaxPageSize)
	page := &provider.StalledPage{InstanceIDs: []string{}}
	err := p.read(ctx, op, func() error {
		cutoff := p.now() - sqlenc.DurMs(opts.After)
		return queryRows(ctx, p.rstmts[rStalled], func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			page.InstanceIDs = append(page.InstanceIDs, id)
			return nil
		}, cutoff, opts.MinAttempts, limit+1, maxStalledCandidates)
	})
	if err != nil {
		return nil, err
	}
	if len(page.InstanceIDs) > limit {
		page.InstanceIDs, page.More = page.InstanceIDs[:limit], true
	}
	return page, nil
}
