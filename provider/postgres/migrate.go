package postgres

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change, embedded from migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. A file is
// named NNNN_description.sql; its version is NNNN.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("postgres: migration file %q is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("postgres: migration file %q has no valid version number", name)
		}
		b, err := migrationFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("postgres: two migrations have version %d", ms[i].version)
		}
	}
	return ms, nil
}

// latestVersion is the schema version this release needs.
func latestVersion() (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].version, nil
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
		if latest := ms[len(ms)-1].version; current > latest {
			return fmt.Errorf("the schema %q is at version %d, newer than this release supports (%d): upgrade duroxide", p.schema, current, latest)
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("applying migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, sqlInsertMigration, m.version, m.name, p.now()); err != nil {
				return err
			}
			applied = append(applied, m.name)
		}
		return nil
	})
	if err != nil {
		return p.fail(op, err)
	}
	for _, name := range applied {
		p.log.Info("postgres: applied schema migration", logkey.Migration, name, logkey.Path, p.schema)
	}
	return nil
}
