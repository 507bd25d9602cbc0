package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// Copying the store: provider.Exporter and provider.Importer. The export
// is one REPEATABLE READ, read-only transaction, streamed table by table
// in the order rows were written. A row locked in this store is exported
// unlocked: a worker row's visible_at is then its lock expiry, so $1 (the
// export's now) caps it. The import inserts rows without locks.
//
// The SQL of the copy lives here rather than in queries.go, so this file
// can change on its own.

// Compile-time checks of the copy capabilities.
var (
	_ provider.Exporter = (*Provider)(nil)
	_ provider.Importer = (*Provider)(nil)
)

const (
	sqlCopyCounts = `SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM executions),
       (SELECT count(*) FROM history), (SELECT count(*) FROM orchestrator_queue),
       (SELECT count(*) FROM worker_queue), (SELECT count(*) FROM execution_locks),
       (SELECT count(*) FROM lock_queue), (SELECT count(*) FROM idempotency_keys),
       (SELECT count(*) FROM dead_letters)`
	// $1 now.
	sqlCopyLiveLeases = `SELECT (SELECT count(*) FROM instance_locks WHERE locked_until > $1),
       (SELECT count(*) FROM worker_queue WHERE lock_token IS NOT NULL AND locked_until > $1),
       (SELECT count(*) FROM sessions WHERE locked_until > $1)`

	sqlExportInstances = `SELECT instance_id, orchestration_name, orchestration_version, status, current_execution_id,
       input, output, error, custom_status, custom_status_version,
       coalesce(parent_instance_id, ''), parent_execution_id, created_at, updated_at, last_error
FROM instances ORDER BY seq`
	sqlExportExecutions = `SELECT instance_id, execution_id, status, input, output, error, started_at, coalesce(completed_at, 0)
FROM executions ORDER BY instance_id, execution_id`
	sqlExportHistory = `SELECT instance_id, execution_id, event_id, event_type, event_data, created_at
FROM history ORDER BY instance_id, execution_id, event_id`
	sqlExportOrchestratorQ = `SELECT instance_id, work_item, visible_at, attempt_count, created_at
FROM orchestrator_queue ORDER BY id`
	// $1 now.
	sqlExportWorkerQ = `SELECT instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item,
       CASE WHEN lock_token IS NOT NULL AND visible_at > $1 THEN $1 ELSE visible_at END, attempt_count, created_at
FROM worker_queue ORDER BY id`
	sqlExportExecutionLocks = `SELECT lock_key, instance_id, locked_at, expires_at, ttl_ms FROM execution_locks ORDER BY lock_key`
	sqlExportQueuedStarts   = `SELECT lock_key, instance_id, work_item, visible_at, ttl_ms, created_at FROM lock_queue ORDER BY id`
	sqlExportIdempotency    = `SELECT idem_key, instance_id, created_at, expires_at, coalesce(purged_at, 0) FROM idempotency_keys ORDER BY idem_key`
	sqlExportDeadLetters    = `SELECT queue, instance_id, payload, error, dead_at FROM dead_letters ORDER BY id`

	sqlImportInstance = `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status,
    current_execution_id, input, output, error, custom_status, custom_status_version,
    parent_instance_id, parent_execution_id, created_at, updated_at, last_error, last_error_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, nullif($11::text, ''), $12, $13, $14, $15,
    CASE WHEN $15::text IS NULL THEN NULL ELSE $14::bigint END)`
	sqlImportExecution = `INSERT INTO executions (instance_id, execution_id, status, input, output, error, started_at, completed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8::bigint, 0))`
	sqlImportEvent = `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`
	sqlImportOrchestratorQ = `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, attempt_count, created_at)
VALUES ($1, $2, $3, $4, $5)`
	sqlImportWorkerQ = `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, attempt_count, created_at)
VALUES ($1, $2, $3, nullif($4::text, ''), $5, $6, $7, $8)`
	sqlImportExecutionLock = `INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms)
VALUES ($1, $2, $3, $4, $5)`
	sqlImportQueuedStart = `INSERT INTO lock_queue (lock_key, instance_id, work_item, visible_at, ttl_ms, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`
	sqlImportIdempotency = `INSERT INTO idempotency_keys (idem_key, instance_id, created_at, expires_at, purged_at)
VALUES ($1, $2, $3, $4, nullif($5::bigint, 0))`
	sqlImportDeadLetter = `INSERT INTO dead_letters (queue, instance_id, payload, error, dead_at) VALUES ($1, $2, $3, $4, $5)`
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
				&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters)
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

// exportQuery is one table's export: its query and how a row becomes a record.
type exportQuery struct {
	table provider.Table
	query string
	args  []any
	scan  func(r pgx.Rows) (provider.Record, error)
}

// errStopped: the consumer of Records stopped the iteration.
var errStopped = errors.New("iteration stopped")

func (s *snapshot) Records(ctx context.Context) iter.Seq2[provider.Record, error] {
	return func(yield func(provider.Record, error) bool) {
		for _, q := range s.queries() {
			err := s.stream(ctx, q, yield)
			if errors.Is(err, errStopped) {
				return
			}
			if err != nil {
				yield(nil, s.p.fail("exporting "+string(q.table), err))
				return
			}
		}
	}
}

func (s *snapshot) stream(ctx context.Context, q exportQuery, yield func(provider.Record, error) bool) error {
	rows, err := s.tx.Query(ctx, q.query, q.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := q.scan(rows)
		if err != nil {
			return err
		}
		if !yield(rec, nil) {
			return errStopped
		}
	}
	return rows.Err()
}

// raw turns a nullable TEXT column into a JSON document (nil: NULL).
func raw(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// text turns a JSON document into a nullable TEXT argument.
func text(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// optTime converts a stored optional time (0: none).
func optTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return msTime(ms)
}

// optMs converts an optional time to stored milliseconds (0: none).
func optMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func (s *snapshot) queries() []exportQuery {
	return []exportQuery{
		{provider.TableInstances, sqlExportInstances, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				in                                   provider.InstanceRecord
				status                               string
				input, output, errJ, custom, lastErr *string
				created, updated                     int64
			)
			if err := r.Scan(&in.InstanceID, &in.OrchestrationName, &in.OrchestrationVersion, &status,
				&in.CurrentExecutionID, &input, &output, &errJ, &custom, &in.CustomStatusVersion,
				&in.ParentInstanceID, &in.ParentExecutionID, &created, &updated, &lastErr); err != nil {
				return nil, err
			}
			in.Status = provider.Status(status)
			in.Input, in.Output, in.Error, in.CustomStatus, in.LastError = raw(input), raw(output), raw(errJ), raw(custom), raw(lastErr)
			in.CreatedAt, in.UpdatedAt = msTime(created), msTime(updated)
			return &in, nil
		}},
		{provider.TableExecutions, sqlExportExecutions, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				e                    provider.ExecutionRecord
				status               string
				input, output, errJ  *string
				started, completedAt int64
			)
			if err := r.Scan(&e.InstanceID, &e.ExecutionID, &status, &input, &output, &errJ, &started, &completedAt); err != nil {
				return nil, err
			}
			e.Status = provider.Status(status)
			e.Input, e.Output, e.Error = raw(input), raw(output), raw(errJ)
			e.StartedAt, e.CompletedAt = msTime(started), optTime(completedAt)
			return &e, nil
		}},
		{provider.TableHistory, sqlExportHistory, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				e       provider.EventRecord
				data    string
				created int64
			)
			if err := r.Scan(&e.InstanceID, &e.ExecutionID, &e.EventID, &e.EventType, &data, &created); err != nil {
				return nil, err
			}
			e.Data, e.CreatedAt = json.RawMessage(data), msTime(created)
			return &e, nil
		}},
		{provider.TableOrchestratorQ, sqlExportOrchestratorQ, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec              provider.OrchestratorMessageRecord
				item             string
				visible, created int64
			)
			if err := r.Scan(&rec.InstanceID, &item, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), msTime(visible), msTime(created)
			return &rec, nil
		}},
		{provider.TableWorkerQ, sqlExportWorkerQ, []any{s.now}, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec              provider.WorkerMessageRecord
				item             string
				visible, created int64
			)
			if err := r.Scan(&rec.InstanceID, &rec.ExecutionID, &rec.ActivityID, &rec.SessionID, &item, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), msTime(visible), msTime(created)
			return &rec, nil
		}},
		{provider.TableExecutionLocks, sqlExportExecutionLocks, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec                    provider.ExecutionLockRecord
				locked, expires, ttlMs int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &locked, &expires, &ttlMs); err != nil {
				return nil, err
			}
			rec.LockedAt, rec.ExpiresAt, rec.TTL = msTime(locked), msTime(expires), time.Duration(ttlMs)*time.Millisecond
			return &rec, nil
		}},
		{provider.TableQueuedStarts, sqlExportQueuedStarts, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec                     provider.QueuedStartRecord
				item                    string
				visible, ttlMs, created int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &item, &visible, &ttlMs, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), msTime(visible), msTime(created)
			rec.TTL = time.Duration(ttlMs) * time.Millisecond
			return &rec, nil
		}},
		{provider.TableIdempotencyKeys, sqlExportIdempotency, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec                      provider.IdempotencyKeyRecord
				created, expires, purged int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &created, &expires, &purged); err != nil {
				return nil, err
			}
			rec.CreatedAt, rec.ExpiresAt, rec.PurgedAt = msTime(created), msTime(expires), optTime(purged)
			return &rec, nil
		}},
		{provider.TableDeadLetters, sqlExportDeadLetters, nil, func(r pgx.Rows) (provider.Record, error) {
			var (
				rec provider.DeadLetterRecord
				at  int64
			)
			if err := r.Scan(&rec.Queue, &rec.InstanceID, &rec.Payload, &rec.Error, &at); err != nil {
				return nil, err
			}
			rec.DeadAt = msTime(at)
			return &rec, nil
		}},
	}
}

// CopyCounts counts the rows of each copied table; see provider.Importer.
func (p *Provider) CopyCounts(ctx context.Context) (provider.TableCounts, error) {
	var c provider.TableCounts
	err := p.read(ctx, "counting rows", func() error {
		return p.pool.QueryRow(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters)
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
	exec := func(conflict error, query string, args ...any) error {
		_, err := w.tx.Exec(w.ctx, query, args...)
		return interpretError(err, conflict)
	}
	switch r := rec.(type) {
	case *provider.InstanceRecord:
		return exec(provider.ErrInstanceExists, sqlImportInstance, r.InstanceID, r.OrchestrationName, r.OrchestrationVersion,
			string(r.Status), r.CurrentExecutionID, text(r.Input), text(r.Output), text(r.Error),
			text(r.CustomStatus), r.CustomStatusVersion, r.ParentInstanceID, r.ParentExecutionID,
			r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli(), text(r.LastError))
	case *provider.ExecutionRecord:
		return exec(provider.ErrInstanceExists, sqlImportExecution, r.InstanceID, r.ExecutionID, string(r.Status),
			text(r.Input), text(r.Output), text(r.Error), r.StartedAt.UnixMilli(), optMs(r.CompletedAt))
	case *provider.EventRecord:
		return exec(provider.ErrDuplicateEvent, sqlImportEvent, r.InstanceID, r.ExecutionID, r.EventID, r.EventType,
			string(r.Data), r.CreatedAt.UnixMilli())
	case *provider.OrchestratorMessageRecord:
		return exec(nil, sqlImportOrchestratorQ, r.InstanceID, string(r.Item), r.VisibleAt.UnixMilli(), r.AttemptCount, r.CreatedAt.UnixMilli())
	case *provider.WorkerMessageRecord:
		return exec(nil, sqlImportWorkerQ, r.InstanceID, r.ExecutionID, r.ActivityID, r.SessionID, string(r.Item),
			r.VisibleAt.UnixMilli(), r.AttemptCount, r.CreatedAt.UnixMilli())
	case *provider.ExecutionLockRecord:
		return exec(nil, sqlImportExecutionLock, r.Key, r.InstanceID, r.LockedAt.UnixMilli(), r.ExpiresAt.UnixMilli(), sqlenc.DurMs(r.TTL))
	case *provider.QueuedStartRecord:
		return exec(nil, sqlImportQueuedStart, r.Key, r.InstanceID, string(r.Item), r.VisibleAt.UnixMilli(), sqlenc.DurMs(r.TTL), r.CreatedAt.UnixMilli())
	case *provider.IdempotencyKeyRecord:
		return exec(nil, sqlImportIdempotency, r.Key, r.InstanceID, r.CreatedAt.UnixMilli(), r.ExpiresAt.UnixMilli(), optMs(r.PurgedAt))
	case *provider.DeadLetterRecord:
		return exec(nil, sqlImportDeadLetter, r.Queue, r.InstanceID, r.Payload, r.Error, r.DeadAt.UnixMilli())
	case nil:
		return sqlenc.Invalid("a nil record")
	default:
		return sqlenc.Invalid("unknown record type %T", rec)
	}
}
