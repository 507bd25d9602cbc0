package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Copying the store: provider.Exporter and provider.Importer. The export
// is one REPEATABLE READ, read-only transaction, streamed table by table
// in the order rows were written. A row locked in this store is exported
// unlocked: a worker row's visible_at is then its lock expiry, so $1 (the
// export's now) caps it. The import inserts rows without locks.
//
// The SQL of the copy lives here rather than in queries.go, so this file
// can change on its own.

const (
	sqlCopyCounts = `SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM executions),
       (SELECT count(*) FROM history), (SELECT count(*) FROM orchestrator_queue),
       (SELECT count(*) FROM worker_queue), (SELECT count(*) FROM execution_locks),
       (SELECT count(*) FROM lock_queue), (SELECT count(*) FROM idempotency_keys),
       (SELECT count(*) FROM dead_letters), (SELECT count(*) FROM instance_values),
       (SELECT count(*) FROM instance_locks WHERE pause_reason IS NOT NULL), (SELECT count(*) FROM schedules)`
	// $1 now.
	sqlCopyLiveLeases = `SELECT (SELECT count(*) FROM instance_locks WHERE locked_until > $1 AND pause_reason IS NULL),
       (SELECT count(*) FROM worker_queue WHERE lock_token IS NOT NULL AND locked_until > $1),
       (SELECT count(*) FROM sessions WHERE locked_until > $1)`
)

// BeginExport opens a REPEATABLE READ, read-only transaction: its snapshot
// is what the export streams. See provider.Exporter.
func (p *Provider) BeginExport(ctx context.Context) (provider.Snapshot, error) {
	s := &snapshot{p: p, now: p.now()}
	err := p.read(ctx, "exporting", func() error {
		tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		s.tx = tx
		c, l := &s.counts, &s.leases
		// The export streams the whole store while its reader writes it
		// elsewhere: not bounded like ordinary store calls.
		_, err = tx.Exec(ctx, sqlUnboundedTx)
		if err == nil {
			err = tx.QueryRow(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
				&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters,
				&c.Values, &c.Pauses, &c.Schedules)
		}
		if err == nil {
			err = tx.QueryRow(ctx, sqlCopyLiveLeases, s.now).Scan(&l.InstanceLocks, &l.WorkerLeases, &l.Sessions)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// snapshot is an open export: a read transaction.
type snapshot struct {
	p      *Provider
	tx     pgx.Tx
	now    int64
	counts provider.TableCounts
	leases provider.LiveLeases
}

func (s *snapshot) Counts() provider.TableCounts { return s.counts }
func (s *snapshot) Leases() provider.LiveLeases  { return s.leases }

func (s *snapshot) Close() error {
	if err := s.tx.Rollback(context.Background()); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("postgres: closing the export: %w", interpretError(err, nil))
	}
	return nil
}

// Records streams the export's tables; see provider.Snapshot.
func (s *snapshot) Records(ctx context.Context) iter.Seq2[provider.Record, error] {
	return sqlstore.Records(s.now, func(t sqlstore.ExportTable) (sqlstore.Rows, func(), error) {
		rows, err := s.tx.Query(ctx, exportSQL[t.Table], t.Args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, rows.Close, nil
	}, s.p.fail)
}

// exportSQL and importSQL are the statements of each copied table, with
// the columns sqlstore.ExportTables reads and sqlstore.ImportArgs writes.
var (
	// $1 now.
	exportSQL = sqlstore.ExportSQL(`SELECT instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item,
       CASE WHEN lock_token IS NOT NULL AND visible_at > $1 THEN $1 ELSE visible_at END, attempt_count, created_at
FROM worker_queue ORDER BY id`)
	importSQL = map[provider.Table]string{
		provider.TableInstances: `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status,
    current_execution_id, input, output, error, custom_status, custom_status_version,
    parent_instance_id, parent_execution_id, created_at, updated_at, last_error, last_error_at, values_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, nullif($11::text, ''), $12, $13, $14, $15,
    CASE WHEN $15::text IS NULL THEN NULL ELSE $14::bigint END, $16)`,
		provider.TableExecutions: `INSERT INTO executions (instance_id, execution_id, status, input, output, error, started_at, completed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8::bigint, 0))`,
		provider.TableHistory: `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`,
		provider.TableOrchestratorQ: `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, attempt_count, created_at)
VALUES ($1, $2, $3, $4, $5)`,
		// The row's activity name and queue come from its work item, as in
		// sqlInsertWork, so a copied activity keeps its routing.
		provider.TableWorkerQ: `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, attempt_count, created_at,
    activity_name, queue)
VALUES ($1, $2, $3, nullif($4::text, ''), $5::text, $6, $7, $8, $5::jsonb ->> 'name', coalesce($5::jsonb ->> 'queue', ''))`,
		provider.TableExecutionLocks: `INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms)
VALUES ($1, $2, $3, $4, $5)`,
		provider.TableQueuedStarts: `INSERT INTO lock_queue (lock_key, instance_id, work_item, visible_at, ttl_ms, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`,
		provider.TableIdempotencyKeys: `INSERT INTO idempotency_keys (idem_key, instance_id, created_at, expires_at, purged_at)
VALUES ($1, $2, $3, $4, nullif($5::bigint, 0))`,
		provider.TableDeadLetters: `INSERT INTO dead_letters (queue, instance_id, payload, error, dead_at) VALUES ($1, $2, $3, $4, $5)`,
		provider.TableValues:      `INSERT INTO instance_values (instance_id, value_key, value, updated_at) VALUES ($1, $2, $3, $4)`,
		// A pause is the instance's lock row that never expires (0005).
		provider.TablePauses: `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at, pause_reason, paused_by)
VALUES ($1, $5, $6, $2, $3, $4)`,
		provider.TableSchedules: `INSERT INTO schedules (schedule_id, spec, paused, next_fire_at, last_fire_at, last_instance_id, last_outcome,
    revision, created_at, updated_at)
VALUES ($1, $2, $3, nullif($4::bigint, 0), nullif($5::bigint, 0), $6, $7, $8, $9, $10)`,
	}
)

// CopyCounts counts the rows of each copied table; see provider.Importer.
func (p *Provider) CopyCounts(ctx context.Context) (provider.TableCounts, error) {
	var c provider.TableCounts
	err := p.read(ctx, "counting rows", func() error {
		return p.pool.QueryRow(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters,
			&c.Values, &c.Pauses, &c.Schedules)
	})
	return c, err
}

// Import writes records in one transaction; see provider.Importer. Once
// committed it wakes the dispatchers of every node on the schema.
func (p *Provider) Import(ctx context.Context, records []provider.Record) error {
	return p.write(ctx, "importing", func(w *wtx) error {
		for _, rec := range records {
			if err := importRecord(w, rec); err != nil {
				return err
			}
		}
		w.changes.orch, w.changes.work = true, true
		return nil
	})
}

func importRecord(w *wtx, rec provider.Record) error {
	row, err := sqlstore.ImportArgs(rec)
	if err != nil {
		return err
	}
	_, err = w.tx.Exec(w.ctx, importSQL[row.Table], row.Args...)
	return interpretError(err, row.Conflict)
}
