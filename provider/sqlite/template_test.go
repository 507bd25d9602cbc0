package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The suites open hundreds of fresh stores; migrating each from scratch is
// most of their cost (the schema's DDL through the SQL parser, under the
// race detector). openTestStore instead copies a database file migrated
// once per test binary and opens the copy, which runs Migrate and finds
// nothing to apply. Tests of migrating a fresh database itself (the
// harness's FreshDatabase, TestMigrations*, ...) keep opening empty files.
var template struct {
	once sync.Once
	dir  string
	file []byte // the migrated database file, WAL checkpointed into it
	err  error

	memOnce sync.Once
	mem     []byte // a migrated in-memory database, serialized
	memErr  error
}

// migratedTemplate returns the bytes of a freshly migrated database file.
func migratedTemplate() ([]byte, error) {
	template.once.Do(func() {
		template.file, template.err = buildTemplate()
	})
	return template.file, template.err
}

func buildTemplate() ([]byte, error) {
	dir, err := os.MkdirTemp("", "duroxide-sqlite-template-")
	if err != nil {
		return nil, err
	}
	template.dir = dir
	path := filepath.Join(dir, "template.db")
	p, err := Open(context.Background(), path, &Options{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	if _, err := p.writer.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		_ = p.Close()
		return nil, err
	}
	if err := p.Close(); err != nil {
		return nil, err
	}
	// Every migrated page must be in the main file: a copy of it alone is
	// the whole database.
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		return nil, fmt.Errorf("template: %s-wal still holds %d bytes after close", path, st.Size())
	}
	return os.ReadFile(path)
}

// removeTemplate deletes the template's directory (from TestMain).
func removeTemplate() {
	if template.dir != "" {
		_ = os.RemoveAll(template.dir)
	}
}

// openTestStore opens a fresh, migrated store at path (a file store; ""
// or ":memory:" an in-memory one), starting from the migrated template.
func openTestStore(t testing.TB, path string, opts *Options) *Provider {
	t.Helper()
	if path == "" || path == ":memory:" {
		template.memOnce.Do(func() { template.mem, template.memErr = buildMemoryTemplate() })
		if template.memErr != nil {
			t.Fatalf("building the migrated in-memory template: %v", template.memErr)
		}
		p, err := openMemoryFromTemplate(opts, template.mem)
		if err != nil {
			t.Fatalf("Open(%q): %v", path, err)
		}
		return p
	}
	file, err := migratedTemplate()
	if err != nil {
		t.Fatalf("building the migrated template database: %v", err)
	}
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatalf("copying the template database to %s: %v", path, err)
	}
	p, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	return p
}

// openMemoryFromTemplate opens an in-memory store without migrating, loads
// the template into its one connection (sqlite3_deserialize), then runs
// Migrate, which finds the schema current.
func openMemoryFromTemplate(opts *Options, file []byte) (*Provider, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.NoMigrate = true
	p, err := Open(context.Background(), ":memory:", &o)
	if err != nil {
		return nil, err
	}
	if err := rawConn(p, func(c serializer) error { return c.Deserialize(file) }); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("loading the template: %w", err)
	}
	if err := p.Migrate(context.Background()); err != nil {
		_ = p.Close()
		return nil, err
	}
	var n int
	if err := p.writerDB.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n == 0 {
		_ = p.Close()
		return nil, fmt.Errorf("template not loaded: %d migrations recorded (%v)", n, err)
	}
	return p, nil
}

// buildMemoryTemplate migrates an in-memory store and serializes it (a
// file database's bytes say WAL mode, which an in-memory one cannot load).
func buildMemoryTemplate() ([]byte, error) {
	p, err := Open(context.Background(), ":memory:", &Options{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var b []byte
	err = rawConn(p, func(c serializer) error {
		var err error
		b, err = c.Serialize()
		return err
	})
	return b, err
}

// serializer is what the driver's connection offers to copy a database.
type serializer interface {
	Serialize() ([]byte, error)
	Deserialize([]byte) error
}

// rawConn runs f on the in-memory store's one driver connection.
func rawConn(p *Provider, f func(serializer) error) error {
	c, err := p.writerDB.Conn(context.Background())
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		s, ok := dc.(serializer)
		if !ok {
			return errors.New("the driver's connection cannot serialize")
		}
		return f(s)
	})
}

// TestSuiteStoresStartFromTheTemplate: the stores openTestStore opens hold
// every migration, none of them applied by that store (each was recorded
// at the template's time, not at the store's clock).
func TestSuiteStoresStartFromTheTemplate(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, path := range []string{filepath.Join(t.TempDir(), "s.db"), ":memory:"} {
		p := openTestStore(t, path, &Options{Clock: func() time.Time { return clock }, Logger: quietLogger})
		var n, byStore int
		err := p.writer.QueryRowContext(t.Context(),
			"SELECT count(*), count(*) FILTER (WHERE applied_at = ?1) FROM schema_migrations", clock.UnixMilli()).Scan(&n, &byStore)
		_ = p.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if n != len(ms) || byStore != 0 {
			t.Errorf("%s: %d migrations recorded (want %d), %d applied by the store itself (want 0)", path, n, len(ms), byStore)
		}
	}
}
