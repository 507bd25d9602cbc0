package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// The maintenance calls (leases, execution pruning, bulk job records):
// the bodies are sqlstore's, over maintSQL.

var maintSQL = [sqlstore.NumMQueries]string{
	sqlstore.MLeaseAcquire: `INSERT INTO leases (name, owner, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE leases.owner = excluded.owner OR leases.expires_at <= $4`,
	sqlstore.MLeaseRelease: `DELETE FROM leases WHERE name = $1 AND owner = $2`,
	sqlstore.MJobInsert: `INSERT INTO bulk_jobs (job_id, spec, state, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)`,
	sqlstore.MJobGet:  `SELECT ` + sqlstore.BulkJobColumns + ` FROM bulk_jobs WHERE job_id = $1`,
	sqlstore.MJobList: `SELECT ` + sqlstore.BulkJobColumns + ` FROM bulk_jobs ORDER BY seq DESC LIMIT $1`,
	sqlstore.MJobListUnfinished: `SELECT ` + sqlstore.BulkJobColumns + ` FROM bulk_jobs
		WHERE state IN ('Pending', 'Running') ORDER BY seq DESC LIMIT $1`,
	sqlstore.MJobClaim: `UPDATE bulk_jobs SET owner = $2, lease_until = $3, updated_at = $4,
		state = CASE WHEN state = 'Pending' THEN 'Running' ELSE state END
		WHERE job_id = $1 AND state IN ('Pending', 'Running') AND (owner = '' OR owner = $2 OR lease_until <= $4)`,
	sqlstore.MJobUpdate: `UPDATE bulk_jobs SET updated_at = $3, lease_until = $4::bigint,
		owner = CASE WHEN $4::bigint = 0 THEN '' ELSE owner END, state = $5, cursor = $6, total = $7,
		processed = $8, succeeded = $9, skipped = $10, failed = $11, error = $12
		WHERE job_id = $1 AND owner = $2 AND lease_until > $3 AND state <> 'Canceled'`,
	sqlstore.MJobCancel: `UPDATE bulk_jobs SET state = 'Canceled', updated_at = $2::bigint,
		owner = CASE WHEN lease_until > $2::bigint THEN owner ELSE '' END,
		lease_until = CASE WHEN lease_until > $2::bigint THEN lease_until ELSE 0 END
		WHERE job_id = $1 AND state IN ('Pending', 'Running')`,
	sqlstore.MJobCanceledProgress: `UPDATE bulk_jobs SET updated_at = $3, owner = '', lease_until = 0,
		cursor = $4, total = $5, processed = $6, succeeded = $7, skipped = $8, failed = $9, error = $10
		WHERE job_id = $1 AND owner = $2 AND state = 'Canceled'`,
	sqlstore.MPruneCandidates: `SELECT instance_id FROM instances i WHERE current_execution_id > $1::bigint
		AND EXISTS (SELECT 1 FROM executions e WHERE e.instance_id = i.instance_id
		            AND e.execution_id <= i.current_execution_id - $1::bigint)
		ORDER BY seq LIMIT $2`,
	sqlstore.MPruneCountExecutions:  `SELECT count(*) FROM executions WHERE instance_id = $1 AND execution_id <= $2`,
	sqlstore.MPruneCountEvents:      `SELECT count(*) FROM history WHERE instance_id = $1 AND execution_id <= $2`,
	sqlstore.MPruneDeleteHistory:    `DELETE FROM history WHERE instance_id = $1 AND execution_id <= $2`,
	sqlstore.MPruneDeleteExecutions: `DELETE FROM executions WHERE instance_id = $1 AND execution_id <= $2`,
	sqlstore.MInstanceCurrent:       `SELECT current_execution_id FROM instances WHERE instance_id = $1`,
}

// maintTx runs the maintenance statements on a transaction or the pool.
type maintTx struct {
	ctx context.Context
	q   interface {
		querier
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
}

func (m maintTx) Exec(q sqlstore.MQuery, args ...any) (int64, error) {
	ct, err := m.q.Exec(m.ctx, maintSQL[q], args...)
	if err != nil {
		return 0, interpretError(err, provider.ErrInstanceExists)
	}
	return ct.RowsAffected(), nil
}

func (m maintTx) Each(q sqlstore.MQuery, scan func(sqlstore.Row) error, args ...any) error {
	return queryRows(m.ctx, m.q, maintSQL[q], func(r pgx.Rows) error { return scan(r) }, args...)
}

// maintWrite runs fn in a write transaction; maintRead on the pool.
func (p *Provider) maintWrite(ctx context.Context, op string, fn func(tx sqlstore.MaintTx, now int64) error) error {
	return p.write(ctx, op, func(w *wtx) error { return fn(maintTx{w.ctx, w.tx}, w.now) })
}

func (p *Provider) maintRead(ctx context.Context, op string, fn func(tx sqlstore.MaintTx, now int64) error) error {
	return p.read(ctx, op, func() error { return fn(maintTx{ctx, p.pool}, p.now()) })
}

// maintenance is the embedded implementation of the maintenance calls
// (provider.Leaser, provider.ExecutionPruner, provider.BulkJobStore),
// set by Open.
type maintenance = sqlstore.Maintenance

func (p *Provider) newMaintenance() maintenance {
	return sqlstore.NewMaintenance(p.maintWrite, p.maintRead, p.fail)
}
