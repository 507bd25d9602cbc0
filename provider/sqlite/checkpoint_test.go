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
		if err := p.Enqueue(ctx, providertest.HammerStart(fmt.Sprintf("c%d", i))); err != nil {
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
