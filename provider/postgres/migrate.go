package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]sqlstore.Migration, error) {
	return sqlstore.Migrations(migrationFS, "migrations", "postgres")
}

// latestVersion is the schema version this release needs.
func latestVersion() (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// Migrate applies the pending schema migrations and records them in
// schema_migrations, all in one transaction under an advisory lock keyed by
// the schema, so nodes starting together never race: the first applies
// them, the others wait for it and then find nothing to do. It fails, and
// changes nothing, if the schema was migrated by a newer release.
func (p *Provider) Migrate(ctx context.Context) error {
	const op = "migrating"
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	var applied []string
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		applied = applied[:0]
		// Waiting for another node's migration, and a migration that
		// rewrites a large table, may take longer than the bounds of
		// ordinary store calls (Options.LockTimeout, StatementTimeout).
		if _, err := tx.Exec(ctx, sqlUnboundedTx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlAdvisoryLock, "duroxide-migrate:"+p.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlCreateMigrationsTable); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, sqlMaxMigration).Scan(&current); err != nil {
			return err
		}
		if latest := ms[len(ms)-1].Version; current > latest {
			return fmt.Errorf("the schema %q is at version %d, newer than this release supports (%d): upgrade duroxide", p.schema, current, latest)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("applying migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, sqlInsertMigration, m.Version, m.Name, p.now()); err != nil {
				return err
			}
			applied = append(applied, m.Name)
		}
		return nil
	})
	if err != nil {
		return p.fail(op, err)
	}
	// Connections can be warmed now; those warmed before a migration are
	// warmed again (warm.go).
	p.warm.setReady(len(applied) > 0)
	for _, name := range applied {
		p.log.Info("postgres: applied schema migration", logkey.Migration, name, logkey.Path, p.schema)
	}
	return nil
}
