package postgres

import (
	"context"
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

// TestFetchesCommitRelaxed: a transaction of fetches alone commits without
// waiting for the WAL flush (synchronous_commit off, in its commit batch:
// no extra round trip), also a worker fetch with a session that claims
// none, and so does a turn ack that does not end its execution;
// enqueues, activity acks, turn acks that end an execution, a fetch
// claiming a session and a group with any call that is not a fetch commit
// durably.
func TestFetchesCommitRelaxed(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr})
	ctx := t.Context()
	var sent int64 // the relaxing statements sent so far
	relaxed := func(step string, want int64) {
		t.Helper()
		_, _, bySQL := tr.snapshot()
		sent += int64(bySQL[sqlRelaxCommit])
		if got := p.relaxedCommits.Load(); got != want || sent != want {
			t.Fatalf("%s: %d relaxed commits, %d %q sent; want %d", step, got, sent, sqlRelaxCommit, want)
		}
	}
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	relaxed("enqueue", 0)
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	relaxed("turn fetch", 1)
	if _, err := p.AckOrchestrationItem(ctx, providertest.HammerTurn(it, 0)); err != nil {
		t.Fatal(err)
	}
	relaxed("turn ack that does not end its execution", 2)
	if _, err := p.Enqueue(ctx, providertest.HammerStart("c")); err != nil {
		t.Fatal(err)
	}
	it, err = provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	relaxed("turn fetch", 3)
	ending := providertest.HammerTurn(it, 2) // starts and completes its execution
	ending.WorkerItems = nil
	if _, err := p.AckOrchestrationItem(ctx, ending); err != nil {
		t.Fatal(err)
	}
	relaxed("turn ack that ends its execution", 3)
	leases, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{Max: 1, LockTimeout: time.Minute})
	if err != nil || len(leases) != 1 {
		t.Fatalf("FetchWorkItems = %v, %v", leases, err)
	}
	relaxed("work fetch", 4)
	if _, err := p.AckWorkItem(ctx, &provider.WorkAck{LockToken: leases[0].LockToken}); err != nil {
		t.Fatal(err)
	}
	relaxed("activity ack", 4)
	// A fetch with a session (as the runtime's) that claims none wrote
	// only leases; one that claims a session commits durably.
	session := provider.WorkFetchOptions{Max: 1, LockTimeout: time.Minute,
		Session: &provider.SessionOptions{OwnerID: "o", LockTimeout: time.Minute}}
	if err := p.enqueueWork(ctx, providertest.HammerActivity("b", 1)); err != nil {
		t.Fatal(err)
	}
	if leases, err := p.FetchWorkItems(ctx, session); err != nil || len(leases) != 1 {
		t.Fatalf("FetchWorkItems = %v, %v", leases, err)
	}
	relaxed("session fetch of a row of no session", 5)
	w := providertest.HammerActivity("b", 2)
	w.SessionID = "S"
	if err := p.enqueueWork(ctx, w); err != nil {
		t.Fatal(err)
	}
	if leases, err := p.FetchWorkItems(ctx, session); err != nil || len(leases) != 1 {
		t.Fatalf("FetchWorkItems = %v, %v", leases, err)
	}
	relaxed("session fetch claiming a session", 5)

	// Groups: fetches alone commit relaxed; with any other call, durably.
	fetch := &groupOp{fn: func(w *wtx) error {
		_, err := w.FetchTurns(1, 60_000, 0, nil, nil)
		return err
	}}
	other := &groupOp{fn: func(w *wtx) error {
		_, err := w.tx.Exec(w.ctx, "SELECT 1")
		return err
	}}
	group := func(ops ...*groupOp) {
		t.Helper()
		conn, err := p.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		var reqs []sqlstore.Request[*groupOp]
		for _, op := range ops {
			reqs = append(reqs, sqlstore.Request[*groupOp]{Ctx: ctx, Op: op})
		}
		if _, _, err := p.groupOn(conn, reqs, false); err != nil {
			t.Fatal(err)
		}
	}
	group(fetch, fetch)
	relaxed("group of fetches", 6)
	group(fetch, other)
	relaxed("group of a fetch and another call", 6)
}

// orderTracer records, per batch, whether a pg_notify was sent before the
// batch's COMMIT (inside the transaction) or after it.
type orderTracer struct {
	mu        sync.Mutex
	committed map[*pgx.Conn]bool // the current batch of the connection passed its COMMIT
	inside    []string           // notifications sent inside a transaction
	after     int                // notifications sent after a COMMIT
}

func (o *orderTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_notify") {
		o.mu.Lock()
		o.inside = append(o.inside, d.SQL)
		o.mu.Unlock()
	}
	return ctx
}

func (o *orderTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (o *orderTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	o.mu.Lock()
	o.committed[c] = false
	o.mu.Unlock()
	return ctx
}

func (o *orderTracer) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case d.SQL == "COMMIT":
		o.committed[c] = true
	case strings.Contains(d.SQL, "pg_notify") && o.committed[c]:
		o.after++
	case strings.Contains(d.SQL, "pg_notify"):
		o.inside = append(o.inside, d.SQL)
	}
}

func (o *orderTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestNotificationsFollowTheCommit: no write transaction calls pg_notify
// inside it (PostgreSQL would hold its server-wide notification lock
// through the commit's WAL flush, so notifying transactions could never
// share a flush); the notifications follow the COMMIT in its round trip,
// for lone calls and groups alike (TestNotifyAcrossStores shows that other
// nodes get them).
func TestNotificationsFollowTheCommit(t *testing.T) {
	t.Parallel()
	tr := &orderTracer{committed: map[*pgx.Conn]bool{}}
	p := openFresh(t, &Options{tracer: tr})
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	if _, err := p.AckOrchestrationItem(ctx, providertest.HammerTurn(it, 0)); err != nil {
		t.Fatal(err)
	}
	// A group of enqueues.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := p.Enqueue(ctx, providertest.HammerStart(fmt.Sprint("g", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.inside) > 0 {
		t.Fatalf("%d notifications sent inside a transaction, e.g. %s", len(tr.inside), tr.inside[0])
	}
	if tr.after < 3 {
		t.Fatalf("%d notifications after a COMMIT, want at least 3", tr.after)
	}
}
