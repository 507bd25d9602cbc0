package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// ErrStoreNotEmpty: SQLiteFile was pointed at an existing, non-empty file.
// The workloads need a fresh store.
var ErrStoreNotEmpty = errors.New("bench: the store is not empty")

// Store is the fresh store of one workload.
type Store struct {
	Provider provider.Provider
	// Path is the SQLite file, whose size once closed (plus its -wal file,
	// if any is left) is reported as Result.StoreBytes; "" when there is
	// none.
	Path string
	// Close closes the store.
	Close func() error
	// Cleanup, if set, runs after Close and the size measure: temporary
	// stores remove their files.
	Cleanup func() error
	// Remote is set for a store on a database server (PostgreSQL): the
	// bytes this process writes are not the store's, so
	// Result.BytesWrittenPerOrch is omitted.
	Remote bool
	// Commits, if set, counts the store's committed write transactions
	// (Result.CommitsPerOrch). SQLite stores are counted without it.
	Commits func() int64
}

func (s *Store) size() int64 {
	if s.Path == "" {
		return 0
	}
	var total int64
	for _, p := range []string{s.Path, s.Path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	return total
}

// StoreFactory opens a fresh, empty store for the named workload.
type StoreFactory func(ctx context.Context, workload string) (*Store, error)

// TempSQLite returns a factory of SQLite stores, each a file in a new
// temporary directory that Cleanup removes. opts may be nil.
func TempSQLite(opts *sqlite.Options) StoreFactory {
	return func(ctx context.Context, workload string) (*Store, error) {
		dir, err := os.MkdirTemp("", "duroxide-bench-")
		if err != nil {
			return nil, err
		}
		s, err := SQLiteFile(filepath.Join(dir, workload+".db"), opts)(ctx, workload)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.Cleanup = func() error { return os.RemoveAll(dir) }
		return s, nil
	}
}

// SQLiteFile returns a factory that opens the SQLite store at path, which
// must not exist or be empty (else ErrStoreNotEmpty); the file is kept.
// The path ":memory:" (or "") opens an in-memory store. opts may be nil.
func SQLiteFile(path string, opts *sqlite.Options) StoreFactory {
	return func(ctx context.Context, _ string) (*Store, error) {
		memory := path == "" || path == ":memory:"
		if !memory {
			fi, err := os.Stat(path)
			switch {
			case err == nil && fi.Size() > 0:
				return nil, fmt.Errorf("%w: %s exists: the workloads need a fresh store (remove it, or name another file)", ErrStoreNotEmpty, path)
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				return nil, err
			}
		}
		p, err := sqlite.Open(ctx, path, opts)
		if err != nil {
			return nil, err
		}
		s := &Store{Provider: p, Close: p.Close}
		if !memory {
			s.Path = path
		}
		return s, nil
	}
}
