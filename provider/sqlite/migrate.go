package sqlite

import (
	"context"
	"embed"
	"fmt"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]sqlstore.Migration, error) {
	return sqlstore.Migrations(migrationFS, "migrations", "sqlite")
}

// Migrate applies the pending schema migrations, each in its own
// transaction, and records them in schema_migrations. It is safe to run
// concurrently from several processes: each migration's transaction takes
// the write lock first and skips the migration if another process applied
// it meanwhile. It fails if the database was migrated by a newer release.
func (p *Provider) Migrate(ctx context.Context) error {
	if p.closed.Load() {
		return fmt.Errorf("sqlite: migrating: %w", provider.ErrClosed)
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	// On a file store the writer's connection is pinned: wait for the
	// transaction it may be running (see writer.go).
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if _, err := p.writer.ExecContext(ctx, sqlCreateMigrationsTable); err != nil {
		return p.fail("migrating", err)
	}
	var current int
	if err := p.writer.QueryRowContext(ctx, sqlMaxMigration).Scan(&current); err != nil {
		return p.fail("migrating", err)
	}
	if latest := ms[len(ms)-1].Version; current > latest {
		return fmt.Errorf("sqlite: the database schema is at version %d, newer than this release supports (%d): upgrade duroxide", current, latest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if err := p.applyMigration(ctx, m); err != nil {
			return p.fail("applying migration "+m.Name, err)
		}
	}
	return nil
}

func (p *Provider) applyMigration(ctx context.Context, m sqlstore.Migration) error {
	tx, err := p.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE: serialized with other processes
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, sqlMigrationApplied, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil // another process applied it
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlInsertMigration, m.Version, m.Name, p.now()); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p.log.Info("sqlite: applied schema migration", logkey.Migration, m.Name, logkey.Path, p.path)
	return nil
}
