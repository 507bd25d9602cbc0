package cli

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider/postgres"
)

// openPostgres opens the PostgreSQL store of a --db postgres://... value:
// dsn is the URL without the schema parameter, schema "" the store's
// default schema.
func openPostgres(ctx context.Context, dsn, schema string, noMigrate bool, logger *slog.Logger) (store, error) {
	p, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema, NoMigrate: noMigrate, Logger: logger})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// dropPostgresSchema drops a schema and everything in it (bench stores,
// tests).
func dropPostgresSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
