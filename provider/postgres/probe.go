package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
)

// CheckWritable reports whether the store can serve: the server answers,
// the schema is migrated to this release's version, and a write
// transaction commits. The write rewrites the newest migration record with
// its own value, so it fails on a read-only server (a standby after a
// failover), a full disk or missing privileges.
//
// The error says what failed: the server refused the connection or did
// not answer, the schema is not migrated or is behind this release, the
// server is read-only... It wraps the provider sentinels as every store
// call does (provider.IsRetryable tells transient ones apart).
func (p *Provider) CheckWritable(ctx context.Context) error {
	const op = "checking the store is writable"
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	latest, err := latestVersion()
	if err != nil {
		return err
	}
	var current int
	if err := p.pool.QueryRow(ctx, sqlMaxMigration).Scan(&current); err != nil {
		return p.probeFailure(op+": reading the schema version", err)
	}
	if current < latest {
		return fmt.Errorf("postgres: %s: the schema %q is at version %d, this release needs %d: run duroxide migrate", op, p.schema, current, latest)
	}
	if current > latest {
		return fmt.Errorf("postgres: %s: the schema %q is at version %d, newer than this release supports (%d): upgrade duroxide", op, p.schema, current, latest)
	}
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sqlProbeWrite, current)
		return err
	})
	if err != nil {
		return p.probeFailure(op+": writing", err)
	}
	return nil
}

// probeFailure is the error of a failed readiness check: what failed, in
// words (describeFailure), then the translated error.
func (p *Provider) probeFailure(op string, err error) error {
	err = p.fail(op, err)
	if what := describeFailure(err, p.schema); what != "" {
		return fmt.Errorf("%s: %w", what, err)
	}
	return err
}
