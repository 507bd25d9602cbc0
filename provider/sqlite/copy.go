package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"iter"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
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
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters,
			&c.Values, &c.Pauses, &c.Schedules); err != nil {
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

// Records streams the export's tables; see provider.Snapshot.
func (s *snapshot) Records(ctx context.Context) iter.Seq2[provider.Record, error] {
	return sqlstore.Records(s.now, func(t sqlstore.ExportTable) (sqlstore.Rows, func(), error) {
		rows, err := s.tx.QueryContext(ctx, exportSQL[t.Table], t.Args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { _ = rows.Close() }, nil
	}, s.p.fail)
}

// CopyCounts counts the rows of each copied table; see provider.Importer.
func (p *Provider) CopyCounts(ctx context.Context) (provider.TableCounts, error) {
	var c provider.TableCounts
	err := p.read(ctx, "counting rows", func() error {
		return interpretError(p.readers.QueryRowContext(ctx, sqlCopyCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents,
			&c.OrchestratorQ, &c.WorkerQ, &c.ExecutionLocks, &c.QueuedStarts, &c.IdempotencyKeys, &c.DeadLetters,
			&c.Values, &c.Pauses, &c.Schedules), nil)
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
	row, err := sqlstore.ImportArgs(rec)
	if err != nil {
		return err
	}
	_, err = w.tx.ExecContext(w.ctx, importSQL[row.Table], row.Args...)
	return interpretError(err, row.Conflict)
}
