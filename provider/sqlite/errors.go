package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/duroxide/duroxide-go/provider"
)

// storeError is a driver error translated to a provider sentinel. Both stay
// reachable with errors.Is/As.
type storeError struct {
	sentinel error
	cause    error
}

func (e *storeError) Error() string   { return fmt.Sprintf("%v: %v", e.sentinel, e.cause) }
func (e *storeError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// sentinels are the provider errors that need no translation.
var sentinels = []error{
	provider.ErrNotFound, provider.ErrInstanceExists, provider.ErrLockLost, provider.ErrDuplicateEvent,
	provider.ErrCorruptData, provider.ErrStillRunning, provider.ErrChildInstance, provider.ErrInvalidArgument,
	provider.ErrClosed, provider.ErrBusy, provider.ErrUnavailable, provider.ErrLocked, provider.ErrLockContended,
}

// interpretError translates an error from the driver or database/sql into
// the provider's sentinels; it is the only place that looks at driver
// errors. conflict is what a UNIQUE or PRIMARY KEY violation means to the
// caller (for example ErrDuplicateEvent when appending history); nil means
// ErrInvalidArgument. Errors that already carry a sentinel, context errors
// and nil pass through unchanged.
func interpretError(err error, conflict error) error {
	if err == nil {
		return nil
	}
	var se *storeError
	if errors.As(err, &se) {
		return err
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return err
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var le *sqlite.Error
	if errors.As(err, &le) {
		if s := sentinelForCode(le.Code(), conflict); s != nil {
			return &storeError{sentinel: s, cause: err}
		}
		return err
	}
	switch {
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, driver.ErrBadConn):
		return &storeError{sentinel: provider.ErrUnavailable, cause: err}
	case errors.Is(err, sql.ErrTxDone):
		return &storeError{sentinel: provider.ErrBusy, cause: err}
	}
	return err
}

// sentinelForCode maps an SQLite result code (primary or extended); nil for
// codes that say nothing about retrying (such as SQLITE_ERROR), which stay
// permanent, unknown errors.
func sentinelForCode(code int, conflict error) error {
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		if conflict != nil {
			return conflict
		}
		return provider.ErrInvalidArgument
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_READONLY_DBMOVED, sqlite3.SQLITE_READONLY_DIRECTORY, sqlite3.SQLITE_READONLY_ROLLBACK:
		// The file (or its directory or journal) cannot be written: a
		// retry will not mend that, so the error stays permanent. The other
		// read-only codes (recovery, locking) pass.
		return nil
	}
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_PROTOCOL:
		return provider.ErrBusy
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM,
		sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOLFS, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return provider.ErrUnavailable
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return provider.ErrCorruptData
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
		return provider.ErrInvalidArgument
	}
	return nil
}
