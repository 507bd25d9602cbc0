package cli

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

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

const (
	// envDB names the store when --db is absent.
	envDB = "DUROXIDE_DB"
	// defaultDB is the store when neither --db nor DUROXIDE_DB is set.
	defaultDB = "sqlite:duroxide.db"
)

// store is what the commands need of a store: the provider contract, plus
// migration and the writability probe that both stores have.
type store interface {
	provider.Provider
	// Migrate applies pending schema migrations.
	Migrate(ctx context.Context) error
	// CheckWritable reports whether the store answers, is migrated and
	// accepts writes.
	CheckWritable(ctx context.Context) error
}

// Store kinds.
const (
	kindSQLite   = "sqlite"
	kindPostgres = "postgres"
)

// storeSpec is a parsed --db value.
type storeSpec struct {
	raw     string // as given; may hold a password: never print it
	display string // raw with any password replaced by "xxxxx", for messages
	source  string // "--db", "$DUROXIDE_DB" or "the default"
	kind    string // kindSQLite or kindPostgres

	path   string // SQLite path; "" for in-memory
	memory bool

	dsn      string // PostgreSQL connection URL, without the schema parameter
	schema   string // PostgreSQL schema; "" for the store's default
	password string // the password in the URL, to redact from messages
}

// schemaParam is the query parameter of a PostgreSQL URL that selects the
// schema holding the store's tables.
const schemaParam = "schema"

// schemaName is what a --db schema may be: a plain, unquoted PostgreSQL
// identifier (at most 63 bytes).
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// parseDB interprets a --db value: sqlite:PATH, sqlite::memory:, a bare
// path ending in .db (or .sqlite, .sqlite3), or a PostgreSQL URL
// (postgres:// or postgresql://, optionally with ?schema=NAME).
func parseDB(raw string) (storeSpec, error) {
	s := storeSpec{raw: raw, display: raw, kind: kindSQLite}
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return parsePostgresURL(raw)
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

// parsePostgresURL checks a PostgreSQL URL and takes its schema parameter
// out: the rest goes to the driver as it is.
func parsePostgresURL(raw string) (storeSpec, error) {
	s := storeSpec{raw: raw, kind: kindPostgres}
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the whole URL, password included.
		return s, usageErrorf("--db: not a valid PostgreSQL URL (%s): use postgres://USER:PASSWORD@HOST:PORT/DATABASE?schema=NAME", urlProblem(err))
	}
	if pw, ok := u.User.Password(); ok {
		s.password = pw
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		s.display = u.Redacted()
		return s, usageErrorf("--db: the parameters of the PostgreSQL URL are malformed (%s): write them as ?name=value&name=value", urlProblem(err))
	}
	if pw := q.Get("password"); pw != "" && s.password == "" {
		s.password = pw
	}
	s.display = redactURL(u)
	if u.Host == "" && q.Get("host") == "" {
		return s, usageErrorf("--db %s names no server: use postgres://USER:PASSWORD@HOST:PORT/DATABASE", s.display)
	}
	if vs, ok := q[schemaParam]; ok {
		if len(vs) != 1 || !schemaName.MatchString(vs[0]) {
			return s, usageErrorf("--db %s: ?%s= must name one schema: letters, digits and _, not starting with a digit, at most 63 characters", s.display, schemaParam)
		}
		s.schema = vs[0]
		q.Del(schemaParam)
		u.RawQuery = q.Encode()
	}
	s.dsn = u.String()
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

// redact removes the spec's password from a message (a driver's error may
// quote the connection string). Only the password's fields are redacted: a
// URL's user info (":PASSWORD@") and a password parameter ("password=...",
// "password: ...", "password ..."), in each of its encodings; the same text
// elsewhere stays, so that a password equal to the user, the database or
// "postgres" does not turn postgres://postgres:postgres@db/postgres into
// xxxxx://xxxxx:xxxxx@db/xxxxx.
func (s storeSpec) redact(msg string) string {
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

// redactedError is an error whose message had a password removed; it
// still wraps the original for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// wrapErr wraps err with context, removing the spec's password from it.
func (s storeSpec) wrapErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: s.redact(fmt.Sprintf(format, args...) + ": " + err.Error()), err: err}
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
	return resolveSpec(raw, source)
}

// resolveSpec parses raw, a store named by source (for messages).
func resolveSpec(raw, source string) (storeSpec, error) {
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
	// openExisting fails with a helpful message if the SQLite file or the
	// PostgreSQL schema does not exist, rather than creating an empty
	// store to read from (a mistyped name would otherwise look like an
	// empty store).
	openExisting openMode = iota
	// openCreate creates the store if needed and migrates it (serve, the
	// target of copy).
	openCreate
	// openNoMigrate opens (creating the file or schema if needed) without
	// migrating (migrate).
	openNoMigrate
	// openCreateFile creates an SQLite file if needed and migrates it, but
	// refuses a missing PostgreSQL schema as openExisting does (start).
	openCreateFile
)

// createsSchema reports whether a command opening a store in mode may
// create a missing PostgreSQL schema.
func (m openMode) createsSchema() bool { return m == openCreate || m == openNoMigrate }

// logger is the logger of the store and the runtime: warnings and errors on
// standard error.
func (inv *invocation) logger() *slog.Logger {
	h := slog.Handler(slog.NewTextHandler(inv.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if inv.onMigration != nil {
		h = &migrationRecorder{Handler: h, record: inv.onMigration}
	}
	return slog.New(h)
}

// openStore opens the store named by --db.
func (inv *invocation) openStore(ctx context.Context, mode openMode) (store, storeSpec, error) {
	spec, err := inv.resolveStore()
	if err != nil {
		return nil, spec, err
	}
	s, err := inv.openSpec(ctx, spec, mode)
	return s, spec, err
}

// openSpec opens the store spec names.
func (inv *invocation) openSpec(ctx context.Context, spec storeSpec, mode openMode) (store, error) {
	if spec.kind == kindPostgres {
		p, err := openPostgres(ctx, spec, mode, inv.logger())
		if err != nil {
			return nil, spec.wrapErr(err, "opening PostgreSQL store %s", spec.display)
		}
		return p, nil
	}
	if mode == openExisting && !spec.memory {
		if _, err := os.Stat(spec.path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no store at %s (from %s): point --db or $%s at your store, or create one with 'duroxide migrate' or 'duroxide serve'", spec.path, spec.source, envDB)
		}
	}
	p, err := sqlite.Open(ctx, spec.path, &sqlite.Options{Logger: inv.logger(), NoMigrate: mode == openNoMigrate})
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", spec.display, err)
	}
	return p, nil
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
