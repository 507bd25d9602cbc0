package cli

import (
	"net/url"
	"strings"
	"testing"
)

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
