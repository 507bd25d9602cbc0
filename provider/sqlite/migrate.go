package sqlite

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. File names
// are NNNN_description.sql; versions are unique and start at 1.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || path.Ext(name) != ".sql" {
			return nil, fmt.Errorf("sqlite: bad migration file name %q (want NNNN_name.sql)", name)
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
			return nil, fmt.Errorf("sqlite: two migrations have version %d", ms[i].version)
		}
	}
	return ms, nil
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
	if _, err := p.writer.ExecContext(ctx, sqlCreateMigrationsTable); err != nil {
		return p.fail("migrating", err)
	}
	var current int
	if err := p.writer.QueryRowContext(ctx, sqlMaxMigration).Scan(&current); err != nil {
		return p.fail("migrating", err)
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return fmt.Errorf("sqlite: the database schema is at version %d, newer than this release supports (%d): upgrade duroxide", current, latest)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if err := p.applyMigration(ctx, m); err != nil {
			return p.fail("applying migration "+m.name, err)
		}
	}
	return nil
}

func (p *Provider) applyMigration(ctx context.Context, m migration) error {
	tx, err := p.writer.BeginTx(ctx, nil) // BEGIN IMMEDIATE: serialized with other processes
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, sqlMigrationApplied, m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil // another process applied it
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlInsertMigration, m.version, m.name, p.now()); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p.log.Info("sqlite: applied schema migration", logkey.Migration, m.name, logkey.Path, p.path)
	return nil
}
