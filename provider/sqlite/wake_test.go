package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// A store created before migrations 0003 and 0004 keeps its instances (with
// no last error) and its worker rows, which NextVisible then finds through
// the new index.
func TestMigrations0003And0004UpgradeOldStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openMigratedBefore(t, filepath.Join(t.TempDir(), "old.db"), 3)
	for _, q := range []string{
		`INSERT INTO instances (instance_id, status, created_at, updated_at) VALUES ('old', 'Running', 1, 1)`,
		`INSERT INTO worker_queue (instance_id, execution_id, activity_id, work_item, visible_at, created_at) VALUES
			('old', 1, 1, '{}', 9000, 1), ('old', 1, 2, '{}', 7000, 1)`,
	} {
		if _, err := p.writer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	info, err := p.GetInstance(ctx, "old")
	if err != nil {
		t.Fatalf("GetInstance: %v", err)
	}
	if info.LastError != nil {
		t.Fatalf("LastError of a migrated instance = %+v, want nil", info.LastError)
	}
	next, err := p.NextVisible(ctx, provider.QueueWorker)
	if err != nil {
		t.Fatalf("NextVisible: %v", err)
	}
	if want := msTime(7000); !next.Equal(want) {
		t.Fatalf("NextVisible(worker) = %v, want %v", next, want)
	}
}

func TestNextVisibleRejectsUnknownQueue(t *testing.T) {
	t.Parallel()
	p := openFile(t, ":memory:", nil)
	for _, q := range []provider.Queue{0, 3} {
		if _, err := p.NextVisible(t.Context(), q); !errors.Is(err, provider.ErrInvalidArgument) {
			t.Fatalf("NextVisible(%d): %v, want ErrInvalidArgument", q, err)
		}
	}
}

// An abandon whose Error cannot be stored fails before its transaction:
// the lock stays held and nothing is recorded.
func TestAbandonRejectsInvalidError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := openFile(t, ":memory:", &Options{Clock: func() time.Time { return now }})
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	bad := &history.ErrorDetails{Kind: "no-such-kind", Message: "x"}
	err = p.AbandonOrchestrationItem(ctx, it.LockToken, provider.AbandonOptions{Error: bad})
	if !errors.Is(err, provider.ErrInvalidArgument) {
		t.Fatalf("abandon with an invalid Error: %v, want ErrInvalidArgument", err)
	}
	if again, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute}); err != nil || again != nil {
		t.Fatalf("fetch after the failed abandon: %v, %v; want nothing (still locked)", again, err)
	}
	info, err := p.GetInstance(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if info.LastError != nil {
		t.Fatalf("LastError = %+v, want nil", info.LastError)
	}
	if err := p.AbandonOrchestrationItem(ctx, it.LockToken, provider.AbandonOptions{}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
}
