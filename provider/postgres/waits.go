package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// InstanceQueue returns one instance's queue state, read in one
// REPEATABLE READ snapshot and one round trip; see provider.Admin.
func (p *Provider) InstanceQueue(ctx context.Context, instanceID string) (*provider.InstanceQueueState, error) {
	const op = "reading instance queue"
	if instanceID == "" {
		return nil, p.fail(op, sqlenc.Invalid("empty instance ID"))
	}
	var st *provider.InstanceQueueState
	err := p.readTx(ctx, op, func(tx pgx.Tx) error {
		s := &provider.InstanceQueueState{Now: msTime(p.now())}
		found := false
		b := &pgx.Batch{}
		b.Queue(sqlQueueInstance, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var execID, created int64
				var errSince, last *int64
				if err := r.Scan(&execID, &created, &errSince, &last); err != nil {
					return err
				}
				found = true
				s.LastProgressAt = msTime(created)
				if last != nil {
					s.LastProgressAt = msTime(*last)
				}
				if errSince != nil {
					s.LastErrorSince = msTime(*errSince)
				}
				return nil
			})
		})
		b.Queue(sqlQueueMessages, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var m provider.QueuedMessage
				var item []byte
				var enq, vis int64
				var attempts int32
				if err := r.Scan(&item, &enq, &vis, &attempts, &m.Locked); err != nil {
					return err
				}
				m.EnqueuedAt, m.VisibleAt, m.Attempts = msTime(enq), msTime(vis), int(attempts)
				if wi, err := history.DecodeWorkItem(item); err != nil {
					m.DecodeError = err.Error()
				} else {
					m.Item = wi
				}
				s.Messages = append(s.Messages, m)
				return nil
			})
		})
		b.Queue(sqlQueueWork, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var a provider.QueuedActivity
				var item []byte
				var enq, vis int64
				var attempts int32
				var locked, errAt *int64
				var errJ *string
				if err := r.Scan(&a.ExecutionID, &a.ActivityID, &a.SessionID, &item, &enq, &vis, &attempts, &locked, &errJ, &errAt); err != nil {
					return err
				}
				a.EnqueuedAt, a.VisibleAt, a.Attempts = msTime(enq), msTime(vis), int(attempts)
				if locked != nil {
					a.LockedUntil = msTime(*locked)
				}
				if wi, err := history.DecodeWorkItem(item); err == nil {
					a.Name = wi.Name
				}
				if errJ != nil {
					var d history.ErrorDetails
					if err := json.Unmarshal([]byte(*errJ), &d); err == nil {
						a.Error = &d
					} else {
						a.Error = &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: "corrupt stored error: " + err.Error()}
					}
					if errAt != nil {
						a.ErrorSince = msTime(*errAt)
					}
				}
				s.Activities = append(s.Activities, a)
				return nil
			})
		})
		b.Queue(sqlQueueLock, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var at, until int64
				if err := r.Scan(&at, &until); err != nil {
					return err
				}
				s.InstanceLock = &provider.InstanceLockState{LockedAt: msTime(at), LockedUntil: msTime(until)}
				return nil
			})
		})
		b.Queue(sqlQueueHeldLocks, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var k string
				if err := r.Scan(&k); err != nil {
					return err
				}
				s.HeldLocks = append(s.HeldLocks, k)
				return nil
			})
		})
		b.Queue(sqlQueueStart, instanceID).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var qs provider.QueuedStart
				var at, vis, pos int64
				if err := r.Scan(&qs.LockKey, &qs.Holder, &at, &vis, &pos); err != nil {
					return err
				}
				qs.QueuedAt, qs.Position = msTime(at), int(pos)
				if vis > at {
					qs.StartAt = msTime(vis)
				}
				s.QueuedStart = &qs
				return nil
			})
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
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

// StalledInstances lists stalled instances, newest first, in one
// statement; see provider.Admin.
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
		return queryRows(ctx, p.pool, sqlStalled, func(r pgx.Rows) error {
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
