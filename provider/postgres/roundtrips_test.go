package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// countingTracer counts the round trips (a statement sent alone, or a
// batch) and the statements the store's connections send.
type countingTracer struct {
	mu         sync.Mutex
	roundTrips int
	statements int
	bySQL      map[string]int
}

func (c *countingTracer) add(sql string, trip bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if trip {
		c.roundTrips++
	}
	c.statements++
	if c.bySQL == nil {
		c.bySQL = map[string]int{}
	}
	key := strings.Join(strings.Fields(sql), " ")
	if len(key) > 70 {
		key = key[:70]
	}
	c.bySQL[key]++
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL, true)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	c.roundTrips++
	c.mu.Unlock()
	return ctx
}

func (c *countingTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL, false)
}

func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// snapshot returns the counts so far and resets them.
func (c *countingTracer) snapshot() (trips, stmts int, bySQL map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	trips, stmts, bySQL = c.roundTrips, c.statements, c.bySQL
	c.roundTrips, c.statements, c.bySQL = 0, 0, nil
	return trips, stmts, bySQL
}

// TestRoundTripsPerSequentialOrchestration runs orchestrations of five
// chained activities one after another (nothing else runs, so no call
// shares a group) and counts, per orchestration, the round trips, the
// statements and the commits of the store. It fails when they exceed the
// figures docs/postgres.md reports (with some room for the client's
// polling reads, which vary), so a change that adds round trips to the
// hot path is noticed.
func TestRoundTripsPerSequentialOrchestration(t *testing.T) {
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 4})
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "AddOne", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "Seq", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for range 5 {
			if err := ctx.ScheduleActivity("AddOne", n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	ctx := context.Background()
	rt, err := duroxide.StartRuntime(ctx, p, reg, &duroxide.RuntimeOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	client := duroxide.NewClient(p)
	run := func(i int) {
		id := fmt.Sprintf("seq-%d", i)
		if err := client.StartOrchestration(ctx, id, "Seq", i, nil); err != nil {
			t.Fatal(err)
		}
		st, err := client.WaitForOrchestration(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := st.Decode(&got); err != nil || got != i+5 {
			t.Fatalf("%s: got %d, %v; want %d", id, got, err, i+5)
		}
	}
	// Warm up: every pooled connection prepares its statements once.
	for i := range 5 {
		run(i)
	}
	const n = 20
	tr.snapshot()
	commits0, relaxed0 := p.Stats().Commits, p.relaxedCommits.Load()
	for i := range n {
		run(100 + i)
	}
	trips, stmts, bySQL := tr.snapshot()
	commits := p.Stats().Commits - commits0
	durable := commits - (p.relaxedCommits.Load() - relaxed0)
	type kv struct {
		sql string
		n   int
	}
	var top []kv
	for k, v := range bySQL {
		top = append(top, kv{k, v})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n })
	for _, e := range top {
		t.Logf("%6.1f  %s", float64(e.n)/n, e.sql)
	}
	t.Logf("per orchestration: %.1f round trips, %.1f statements, %.1f commits (%.1f waiting for the WAL flush)",
		float64(trips)/n, float64(stmts)/n, float64(commits)/n, float64(durable)/n)
	// Measured: about 27 round trips and 68 statements (the client's
	// polling reads included: about 9 of each), 8 commits (start, fetch,
	// first turn, five activities each with its fused turn). Before the
	// acks were pipelined whole: 50 round trips, 86 statements.
	if per := float64(trips) / n; per > 33 {
		t.Errorf("%.1f round trips per orchestration, want at most 33", per)
	}
	if per := float64(stmts) / n; per > 78 {
		t.Errorf("%.1f statements per orchestration, want at most 78", per)
	}
	if per := float64(commits) / n; per > 9 {
		t.Errorf("%.1f commits per orchestration, want at most 9", per)
	}
	// The fetch of the first turn commits relaxed (see wtx.relaxed); the
	// start, the first turn's ack and the five work acks wait for the WAL
	// flush.
	if per := float64(durable) / n; per > 7 {
		t.Errorf("%.1f commits per orchestration wait for the WAL flush, want at most 7", per)
	}
}

// TestRenewalsAreOneStatement: a turn lock's and a work item lock's
// renewal each send one statement, outside an explicit transaction (no
// BEGIN, no COMMIT): one round trip.
func TestRenewalsAreOneStatement(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 4})
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, providertest.HammerStart("a")); err != nil {
		t.Fatal(err)
	}
	if err := p.enqueueWork(ctx, providertest.HammerActivity("b", 1)); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	leases, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{Max: 1, LockTimeout: time.Minute})
	if err != nil || len(leases) != 1 {
		t.Fatalf("FetchWorkItems = %v, %v", leases, err)
	}
	for _, renew := range []struct {
		name string
		call func() error
	}{
		{"RenewOrchestrationItemLock", func() error { return p.RenewOrchestrationItemLock(ctx, it.LockToken, time.Hour) }},
		{"RenewWorkItemLock", func() error { return p.RenewWorkItemLock(ctx, leases[0].LockToken, time.Hour) }},
	} {
		tr.snapshot()
		if err := renew.call(); err != nil {
			t.Fatalf("%s: %v", renew.name, err)
		}
		if trips, stmts, bySQL := tr.snapshot(); trips != 1 || stmts != 1 {
			t.Errorf("%s: %d round trips, %d statements (%v), want 1 and 1", renew.name, trips, stmts, bySQL)
		}
	}
}
