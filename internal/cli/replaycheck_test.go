package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// replay-check reads a PostgreSQL store as it reads SQLite.
func TestReplayCheckPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := postgresTestDB(t, "replaycheck")
	spec, err := storeurl.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	store, err := storeurl.Open(ctx, spec, storeurl.Create, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordHello(t, store)
	var out, errb bytes.Buffer
	getenv := func(string) string { return "" }
	if code := run(ctx, []string{"replay-check", "--db", db}, &out, &errb, getenv); code != exitOK ||
		!strings.Contains(out.String(), "1 checked, 1 passed, 0 diverged") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
}

// recordHello runs demo.Hello once (hello-1) in store, then closes it.
func recordHello(t *testing.T, store storeurl.Store) {
	t.Helper()
	ctx := context.Background()
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "hello-1", demo.Hello, "Ada", nil); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitForOrchestration(ctx, "hello-1"); err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("%v %v", st, err)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// The duroxide binary's replay-check checks against the demo
// orchestrations: a recorded demo.Hello replays.
func TestReplayCheckDemoCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "demo.db")
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordHello(t, store)
	var out, errb bytes.Buffer
	getenv := func(string) string { return "" }
	if code := run(ctx, []string{"replay-check", "--db", "sqlite:" + path, "--orchestration", demo.Hello}, &out, &errb, getenv); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "1 checked, 1 passed, 0 diverged") || !strings.Contains(out.String(), "OK:") {
		t.Fatalf("output: %s", out.String())
	}
}
