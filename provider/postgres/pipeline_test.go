package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// TestGroupPipelineIsOneRoundTrip: a group of calls of one batch each
// sends them all in one pipeline: one round trip for the calls, headed by
// the group's locks, and one for the COMMIT, whatever the group's size
// (run call after call, it was one round trip per call and one for the
// locks), and the calls do not take again the instance locks their group
// holds.
func TestGroupPipelineIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr})
	ctx := t.Context()
	const n = 8
	group := make([]sqlstore.Request[*groupOp], n)
	for i := range group {
		group[i] = startOp(t, ctx, fmt.Sprintf("pipe-%d", i), nil)
	}
	tr.snapshot()
	commits0 := p.Stats().Commits
	errs := p.runGroup(group)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	trips, stmts, bySQL := tr.snapshot()
	if trips != 2 {
		t.Errorf("%d round trips (%d statements: %v), want 2", trips, stmts, bySQL)
	}
	// BEGIN, the group's locks, one insert per start (the group holds
	// their instances' locks: they take none of their own), COMMIT and
	// the group's notification.
	if want := n + 4; stmts != want {
		t.Errorf("%d statements (%v), want %d", stmts, bySQL, want)
	}
	if got := p.Stats().Commits - commits0; got != 1 || p.groups.Load() != 1 {
		t.Fatalf("commits = %d, groups = %d: want one group committed once", got, p.groups.Load())
	}
	items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{Max: 2 * n, LockTimeout: time.Minute})
	if err != nil || len(items) != n {
		t.Fatalf("FetchOrchestrationItems = %d items, %v; want %d", len(items), err, n)
	}
}

// TestGroupPipelineFailingCallRunsCallsAlone: in a pipelined group, a call
// that fails after writing rolls the group back, and every call runs again
// alone: the others commit, the failed one writes nothing, and each
// caller gets its own call's outcome.
func TestGroupPipelineFailingCallRunsCallsAlone(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	if got := runFailingMiddle(t, p); got != 2 || p.groups.Load() != 0 {
		t.Fatalf("commits = %d, groups = %d: want a and c committed alone", got, p.groups.Load())
	}
}

// TestGroupPipelineCallFailingBeforeSendingFailsAlone: a call that fails
// before it sent anything wrote nothing; it fails alone and the group
// commits the others.
func TestGroupPipelineCallFailingBeforeSendingFailsAlone(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	boom := errors.New("boom")
	early := sqlstore.Request[*groupOp]{Ctx: ctx, Op: &groupOp{
		locks: []sqlstore.Lock{{Instance: "early"}},
		fn:    func(*wtx) error { return boom },
	}}
	errs := p.runGroup([]sqlstore.Request[*groupOp]{startOp(t, ctx, "a", nil), early, startOp(t, ctx, "c", nil)})
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("outcomes = %v, want [nil boom nil]", errs)
	}
	if p.groups.Load() != 1 {
		t.Fatalf("groups = %d, want the group committed", p.groups.Load())
	}
}

// TestGroupPipelinable: a group runs pipelined unless two calls that
// declare no instance are fetches of one kind (turns, served or unserved,
// or work items).
func TestGroupPipelinable(t *testing.T) {
	t.Parallel()
	op := func(name string, ids ...string) sqlstore.Request[*groupOp] {
		o := &groupOp{op: name}
		for _, id := range ids {
			o.locks = append(o.locks, sqlstore.Lock{Instance: id})
		}
		return sqlstore.Request[*groupOp]{Op: o}
	}
	for _, c := range []struct {
		name  string
		group []sqlstore.Request[*groupOp]
		want  bool
	}{
		{"distinct instances", []sqlstore.Request[*groupOp]{op("ack", "a", "b"), op("ack", "c"), op("enqueue", "d", "d")}, true},
		{"one instance twice", []sqlstore.Request[*groupOp]{op("ack", "a", "b"), op("enqueue", "b")}, true},
		{"one fetch of each kind", []sqlstore.Request[*groupOp]{op("fetching orchestration items"), op("fetching work items"), op("ack", "a")}, true},
		{"two turn fetches", []sqlstore.Request[*groupOp]{op("fetching orchestration items"), op("fetching work items"), op("fetching unserved orchestration items")}, false},
		{"two work fetches", []sqlstore.Request[*groupOp]{op("fetching work items"), op("fetching work items")}, false},
	} {
		if got := pipelinable(c.group); got != c.want {
			t.Errorf("%s: pipelinable = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGroupPipelineStaysSerialEquivalent: a call that needs a second round
// after a call behind it ran its first would see that call's writes as if
// it had run first; the group then runs again call after call, so the
// first call sees nothing of the second, as in order.
func TestGroupPipelineStaysSerialEquivalent(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	seen := int64(-1)
	twoRounds := sqlstore.Request[*groupOp]{Ctx: ctx, Op: &groupOp{
		locks: []sqlstore.Lock{{Instance: "a", Exclusive: true}},
		fn: func(w *wtx) error {
			if _, err := w.tx.Exec(w.ctx, "SELECT 1"); err != nil {
				return err
			}
			return w.tx.QueryRow(w.ctx, "SELECT count(*) FROM orchestrator_queue WHERE instance_id = 'b'").Scan(&seen)
		},
	}}
	errs := p.runGroup([]sqlstore.Request[*groupOp]{twoRounds, startOp(t, ctx, "b", nil)})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if seen != 0 {
		t.Fatalf("the first call saw %d messages of the second, want 0", seen)
	}
	if p.groups.Load() != 1 {
		t.Fatalf("groups = %d, want the group committed once", p.groups.Load())
	}
}

// TestGroupPipelineFailedCheckFailsAlone: an ack whose check fails (here
// a lost lock, DX001) rolls a pipelined group back; it fails with its
// check's error and the other calls commit as a group without it.
func TestGroupPipelineFailedCheckFailsAlone(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	lost := sqlstore.Request[*groupOp]{Ctx: ctx, Op: &groupOp{
		locks: []sqlstore.Lock{{Instance: "lost", Exclusive: true}},
		fn: func(w *wtx) error {
			b := &pgx.Batch{}
			b.Queue(sqlCheckTurnLock, "lost", "no-such-token", w.now)
			err := w.tx.SendBatch(w.ctx, b).Close()
			if checkFailed(err, codeLockLost) {
				return provider.ErrLockLost
			}
			return err
		},
	}}
	commits0 := p.Stats().Commits
	errs := p.runGroup([]sqlstore.Request[*groupOp]{startOp(t, ctx, "a", nil), lost, startOp(t, ctx, "c", nil)})
	if errs[0] != nil || !errors.Is(errs[1], provider.ErrLockLost) || errs[2] != nil {
		t.Fatalf("outcomes = %v, want [nil ErrLockLost nil]", errs)
	}
	if got := p.Stats().Commits - commits0; got != 1 || p.groups.Load() != 1 {
		t.Fatalf("commits = %d, groups = %d: want a and c committed as one group", got, p.groups.Load())
	}
	for _, id := range []string{"a", "c"} {
		if _, err := p.GetInstance(ctx, id); err != nil {
			t.Fatalf("GetInstance(%q) = %v", id, err)
		}
	}
}
