package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
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

// A turn that leaves its instance running does not wake the instance's
// end watchers (provider.EndWatcher, what WaitForOrchestration sleeps on):
// only the work ack whose turn completes it does. Its plain watchers are
// woken by both.
func TestEndWatchersSleepThroughLiveTurns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "end.db"), nil)
	if _, err := p.Enqueue(ctx, benchStart("e")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	end, stopEnd := p.WatchInstanceEnd("e")
	defer stopEnd()
	all, stopAll := p.WatchInstance("e")
	defer stopAll()
	signalled := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	turn := benchTurn(it)
	turn.WorkerItems[0].Lease = true
	turn.LeaseFor = time.Minute
	res, err := p.AckOrchestrationItem(ctx, turn)
	if err != nil || len(res.Leased) != 1 {
		t.Fatalf("turn ack: %+v, %v", res, err)
	}
	if signalled(end) {
		t.Fatal("the end watcher was woken by a turn that left the instance running")
	}
	if !signalled(all) {
		t.Fatal("the watcher was not woken by a turn")
	}

	ack := benchCompletion(res.Leased[0])
	ack.Then = &provider.TurnAck{
		ExecutionID: 1,
		History: []history.Event{
			{EventID: 4, Kind: history.ActivityCompleted, TimestampMs: time.Now().UnixMilli(), SourceEventID: 3, Output: json.RawMessage(`{"charged":true}`)},
			{EventID: 5, Kind: history.OrchestrationCompleted, TimestampMs: time.Now().UnixMilli(), Output: json.RawMessage(`"done"`)},
		},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: json.RawMessage(`"done"`)},
	}
	ack.ThenAfter = 3
	if wr, err := p.AckWorkItem(ctx, ack); err != nil || wr.Then == nil {
		t.Fatalf("fused ack: %+v, %v; want its turn applied", wr, err)
	}
	if !signalled(end) {
		t.Fatal("the end watcher was not woken by the turn that completed the instance")
	}
	if !signalled(all) {
		t.Fatal("the watcher was not woken by the turn that completed the instance")
	}
	if st, err := p.GetInstance(ctx, "e"); err != nil || st.Status != provider.StatusCompleted {
		t.Fatalf("instance after the fused ack: %+v, %v", st, err)
	}
}

// An enqueue wakes the orchestrator queue's subscribers once it is
// queued, before its transaction runs (so a fetch they start queues
// behind it and may share its commit), and its commit does not wake them
// a second time.
func TestEnqueueWakesTheOrchestratorQueueWhenQueued(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// No watcher: its data_version reads would hold the writer now and
	// then, and an enqueue that finds the writer busy waits for its
	// commit to wake anyone.
	p := openFile(t, filepath.Join(t.TempDir(), "early.db"), &Options{ChangeCheckInterval: -1})
	orch, stop := p.Subscribe(provider.QueueOrchestrator)
	defer stop()
	var inTx, checked int
	p.testHookStmt = func(id stmtID) {
		if id != sInsertMessage || checked > 0 {
			return
		}
		checked++
		select {
		case <-orch:
			inTx++
		default:
		}
	}
	t.Cleanup(func() { p.testHookStmt = nil })
	if _, err := p.Enqueue(ctx, benchStart("q")); err != nil {
		t.Fatal(err)
	}
	if checked != 1 {
		t.Fatalf("the enqueue ran its insert %d times, want 1", checked)
	}
	if inTx != 1 {
		t.Fatal("the orchestrator queue was not woken before the enqueue's transaction ran")
	}
	select {
	case <-orch:
		t.Fatal("the enqueue's commit woke the orchestrator queue again")
	default:
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil || it.InstanceID != "q" {
		t.Fatalf("fetch after the wake: %+v, %v", it, err)
	}
}

// Only an enqueue, which the core runs through WriteEnqueue, wakes the
// orchestrator queue early: any other grouped write, whatever its op is
// called, wakes its subscribers only once it committed.
func TestOnlyWriteEnqueueWakesEarly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "late.db"), &Options{ChangeCheckInterval: -1})
	orch, stop := p.Subscribe(provider.QueueOrchestrator)
	defer stop()
	var _ sqlstore.EnqueueWriter = db{p}
	woken := func() bool {
		select {
		case <-orch:
			return true
		default:
			return false
		}
	}
	for _, op := range []string{"enqueueing", "writing"} {
		ran := false
		err := db{p}.WriteGrouped(ctx, op, nil, func(sqlstore.Tx) error {
			ran = true
			if woken() {
				t.Errorf("WriteGrouped(%q) woke the orchestrator queue before its transaction ran", op)
			}
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("WriteGrouped(%q): ran %v, %v", op, ran, err)
		}
	}
	err := db{p}.WriteEnqueue(ctx, "enqueueing", nil, func(sqlstore.Tx) error {
		if !woken() {
			t.Error("WriteEnqueue did not wake the orchestrator queue before its transaction ran")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
