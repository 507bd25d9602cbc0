package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider/postgres"
)

// openPostgres opens the PostgreSQL store of a --db postgres://... value:
// dsn is the URL without the schema parameter, schema "" the store's
// default schema.
func openPostgres(ctx context.Context, dsn, schema string, noMigrate bool, logger *slog.Logger) (store, error) {
	p, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema, NoMigrate: noMigrate, Logger: logger})
	if err != nil {
		return nil, connectProblem(err)
	}
	return p, nil
}

// connectProblem shortens a failure to connect to its cause: the driver
// lists every address it tried, one line each, with the cause repeated.
func connectProblem(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	return &redactedError{msg: fmt.Sprintf("cannot connect to the server: %s (check the host, port, user, password and database of the URL)", rootCause(ce)), err: err}
}

// rootCause returns the innermost error of err's chain (the last one where
// it branches).
func rootCause(err error) error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err
			}
			err = errs[len(errs)-1]
		default:
			return err
		}
	}
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
