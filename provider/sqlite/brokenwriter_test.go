package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// breakWriter does to the pinned writer connection what database/sql does
// when the driver returns driver.ErrBadConn from a call on it: it closes
// the connection, and every later call on it fails with sql.ErrConnDone.
func breakWriter(t *testing.T, p *Provider) {
	t.Helper()
	p.connMu.Lock()
	defer p.connMu.Unlock()
	discardWriter(t, p)
}

// discardWriter is breakWriter for a caller holding connMu.
func discardWriter(t *testing.T, p *Provider) {
	t.Helper()
	if err := p.wconn.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("breaking the writer: %v", err)
	}
}

// writerPragmas reads the per-connection settings of the writer.
func writerPragmas(t *testing.T, p *Provider) map[string]string {
	t.Helper()
	p.connMu.Lock()
	defer p.connMu.Unlock()
	got := make(map[string]string)
	for _, name := range []string{"journal_mode", "synchronous", "busy_timeout", "foreign_keys", "temp_store", "cache_size", "wal_autocheckpoint"} {
		var v string
		if err := p.wconn.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		got[name] = v
	}
	return got
}

// A writer connection that broke is replaced, with the writer's pragmas,
// before the next write, which succeeds.
func TestWriterReplacesBrokenConnection(t *testing.T) {
	t.Parallel()
	for _, sync := range []string{"NORMAL", "FULL"} {
		t.Run(sync, func(t *testing.T) {
			t.Parallel()
			p := openFile(t, filepath.Join(t.TempDir(), "broken.db"), &Options{Synchronous: sync, BusyTimeout: 1234 * time.Millisecond})
			ctx := t.Context()
			if _, err := p.Enqueue(ctx, providertest.HammerStart("before")); err != nil {
				t.Fatal(err)
			}
			want := writerPragmas(t, p)
			breakWriter(t, p)
			if _, err := p.Enqueue(ctx, providertest.HammerStart("after")); err != nil {
				t.Fatalf("the first write after the writer broke: %v", err)
			}
			if _, err := p.Enqueue(ctx, providertest.HammerStart("later")); err != nil {
				t.Fatalf("a later write: %v", err)
			}
			for _, id := range []string{"before", "after", "later"} {
				if _, err := p.GetInstance(ctx, id); err != nil {
					t.Fatalf("GetInstance(%s): %v", id, err)
				}
			}
			if n := p.writerReplaced.Load(); n != 1 {
				t.Fatalf("writer replaced %d times, want 1", n)
			}
			got := writerPragmas(t, p)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("PRAGMA %s on the new writer = %q, want %q (the old writer's)", k, got[k], v)
				}
			}
			if got["busy_timeout"] != "1234" {
				t.Errorf("busy_timeout = %s, want 1234", got["busy_timeout"])
			}
		})
	}
}

// A write whose connection broke before its COMMIT returns an error, runs
// once (its outcome is the caller's to learn, never retried by the
// store), and wrote nothing; the next write succeeds.
func TestWriteOnBrokenWriterFailsAndIsNotRetried(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "commit.db"), nil)
	ctx := t.Context()
	runs := 0
	err := p.write(ctx, "breaking", func(w *wtx) error {
		runs++
		if _, err := w.tx.ExecContext(w.ctx, `INSERT INTO instances (instance_id, status, created_at, updated_at) VALUES ('lost', 'Pending', 1, 1)`); err != nil {
			return err
		}
		// The connection closes under the transaction, which rolls it
		// back. (Its statements close first: SQLite keeps a connection
		// closed with statements unfinalized open as a "zombie", holding
		// its transaction, and modernc cannot finalize them afterwards.)
		for _, s := range p.wstmts {
			_ = s.Close()
		}
		discardWriter(t, p) // begin holds connMu
		return nil
	})
	if err == nil {
		t.Fatal("a write on a writer that broke before COMMIT succeeded")
	}
	if runs != 1 {
		t.Fatalf("the request ran %d times, want 1", runs)
	}
	if _, err := p.Enqueue(ctx, providertest.HammerStart("next")); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	var n int
	queryCount(t, p, `SELECT count(*) FROM instances WHERE instance_id = 'lost'`, &n)
	if n != 0 {
		t.Fatalf("the failed write's row is in the store")
	}
}

// testInterrupts holds the cancel functions test_interrupt(key) calls.
var testInterrupts sync.Map

func init() {
	// test_interrupt(key) cancels the context of the statement calling it,
	// so the driver interrupts that statement while it runs.
	msqlite.MustRegisterScalarFunction("test_interrupt", 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if key, ok := args[0].(string); ok {
			if f, ok := testInterrupts.Load(key); ok {
				f.(context.CancelFunc)()
			}
		}
		return int64(1), nil
	})
}

// A writer connection the driver reports unusable (here: a statement on
// it was interrupted) is replaced before the next write, as database/sql
// discards such a connection from a pool.
func TestWriterReplacesConnectionTheDriverCallsUnusable(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "unusable.db"), nil)
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("before")); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	testInterrupts.Store(t.Name(), cancel)
	defer testInterrupts.Delete(t.Name())
	p.connMu.Lock()
	var n int64
	err := p.wconn.QueryRowContext(qctx, `WITH RECURSIVE c(x) AS (SELECT test_interrupt(?) UNION ALL SELECT x+1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c`, t.Name()).Scan(&n)
	usable := p.writerUsable()
	p.connMu.Unlock()
	if !errors.Is(err, context.Canceled) || usable {
		t.Fatalf("interrupting the writer: %v, usable %v; want context.Canceled and unusable", err, usable)
	}
	if _, err := p.Enqueue(ctx, providertest.HammerStart("after")); err != nil {
		t.Fatal(err)
	}
	if n := p.writerReplaced.Load(); n != 1 {
		t.Fatalf("writer replaced %d times, want 1", n)
	}
}

// An idle store whose writer broke replaces it in its watcher, and goes
// on noticing other processes' commits.
func TestIdleStoreReplacesBrokenWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idle.db")
	p := openFile(t, path, &Options{ChangeCheckInterval: time.Millisecond})
	other := openFile(t, path, &Options{ChangeCheckInterval: -1})
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("before")); err != nil {
		t.Fatal(err)
	}
	work, stop := p.Subscribe(provider.QueueWorker)
	defer stop()
	guard := time.NewTimer(time.Minute) // a hang guard, never a measure
	defer guard.Stop()
	wait := func(what string, done func() bool) {
		for !done() {
			select {
			case <-work:
			case <-guard.C:
				t.Fatalf("the idle store never %s", what)
			}
		}
	}
	breakWriter(t, p)
	wait("replaced its broken writer", func() bool { return p.writerReplaced.Load() == 1 })
	seen := p.foreignCommits.Load()
	if _, err := other.Enqueue(ctx, providertest.HammerStart("other")); err != nil {
		t.Fatal(err)
	}
	wait("saw the other store's commit", func() bool { return p.foreignCommits.Load() > seen })
}

// A store whose writer broke closes cleanly.
func TestCloseAfterWriterBroke(t *testing.T) {
	t.Parallel()
	p, err := Open(t.Context(), filepath.Join(t.TempDir(), "close.db"), &Options{Logger: quietLogger, ChangeCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	breakWriter(t, p)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
