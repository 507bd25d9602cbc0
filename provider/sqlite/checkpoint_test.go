package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/duroxide/duroxide-go/provider/providertest"
)

// The writer's commits never checkpoint; every checkpointEvery commits the
// checkpointer copies the WAL into the database file on its own connection.
func TestCheckpointsRunOffTheWriter(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "ckpt.db"), nil)
	ctx := t.Context()
	var auto int
	if err := p.writer.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, want 0: commits would checkpoint", auto)
	}

	type result struct {
		busy              bool
		log, checkpointed int64
		err               error
	}
	results := make(chan result, 1)
	p.ckpt.testHook = func(busy bool, log, checkpointed int64, err error) {
		results <- result{busy, log, checkpointed, err}
	}
	before := p.stats.commits.Load()
	for i := 0; p.stats.commits.Load()-before < checkpointEvery; i++ {
		if _, err := p.Enqueue(ctx, providertest.HammerStart(fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-results:
			t.Fatalf("checkpoint after %d commits, want %d: %+v", p.stats.commits.Load()-before, checkpointEvery, r)
		default:
		}
	}
	r := <-results // the checkpointEvery-th commit woke it
	if r.err != nil || r.busy || r.log == 0 || r.checkpointed != r.log {
		t.Fatalf("checkpoint: %+v, want the whole non-empty WAL copied", r)
	}
}

// Under synchronous FULL the writer checkpoints itself (SQLite's default
// autocheckpoint) and no checkpointer runs: a WAL that grows between
// background checkpoints makes FULL's per-commit syncs dearer.
func TestFullSyncCheckpointsOnTheWriter(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "full.db"), &Options{Synchronous: "FULL"})
	var auto int
	if err := p.writer.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 1000 || p.ckpt != nil {
		t.Fatalf("FULL: writer wal_autocheckpoint = %d, checkpointer %v; want SQLite's 1000 and none", auto, p.ckpt != nil)
	}
	for i := range 3 * checkpointEvery {
		if _, err := p.Enqueue(t.Context(), providertest.HammerStart(fmt.Sprintf("f%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}
