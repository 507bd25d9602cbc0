package sqlite

import (
	"database/sql"
	"database/sql/driver"
	"errors"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// interpretError translates an error from the driver or database/sql into
// the provider's sentinels; it is the only place that looks at driver
// errors. conflict is what a UNIQUE or PRIMARY KEY violation means to the
// caller (for example ErrDuplicateEvent when appending history); nil means
// ErrInvalidArgument. Errors that already carry a sentinel, context errors
// and nil pass through unchanged.
func interpretError(err error, conflict error) error {
	if sqlstore.Classified(err) {
		return err
	}
	var le *sqlite.Error
	if errors.As(err, &le) {
		if s := sentinelForCode(le.Code(), conflict); s != nil {
			return sqlstore.Translated(s, err)
		}
		return err
	}
	switch {
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, driver.ErrBadConn):
		return sqlstore.Translated(provider.ErrUnavailable, err)
	case errors.Is(err, sql.ErrTxDone):
		return sqlstore.Translated(provider.ErrBusy, err)
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
