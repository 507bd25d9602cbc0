package cli

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// storeState reads what a dry run must leave as it is: the store's totals
// and its instances with their states.
func storeState(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := store.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := duroxide.NewClient(store).ListInstances(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%d instances, %d executions, %d events, %v;", c.Instances, c.Executions, c.HistoryEvents, c.ByStatus)
	for _, st := range page.Instances {
		out += fmt.Sprintf(" %s=%s@%d", st.InstanceID, st.State, st.ExecutionID)
	}
	return out
}

// TestPrune fills a store whose clock runs 60 days behind, so its
// instances finished 60 days ago: prune --dry-run counts them, prints the
// first IDs and changes nothing; prune deletes them, with progress.
func TestPrune(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, &sqlite.Options{Clock: func() time.Time { return time.Now().Add(-60 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := duroxide.NewClient(store)
	for i := range 3 {
		id := fmt.Sprintf("old-%d", i)
		if err := client.StartOrchestration(ctx, id, demo.Hello, "Ada", nil); err != nil {
			t.Fatal(err)
		}
		waitState(t, client, id, duroxide.StateCompleted)
	}
	if err := client.StartOrchestration(ctx, "live", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 3600}, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, client, "live", duroxide.StateRunning)
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	before := storeState(t, path)
	r := runCLI(t, "prune", "--db", db, "--older-than", "720h", "--keep-executions", "1", "--dry-run").wantCode(t, 0)
	for _, want := range []string{"would purge 3 instances", "first: old-", "dry run: nothing was changed", "would delete 0 executions"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "prune: batch 1: would purge 3 instances") {
		t.Fatalf("no progress on stderr:\n%s", r.stderr)
	}
	if after := storeState(t, path); after != before {
		t.Fatalf("the dry run changed the store:\nbefore %s\nafter  %s", before, after)
	}
	var rep duroxide.PruneReport
	runCLI(t, "prune", "--db", db, "--older-than", "720h", "--batch", "2", "--json").wantCode(t, 0).decode(t, &rep)
	if rep.Instances != 3 || rep.Batches < 2 || rep.DryRun {
		t.Fatalf("report %+v", rep)
	}
	if after := storeState(t, path); !strings.HasPrefix(after, "1 instances") || !strings.Contains(after, "live=Running") {
		t.Fatalf("after prune: %s", after)
	}
	runCLI(t, "prune", "--db", db).wantErr(t, exitUsage, "--older-than")
	runCLI(t, "prune", "--db", db, "--older-than", "1h", "--batch", "0").wantErr(t, exitUsage, "--batch")
}

// TestBulkCommand previews a cancel by filter (nothing changes), then runs
// it with a progress bar.
func TestBulkCommand(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	client := startRuntime(t, path)
	ctx := context.Background()
	for i := range 3 {
		if err := client.StartOrchestration(ctx, fmt.Sprintf("ap-%d", i), demo.Approval, demo.ApprovalInput{TimeoutSeconds: 3600}, nil); err != nil {
			t.Fatal(err)
		}
		waitState(t, client, fmt.Sprintf("ap-%d", i), duroxide.StateRunning)
	}
	if err := client.StartOrchestration(ctx, "hello", demo.Hello, "Ada", nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, client, "hello", duroxide.StateCompleted)

	before := storeState(t, path)
	r := runCLI(t, "bulk", "cancel", "--db", db, "--status", "Running", "--orchestration", demo.Approval, "--created-after", "1h", "--dry-run").wantCode(t, 0)
	for _, want := range []string{"cancel would touch 3 instances", "ap-0", "ap-2", "dry run: nothing was changed"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, r.stdout)
		}
	}
	if after := storeState(t, path); after != before {
		t.Fatalf("the dry run changed the store:\nbefore %s\nafter  %s", before, after)
	}
	r = runCLI(t, "bulk", "cancel", "--db", db, "--status", "Running", "--orchestration", demo.Approval, "--reason", "cli", "--chunk", "2").wantCode(t, 0)
	if !strings.Contains(r.stderr, "[####") || !strings.Contains(r.stderr, "3/3") || !strings.Contains(r.stdout, "Done: 3 of 3 instances: 3 succeeded") {
		t.Fatalf("bulk output:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
	for i := range 3 {
		waitState(t, client, fmt.Sprintf("ap-%d", i), duroxide.StateCanceled)
	}
	if st, err := client.GetStatus(ctx, "hello"); err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("hello: %+v, %v", st, err)
	}
	runCLI(t, "bulk", "explode", "--db", db).wantErr(t, exitUsage, "ACTION")
	runCLI(t, "bulk", "cancel", "--db", db, "--status", "Sleeping").wantErr(t, exitUsage, "Sleeping")
	runCLI(t, "bulk", "cancel", "--db", db, "--finished-before", "last week").wantErr(t, exitUsage, "finished-before")
	runCLI(t, "bulk", "raiseEvent", "--db", db, "--data", "{").wantErr(t, exitUsage, "data")
}

// TestBulkCommandThroughServer previews and runs a bulk rewind through a
// server's API (--server): the server's runtime runs the job and the
// command follows it to its end.
func TestBulkCommandThroughServer(t *testing.T) {
	t.Parallel()
	_, path := tempDB(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := duroxide.NewClient(store)
	h, err := httpapi.NewHandler(client, &httpapi.Options{Registry: reg, Runtime: rt, AuthToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		_ = store.Close()
	})
	for i := range 2 {
		if err := client.StartOrchestration(ctx, fmt.Sprintf("f-%d", i), demo.Fail, "boom", nil); err != nil {
			t.Fatal(err)
		}
		waitState(t, client, fmt.Sprintf("f-%d", i), duroxide.StateFailed)
	}
	env := map[string]string{envServer: srv.URL, envAuthToken: testToken}
	r := runCLIEnv(t, env, "bulk", "rewind", "--status", "Failed", "--error-kind", "application", "--dry-run").wantCode(t, 0)
	if !strings.Contains(r.stdout, "rewind would touch 2 instances") {
		t.Fatalf("dry run through the server:\n%s", r.stdout)
	}
	for i := range 2 {
		if st, _ := client.GetStatus(ctx, fmt.Sprintf("f-%d", i)); st.ExecutionID != 1 {
			t.Fatalf("the dry run rewound f-%d", i)
		}
	}
	r = runCLIEnv(t, env, "bulk", "rewind", "--status", "Failed", "--json").wantCode(t, 0)
	var job duroxide.BulkJob
	r.decode(t, &job)
	if job.State != duroxide.BulkJobDone || job.Succeeded != 2 {
		t.Fatalf("job %+v", job)
	}
	for i := range 2 {
		// demo.Fail fails again: a new execution, Failed again.
		waitFor := waitState(t, client, fmt.Sprintf("f-%d", i), duroxide.StateFailed)
		if waitFor.ExecutionID != 2 {
			t.Fatalf("f-%d after the rewind: execution %d", i, waitFor.ExecutionID)
		}
	}
	runCLIEnv(t, map[string]string{envServer: srv.URL}, "bulk", "cancel", "--dry-run").wantErr(t, 1, "auth token")
	// The job ended: canceling it is refused; an unknown job is not found.
	runCLIEnv(t, env, "bulk", "--cancel-job", job.ID).wantErr(t, 1, "already ended")
	runCLIEnv(t, env, "bulk", "--cancel-job", "nope").wantErr(t, 1, "not found")
}

// TestBulkCancelJobCommand cancels a pending job on the store (no runtime
// runs it): it ends Canceled and never touches its instances; a second
// cancel is refused.
func TestBulkCancelJobCommand(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	client := duroxide.NewClient(store)
	if err := client.StartOrchestration(ctx, "ap", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 3600}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := client.BulkAction(ctx, &duroxide.BulkRequest{Action: duroxide.BulkCancel})
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "bulk", "--db", db, "--cancel-job", res.Job.ID).wantCode(t, 0)
	if !strings.Contains(r.stdout, "Canceled: 0 of 1 instances") {
		t.Fatalf("cancel output:\n%s", r.stdout)
	}
	if j, err := client.GetBulkJob(ctx, res.Job.ID); err != nil || j.State != duroxide.BulkJobCanceled {
		t.Fatalf("job after the cancel: %+v, %v", j, err)
	}
	runCLI(t, "bulk", "--db", db, "--cancel-job", res.Job.ID).wantErr(t, 1, "already ended")
	if st, err := client.GetStatus(ctx, "ap"); err != nil || st.State.IsTerminal() {
		t.Fatalf("the canceled job touched its instance: %+v, %v", st, err)
	}
}
