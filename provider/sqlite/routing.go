package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// routeArgs are the activity-name and queue arguments of the worker
// candidate statements: JSON arrays.
func routeArgs(names, queues []string) [2]any {
	return sqlstore.RouteArgs(names, queues, func(s []string) any { return jsonStrings(s) })
}

// HeartbeatWorkItem renews a worker lock and records a heartbeat; see
// provider.Heartbeater.
func (p *Provider) HeartbeatWorkItem(ctx context.Context, lockToken string, extendFor time.Duration, details json.RawMessage) error {
	const op = "recording heartbeat"
	id, keep, err := sqlstore.CheckHeartbeat(lockToken, extendFor, details)
	if err != nil {
		return p.fail(op, err)
	}
	return p.write(ctx, op, func(w *wtx) error {
		found := false
		var sess sql.NullString
		err := w.query(sHeartbeatWork, func(r *sql.Rows) error {
			found = true
			return r.Scan(&sess)
		}, id, lockToken, w.now, w.now+sqlenc.DurMs(extendFor), keep)
		if err != nil {
			return err
		}
		if !found {
			return provider.ErrLockLost
		}
		if sess.Valid {
			_, err = w.exec(sTouchSession, nil, sess.String, w.now)
		}
		return err
	})
}

// WorkItemHeartbeat returns the latest heartbeat of a locked worker row;
// see provider.Heartbeater.
func (p *Provider) WorkItemHeartbeat(ctx context.Context, lockToken string) (provider.WorkHeartbeat, error) {
	var hb provider.WorkHeartbeat
	err := p.read(ctx, "reading heartbeat", func() error {
		var err error
		hb, err = sqlstore.WorkItemHeartbeat(ctx, p.readQuerier(nil), lockToken, p.now())
		return err
	})
	return hb, err
}

// AnnounceRoutes records what a runtime serves; see provider.Router.
func (p *Provider) AnnounceRoutes(ctx context.Context, r provider.WorkerRoutes, ttl time.Duration) error {
	const op = "announcing routes"
	rs, err := sqlstore.CheckRoutes(r, ttl)
	if err != nil {
		return p.fail(op, err)
	}
	return p.write(ctx, op, func(w *wtx) error {
		_, err := w.exec(sAnnounceRoutes, nil, r.WorkerID, jsonStrings(rs.Activities), jsonStrings(rs.Queues), w.now+sqlenc.DurMs(ttl),
			orchNamesArg(rs.Orchestrations), orchNamesArg(rs.OrchestrationRoutes))
		return err
	})
}

// WithdrawRoutes forgets a runtime's routes; see provider.Router.
func (p *Provider) WithdrawRoutes(ctx context.Context, workerID string) error {
	return p.write(ctx, "withdrawing routes", func(w *wtx) error {
		_, err := w.exec(sWithdrawRoutes, nil, workerID)
		return err
	})
}

// FetchUnservedWorkItems locks rows no live route serves; see
// provider.Router.
func (p *Provider) FetchUnservedWorkItems(ctx context.Context, olderThan, lockTimeout time.Duration, max int) ([]*provider.WorkItemLease, error) {
	const op = "fetching unserved work items"
	limit, err := sqlenc.WorkFetchLimit(provider.WorkFetchOptions{LockTimeout: lockTimeout, Max: max})
	if err != nil {
		return nil, p.fail(op, err)
	}
	if olderThan < 0 {
		return nil, p.fail(op, sqlenc.Invalid("olderThan %v is negative", olderThan))
	}
	var leases []*provider.WorkItemLease
	err = p.write(ctx, op, func(w *wtx) error {
		var ids []int64
		err := w.query(sUnservedCandidates, func(r *sql.Rows) error {
			var id int64
			if err := r.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		}, w.now, w.now-sqlenc.DurMs(olderThan), limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		until := w.now + sqlenc.DurMs(lockTimeout)
		return w.query(sLockUnserved, func(r *sql.Rows) error {
			var l provider.WorkItemLease
			var data []byte
			if err := r.Scan(new(int64), &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID, &l.SessionID, &data, &l.AttemptCount); err != nil {
				return err
			}
			if sqlstore.UnservedLease(&l, data, until) {
				leases = append(leases, &l)
			}
			return nil
		}, sqlstore.NewTokenPrefix(), jsonInts(ids), until)
	})
	return leases, err
}
