// Package storeurl opens the store a --db value names, for the duroxide
// command and for the replay-check command built into users' binaries
// (package replaycheck): it parses sqlite:PATH, PATH.db and postgres://...
// URLs, falls back to $DUROXIDE_DB and then sqlite:duroxide.db, keeps
// passwords out of every message, and opens SQLite or PostgreSQL with the
// rules of the mode (whether a missing file or schema is created, whether
// the schema is migrated).
//
// It depends only on the root package and the two stores, so that a binary
// embedding replay-check does not pull in the HTTP API or the dashboard.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

const (
	// EnvDB names the store when --db is absent.
	EnvDB = "DUROXIDE_DB"
	// DefaultDB is the store when neither --db nor DUROXIDE_DB is set.
	DefaultDB = "sqlite:duroxide.db"
	// FlagUsage is the help text of a --db flag.
	FlagUsage = "the store: sqlite:PATH, sqlite::memory:, PATH.db or postgres://... (default $" + EnvDB + ", else " + DefaultDB + ")"
)

// Store is what the commands need of a store: the provider contract, plus
// migration and the writability probe that both stores have.
type Store interface {
	provider.Provider
	// Migrate applies pending schema migrations.
	Migrate(ctx context.Context) error
	// CheckWritable reports whether the store answers, is migrated and
	// accepts writes.
	CheckWritable(ctx context.Context) error
}

// Store kinds.
const (
	KindSQLite   = "sqlite"
	KindPostgres = "postgres"
)

// Spec is a parsed --db value.
type Spec struct {
	Raw     string // as given; may hold a password: never print it
	Display string // Raw with any password replaced by "xxxxx", for messages
	Source  string // "--db", "$DUROXIDE_DB" or "the default"
	Kind    string // KindSQLite or KindPostgres

	Path   string // SQLite path; "" for in-memory
	Memory bool

	DSN    string // PostgreSQL connection URL, without the schema parameter
	Schema string // PostgreSQL schema; "" for the store's default

	password string // the password in the URL, to redact from messages
}

// UsageError is a malformed --db value, or any other error in how a
// command was invoked (exit code 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// SchemaParam is the query parameter of a PostgreSQL URL that selects the
// schema holding the store's tables.
const SchemaParam = "schema"

// schemaName is what a --db schema may be: a plain, unquoted PostgreSQL
// identifier (at most 63 bytes).
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Parse interprets a --db value: sqlite:PATH, sqlite::memory:, a bare
// path ending in .db (or .sqlite, .sqlite3), or a PostgreSQL URL
// (postgres:// or postgresql://, optionally with ?schema=NAME). Its errors
// are *UsageError.
func Parse(raw string) (Spec, error) {
	s := Spec{Raw: raw, Display: raw, Kind: KindSQLite}
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return parsePostgresURL(raw)
	case strings.HasPrefix(lower, "sqlite:"):
		s.Path = raw[len("sqlite:"):]
		s.Path = strings.TrimPrefix(s.Path, "//") // sqlite:///abs/path.db, sqlite://rel.db
		if s.Path == "" {
			return s, Usagef("--db %q names no file: use sqlite:PATH, e.g. sqlite:duroxide.db, or sqlite::memory:", raw)
		}
	case strings.HasSuffix(lower, ".db"), strings.HasSuffix(lower, ".sqlite"), strings.HasSuffix(lower, ".sqlite3"):
		s.Path = raw
	default:
		return s, Usagef("cannot tell which store --db %q is: use sqlite:PATH, sqlite::memory:, a path ending in .db, or postgres://...", raw)
	}
	if s.Path == ":memory:" {
		s.Path, s.Memory = "", true
	}
	return s, nil
}

// parsePostgresURL checks a PostgreSQL URL and takes its schema parameter
// out: the rest goes to the driver as it is.
func parsePostgresURL(raw string) (Spec, error) {
	s := Spec{Raw: raw, Kind: KindPostgres}
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the whole URL, password included.
		return s, Usagef("--db: not a valid PostgreSQL URL (%s): use postgres://USER:PASSWORD@HOST:PORT/DATABASE?schema=NAME", urlProblem(err))
	}
	if pw, ok := u.User.Password(); ok {
		s.password = pw
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		s.Display = u.Redacted()
		return s, Usagef("--db: the parameters of the PostgreSQL URL are malformed (%s): write them as ?name=value&name=value", urlProblem(err))
	}
	if pw := q.Get("password"); pw != "" && s.password == "" {
		s.password = pw
	}
	s.Display = redactURL(u)
	if u.Host == "" && q.Get("host") == "" {
		return s, Usagef("--db %s names no server: use postgres://USER:PASSWORD@HOST:PORT/DATABASE", s.Display)
	}
	if vs, ok := q[SchemaParam]; ok {
		if len(vs) != 1 || !schemaName.MatchString(vs[0]) {
			return s, Usagef("--db %s: ?%s= must name one schema: letters, digits and _, not starting with a digit, at most 63 characters", s.Display, SchemaParam)
		}
		s.Schema = vs[0]
		q.Del(SchemaParam)
		u.RawQuery = q.Encode()
	}
	s.DSN = u.String()
	return s, nil
}

// urlProblem is what url.Parse found wrong, without the URL itself.
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "malformed"
}

// redactURL prints u with its password (in the user info or the password
// parameter) replaced by "xxxxx".
func redactURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		q := c.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			c.RawQuery = q.Encode()
		}
	}
	return c.Redacted()
}

// Redact removes the spec's password from a message (a driver's error may
// quote the connection string). Only the password's fields are redacted: a
// URL's user info (":PASSWORD@") and a password parameter ("password=...",
// "password: ...", "password ..."), in each of its encodings; the same text
// elsewhere stays, so that a password equal to the user, the database or
// "postgres" does not turn postgres://postgres:postgres@db/postgres into
// xxxxx://xxxxx:xxxxx@db/xxxxx.
func (s Spec) Redact(msg string) string {
	if s.password == "" {
		return msg
	}
	forms := []string{s.password}
	for _, esc := range []string{url.QueryEscape(s.password), url.PathEscape(s.password), url.UserPassword("", s.password).String()[1:]} {
		if !slices.Contains(forms, esc) {
			forms = append(forms, esc)
		}
	}
	for _, f := range forms {
		msg = strings.ReplaceAll(msg, ":"+f+"@", ":xxxxx@")
		param := regexp.MustCompile(`(?i)(password\s*[=:]?\s*['"]?)` + regexp.QuoteMeta(f))
		msg = param.ReplaceAllString(msg, "${1}xxxxx")
	}
	return msg
}

// RedactedError is an error whose message had a password removed; it
// still wraps the original for errors.Is and errors.As.
type RedactedError struct {
	Msg string
	Err error
}

func (e *RedactedError) Error() string { return e.Msg }
func (e *RedactedError) Unwrap() error { return e.Err }

// WrapErr wraps err with context, removing the spec's password from it.
func (s Spec) WrapErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &RedactedError{Msg: s.Redact(fmt.Sprintf(format, args...) + ": " + err.Error()), Err: err}
}

// Resolve resolves the store: flag (the --db value) if set, then
// $DUROXIDE_DB (read with getenv), then DefaultDB.
func Resolve(flag string, getenv func(string) string) (Spec, error) {
	raw, source := flag, "--db"
	if raw == "" {
		raw, source = getenv(EnvDB), "$"+EnvDB
	}
	if raw == "" {
		raw, source = DefaultDB, "the default"
	}
	return ResolveSpec(raw, source)
}

// ResolveSpec parses raw, a store named by source (for messages).
func ResolveSpec(raw, source string) (Spec, error) {
	s, err := Parse(raw)
	s.Source = source
	if err != nil && source != "--db" {
		return s, Usagef("%v (from %s)", err, source)
	}
	return s, err
}

// Mode says what opening a store may do.
type Mode int

const (
	// Existing fails with a helpful message if the SQLite file or the
	// PostgreSQL schema does not exist, rather than creating an empty
	// store to read from (a mistyped name would otherwise look like an
	// empty store).
	Existing Mode = iota
	// Create creates the store if needed and migrates it (serve, the
	// target of copy).
	Create
	// NoMigrate opens (creating the file or schema if needed) without
	// migrating (migrate).
	NoMigrate
	// CreateFile creates an SQLite file if needed and migrates it, but
	// refuses a missing PostgreSQL schema as Existing does (start).
	CreateFile
)

// createsSchema reports whether opening a store in mode may create a
// missing PostgreSQL schema.
func (m Mode) createsSchema() bool { return m == Create || m == NoMigrate }

// Open opens the store spec names in mode; logger receives the store's
// log records.
func Open(ctx context.Context, spec Spec, mode Mode, logger *slog.Logger) (Store, error) {
	if spec.Kind == KindPostgres {
		p, err := OpenPostgres(ctx, spec, mode, logger)
		if err != nil {
			return nil, spec.WrapErr(err, "opening PostgreSQL store %s", spec.Display)
		}
		return p, nil
	}
	if mode == Existing && !spec.Memory {
		if _, err := os.Stat(spec.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no store at %s (from %s): point --db or $%s at your store, or create one with 'duroxide migrate' or 'duroxide serve'", spec.Path, spec.Source, EnvDB)
		}
	}
	p, err := sqlite.Open(ctx, spec.Path, &sqlite.Options{Logger: logger, NoMigrate: mode == NoMigrate})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", spec.Display, err)
	}
	return p, nil
}
