package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// openForGroups opens a store on which runAsOneGroup can gather up to 8
// concurrent calls into one group.
func openForGroups(t *testing.T, opts *Options) *Provider {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	// Every call finds a lane free (a further lane opens for one queued
	// call: GroupCommitMax/4 is 1), so each reaches runAsOneGroup's
	// capture at once.
	opts.GroupCommitMax, opts.GroupCommitLanes, opts.MaxConns = 4, 8, 12
	return openFresh(t, opts)
}

// runAsOneGroup runs calls (store calls that go through the group commit)
// at once, and the requests they make as one group: each request is held
// as it reaches the group commit, and once every call made its request
// they run together (runGroup), each caller getting its own outcome.
func runAsOneGroup(t *testing.T, p *Provider, calls ...func() error) []error {
	t.Helper()
	type held struct {
		group []sqlstore.Request[*groupOp]
		out   chan []error
	}
	reqs := make(chan held)
	p.group.Run = func(group []sqlstore.Request[*groupOp]) []error {
		h := held{group: group, out: make(chan []error, 1)}
		reqs <- h
		return <-h.out
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = call() })
	}
	var (
		hs  []held
		all []sqlstore.Request[*groupOp]
	)
	for len(all) < len(calls) {
		h := <-reqs
		hs = append(hs, h)
		all = append(all, h.group...)
	}
	p.group.Run = p.runGroup
	out := p.runGroup(all)
	for _, h := range hs {
		h.out <- out[:len(h.group)]
		out = out[len(h.group):]
	}
	wg.Wait()
	return errs
}

// leaseWork queues the activities acts of each of instances and leases
// them all.
func leaseWork(t *testing.T, p *Provider, instances []string, acts int) []*provider.WorkItemLease {
	t.Helper()
	var msgs []*provider.WorkerMessage
	for _, id := range instances {
		for a := range acts {
			msgs = append(msgs, providertest.HammerActivity(id, int64(a+1)))
		}
	}
	if err := p.enqueueWork(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	leases, err := p.FetchWorkItems(t.Context(), provider.WorkFetchOptions{Max: len(msgs), LockTimeout: time.Minute})
	if err != nil || len(leases) != len(msgs) {
		t.Fatalf("FetchWorkItems = %d leases, %v; want %d", len(leases), err, len(msgs))
	}
	return leases
}

func ackCall(t *testing.T, p *Provider, ack *provider.WorkAck) func() error {
	return func() error {
		_, err := p.AckWorkItem(t.Context(), ack)
		return err
	}
}

// TestGroupedWorkAcksAreSetBased: the plain activity acks of a group
// are applied by one statement (the rows' deletion and the completions'
// insertion) and, for the acks that may take their instance's turn, one
// question for all of them; each ran four statements of its own before
// (two without TakeTurn).
func TestGroupedWorkAcksAreSetBased(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openForGroups(t, &Options{tracer: tr})
	ctx := t.Context()
	insts := []string{"s1", "s2", "s3"}
	// Three activities per instance, two of them acked: the instances
	// stay busy, so no ack takes its turn.
	leases := leaseWork(t, p, insts, 3)
	var calls []func() error
	for i, l := range leases {
		if l.ActivityID == 3 {
			continue
		}
		ack := providertest.HammerCompletion(l)
		if i%2 == 0 {
			ack.TakeTurn = &provider.FetchOptions{LockTimeout: time.Minute}
		}
		calls = append(calls, ackCall(t, p, ack))
	}
	tr.snapshot()
	commits0 := p.Stats().Commits
	if err := errors.Join(runAsOneGroup(t, p, calls...)...); err != nil {
		t.Fatal(err)
	}
	trips, stmts, bySQL := tr.snapshot()
	// BEGIN, the group's locks, the acks (between the two settings that
	// keep sequential scans out of their plans), the busy question,
	// COMMIT and the notification.
	if trips != 2 || stmts != 8 {
		t.Errorf("%d round trips, %d statements (%v), want 2 and 8", trips, stmts, bySQL)
	}
	if got := p.Stats().Commits - commits0; got != 1 || p.groups.Load() != 1 {
		t.Fatalf("commits = %d, groups = %d: want one group committed once", got, p.groups.Load())
	}
	var queued, left int
	if err := p.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orchestrator_queue), (SELECT count(*) FROM worker_queue)`).Scan(&queued, &left); err != nil {
		t.Fatal(err)
	}
	if queued != 6 || left != 3 {
		t.Fatalf("%d completions queued, %d worker rows left; want 6 and 3", queued, left)
	}
	checkReadyTable(t, p)
}

// TestGroupedWorkAckLostLockFailsAlone: in a group of plain activity
// acks, an ack whose lock was lost (its row fetched again by another
// token) and the second of two acks of one row fail with ErrLockLost,
// enqueueing nothing, while the group commits the others once: nothing
// is rolled back or run again.
func TestGroupedWorkAckLostLockFailsAlone(t *testing.T) {
	t.Parallel()
	p := openForGroups(t, nil)
	ctx := t.Context()
	leases := leaseWork(t, p, []string{"l1", "l2"}, 2)
	stale := leases[1]
	if err := p.AbandonWorkItem(ctx, stale.LockToken, provider.AbandonOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{Max: 1, LockTimeout: time.Minute})
	if err != nil || len(again) != 1 || again[0].LockToken == stale.LockToken {
		t.Fatalf("FetchWorkItems = %v, %v; want the abandoned row under a new token", again, err)
	}
	acks := []*provider.WorkAck{
		providertest.HammerCompletion(leases[0]),
		providertest.HammerCompletion(stale),
		providertest.HammerCompletion(leases[2]),
		providertest.HammerCompletion(leases[2]), // acked twice
		providertest.HammerCompletion(leases[3]),
	}
	var calls []func() error
	for _, a := range acks {
		calls = append(calls, ackCall(t, p, a))
	}
	commits0 := p.Stats().Commits
	errs := runAsOneGroup(t, p, calls...)
	if errs[0] != nil || !errors.Is(errs[1], provider.ErrLockLost) || errs[4] != nil {
		t.Fatalf("outcomes = %v, want [nil ErrLockLost ... nil]", errs)
	}
	// The row acked twice: one of its acks succeeds.
	if (errs[2] == nil) == (errs[3] == nil) || !errors.Is(errors.Join(errs[2], errs[3]), provider.ErrLockLost) {
		t.Fatalf("outcomes of the row acked twice = %v, %v; want one nil and one ErrLockLost", errs[2], errs[3])
	}
	if got := p.Stats().Commits - commits0; got != 1 || p.groups.Load() != 1 {
		t.Fatalf("commits = %d, groups = %d: want the others committed as one group", got, p.groups.Load())
	}
	rows, _ := p.pool.Query(ctx, `SELECT (work_item::jsonb->>'id')::bigint FROM orchestrator_queue ORDER BY 1`)
	completed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(completed) != fmt.Sprint([]int64{leases[0].ActivityID, leases[2].ActivityID, leases[3].ActivityID}) {
		t.Fatalf("completions of activities %v queued; want those of %v, %v, %v only", completed,
			leases[0].ActivityID, leases[2].ActivityID, leases[3].ActivityID)
	}
	// The stale ack left the row to its new holder.
	row, _ := sqlstore.TokenRow(again[0].LockToken)
	var token string
	if err := p.pool.QueryRow(ctx, `SELECT lock_token FROM worker_queue WHERE id = $1`, row).Scan(&token); err != nil || token != again[0].LockToken {
		t.Fatalf("row of the stale ack: token %q, %v; want %q", token, err, again[0].LockToken)
	}
	checkReadyTable(t, p)
}

// TestGroupedWorkAcksHoldInstancesShared: a group of plain activity acks
// holds their instances' advisory locks shared, so it does not wait for
// another transaction holding one of them shared (another group of acks,
// an enqueue) and commits as a group; holding them exclusively, it waited
// until lock_timeout, then ran each ack alone.
func TestGroupedWorkAcksHoldInstancesShared(t *testing.T) {
	t.Parallel()
	p := openForGroups(t, &Options{LockTimeout: 2 * time.Second})
	leases := leaseWork(t, p, []string{"h1"}, 2)
	// h1 is ready (a message waits for it), and another transaction holds
	// h1 shared and has enqueued a message of its own for it, as another
	// group's acks would.
	mustExec(t, p, sqlInsertMessages, []string{"h1"}, []string{`{"kind":"ExternalRaised"}`}, []int64{p.now() - 1000}, p.now())
	other := pendingEnqueue(t, p, "h1", p.now())
	errs := runAsOneGroup(t, p, ackCall(t, p, providertest.HammerCompletion(leases[0])),
		ackCall(t, p, providertest.HammerCompletion(leases[1])))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if p.groups.Load() != 1 {
		t.Fatalf("groups = %d: want the acks committed as a group while another transaction holds their instance", p.groups.Load())
	}
	commitChecked(t, p, other)
}

// TestReadyInsertLeavesUnchangedRowUnlocked: a message that would not
// change its instance's scheduling row does not lock it, so a second
// enqueuer of the instance does not wait for the first's commit (it did,
// until lock_timeout, when every merge locked the row).
func TestReadyInsertLeavesUnchangedRowUnlocked(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	now := p.now()
	insert := func(tx pgx.Tx, visible int64) error {
		_, err := tx.Exec(ctx, sqlInsertMessages, []string{"u1"}, []string{`{"kind":"ExternalRaised"}`}, []int64{visible}, now)
		return err
	}
	if err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error { return insert(tx, now) }); err != nil {
		t.Fatal(err)
	}
	first := pendingEnqueue(t, p, "u1", now+1000)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return err
		}
		return insert(tx, now+2000)
	})
	if err != nil {
		t.Fatalf("second enqueuer: %v, want no wait for the first", err)
	}
	commitChecked(t, p, first)
}

// TestGroupedWorkAcksTakeTheirTurns: acks of one group whose instances
// have nothing else queued each take their instance's turn, with the
// completion, as alone; an instance acked twice in the group has its turn
// taken once.
func TestGroupedWorkAcksTakeTheirTurns(t *testing.T) {
	t.Parallel()
	p := openForGroups(t, nil)
	ctx := t.Context()
	leases := leaseWork(t, p, []string{"t1", "t2"}, 1)
	leases = append(leases, leaseWork(t, p, []string{"t2"}, 1)[0])
	turns := make([]*provider.OrchestrationItem, len(leases))
	var calls []func() error
	for i, l := range leases {
		ack := providertest.HammerCompletion(l)
		ack.TakeTurn = &provider.FetchOptions{LockTimeout: time.Minute}
		calls = append(calls, func() error {
			res, err := p.AckWorkItem(ctx, ack)
			turns[i] = res.Turn
			return err
		})
	}
	if err := errors.Join(runAsOneGroup(t, p, calls...)...); err != nil {
		t.Fatal(err)
	}
	if p.groups.Load() != 1 {
		t.Fatalf("groups = %d, want the acks committed as one group", p.groups.Load())
	}
	taken := map[string]int{}
	for _, it := range turns {
		if it != nil {
			taken[it.InstanceID] += len(it.Messages)
		}
	}
	if taken["t1"] != 1 || taken["t2"] != 2 || len(taken) != 2 {
		t.Fatalf("turns taken with %v messages, want t1's 1 and t2's 2", taken)
	}
	checkReadyTable(t, p)
}

// pendingEnqueue begins a transaction that holds instance's advisory lock
// shared and has enqueued a message for it, visible at visible, as an
// enqueue or a group of acks in progress would, and leaves it open (rolled
// back at the end of the test unless committed).
func pendingEnqueue(t *testing.T, p *Provider, instance string, visible int64) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, sqlAdvisoryLockShared, p.lockSpace, []string{instance}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sqlInsertMessages, []string{instance}, []string{`{"kind":"ExternalRaised"}`}, []int64{visible}, p.now()); err != nil {
		t.Fatal(err)
	}
	return tx
}

// commitChecked commits tx and checks the scheduling table.
func commitChecked(t *testing.T, p *Provider, tx pgx.Tx) {
	t.Helper()
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkReadyTable(t, p)
}

// TestLoneWorkAckAsksTakeableOnce: a lone activity ack that may take its
// instance's turn asks whether the instance is busy and tries its lock in
// one statement, and tries it only when it is not busy (a busy instance's
// lock, held until the commit, would only keep its other acks waiting).
func TestLoneWorkAckAsksTakeableOnce(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr})
	leases := leaseWork(t, p, []string{"b1"}, 2)
	ack := providertest.HammerCompletion(leases[0])
	ack.TakeTurn = &provider.FetchOptions{LockTimeout: time.Minute}
	tr.snapshot()
	if err := ackCall(t, p, ack)(); err != nil {
		t.Fatal(err)
	}
	// Its batch (BEGIN, its instance's shared lock, the row's deletion,
	// the completion, the busy question with the lock tried), then
	// COMMIT and the notification.
	if trips, stmts, bySQL := tr.snapshot(); trips != 2 || stmts != 7 {
		t.Errorf("%d round trips, %d statements (%v), want 2 and 7", trips, stmts, bySQL)
	}
}

// TestGroupedWorkAcksBeforeAFetchTakeNoTurn: in a group where a call runs
// after the plain activity acks (here a turn fetch), an ack that may take
// its instance's turn leaves it to a fetch: the group stays pipelined and
// commits once. Taking it was a further round of the acks' call after the
// fetch sent its own, which rolled the group back and ran it again call
// after call, in savepoints. The fetch behind the acks finds the
// completion and takes the turn.
func TestGroupedWorkAcksBeforeAFetchTakeNoTurn(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openForGroups(t, &Options{tracer: tr})
	ctx := t.Context()
	leases := leaseWork(t, p, []string{"f1"}, 1)
	ack := providertest.HammerCompletion(leases[0])
	ack.TakeTurn = &provider.FetchOptions{LockTimeout: time.Minute}
	var (
		taken   *provider.OrchestrationItem
		fetched *provider.OrchestrationItem
	)
	tr.snapshot()
	errs := runAsOneGroup(t, p, func() error {
		res, err := p.AckWorkItem(ctx, ack)
		taken = res.Turn
		return err
	}, func() error {
		var err error
		fetched, err = provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
		return err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	_, _, bySQL := tr.snapshot()
	for sql, n := range bySQL {
		if strings.HasPrefix(sql, "SAVEPOINT") || strings.HasPrefix(sql, "ROLLBACK") {
			t.Errorf("%d× %q: the group ran again call after call", n, sql)
		}
	}
	if p.groups.Load() != 1 {
		t.Fatalf("groups = %d, want the calls committed as one group", p.groups.Load())
	}
	if taken != nil {
		t.Errorf("the ack took the turn of %s, want it left to the fetch", taken.InstanceID)
	}
	if fetched == nil || fetched.InstanceID != "f1" || len(fetched.Messages) != 1 {
		t.Fatalf("fetched %+v, want f1's turn with the completion", fetched)
	}
	checkReadyTable(t, p)
}

// TestTakeableAsksBusyOnce: the question activity acks ask before taking
// their instances' turns (sqlInstancesTakeable) reads each instance's
// worker rows once; the planner had copied the busy question into both
// places that use its answer, scanning them twice.
func TestTakeableAsksBusyOnce(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	leaseWork(t, p, []string{"k1", "k2"}, 2)
	type node struct {
		Relation string `json:"Relation Name"`
		Loops    int    `json:"Actual Loops"`
		Plans    []node `json:"Plans"`
	}
	var scans func(n node) int
	scans = func(n node) int {
		k := 0
		if n.Relation == "worker_queue" {
			k = n.Loops
		}
		for _, c := range n.Plans {
			k += scans(c)
		}
		return k
	}
	for _, names := range [][]string{nil, {"Other"}} {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			var out string
			if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sqlInstancesTakeable,
				p.lockSpace, []string{"k1", "k2"}, names).Scan(&out); err != nil {
				return err
			}
			var plans []struct {
				Plan node `json:"Plan"`
			}
			if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
				return fmt.Errorf("EXPLAIN output %s: %v", out, err)
			}
			if got := scans(plans[0].Plan); got != 2 {
				t.Errorf("names %v: %d scans of worker_queue for 2 instances, want 2: %s", names, got, out)
			}
			return errors.New("rolled back") // releases the locks tried
		})
		if err != nil && err.Error() != "rolled back" {
			t.Fatal(err)
		}
	}
}
