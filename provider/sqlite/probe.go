package sqlite

import (
	"context"
	"fmt"

	"github.com/duroxide/duroxide-go/provider"
)

// sqlProbeWrite rewrites the newest migration record with its own value:
// a real write (it takes the write lock and commits a page) that changes
// nothing.
const sqlProbeWrite = `UPDATE schema_migrations SET version = version WHERE version = ?`

// sqlProbeMigrationsTable counts the migrations table: 0 on a store never
// migrated.
const sqlProbeMigrationsTable = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`

// CheckWritable reports whether the store can serve: it answers, its
// schema is migrated to this release's version, and it accepts writes. The
// write check commits a transaction that rewrites the newest migration
// record with its own value, so it fails on a read-only file, a full disk
// or a database locked by another process beyond the busy timeout.
//
// A schema behind this release is reported with a message that says to
// run the migrations; other errors wrap the provider sentinels as every
// store call does (provider.IsRetryable tells transient ones apart).
func (p *Provider) CheckWritable(ctx context.Context) error {
	const op = "checking the store is writable"
	if p.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	// Only a store without the migrations table is called not migrated;
	// any other failure is reported as what it is.
	var tables int
	if err := p.readers.QueryRowContext(ctx, sqlProbeMigrationsTable).Scan(&tables); err != nil {
		return fmt.Errorf("sqlite: %s: reading the schema: %w", op, interpretError(err, nil))
	}
	if tables == 0 {
		return fmt.Errorf("sqlite: %s: the store is not migrated: run duroxide migrate", op)
	}
	var current int
	if err := p.readers.QueryRowContext(ctx, sqlMaxMigration).Scan(&current); err != nil {
		return fmt.Errorf("sqlite: %s: reading the schema version: %w", op, interpretError(err, nil))
	}
	if current < latest {
		return fmt.Errorf("sqlite: %s: the schema is at version %d, this release needs %d: run duroxide migrate", op, current, latest)
	}
	return p.write(ctx, op, func(w *wtx) error {
		_, err := w.tx.ExecContext(w.ctx, sqlProbeWrite, current)
		return interpretError(err, nil)
	})
}
