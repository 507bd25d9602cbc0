package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// groupRound holds the writer loop busy until n more requests are about to
// be handed over, so they are likely to run as one group, then runs them:
// ops[i] is run by its own goroutine and its error stored in errs[i].
func groupRound(t *testing.T, p *Provider, ops []func() error) []error {
	t.Helper()
	ctx := t.Context()
	var submitted sync.WaitGroup
	submitted.Add(len(ops) + 1)
	p.testHookSubmit = func() { submitted.Done() }
	defer func() { p.testHookSubmit = nil }()

	release := make(chan struct{})
	blocked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = p.write(ctx, "blocking", func(w *wtx) error {
			close(blocked)
			<-release
			return nil
		})
	}()
	<-blocked
	errs := make([]error, len(ops))
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = op()
		}()
	}
	submitted.Wait()
	for range 100 {
		runtime.Gosched() // let the submitters block on the hand-over
	}
	close(release)
	wg.Wait()
	return errs
}

func TestGroupCommitIsolatesFailingRequests(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "group.db"), nil)
	ctx := t.Context()
	for round := 0; round < 20 && p.groups.Load() == 0; round++ {
		var ops []func() error
		for i := range 6 {
			id := fmt.Sprintf("g%d-%d", round, i)
			ops = append(ops,
				func() error { _, err := p.Enqueue(ctx, providertest.HammerStart(id)); return err },
				func() error { _, err := p.Enqueue(ctx, providertest.HammerStart(id)); return err }, // the second fails: taken
				func() error {
					return p.AbandonOrchestrationItem(ctx, "0123456789abcdef0123456789abcdef.nobody", provider.AbandonOptions{})
				},
			)
		}
		errs := groupRound(t, p, ops)
		created, exists := 0, 0
		for i, err := range errs {
			switch {
			case i%3 == 2:
				if !errors.Is(err, provider.ErrLockLost) {
					t.Fatalf("bogus abandon: %v, want ErrLockLost", err)
				}
			case err == nil:
				created++
			case errors.Is(err, provider.ErrInstanceExists):
				exists++
			default:
				t.Fatalf("enqueue: %v", err)
			}
		}
		if created != 6 || exists != 6 {
			t.Fatalf("round %d: %d enqueues created, %d found the ID taken; want 6 and 6", round, created, exists)
		}
	}
	if p.groups.Load() == 0 {
		t.Skip("the requests never ran as a group on this machine")
	}
	wantEachInstanceQueued(t, p)
}

// wantEachInstanceQueued checks that every instance has its start queued
// and no start is queued for an instance that does not exist: a request
// committed once or not at all.
func wantEachInstanceQueued(t *testing.T, p *Provider) {
	t.Helper()
	c, err := p.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.QueueDepths(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Instances != d.OrchestratorReady {
		t.Fatalf("%d instances but %d queued starts: a failed request leaked writes", c.Instances, d.OrchestratorReady)
	}
}

// enqueueStart is a request of a group: it enqueues the start of id.
func enqueueStart(p *Provider, id string) func() error {
	return func() error {
		_, err := p.Enqueue(context.Background(), providertest.HammerStart(id))
		return err
	}
}

// wantInstances checks that the instances exist.
func wantInstances(t *testing.T, p *Provider, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := p.GetInstance(t.Context(), id); err != nil {
			t.Fatalf("GetInstance(%s): %v", id, err)
		}
	}
}

// TestBrokenGroupReRunsEachRequestAlone breaks the shared transaction from
// inside one request (as SQLite does when it rolls a transaction back on an
// I/O error): the other requests must still commit, each on its own.
func TestBrokenGroupReRunsEachRequestAlone(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "broken.db"), nil)
	ctx := t.Context()
	breakErr := errors.New("broke the transaction")
	for round := 0; round < 20 && p.brokenGroups.Load() == 0; round++ {
		a, b := fmt.Sprintf("b%d-1", round), fmt.Sprintf("b%d-2", round)
		ops := []func() error{
			enqueueStart(p, a),
			func() error {
				return p.write(ctx, "breaking", func(w *wtx) error {
					_, _ = w.tx.ExecContext(w.ctx, "ROLLBACK")
					return breakErr
				})
			},
			enqueueStart(p, b),
		}
		errs := groupRound(t, p, ops)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], breakErr) {
			t.Fatalf("round %d: errors %v, want nil, %v, nil", round, errs, breakErr)
		}
		wantInstances(t, p, a, b)
	}
	if p.brokenGroups.Load() == 0 {
		t.Skip("the requests never ran as a group on this machine")
	}
}

// TestCloseDuringWrites closes the store while goroutines write: every call
// returns nil or ErrClosed, and none hangs.
func TestCloseDuringWrites(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "close.db"), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				_, err := p.Enqueue(ctx, providertest.HammerStart(fmt.Sprintf("c%d-%d", g, i)))
				if i == 0 {
					started <- struct{}{}
				}
				if errors.Is(err, provider.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
			}
		}()
	}
	for range 8 {
		<-started
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if _, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: 1}); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("fetch after Close: %v, want ErrClosed", err)
	}
}

// TestWriterTransactionsEndCleanly runs, alone, requests that fail, that
// end the transaction themselves (as SQLite does after an I/O error) and
// that panic: each must leave the pinned writer connection outside any
// transaction, so the next write commits and readers see it.
func TestWriterTransactionsEndCleanly(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "clean.db"), nil)
	ctx := t.Context()
	failErr := errors.New("request failed")
	bad := []func(w *wtx) error{
		func(w *wtx) error {
			if _, ok := w.tx.(*sql.Conn); !ok || w.stmts != nil {
				return fmt.Errorf("file store transaction on %T, want the pinned *sql.Conn", w.tx)
			}
			return nil
		},
		func(w *wtx) error {
			m, err := sqlenc.EncodeMessage(providertest.HammerStart("rolled-back"))
			if err != nil {
				return err
			}
			if err := w.insertMessage(m); err != nil {
				return err
			}
			return failErr
		},
		func(w *wtx) error {
			_, _ = w.tx.ExecContext(w.ctx, "ROLLBACK")
			return failErr
		},
		func(w *wtx) error { panic("request panicked") },
	}
	for i, fn := range bad {
		err := p.write(ctx, "testing", fn)
		if i == 0 {
			if err != nil {
				t.Fatal(err)
			}
		} else if err == nil {
			t.Fatalf("request %d: no error", i)
		}
		id := fmt.Sprintf("after-%d", i)
		if _, err := p.Enqueue(ctx, providertest.HammerStart(id)); err != nil {
			t.Fatalf("write after request %d: %v", i, err)
		}
		if _, err := p.GetInstance(ctx, id); err != nil {
			t.Fatalf("GetInstance(%s) after request %d: %v", id, i, err)
		}
	}
	if _, err := p.GetInstance(ctx, "rolled-back"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("GetInstance(rolled-back) = %v, want ErrNotFound: a failed request's write survived", err)
	}
}

// TestGroupAcksWorkSetBased: the work acks of one group are applied
// set-based (runAcks), with each ack's own outcome: acks whose token holds
// the row delete it and enqueue their completion, in the group's order; a
// second ack of the same row and an ack with a token the row does not
// hold fail with ErrLockLost and enqueue nothing.
func TestGroupAcksWorkSetBased(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "acks.db"), nil)
	ctx := t.Context()
	for round := 0; round < 20 && p.batchedAcks.Load() == 0; round++ {
		var msgs []*provider.WorkerMessage
		for i := range 5 {
			msgs = append(msgs, benchActivity(fmt.Sprintf("r%d-%d", round, i%2), int64(i)+1))
		}
		if err := p.enqueueWork(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		leases, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 5})
		if err != nil || len(leases) != 5 {
			t.Fatalf("fetch: %d leases, %v", len(leases), err)
		}
		acks := make([]*provider.WorkAck, 0, 7)
		for _, l := range leases {
			acks = append(acks, benchCompletion(l))
		}
		acks = append(acks, benchCompletion(leases[0])) // the same row again
		stale := benchCompletion(leases[1])
		stale.LockToken = "0123456789abcdef0123456789abcdef." + stale.LockToken[33:] // its row, another token
		acks = append(acks, stale)
		ops := make([]func() error, len(acks))
		for i, a := range acks {
			ops[i] = func() error { _, err := p.AckWorkItem(ctx, a); return err }
		}
		errs := groupRound(t, p, ops)
		if !errors.Is(errs[6], provider.ErrLockLost) {
			t.Fatalf("round %d: ack with a stale token: %v, want ErrLockLost", round, errs[6])
		}
		if (errs[0] == nil) == (errs[5] == nil) || (errs[0] != nil && !errors.Is(errs[0], provider.ErrLockLost)) ||
			(errs[5] != nil && !errors.Is(errs[5], provider.ErrLockLost)) {
			t.Fatalf("round %d: two acks of one row: %v and %v, want one nil and one ErrLockLost", round, errs[0], errs[5])
		}
		for i := 1; i < 5; i++ {
			if errs[i] != nil {
				t.Fatalf("round %d: ack %d: %v", round, i, errs[i])
			}
		}
		// Each row's completion was enqueued once; no worker row is left.
		var queued, distinct, work int
		like := fmt.Sprintf("r%d-%%", round)
		queryCount(t, p, `SELECT count(*) FROM orchestrator_queue WHERE instance_id LIKE ?1`, &queued, like)
		queryCount(t, p, `SELECT count(DISTINCT instance_id || work_item) FROM orchestrator_queue WHERE instance_id LIKE ?1`, &distinct, like)
		queryCount(t, p, `SELECT count(*) FROM worker_queue`, &work)
		if queued != 5 || distinct != 5 || work != 0 {
			t.Fatalf("round %d: %d completions queued (%d distinct), %d worker rows left; want 5, 5, 0", round, queued, distinct, work)
		}
	}
	if p.batchedAcks.Load() == 0 {
		t.Fatal("the acks never ran set-based")
	}
	checkReadyTable(t, p)
}

// TestGroupAcksAskTakeTurnOnce: a group of work acks that may take their
// turns (WorkAck.TakeTurn) asks once for all of them whether those turns
// can be taken, not once per ack, and still declines a turn while another
// activity of the instance is queued or when the caller does not serve its
// orchestration. An ack that serves other orchestrations than the rest of
// its group asks on its own.
func TestGroupAcksAskTakeTurnOnce(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "take.db"), nil)
	ctx := t.Context()
	count := stmtCounter(t, p)
	for round := 0; round < 20; round++ {
		// busy has a second activity queued; other runs an orchestration
		// the acks do not serve; free and free2 may be taken; any is taken
		// by an ack that serves every orchestration.
		ids := map[string]string{}
		for _, k := range []string{"busy", "free", "free2", "other", "any"} {
			ids[k] = fmt.Sprintf("%s-%d", k, round)
			start := benchStart(ids[k])
			if k == "other" {
				start.Item.Name, start.Create.OrchestrationName = "Other", "Other"
			}
			if _, err := p.Enqueue(ctx, start); err != nil {
				t.Fatal(err)
			}
		}
		items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Minute, Max: 5})
		if err != nil || len(items) != 5 {
			t.Fatalf("fetched %d turns (%v), want 5", len(items), err)
		}
		for _, it := range items {
			ack := benchTurn(it)
			if it.InstanceID == ids["other"] {
				ack.History[0].Name, ack.Metadata.OrchestrationName = "Other", "Other"
			}
			if _, err := p.AckOrchestrationItem(ctx, ack); err != nil {
				t.Fatal(err)
			}
		}
		leases, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 5})
		if err != nil || len(leases) != 5 {
			t.Fatalf("fetched %d activities (%v), want 5", len(leases), err)
		}
		if err := p.enqueueWork(ctx, benchActivity(ids["busy"], 4)); err != nil {
			t.Fatal(err)
		}
		byInstance := map[string]int{}
		ops := make([]func() error, len(leases))
		results := make([]provider.WorkResult, len(leases))
		for i, l := range leases {
			byInstance[l.InstanceID] = i
			a := benchCompletion(l)
			a.TakeTurn = &provider.FetchOptions{LockTimeout: time.Minute, Orchestrations: []string{"Bench"}}
			if l.InstanceID == ids["any"] {
				a.TakeTurn.Orchestrations = nil
			}
			ops[i] = func() error {
				var err error
				results[i], err = p.AckWorkItem(ctx, a)
				return err
			}
		}
		count(sInstanceHasWork)
		count(sInstancesWithWork)
		before := p.batchedAcks.Load()
		for i, err := range groupRound(t, p, ops) {
			if err != nil {
				t.Fatalf("round %d: ack %d: %v", round, i, err)
			}
		}
		for k, want := range map[string]bool{"busy": false, "free": true, "free2": true, "other": false, "any": true} {
			if got := results[byInstance[ids[k]]].Turn != nil; got != want {
				t.Fatalf("round %d: the %s instance's turn taken: %v, want %v", round, k, got, want)
			}
		}
		if p.batchedAcks.Load()-before != int64(len(ops)) {
			continue // the acks did not run as one group: try again
		}
		if each, once := count(sInstanceHasWork), count(sInstancesWithWork); each != 1 || once != 1 {
			t.Fatalf("a group of %d acks taking turns asked %d times for one and %d for the group; want 1 (the ack serving other orchestrations) and 1",
				len(ops), each, once)
		}
		checkReadyTable(t, p)
		return
	}
	t.Fatal("the acks never ran as one group")
}
