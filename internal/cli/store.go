package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

const (
	// envDB names the store when --db is absent.
	envDB = "DUROXIDE_DB"
	// defaultDB is the store when neither --db nor DUROXIDE_DB is set.
	defaultDB = "sqlite:duroxide.db"
)

// storeSpec is a parsed --db value.
type storeSpec struct {
	raw    string // as given, for messages
	source string // "--db", "$DUROXIDE_DB" or "the default"
	path   string // SQLite path; "" for in-memory
	memory bool
}

// parseDB interprets a --db value: sqlite:PATH, sqlite::memory:, a bare
// path ending in .db (or .sqlite, .sqlite3), or a PostgreSQL URL.
func parseDB(raw string) (storeSpec, error) {
	s := storeSpec{raw: raw}
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return s, usageErrorf("the PostgreSQL store is not built yet: use an SQLite store, e.g. --db sqlite:duroxide.db")
	case strings.HasPrefix(lower, "sqlite:"):
		s.path = raw[len("sqlite:"):]
		s.path = strings.TrimPrefix(s.path, "//") // sqlite:///abs/path.db, sqlite://rel.db
		if s.path == "" {
			return s, usageErrorf("--db %q names no file: use sqlite:PATH, e.g. sqlite:duroxide.db, or sqlite::memory:", raw)
		}
	case strings.HasSuffix(lower, ".db"), strings.HasSuffix(lower, ".sqlite"), strings.HasSuffix(lower, ".sqlite3"):
		s.path = raw
	default:
		return s, usageErrorf("cannot tell which store --db %q is: use sqlite:PATH, sqlite::memory:, a path ending in .db, or postgres://...", raw)
	}
	if s.path == ":memory:" {
		s.path, s.memory = "", true
	}
	return s, nil
}

// resolveStore resolves --db, then $DUROXIDE_DB, then the default.
func (inv *invocation) resolveStore() (storeSpec, error) {
	raw, source := inv.db, "--db"
	if raw == "" {
		raw, source = inv.getenv(envDB), "$"+envDB
	}
	if raw == "" {
		raw, source = defaultDB, "the default"
	}
	s, err := parseDB(raw)
	s.source = source
	if err != nil && source != "--db" {
		return s, usageErrorf("%v (from %s)", err, source)
	}
	return s, err
}

// openMode says what opening a store may do.
type openMode int

const (
	// openExisting fails with a helpful message if the SQLite file does not
	// exist, rather than creating an empty store to read from.
	openExisting openMode = iota
	// openCreate creates the store if needed and migrates it.
	openCreate
	// openNoMigrate opens (creating the file if needed) without migrating.
	openNoMigrate
)

// logger is the logger of the store and the runtime: warnings and errors on
// standard error.
func (inv *invocation) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(inv.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openStore opens the store named by --db.
func (inv *invocation) openStore(ctx context.Context, mode openMode) (*sqlite.Provider, storeSpec, error) {
	spec, err := inv.resolveStore()
	if err != nil {
		return nil, spec, err
	}
	if mode == openExisting && !spec.memory {
		if _, err := os.Stat(spec.path); errors.Is(err, fs.ErrNotExist) {
			return nil, spec, fmt.Errorf("no store at %s (from %s): point --db or $%s at your store, or create one with 'duroxide migrate' or 'duroxide serve'", spec.path, spec.source, envDB)
		}
	}
	p, err := sqlite.Open(ctx, spec.path, &sqlite.Options{Logger: inv.logger(), NoMigrate: mode == openNoMigrate})
	if err != nil {
		return nil, spec, fmt.Errorf("opening store %s: %w", spec.raw, err)
	}
	return p, spec, nil
}

// openClient opens the store and returns a client of it and a function
// that closes the store.
func (inv *invocation) openClient(ctx context.Context, mode openMode) (*duroxide.Client, func(), error) {
	p, _, err := inv.openStore(ctx, mode)
	if err != nil {
		return nil, nil, err
	}
	return duroxide.NewClient(p), func() {
		if err := p.Close(); err != nil {
			fmt.Fprintf(inv.stderr, "duroxide: closing store: %v\n", err)
		}
	}, nil
}
