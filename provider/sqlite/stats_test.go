package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

func TestStatsCountsCommittedWrites(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "stats.db"), nil)
	ctx := t.Context()
	if got := p.Stats().Commits; got != 0 {
		t.Fatalf("Commits after Open = %d, want 0 (migrations are not counted)", got)
	}
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, providertest.HammerStart("b")); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Commits; got != 2 {
		t.Fatalf("Commits after two enqueues = %d, want 2", got)
	}
	// A write that fails rolls back: not a commit.
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); !errors.Is(err, provider.ErrInstanceExists) {
		t.Fatalf("duplicate enqueue: %v, want ErrInstanceExists", err)
	}
	// Reads commit nothing.
	if _, err := p.Counts(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Commits; got != 2 {
		t.Fatalf("Commits after a failed write and a read = %d, want 2", got)
	}
}
