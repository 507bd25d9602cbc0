package cli

import (
	"errors"
	"strings"
	"testing"
)

// TestRedactPasswordFieldOnly: a password equal to the user, the database
// and the scheme is removed from the password field only.
func TestRedactPasswordFieldOnly(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://postgres:postgres@127.0.0.1:1/postgres"
	s, err := parseDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const want = "postgres://postgres:xxxxx@127.0.0.1:1/postgres"
	if s.display != want {
		t.Fatalf("display = %q, want %q", s.display, want)
	}
	inner := errors.New(`failed to connect to user=postgres database=postgres password=postgres via ` + dsn)
	msg := s.wrapErr(inner, "opening PostgreSQL store %s", s.display).Error()
	wantMsg := "opening PostgreSQL store " + want + ": failed to connect to user=postgres database=postgres password=xxxxx via " + want
	if msg != wantMsg {
		t.Fatalf("wrapErr:\n got %s\nwant %s", msg, wantMsg)
	}
}

// TestRedactCommandOutput runs a command on that URL against a server that
// does not answer: the error shows the URL with only its password hidden.
func TestRedactCommandOutput(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "status", "x", "--db", "postgres://postgres:postgres@127.0.0.1:1/postgres?connect_timeout=2")
	r.wantErr(t, 1, "postgres://postgres:xxxxx@127.0.0.1:1/postgres")
	if strings.Contains(r.stderr, "xxxxx://") || strings.Contains(r.stderr, "/xxxxx") || strings.Contains(r.stderr, ":postgres@") {
		t.Fatalf("stderr redacts the wrong text, or keeps the password: %s", r.stderr)
	}
}
