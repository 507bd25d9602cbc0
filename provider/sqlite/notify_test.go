package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// A store whose idle watcher is off still notices another process's commit
// at the start of its own next write transaction.
func TestForeignCommitSeenByTheWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	p, err := Open(ctx, path, &Options{Logger: quietLogger, ChangeCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	other, err := Open(ctx, path, &Options{Logger: quietLogger, ChangeCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	work, stop := p.Subscribe(provider.QueueWorker)
	defer stop()
	if _, err := other.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-work:
		t.Fatal("notified with the watcher off and no write of its own")
	default:
	}
	// Any write of p begins by looking: an enqueue wakes the orchestrator
	// queue itself, but only the foreign commit wakes the worker queue.
	if _, err := p.Enqueue(ctx, providertest.HammerStart("b")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-work:
	default:
		t.Fatal("the writer did not report the other store's commit")
	}
	if n := p.foreignCommits.Load(); n != 1 {
		t.Fatalf("foreign commits seen = %d, want 1", n)
	}
	// Its own commits are not foreign.
	if _, err := p.Enqueue(ctx, providertest.HammerStart("c")); err != nil {
		t.Fatal(err)
	}
	if n := p.foreignCommits.Load(); n != 1 {
		t.Fatalf("foreign commits seen after an own commit = %d, want 1", n)
	}
}
