package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider/postgres"
)

// OpenPostgres opens the PostgreSQL store of a --db postgres://... value.
// Only the modes that set a store up create a missing schema; the others
// refuse it, naming it, so a mistyped ?schema= is never made into an empty
// store.
func OpenPostgres(ctx context.Context, spec Spec, mode Mode, logger *slog.Logger) (Store, error) {
	p, err := postgres.Open(ctx, spec.DSN, &postgres.Options{
		Schema:         spec.Schema,
		NoMigrate:      mode == NoMigrate,
		NoCreateSchema: !mode.createsSchema(),
		Logger:         logger,
		// Only the stores that serve (serve, bench, the target of copy)
		// keep warm connections open; a one-shot command opens none
		// ahead of its calls.
		MinConns: minConns(mode),
	})
	if errors.Is(err, postgres.ErrSchemaNotFound) {
		return nil, &RedactedError{Msg: fmt.Sprintf(
			"the schema %q does not exist: check the ?%s= of the URL, or create the store with 'duroxide migrate' or 'duroxide serve'",
			cmp.Or(spec.Schema, postgres.DefaultSchema), SchemaParam), Err: err}
	}
	if err != nil {
		return nil, connectProblem(err)
	}
	return p, nil
}

// minConns is Options.MinConns for a store opened in mode: the default
// for Create, none for the one-shot commands.
func minConns(mode Mode) int32 {
	if mode == Create {
		return 0
	}
	return -1
}

// connectProblem shortens a failure to connect to its cause: the driver
// lists every address it tried, one line each, with the cause repeated.
func connectProblem(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &RedactedError{Msg: fmt.Sprintf("cannot connect to the server: no answer within the connect timeout (default %v, or connect_timeout=SECONDS in the URL): check the host and port of the URL and that the server is up", postgres.DefaultConnectTimeout), Err: err}
	}
	return &RedactedError{Msg: fmt.Sprintf("cannot connect to the server: %s (check the host, port, user, password and database of the URL)", rootCause(ce)), Err: err}
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

// DropPostgresSchema drops a schema and everything in it (bench stores,
// tests).
func DropPostgresSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
