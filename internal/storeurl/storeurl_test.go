package storeurl

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		path   string
		memory bool
	}{
		{"sqlite:app.db", "app.db", false},
		{"sqlite:/var/lib/app.db", "/var/lib/app.db", false},
		{"sqlite:///var/lib/app.db", "/var/lib/app.db", false},
		{"sqlite:data/store", "data/store", false},
		{"sqlite::memory:", "", true},
		{"app.db", "app.db", false},
		{"/tmp/x.sqlite3", "/tmp/x.sqlite3", false},
	}
	for _, tt := range tests {
		s, err := Parse(tt.in)
		if err != nil || s.Path != tt.path || s.Memory != tt.memory {
			t.Errorf("Parse(%q) = path %q memory %v, %v; want %q %v", tt.in, s.Path, s.Memory, err, tt.path, tt.memory)
		}
	}
}

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
		s, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if s.Kind != KindPostgres || s.DSN != tt.dsn || s.Schema != tt.schema || s.Display != tt.display {
			t.Errorf("Parse(%q) = kind %s dsn %q schema %q display %q; want dsn %q schema %q display %q",
				tt.in, s.Kind, s.DSN, s.Schema, s.Display, tt.dsn, tt.schema, tt.display)
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
		_, err := Parse(tt.in)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want a usage error about %q", tt.in, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) error shows the password: %v", tt.in, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	s, err := Parse("postgres://u:p%40ss%2Fw0rd@db/app")
	if err != nil {
		t.Fatal(err)
	}
	inner := errors.New("connect failed for postgres://u:p%40ss%2Fw0rd@db/app (password p@ss/w0rd)")
	err = s.WrapErr(inner, "opening %s", s.Display)
	if msg := err.Error(); strings.Contains(msg, "w0rd") || !strings.Contains(msg, "xxxxx") {
		t.Fatalf("wrapErr kept the password: %s", msg)
	}
	if !errors.Is(err, inner) {
		t.Fatalf("wrapErr lost the wrapped error")
	}
}

// TestRedactPasswordFieldOnly: a password equal to the user, the database
// and the scheme is removed from the password field only.
func TestRedactPasswordFieldOnly(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://postgres:postgres@127.0.0.1:1/postgres"
	s, err := Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const want = "postgres://postgres:xxxxx@127.0.0.1:1/postgres"
	if s.Display != want {
		t.Fatalf("display = %q, want %q", s.Display, want)
	}
	inner := errors.New(`failed to connect to user=postgres database=postgres password=postgres via ` + dsn)
	msg := s.WrapErr(inner, "opening PostgreSQL store %s", s.Display).Error()
	wantMsg := "opening PostgreSQL store " + want + ": failed to connect to user=postgres database=postgres password=xxxxx via " + want
	if msg != wantMsg {
		t.Fatalf("wrapErr:\n got %s\nwant %s", msg, wantMsg)
	}
}

// TestMinConnsByMode: only a store opened to serve (Create: serve, bench,
// the target of copy) keeps warm PostgreSQL connections open; one-shot
// commands keep none.
func TestMinConnsByMode(t *testing.T) {
	for _, c := range []struct {
		mode Mode
		want int32
	}{{Create, 0}, {Existing, -1}, {CreateFile, -1}, {NoMigrate, -1}} {
		if got := minConns(c.mode); got != c.want {
			t.Errorf("minConns(%v) = %d, want %d", c.mode, got, c.want)
		}
	}
}
