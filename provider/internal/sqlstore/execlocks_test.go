package sqlstore

import (
	"errors"
	"testing"
)

// fakeCleaner frees keys from a fixed list; settled keys were settled by
// another writer meanwhile, queued keys have a start to promote.
type fakeCleaner struct {
	keys    []string
	settled map[string]bool
	queued  map[string]bool
	freed   []string
	idem    int64
	failOn  string
}

func (f *fakeCleaner) FreeableLocks() ([]string, error) { return f.keys, nil }

func (f *fakeCleaner) ClaimFreeable(key string) (bool, error) {
	if key == f.failOn {
		return false, errors.New("lock wait failed")
	}
	return !f.settled[key], nil
}

func (f *fakeCleaner) FreeExecutionLock(key string) (bool, error) {
	f.freed = append(f.freed, key)
	return f.queued[key], nil
}

func (f *fakeCleaner) DropExpiredIdempotencyKeys() (int64, error) { return f.idem, nil }

func TestCleanupExecutionLocks(t *testing.T) {
	t.Parallel()
	f := &fakeCleaner{
		keys:    []string{"a", "b", "c"},
		settled: map[string]bool{"b": true},
		queued:  map[string]bool{"c": true},
		idem:    4,
	}
	res, err := CleanupExecutionLocks(f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Locks != 2 || res.Promoted != 1 || res.IdempotencyKeys != 4 {
		t.Fatalf("got %+v, want 2 locks, 1 promoted, 4 keys", *res)
	}
	if len(f.freed) != 2 || f.freed[0] != "a" || f.freed[1] != "c" {
		t.Fatalf("freed %v, want [a c]: a key settled meanwhile stays", f.freed)
	}
	f = &fakeCleaner{keys: []string{"a"}, failOn: "a"}
	if _, err := CleanupExecutionLocks(f); err == nil || len(f.freed) != 0 {
		t.Fatalf("got %v, freed %v; want the claim's error and nothing freed", err, f.freed)
	}
}
