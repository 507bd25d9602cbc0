package cli

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParsePostgresDB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, dsn, schema, display string
	}{
		{"postgres://u@db:5432/app", "postgres://u@db:5432/app", "", "postgres://u@db:5432/app"},
		{"postgresql://u:secret@db/app?sslmode=disable", "postgresql://u:secret@db/app?sslmode=disable", "", "postgresql://u:xxxxx@db/app?sslmode=disable"},
		{"postgres://u:secret@db/app?schema=tenant_1&sslmode=disable", "postgres://u:secret@db/app?sslmode=disable", "tenant_1", "postgres://u:xxxxx@db/app?schema=tenant_1&sslmode=disable"},
		{"POSTGRES://u@db/app?schema=_x", "postgres://u@db/app", "_x", "postgres://u@db/app?schema=_x"},
		{"postgres://u@db/app?password=hunter22", "postgres://u@db/app?password=hunter22", "", "postgres://u@db/app?password=xxxxx"},
		{"postgres:///app?host=/run/postgresql", "postgres:///app?host=/run/postgresql", "", "postgres:///app?host=/run/postgresql"},
	}
	for _, tt := range tests {
		s, err := parseDB(tt.in)
		if err != nil {
			t.Errorf("parseDB(%q): %v", tt.in, err)
			continue
		}
		if s.kind != kindPostgres || s.dsn != tt.dsn || s.schema != tt.schema || s.display != tt.display {
			t.Errorf("parseDB(%q) = kind %s dsn %q schema %q display %q; want dsn %q schema %q display %q",
				tt.in, s.kind, s.dsn, s.schema, s.display, tt.dsn, tt.schema, tt.display)
		}
	}
}

func TestParsePostgresDBErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{"postgres://u:secret@[::1/db", "not a valid PostgreSQL URL"},
		{"postgres://u:secret@db/app?schema=1abc", "?schema= must name one schema"},
		{"postgres://u:secret@db/app?schema=a;drop", "malformed"},
		{"postgres://u:secret@db/app?schema=a%3Bdrop", "?schema= must name one schema"},
		{"postgres://u:secret@db/app?schema=" + strings.Repeat("s", 64), "?schema= must name one schema"},
		{"postgres://u:secret@db/app?schema=a&schema=b", "?schema= must name one schema"},
		{"postgres://u:secret@db/app?schema=", "?schema= must name one schema"},
		{"postgres://u:secret@db/app?schema=%1b%5b31m", "?schema= must name one schema"},
		{"postgres:///app", "names no server"},
		{"postgres://u:secret@db/app\x00", "not a valid PostgreSQL URL"},
	}
	for _, tt := range tests {
		_, err := parseDB(tt.in)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseDB(%q) = %v, want a usage error about %q", tt.in, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("parseDB(%q) error shows the password: %v", tt.in, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	s, err := parseDB("postgres://u:p%40ss%2Fw0rd@db/app")
	if err != nil {
		t.Fatal(err)
	}
	inner := errors.New("connect failed for postgres://u:p%40ss%2Fw0rd@db/app (password p@ss/w0rd)")
	err = s.wrapErr(inner, "opening %s", s.display)
	if msg := err.Error(); strings.Contains(msg, "w0rd") || !strings.Contains(msg, "xxxxx") {
		t.Fatalf("wrapErr kept the password: %s", msg)
	}
	if !errors.Is(err, inner) {
		t.Fatalf("wrapErr lost the wrapped error")
	}
}

// TestPostgresCommandsRedact runs every store command on a PostgreSQL URL
// whose server does not answer: the error is one line, says so, and never
// shows the password.
func TestPostgresCommandsRedact(t *testing.T) {
	t.Parallel()
	db := "postgres://duroxide:sup3rsecret@127.0.0.1:1/nowhere?connect_timeout=2&schema=s"
	for _, args := range [][]string{
		{"status", "x"}, {"list"}, {"history", "x"}, {"start", "demo.Hello"}, {"raise", "x", "e"},
		{"cancel", "x"}, {"purge", "x"}, {"locks", "list"}, {"migrate"}, {"serve"},
	} {
		r := runCLI(t, append(args, "--db", db)...)
		if r.code == 0 {
			t.Errorf("%v on an unreachable server exited 0", args)
			continue
		}
		if strings.Contains(r.stdout+r.stderr, "sup3rsecret") {
			t.Errorf("%v printed the password:\nstdout %s\nstderr %s", args, r.stdout, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "duroxide: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: stderr is not one line: %q", args, r.stderr)
		}
		if !strings.Contains(r.stderr, "cannot connect to the server: connection refused") || !strings.Contains(r.stderr, "duroxide:xxxxx@127.0.0.1:1") {
			t.Errorf("%v: stderr does not say the server cannot be reached: %q", args, r.stderr)
		}
	}
	r := runCLI(t, "copy", "--from", db, "--to", "sqlite::memory:")
	if r.code == 0 || strings.Contains(r.stdout+r.stderr, "sup3rsecret") {
		t.Errorf("copy from an unreachable server: code %d, output %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPostgresServeAndMigrate runs migrate, serve --demo and a few commands
// on PostgreSQL with a password in the URL: it is never printed.
func TestPostgresServeAndMigrate(t *testing.T) {
	t.Parallel()
	db := postgresTestDB(t, "serve")
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "n0t-t0-be-pr1nted"
	u.User = url.UserPassword(u.User.Username(), secret) // ignored by trust authentication
	db = u.String()

	r := runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "is up to date") || strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("migrate:\n%s%s", r.stdout, r.stderr)
	}
	s := serve(t, "--demo", "--db", db)
	r = runCLI(t, "start", "demo.Hello", "--input", `"Ada"`, "--id", "pg-1", "--wait", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, `"Hello, Ada!"`) {
		t.Fatalf("start --wait on PostgreSQL:\n%s", r.stdout)
	}
	r = runCLI(t, "list", "--db", db, "--json").wantCode(t, 0)
	if !strings.Contains(r.stdout, "pg-1") {
		t.Fatalf("list on PostgreSQL:\n%s", r.stdout)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.stderr)
	}
	out := s.stdout.String() + s.stderr.String()
	if strings.Contains(out, secret) || !strings.Contains(out, "store postgres://") || !strings.Contains(out, ":xxxxx@") {
		t.Fatalf("serve's output shows the password, or no redacted store line:\n%s", out)
	}
}
