package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// oneStepRegistry registers "One": one activity ("Echo"), whose result
// it returns.
func oneStepRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, n int) (int, error) { return n, nil })
	duroxide.RegisterOrchestration(reg, "One", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		err := ctx.ScheduleActivity("Echo", n).Await(&n)
		return n, err
	})
	return reg
}

// startAndWait starts orchestration name with input as instance id and
// waits for its end.
func startAndWait(t testing.TB, client *duroxide.Client, id, name string, input any) *duroxide.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client.StartOrchestration(ctx, id, name, input, nil); err != nil {
		t.Fatal(err)
	}
	st, err := client.WaitForOrchestration(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// statementCount returns how many times the tracer saw the statement sql
// since its last snapshot.
func statementCount(tr *countingTracer, sql string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.full[strings.Join(strings.Fields(sql), " ")]
}

// TestWaitTakesTheEndedRowFromItsCommit: a client waiting for an
// orchestration that the runtime of its process ends gets the instance's
// row from the commit that ended it (read in that commit's round trip,
// once, only for the ending turn), and reads the status only when it
// starts waiting: one status read per orchestration of the latency
// workload's shape instead of two. What it returns is what a read finds.
func TestWaitTakesTheEndedRowFromItsCommit(t *testing.T) {
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 4})
	ctx := t.Context()
	rt, err := duroxide.StartRuntime(context.Background(), p, oneStepRegistry(), &duroxide.RuntimeOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	client := duroxide.NewClient(p)
	run := func(i int) *duroxide.Status { return startAndWait(t, client, fmt.Sprint("one-", i), "One", i) }
	run(0)
	const n = 10
	tr.snapshot()
	sts := make([]*duroxide.Status, n)
	for i := range n {
		sts[i] = run(1 + i)
	}
	reads := statementCount(tr, sharedSQL[sqlstore.QGetInstance])
	rows := statementCount(tr, sqlEndedRows)
	// One read per orchestration, when the wait starts; the bound leaves
	// room for a stray wake-up (a notification of another process wakes
	// every watcher).
	if per := float64(reads) / n; per > 1.5 {
		t.Errorf("%.1f status reads per orchestration, want at most 1.5", per)
	}
	// One each, but for an orchestration that ended before its waiter
	// began to watch (its first read finds it ended).
	if rows > n || rows < n/2 {
		t.Errorf("%d reads of ended rows for %d orchestrations, want one each", rows, n)
	}
	for i, st := range sts {
		var got int
		if st.State != duroxide.StateCompleted || st.Decode(&got) != nil || got != 1+i {
			t.Fatalf("one-%d: %+v, want Completed with %d", 1+i, st, 1+i)
		}
		read, err := client.GetStatus(ctx, st.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		if read.ETag != st.ETag || read.ExecutionID != st.ExecutionID || !read.UpdatedAt.Equal(st.UpdatedAt) || string(read.Input) != string(st.Input) {
			t.Fatalf("one-%d: the wait returned %+v, a read finds %+v", 1+i, st, read)
		}
	}
}

// TestWaitOnAnotherNodeReadsTheEnd: a client of a node that does not run
// the instance learns of its end from the notification and reads its
// status; the node that ends it reads no row for it (nobody there waits).
func TestWaitOnAnotherNodeReadsTheEnd(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	trA, trB := &countingTracer{}, &countingTracer{}
	a := openSchema(t, schema, &Options{tracer: trA, MaxConns: 4})
	b := openSchema(t, schema, &Options{tracer: trB, MaxConns: 4})
	rt, err := duroxide.StartRuntime(context.Background(), a, oneStepRegistry(), &duroxide.RuntimeOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	client := duroxide.NewClient(b)
	for i := range 3 {
		id := fmt.Sprint("far-", i)
		trA.snapshot()
		trB.snapshot()
		st := startAndWait(t, client, id, "One", i)
		var got int
		if st.State != duroxide.StateCompleted || st.Decode(&got) != nil || got != i {
			t.Fatalf("%s: %+v, want Completed with %d", id, st, i)
		}
		if n := statementCount(trB, sharedSQL[sqlstore.QGetInstance]); n < 1 {
			t.Errorf("%s: the waiting node read the status %d times, want at least once", id, n)
		}
		if n := statementCount(trA, sqlEndedRows) + statementCount(trB, sqlEndedRows); n != 0 {
			t.Errorf("%s: %d reads of ended rows, want none (no waiter on the node that ends it)", id, n)
		}
	}
}
