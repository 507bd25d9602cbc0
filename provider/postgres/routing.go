package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// routeArgs are the activity-name and queue arguments of the worker
// candidate statements: text arrays.
func routeArgs(names, queues []string) [2]any {
	return sqlstore.RouteArgs(names, queues, func(s []string) any { return s })
}

// HeartbeatWorkItem renews a worker lock and records a heartbeat; see
// provider.Heartbeater.
func (p *Provider) HeartbeatWorkItem(ctx context.Context, lockToken string, extendFor time.Duration, details json.RawMessage) error {
	const op = "recording heartbeat"
	id, keep, err := sqlstore.CheckHeartbeat(lockToken, extendFor, details)
	if err != nil {
		return p.fail(op, err)
	}
	return p.single(ctx, op, func(ctx context.Context, q querier, now int64) error {
		var held bool
		if err := q.QueryRow(ctx, sqlHeartbeatWork, id, lockToken, now, now+sqlenc.DurMs(extendFor), keep).Scan(&held); err != nil {
			return err
		}
		if !held {
			return provider.ErrLockLost
		}
		return nil
	})
}

// WorkItemHeartbeat returns the latest heartbeat of a locked worker row;
// see provider.Heartbeater.
func (p *Provider) WorkItemHeartbeat(ctx context.Context, lockToken string) (provider.WorkHeartbeat, error) {
	var hb provider.WorkHeartbeat
	err := p.read(ctx, "reading heartbeat", func() error {
		var err error
		hb, err = sqlstore.WorkItemHeartbeat(ctx, sharedQuerier{p.pool}, lockToken, p.now())
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
	return p.single(ctx, op, func(ctx context.Context, q querier, now int64) error {
		return queryRows(ctx, q, sqlAnnounceRoutes, nil, r.WorkerID, rs.Activities, rs.Queues, now+sqlenc.DurMs(ttl),
			orchNamesArg(rs.Orchestrations), orchNamesArg(rs.OrchestrationRoutes))
	})
}

// WithdrawRoutes forgets a runtime's routes; see provider.Router.
func (p *Provider) WithdrawRoutes(ctx context.Context, workerID string) error {
	return p.single(ctx, "withdrawing routes", func(ctx context.Context, q querier, _ int64) error {
		return queryRows(ctx, q, sqlWithdrawRoutes, nil, workerID)
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
	err = p.single(ctx, op, func(ctx context.Context, q querier, now int64) error {
		leases = nil
		until := now + sqlenc.DurMs(lockTimeout)
		return queryRows(ctx, q, sqlLockUnserved, func(r pgx.Rows) error {
			var l provider.WorkItemLease
			var data []byte
			if err := r.Scan(&l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID, &l.SessionID, &data, &l.AttemptCount); err != nil {
				return err
			}
			if sqlstore.UnservedLease(&l, data, until) {
				leases = append(leases, &l)
			}
			return nil
		}, now, now-sqlenc.DurMs(olderThan), limit, sqlstore.NewTokenPrefix(), until)
	})
	return leases, err
}
