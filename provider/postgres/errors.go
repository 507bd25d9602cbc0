package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// constraintMeaning maps the unique constraints whose violation means
// something specific to the provider; other unique violations are
// ErrInvalidArgument.
var constraintMeaning = map[string]error{
	// An ack appended an event ID the execution already has.
	"history_pkey": provider.ErrDuplicateEvent,
	// Another transaction took the same execution lock key at the same time.
	"execution_locks_pkey": provider.ErrLockContended,
	// Another transaction created the same instance at the same time (the
	// instance insert waits for it, so this is only met on a race the
	// statement could not resolve).
	"instances_instance_id_key": provider.ErrInstanceExists,
	// Another transaction stored the same idempotency key at the same time:
	// retrying meets the key.
	"idempotency_keys_pkey": provider.ErrLockContended,
}

// interpretError translates an error from pgx or the server into the
// provider's sentinels; it is the only place that looks at driver errors.
// conflict is what a unique violation means to the caller when its
// constraint has no meaning of its own (nil: ErrInvalidArgument). Errors
// that already carry a sentinel, context errors and nil pass through
// unchanged.
func interpretError(err error, conflict error) error {
	if err == nil {
		return nil
	}
	// A failure to connect, also one cut short by the connect timeout, is
	// unavailability (decided before context errors pass through as they
	// are); the context's error stays reachable with errors.Is.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && !errors.As(err, new(*pgconn.PgError)) && !errors.As(err, new(*sqlstore.StoreError)) {
		return sqlstore.Translated(provider.ErrUnavailable, err)
	}
	if sqlstore.Classified(err) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if s := sentinelForCode(pe, conflict); s != nil {
			return sqlstore.Translated(s, err)
		}
		return err
	}
	if errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return sqlstore.Translated(provider.ErrBusy, err)
	}
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err), pgconn.Timeout(err), isClosedConn(err):
		return sqlstore.Translated(provider.ErrUnavailable, err)
	}
	return err
}

// isClosedConn recognizes the errors pgx returns for a connection that
// broke or was closed under a statement.
func isClosedConn(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "closed pool") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "connection reset")
}

// sentinelForCode maps a server error; nil for codes that say nothing about
// retrying, which stay permanent, unknown errors.
func sentinelForCode(pe *pgconn.PgError, conflict error) error {
	switch pe.Code {
	case "23505": // unique_violation
		if s, ok := constraintMeaning[pe.ConstraintName]; ok {
			return s
		}
		if conflict != nil {
			return conflict
		}
		return provider.ErrInvalidArgument
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available
		"57014", // query_canceled (statement timeout)
		"0A000": // feature_not_supported: "cached plan must not change result type" after a migration
		return provider.ErrBusy
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"57P04", // database_dropped
		"25006": // read_only_sql_transaction (a standby after failover)
		return provider.ErrUnavailable
	case "42P01", "42703", "3F000": // undefined table / column / schema: not migrated
		return nil
	}
	switch pe.Code[:2] {
	case "08": // connection exceptions
		return provider.ErrUnavailable
	case "53": // insufficient resources (too many connections, out of memory, disk full)
		return provider.ErrBusy
	case "58", "XX": // system and internal errors
		return provider.ErrUnavailable
	case "22", "23": // data exceptions (a NUL byte in text...), other integrity violations
		return provider.ErrInvalidArgument
	}
	return nil
}

// describeFailure says in a few words what made a store call fail, for
// readiness checks and operators: the server refused the connection, did
// not answer, is read-only, the schema is not migrated... "" when it says
// nothing more than the error itself.
func describeFailure(err error, schema string) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "42P01" || pe.Code == "3F000":
			return fmt.Sprintf("the schema %q is not migrated: run duroxide migrate", schema)
		case pe.Code == "25006":
			return "the server is read-only (a standby, e.g. after a failover): point the store at the primary"
		case pe.Code == "42501":
			return "permission denied: the role lacks a privilege on the store's schema"
		case pe.Code == "53100":
			return "the server's disk is full"
		case pe.Code == "55P03":
			return "a lock wait timed out (lock_timeout): another session holds a lock the check needs"
		case pe.Code == "57014":
			return "a statement was canceled (statement_timeout, or by an operator)"
		case pe.Code[:2] == "57", pe.Code[:2] == "08":
			return "the server is shutting down, starting up or dropped the connection"
		case pe.Code[:2] == "28":
			return "the server refused the credentials"
		case pe.Code[:2] == "53":
			return "the server is out of resources (too many connections, memory)"
		}
		return ""
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the server refused the connection: is it running, and are the host and port right?"
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), errors.As(err, &ne) && ne.Timeout():
		return "the server did not answer in time"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isClosedConn(err):
		return "the connection to the server broke"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the server's host cannot be reached over the network"
	case errors.As(err, new(*net.DNSError)):
		return "the server's host name does not resolve"
	case errors.Is(err, provider.ErrUnavailable):
		return "the server cannot be reached"
	}
	return ""
}
