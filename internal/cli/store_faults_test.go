package cli

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/nettest"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// cliResult runs the CLI with ctx in a goroutine and returns a channel
// that delivers its result.
func runCLIAsync(ctx context.Context, args ...string) <-chan result {
	out := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr, func(string) string { return "" })
		out <- result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	return out
}

// awaitResult waits for a command to return. The bound only keeps a
// regression from hanging the test binary; it asserts nothing on timing.
func awaitResult(t *testing.T, ch <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not return", what)
		return result{}
	}
}

// schemaOf returns the ?schema= of a --db URL and the URL without it.
func schemaOf(t *testing.T, db string) (schema, base string) {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	schema = q.Get(storeurl.SchemaParam)
	q.Del(storeurl.SchemaParam)
	u.RawQuery = q.Encode()
	return schema, u.String()
}

func schemaExists(t *testing.T, base, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestMissingPostgresSchemaIsRefused: a command that reads or manages a
// store refuses a PostgreSQL schema that does not exist, naming it, and
// creates nothing; migrate and serve are the commands that create one.
func TestMissingPostgresSchemaIsRefused(t *testing.T) {
	t.Parallel()
	db := postgresTestDB(t, "typo")
	schema, base := schemaOf(t, db)
	to := "sqlite:" + filepath.Join(t.TempDir(), "to.db")
	for _, args := range [][]string{
		{"list"},
		{"status", "x"},
		{"history", "x"},
		{"raise", "x", "ev"},
		{"cancel", "x"},
		{"purge", "x"},
		{"locks", "list"},
		{"start", "demo.Hello", "--input", `"a"`},
	} {
		runCLI(t, append(args, "--db", db)...).wantErr(t, 1, `schema "`+schema+`" does not exist`, "duroxide migrate")
	}
	runCLI(t, "copy", "--from", db, "--to", to).wantErr(t, 1, `schema "`+schema+`" does not exist`)
	if schemaExists(t, base, schema) {
		t.Fatalf("schema %s was created by a command that must not create it", schema)
	}
	if _, err := os.Stat(strings.TrimPrefix(to, "sqlite:")); err == nil {
		t.Fatalf("copy from a missing schema created its target")
	}

	runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	if !schemaExists(t, base, schema) {
		t.Fatalf("migrate did not create schema %s", schema)
	}
	runCLI(t, "list", "--db", db).wantCode(t, 0)
}

// TestCommandHonoursCancelWhileWaitingOnServer: a command whose store call
// waits on the server (here for an instance's lock, held by another
// session, with no lock timeout) returns when its context is canceled, as
// on SIGINT or SIGTERM.
func TestCommandHonoursCancelWhileWaitingOnServer(t *testing.T) {
	t.Parallel()
	db := postgresTestDB(t, "cancel")
	schema, base := schemaOf(t, db)
	runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	runCLI(t, "start", "demo.Hello", "--id", "i1", "--input", `"a"`, "--db", db).wantCode(t, 0)

	// Another session holds the instance's lock.
	holder, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	key := "duroxide:" + schema + ":i1"
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))`, key); err != nil {
		t.Fatal(err)
	}

	// No lock timeout: only the canceled context ends the wait.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runCLIAsync(ctx, "raise", "i1", "ev", "--db", db+"&lock_timeout=0")
	pollUntil(t, "the raise to wait for the instance's lock", time.Minute, func() bool {
		var waiting int
		// Only a wait for this lock counts: other tests share the database
		// and take advisory locks of their own. A bigint advisory key shows
		// in pg_locks as its high (classid) and low (objid) 32 bits.
		err := holder.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
			  AND classid::bigint = (hashtextextended($1::text, 0) >> 32) & 4294967295
			  AND objid::bigint = hashtextextended($1::text, 0) & 4294967295`, key).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	cancel()
	r := awaitResult(t, done, "raise after its context was canceled")
	r.wantErr(t, 1, "interrupted")
}

// TestListOnSilentServerTimesOut: a port that accepts connections and
// never answers makes a command fail with a connection error (after the
// default connect timeout), not hang.
func TestListOnSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	addr, _ := nettest.SilentListener(t)
	done := runCLIAsync(context.Background(), "list", "--db", "postgres://nobody@"+addr+"/none?sslmode=disable")
	r := awaitResult(t, done, "list on a silent server")
	r.wantErr(t, 1, "cannot connect to the server", "no answer within the connect timeout")
}
