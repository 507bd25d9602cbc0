package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Compile-time checks of the copy capabilities.
var (
	_ provider.Exporter = (*Provider)(nil)
	_ provider.Importer = (*Provider)(nil)
)

// BeginExport opens a read transaction on the store: its snapshot (WAL
// isolation) is what the export streams, however long it takes and
// whatever other processes commit meanwhile. See provider.Exporter.
func (p *Provider) BeginExport(ctx context.Context) (provider.Snapshot, error) {
	const op = "exporting"
	s := &snapshot{p: p, now: p.now()}
	err := p.read(ctx, op, func() error {
		tx, err := p.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return interpretError(err, nil)
		}
		s.tx = tx
		c := &s.counts
		if err := tx.QueryRowContext(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters); err != nil {
			_ = tx.Rollback()
			return interpretError(err, nil)
		}
		l := &s.leases
		if err := tx.QueryRowContext(ctx, sqlCopyLiveLeases, s.now).Scan(&l.InstanceLocks, &l.WorkerLeases, &l.Sessions); err != nil {
			_ = tx.Rollback()
			return interpretError(err, nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// snapshot is an open export: a read transaction.
type snapshot struct {
	p      *Provider
	tx     *sql.Tx
	now    int64
	counts provider.TableCounts
	leases provider.LiveLeases
}

func (s *snapshot) Counts() provider.TableCounts { return s.counts }
func (s *snapshot) Leases() provider.LiveLeases  { return s.leases }

func (s *snapshot) Close() error {
	if err := s.tx.Rollback(); err != nil && err != sql.ErrTxDone {
		return fmt.Errorf("sqlite: closing the export: %w", interpretError(err, nil))
	}
	return nil
}

// exportQuery is one table's export: its query and how a row becomes a record.
type exportQuery struct {
	table provider.Table
	query string
	args  []any
	scan  func(r *sql.Rows) (provider.Record, error)
}

func (s *snapshot) Records(ctx context.Context) iter.Seq2[provider.Record, error] {
	return func(yield func(provider.Record, error) bool) {
		for _, q := range s.queries() {
			err := s.stream(ctx, q, yield)
			if err == errStopped {
				return
			}
			if err != nil {
				yield(nil, s.p.fail("exporting "+string(q.table), err))
				return
			}
		}
	}
}

// errStopped: the consumer of Records stopped the iteration.
var errStopped = fmt.Errorf("iteration stopped")

func (s *snapshot) stream(ctx context.Context, q exportQuery, yield func(provider.Record, error) bool) error {
	rows, err := s.tx.QueryContext(ctx, q.query, q.args...)
	if err != nil {
		return interpretError(err, nil)
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := q.scan(rows)
		if err != nil {
			return interpretError(err, nil)
		}
		if !yield(rec, nil) {
			return errStopped
		}
	}
	return interpretError(rows.Err(), nil)
}

func (s *snapshot) queries() []exportQuery {
	return []exportQuery{
		{provider.TableInstances, sqlExportInstances, nil, scanInstanceRecord},
		{provider.TableExecutions, sqlExportExecutions, nil, func(r *sql.Rows) (provider.Record, error) {
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
			e.Input, e.Output, e.Error = sqlstore.NullJSON(input), sqlstore.NullJSON(output), sqlstore.NullJSON(errJ)
			e.StartedAt, e.CompletedAt = msTime(started), optTime(completedAt)
			return &e, nil
		}},
		{provider.TableHistory, sqlExportHistory, nil, func(r *sql.Rows) (provider.Record, error) {
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
		{provider.TableOrchestratorQ, sqlExportOrchestratorQ, nil, func(r *sql.Rows) (provider.Record, error) {
			var (
				m                rawItem
				visible, created int64
				rec              provider.OrchestratorMessageRecord
			)
			if err := r.Scan(&rec.InstanceID, &m, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(m), msTime(visible), msTime(created)
			return &rec, nil
		}},
		{provider.TableWorkerQ, sqlExportWorkerQ, []any{s.now}, func(r *sql.Rows) (provider.Record, error) {
			var (
				m                rawItem
				visible, created int64
				rec              provider.WorkerMessageRecord
			)
			if err := r.Scan(&rec.InstanceID, &rec.ExecutionID, &rec.ActivityID, &rec.SessionID, &m, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(m), msTime(visible), msTime(created)
			return &rec, nil
		}},
		{provider.TableExecutionLocks, sqlExportExecutionLocks, nil, func(r *sql.Rows) (provider.Record, error) {
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
		{provider.TableQueuedStarts, sqlExportQueuedStarts, nil, func(r *sql.Rows) (provider.Record, error) {
			var (
				rec                     provider.QueuedStartRecord
				m                       rawItem
				visible, ttlMs, created int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &m, &visible, &ttlMs, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(m), msTime(visible), msTime(created)
			rec.TTL = time.Duration(ttlMs) * time.Millisecond
			return &rec, nil
		}},
		{provider.TableIdempotencyKeys, sqlExportIdempotency, nil, func(r *sql.Rows) (provider.Record, error) {
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
		{provider.TableDeadLetters, sqlExportDeadLetters, nil, func(r *sql.Rows) (provider.Record, error) {
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

// rawItem scans a stored JSON document, TEXT or BLOB, as bytes.
type rawItem []byte

func (m *rawItem) Scan(v any) error {
	switch v := v.(type) {
	case string:
		*m = []byte(v)
	case []byte:
		*m = append([]byte(nil), v...)
	default:
		return fmt.Errorf("%w: a stored document is %T, not text", provider.ErrCorruptData, v)
	}
	return nil
}

func scanInstanceRecord(r *sql.Rows) (provider.Record, error) {
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
	in.Input, in.Output, in.Error, in.CustomStatus, in.LastError = sqlstore.NullJSON(input), sqlstore.NullJSON(output), sqlstore.NullJSON(errJ), sqlstore.NullJSON(custom), sqlstore.NullJSON(lastErr)
	in.CreatedAt, in.UpdatedAt = msTime(created), msTime(updated)
	return &in, nil
}

// optTime converts a stored optional time (0: none) to the zero time or a time.
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

// nullText is a JSON document as a nullable TEXT argument.
func nullText(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// CopyCounts counts the rows of each copied table; see provider.Importer.
func (p *Provider) CopyCounts(ctx context.Context) (provider.TableCounts, error) {
	var c provider.TableCounts
	err := p.read(ctx, "counting rows", func() error {
		return interpretError(p.readers.QueryRowContext(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters), nil)
	})
	return c, err
}

// Import writes records in one write transaction; see provider.Importer.
// It wakes this process's dispatchers and waiters once committed.
func (p *Provider) Import(ctx context.Context, records []provider.Record) error {
	err := p.write(ctx, "importing", func(w *wtx) error {
		for _, rec := range records {
			if err := importRecord(w, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		p.hub.WakeAll()
	}
	return err
}

func importRecord(w *wtx, rec provider.Record) error {
	exec := func(conflict error, query string, args ...any) error {
		_, err := w.tx.ExecContext(w.ctx, query, args...)
		return interpretError(err, conflict)
	}
	switch r := rec.(type) {
	case *provider.InstanceRecord:
		return exec(provider.ErrInstanceExists, sqlImportInstance, r.InstanceID, r.OrchestrationName, r.OrchestrationVersion,
			string(r.Status), r.CurrentExecutionID, nullText(r.Input), nullText(r.Output), nullText(r.Error),
			nullText(r.CustomStatus), r.CustomStatusVersion, r.ParentInstanceID, r.ParentExecutionID,
			r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli(), nullText(r.LastError))
	case *provider.ExecutionRecord:
		return exec(provider.ErrInstanceExists, sqlImportExecution, r.InstanceID, r.ExecutionID, string(r.Status),
			nullText(r.Input), nullText(r.Output), nullText(r.Error), r.StartedAt.UnixMilli(), optMs(r.CompletedAt))
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
