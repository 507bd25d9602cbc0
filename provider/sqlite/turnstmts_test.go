package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// A work ack that applies the turn its result causes (WorkAck.Then) of an
// instance that holds no execution lock runs five statements: it deletes
// the row, checks the instance is quiet, updates the instance, appends the
// turn's two events in one statement and inserts the leased activity. It
// neither looks for execution locks to extend nor for messages left for a
// lock it never released. A fetched turn's ack does not extend execution
// locks either when the instance holds none.
func TestFusedStepStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "s.db"), nil)
	var ran []stmtID
	p.testHookStmt = func(id stmtID) {
		if id != sDataVersion { // once per transaction (notify.go)
			ran = append(ran, id)
		}
	}
	t.Cleanup(func() { p.testHookStmt = nil })

	if _, err := p.Enqueue(ctx, benchStart("f")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	turn := benchTurn(it)
	turn.WorkerItems[0].Lease = true
	turn.LeaseFor = time.Minute
	ran = nil
	res, err := p.AckOrchestrationItem(ctx, turn)
	if err != nil || len(res.Leased) != 1 {
		t.Fatalf("turn ack: %d leases, %v", len(res.Leased), err)
	}
	for _, id := range ran {
		if id == sXLockExtend || id == sXLockReleaseInstance || id == sXLockQueueDeleteInstance {
			t.Fatalf("the turn ack of an instance without execution locks ran %q", writerSQL[id])
		}
	}

	now := time.Now().UnixMilli()
	next := benchActivity("f", 5)
	next.Lease = true
	ack := benchCompletion(res.Leased[0])
	ack.Then = &provider.TurnAck{
		ExecutionID: 1,
		History: []history.Event{
			{EventID: 4, Kind: history.ActivityCompleted, TimestampMs: now, SourceEventID: 3, Output: json.RawMessage(`{"charged":true}`)},
			{EventID: 5, Kind: history.ActivityScheduled, TimestampMs: now, Name: "Charge", Input: benchInput},
		},
		Metadata:    provider.ExecutionMetadata{Status: provider.StatusRunning},
		WorkerItems: []*provider.WorkerMessage{next},
		LeaseFor:    time.Minute,
	}
	ack.ThenAfter = 3
	ran = nil
	wr, err := p.AckWorkItem(ctx, ack)
	if err != nil || wr.Then == nil || len(wr.Then.Leased) != 1 {
		t.Fatalf("fused ack: %+v, %v; want its turn applied with one lease", wr, err)
	}
	want := []stmtID{sAckWork, sInstanceQuiet, sUpdateInstance, sInsertEvents2, sInsertWorkLeased}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		var got []string
		for _, id := range ran {
			got = append(got, writerSQL[id])
		}
		t.Fatalf("the fused step ran %d statements %v, want %v:\n%q", len(ran), ran, want, got)
	}
	h, err := p.ReadHistory(ctx, "f", 1)
	if err != nil || len(h) != 5 {
		t.Fatalf("history: %d events, %v; want 5", len(h), err)
	}
}

// A request of a group that fails having written nothing leaves nothing
// to undo: the group runs without a savepoint per request, and its other
// requests commit.
func TestGroupRunsWithoutSavepoints(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "nosp.db"), nil)
	ctx := t.Context()
	count := stmtCounter(t, p)
	for round := 0; round < 20 && p.groups.Load() == 0; round++ {
		var ops []func() error
		for i := range 4 {
			ops = append(ops,
				enqueueStart(p, fmt.Sprintf("n%d-%d", round, i)),
				func() error {
					return p.AbandonOrchestrationItem(ctx, "0123456789abcdef0123456789abcdef.nobody", provider.AbandonOptions{})
				},
			)
		}
		errs := groupRound(t, p, ops)
		for i, err := range errs {
			if i%2 == 1 {
				if !errors.Is(err, provider.ErrLockLost) {
					t.Fatalf("bogus abandon: %v, want ErrLockLost", err)
				}
			} else if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
		}
	}
	if p.groups.Load() == 0 {
		t.Skip("the requests never ran as a group on this machine")
	}
	if n := count(sGroupSavepoint); n != 0 {
		t.Fatalf("the groups ran %d savepoints, want none", n)
	}
	if n := p.redoneGroups.Load(); n != 0 {
		t.Fatalf("%d groups ran again, want none", n)
	}
}

// A request of a group that fails after it wrote is undone: the group's
// transaction is rolled back and the group runs again with a savepoint per
// request; the request's write is gone and the others commit once.
func TestGroupUndoesARequestThatFailsAfterWriting(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "undo.db"), nil)
	ctx := t.Context()
	failed := errors.New("failed after writing")
	for round := 0; round < 20 && p.redoneGroups.Load() == 0; round++ {
		a, b := fmt.Sprintf("u%d-1", round), fmt.Sprintf("u%d-2", round)
		ops := []func() error{
			enqueueStart(p, a),
			func() error {
				return p.write(ctx, "failing", func(w *wtx) error {
					if _, err := w.exec(sDedupInsert, nil, a, "undone", w.now); err != nil {
						return err
					}
					return failed
				})
			},
			enqueueStart(p, b),
		}
		errs := groupRound(t, p, ops)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], failed) {
			t.Fatalf("round %d: errors %v, want nil, %v, nil", round, errs, failed)
		}
		wantInstances(t, p, a, b)
		var n int
		if err := p.readers.QueryRowContext(ctx, `SELECT count(*) FROM message_dedup`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("round %d: %d rows of the failed request committed", round, n)
		}
	}
	if p.redoneGroups.Load() == 0 {
		t.Skip("the requests never ran as a group on this machine")
	}
	wantEachInstanceQueued(t, p)
}
