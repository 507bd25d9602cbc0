package providertest

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// maintenanceCases cover the list filters of retention and bulk actions
// (version, creation and finish time ranges, roots only) and the optional
// capabilities provider.Leaser, provider.ExecutionPruner and
// provider.BulkJobStore; the latter skip on a store without them.
var maintenanceCases = []testCase{
	{name: "list_filters_version_created_finished_roots", run: func(e *env) {
		t0 := e.clock.Now()
		e.createFinished("old-done", provider.StatusCompleted) // created and finished at t0
		e.clock.Advance(time.Hour)
		t1 := e.clock.Now()
		e.createInstance("run")
		e.createChild("run", "child")
		e.finish("child", provider.StatusFailed)
		e.clock.Advance(time.Hour)
		e.createFinished("new-fail", provider.StatusFailed)
		m := startMsg("v2")
		m.Item.Version, m.Create.OrchestrationVersion = "2.0.0", "2.0.0"
		e.enqueue(m)
		list := func(o provider.ListInstancesOptions) []string { return sorted(e.listAll(o)) }
		mustEqual(e.t, "Version 2.0.0", list(provider.ListInstancesOptions{Version: "2.0.0"}), []string{"v2"})
		mustEqual(e.t, "CreatedBefore t1", list(provider.ListInstancesOptions{CreatedBefore: t1}), []string{"old-done"})
		mustEqual(e.t, "CreatedAfter t1", list(provider.ListInstancesOptions{CreatedAfter: t1}), []string{"child", "new-fail", "run", "v2"})
		mustEqual(e.t, "FinishedBefore t1", list(provider.ListInstancesOptions{FinishedBefore: t1}), []string{"old-done"})
		mustEqual(e.t, "FinishedAfter t0+1ms", list(provider.ListInstancesOptions{FinishedAfter: t0.Add(time.Millisecond)}), []string{"child", "new-fail"})
		mustEqual(e.t, "finished roots", list(provider.ListInstancesOptions{FinishedAfter: t0, RootsOnly: true}), []string{"new-fail", "old-done"})
		mustEqual(e.t, "finished with statuses", list(provider.ListInstancesOptions{
			FinishedAfter: t0, Statuses: []provider.Status{provider.StatusFailed, provider.StatusRunning}}), []string{"child", "new-fail"})
	}},

	{name: "leases_one_owner_at_a_time", run: func(e *env) {
		l, ok := e.p.(provider.Leaser)
		if !ok {
			e.t.Skip("store does not implement provider.Leaser")
		}
		take := func(owner string) bool {
			got, err := l.AcquireLease(e.ctx, "job", owner, time.Minute)
			e.noErr(err, "AcquireLease "+owner)
			return got
		}
		mustEqual(e.t, "a takes", take("a"), true)
		mustEqual(e.t, "b while a holds", take("b"), false)
		mustEqual(e.t, "a renews", take("a"), true)
		e.clock.Advance(time.Minute)
		mustEqual(e.t, "b after expiry", take("b"), true)
		mustEqual(e.t, "a after b took it", take("a"), false)
		e.noErr(l.ReleaseLease(e.ctx, "job", "a"), "ReleaseLease by a non-holder")
		mustEqual(e.t, "a after its own release did nothing", take("a"), false)
		e.noErr(l.ReleaseLease(e.ctx, "job", "b"), "ReleaseLease")
		mustEqual(e.t, "a after release", take("a"), true)
		_, err := l.AcquireLease(e.ctx, "", "a", time.Minute)
		e.wantErr(err, provider.ErrInvalidArgument, "empty name")
		_, err = l.AcquireLease(e.ctx, "x", "a", 0)
		e.wantErr(err, provider.ErrInvalidArgument, "zero TTL")
	}},

	{name: "prune_executions_keeps_the_last_k", run: func(e *env) {
		pr, ok := e.p.(provider.ExecutionPruner)
		if !ok {
			e.t.Skip("store does not implement provider.ExecutionPruner")
		}
		e.createInstance("chain")
		for i := range 4 {
			e.continueAsNew("chain", i, time.Second)
		}
		e.createInstance("single")
		before, err := e.admin().Counts(e.ctx)
		e.noErr(err, "Counts")
		dry, err := pr.PruneExecutions(e.ctx, provider.PruneExecutionsOptions{Keep: 2, DryRun: true})
		e.noErr(err, "PruneExecutions dry run")
		mustEqual(e.t, "dry run", []any{dry.InstanceIDs, dry.Executions, dry.Events > 0}, []any{[]string{"chain"}, int64(3), true})
		after, err := e.admin().Counts(e.ctx)
		e.noErr(err, "Counts")
		mustEqual(e.t, "counts after the dry run", after, before)

		res, err := pr.PruneExecutions(e.ctx, provider.PruneExecutionsOptions{Keep: 2})
		e.noErr(err, "PruneExecutions")
		mustEqual(e.t, "pruned", []any{res.InstanceIDs, res.Executions, res.Events}, []any{[]string{"chain"}, int64(3), dry.Events})
		ex, err := e.admin().ListExecutions(e.ctx, "chain")
		e.noErr(err, "ListExecutions")
		var ids []int64
		for _, x := range ex {
			ids = append(ids, x.ExecutionID)
		}
		mustEqual(e.t, "executions left", ids, []int64{4, 5})
		h, err := e.p.ReadHistory(e.ctx, "chain", 0)
		e.noErr(err, "ReadHistory of the current execution")
		mustEqual(e.t, "current history kept", len(h) > 0, true)
		again, err := pr.PruneExecutions(e.ctx, provider.PruneExecutionsOptions{Keep: 2})
		e.noErr(err, "PruneExecutions again")
		mustEqual(e.t, "nothing left to prune", again.Executions, int64(0))
		_, err = pr.PruneExecutions(e.ctx, provider.PruneExecutionsOptions{Keep: 0})
		e.wantErr(err, provider.ErrInvalidArgument, "Keep 0")
	}},

	{name: "bulk_jobs_claim_update_resume", run: func(e *env) {
		js, ok := e.p.(provider.BulkJobStore)
		if !ok {
			e.t.Skip("store does not implement provider.BulkJobStore")
		}
		spec := json.RawMessage(`{"action":"cancel"}`)
		e.noErr(js.CreateBulkJob(e.ctx, &provider.BulkJob{ID: "j1", Spec: spec}), "CreateBulkJob")
		e.wantErr(js.CreateBulkJob(e.ctx, &provider.BulkJob{ID: "j1", Spec: spec}), provider.ErrInstanceExists, "CreateBulkJob twice")
		e.wantErr(js.CreateBulkJob(e.ctx, &provider.BulkJob{ID: "", Spec: spec}), provider.ErrInvalidArgument, "empty ID")
		_, err := js.GetBulkJob(e.ctx, "nope")
		e.wantErr(err, provider.ErrNotFound, "GetBulkJob unknown")

		j, err := js.GetBulkJob(e.ctx, "j1")
		e.noErr(err, "GetBulkJob")
		mustEqual(e.t, "new job", []any{j.State, string(j.Spec), j.Owner}, []any{provider.BulkJobPending, string(spec), ""})

		j, err = js.ClaimBulkJob(e.ctx, "j1", "a", time.Minute)
		e.noErr(err, "ClaimBulkJob a")
		mustEqual(e.t, "claimed", []any{j.State, j.Owner}, []any{provider.BulkJobRunning, "a"})
		_, err = js.ClaimBulkJob(e.ctx, "j1", "b", time.Minute)
		e.wantErr(err, provider.ErrLockLost, "ClaimBulkJob b while a holds it")
		e.noErr(js.UpdateBulkJob(e.ctx, "j1", "a", time.Minute, provider.BulkJobUpdate{
			State: provider.BulkJobRunning, Cursor: "c1", Total: 10, Processed: 4, Succeeded: 3, Skipped: 1}), "UpdateBulkJob a")
		e.wantErr(js.UpdateBulkJob(e.ctx, "j1", "b", time.Minute, provider.BulkJobUpdate{State: provider.BulkJobRunning}),
			provider.ErrLockLost, "UpdateBulkJob by b")

		// a crashes: its lease expires, b continues from the cursor.
		e.clock.Advance(time.Minute)
		e.wantErr(js.UpdateBulkJob(e.ctx, "j1", "a", time.Minute, provider.BulkJobUpdate{State: provider.BulkJobRunning}),
			provider.ErrLockLost, "UpdateBulkJob by a after its lease expired")
		j, err = js.ClaimBulkJob(e.ctx, "j1", "b", time.Minute)
		e.noErr(err, "ClaimBulkJob b after expiry")
		mustEqual(e.t, "resumed", []any{j.Owner, j.Cursor, j.Total, j.Processed, j.Succeeded, j.Skipped},
			[]any{"b", "c1", int64(10), int64(4), int64(3), int64(1)})
		unfinished, err := js.ListBulkJobs(e.ctx, provider.BulkJobListOptions{Unfinished: true})
		e.noErr(err, "ListBulkJobs")
		mustEqual(e.t, "unfinished", len(unfinished), 1)

		e.noErr(js.UpdateBulkJob(e.ctx, "j1", "b", time.Minute, provider.BulkJobUpdate{
			State: provider.BulkJobDone, Cursor: "end", Total: 10, Processed: 10, Succeeded: 9, Skipped: 1}), "UpdateBulkJob done")
		j, err = js.ClaimBulkJob(e.ctx, "j1", "c", time.Minute)
		e.noErr(err, "ClaimBulkJob of a finished job")
		mustEqual(e.t, "finished job unchanged", []any{j.State, j.Owner, j.Processed}, []any{provider.BulkJobDone, "", int64(10)})
		unfinished, err = js.ListBulkJobs(e.ctx, provider.BulkJobListOptions{Unfinished: true})
		e.noErr(err, "ListBulkJobs")
		mustEqual(e.t, "unfinished after done", len(unfinished), 0)
		all, err := js.ListBulkJobs(e.ctx, provider.BulkJobListOptions{})
		e.noErr(err, "ListBulkJobs all")
		mustEqual(e.t, "all", len(all), 1)
	}},

	{name: "bulk_jobs_cancel", run: func(e *env) {
		js, ok := e.p.(provider.BulkJobStore)
		if !ok {
			e.t.Skip("store does not implement provider.BulkJobStore")
		}
		spec := json.RawMessage(`{"action":"cancel"}`)
		for _, id := range []string{"pending", "running", "expired", "done"} {
			e.noErr(js.CreateBulkJob(e.ctx, &provider.BulkJob{ID: id, Spec: spec}), "CreateBulkJob "+id)
		}
		_, err := js.CancelBulkJob(e.ctx, "nope")
		e.wantErr(err, provider.ErrNotFound, "CancelBulkJob unknown")

		// A pending job: canceled, never claimed.
		j, err := js.CancelBulkJob(e.ctx, "pending")
		e.noErr(err, "CancelBulkJob pending")
		mustEqual(e.t, "canceled pending job", []any{j.State, j.Owner}, []any{provider.BulkJobCanceled, ""})
		j, err = js.ClaimBulkJob(e.ctx, "pending", "a", time.Minute)
		e.noErr(err, "ClaimBulkJob of a canceled job")
		mustEqual(e.t, "canceled job unclaimed", []any{j.State, j.Owner}, []any{provider.BulkJobCanceled, ""})
		_, err = js.CancelBulkJob(e.ctx, "pending")
		e.wantErr(err, provider.ErrStateConflict, "CancelBulkJob twice")

		// A running job: its runner keeps the lease until it records its
		// last progress, which keeps the state Canceled.
		_, err = js.ClaimBulkJob(e.ctx, "running", "a", time.Minute)
		e.noErr(err, "ClaimBulkJob running")
		e.noErr(js.UpdateBulkJob(e.ctx, "running", "a", time.Minute, provider.BulkJobUpdate{
			State: provider.BulkJobRunning, Cursor: "c1", Total: 10, Processed: 2, Succeeded: 2}), "UpdateBulkJob")
		j, err = js.CancelBulkJob(e.ctx, "running")
		e.noErr(err, "CancelBulkJob running")
		mustEqual(e.t, "canceled running job", []any{j.State, j.Owner, j.Processed}, []any{provider.BulkJobCanceled, "a", int64(2)})
		e.wantErr(js.UpdateBulkJob(e.ctx, "running", "a", time.Minute, provider.BulkJobUpdate{
			State: provider.BulkJobRunning, Cursor: "c2", Total: 10, Processed: 4, Succeeded: 3, Failed: 1, Error: "x"}),
			provider.ErrBulkJobCanceled, "UpdateBulkJob after the cancel")
		j, err = js.GetBulkJob(e.ctx, "running")
		e.noErr(err, "GetBulkJob running")
		mustEqual(e.t, "last progress of the canceled job",
			[]any{j.State, j.Owner, j.Cursor, j.Processed, j.Succeeded, j.Failed, j.Error},
			[]any{provider.BulkJobCanceled, "", "c2", int64(4), int64(3), int64(1), "x"})
		e.wantErr(js.UpdateBulkJob(e.ctx, "running", "a", time.Minute, provider.BulkJobUpdate{
			State: provider.BulkJobDone, Processed: 10}), provider.ErrBulkJobCanceled, "UpdateBulkJob again")
		j, err = js.GetBulkJob(e.ctx, "running")
		e.noErr(err, "GetBulkJob running")
		mustEqual(e.t, "nothing recorded after the lease went", []any{j.State, j.Processed}, []any{provider.BulkJobCanceled, int64(4)})

		// A job whose runner's lease expired: the lease is released.
		_, err = js.ClaimBulkJob(e.ctx, "expired", "b", time.Minute)
		e.noErr(err, "ClaimBulkJob expired")
		e.clock.Advance(2 * time.Minute)
		j, err = js.CancelBulkJob(e.ctx, "expired")
		e.noErr(err, "CancelBulkJob expired")
		mustEqual(e.t, "canceled job with an expired lease", []any{j.State, j.Owner}, []any{provider.BulkJobCanceled, ""})

		// A job canceled while its runner holds the lease, the runner
		// then dying: the job names it until the lease runs out, then
		// nobody.
		e.noErr(js.CreateBulkJob(e.ctx, &provider.BulkJob{ID: "orphan", Spec: spec}), "CreateBulkJob orphan")
		_, err = js.ClaimBulkJob(e.ctx, "orphan", "dead", time.Minute)
		e.noErr(err, "ClaimBulkJob orphan")
		j, err = js.CancelBulkJob(e.ctx, "orphan")
		e.noErr(err, "CancelBulkJob orphan")
		mustEqual(e.t, "canceled job of a live lease", []any{j.State, j.Owner}, []any{provider.BulkJobCanceled, "dead"})
		e.clock.Advance(2 * time.Minute)
		j, err = js.GetBulkJob(e.ctx, "orphan")
		e.noErr(err, "GetBulkJob orphan")
		mustEqual(e.t, "canceled job after its dead runner's lease", []any{j.State, j.Owner, j.LeaseUntil.IsZero()},
			[]any{provider.BulkJobCanceled, "", true})
		all, err := js.ListBulkJobs(e.ctx, provider.BulkJobListOptions{})
		e.noErr(err, "ListBulkJobs")
		for _, j := range all {
			if j.ID == "orphan" && (j.Owner != "" || !j.LeaseUntil.IsZero()) {
				e.t.Fatalf("listed orphan job: owner %q until %v, want none", j.Owner, j.LeaseUntil)
			}
		}

		// A finished job cannot be canceled.
		_, err = js.ClaimBulkJob(e.ctx, "done", "c", time.Minute)
		e.noErr(err, "ClaimBulkJob done")
		e.noErr(js.UpdateBulkJob(e.ctx, "done", "c", time.Minute, provider.BulkJobUpdate{State: provider.BulkJobDone}), "UpdateBulkJob done")
		_, err = js.CancelBulkJob(e.ctx, "done")
		e.wantErr(err, provider.ErrStateConflict, "CancelBulkJob of a done job")
		unfinished, err := js.ListBulkJobs(e.ctx, provider.BulkJobListOptions{Unfinished: true})
		e.noErr(err, "ListBulkJobs")
		mustEqual(e.t, "no unfinished job", len(unfinished), 0)
	}},

	{name: "dedup_key_enqueues_once", run: func(e *env) {
		e.enqueue(startMsg("a"), startMsg("b"))
		keyed := func(inst, key string) *provider.OrchestratorMessage {
			m := eventMsg(inst, "go", key)
			m.DedupKey = key
			return m
		}
		events := func(inst string) int {
			e.t.Helper()
			q, err := e.admin().InstanceQueue(e.ctx, inst)
			e.noErr(err, "InstanceQueue "+inst)
			n := 0
			for _, m := range q.Messages {
				if m.Item.Kind == history.WorkExternalRaised {
					n++
				}
			}
			return n
		}
		first := e.enqueue(keyed("a", "k1"))
		// The same key again, alone or beside other messages: only the
		// keyed message is dropped (reported Duplicate), and the call
		// succeeds.
		again := e.enqueue(keyed("a", "k1"))
		batch := e.enqueue(keyed("a", "k1"), eventMsg("a", "plain", 1), keyed("a", "k2"), keyed("b", "k1"))
		mustEqual(e.t, "events of a and b", []int{events("a"), events("b")}, []int{3, 1})
		mustEqual(e.t, "results of the first, the repeat and the batch",
			[][]provider.EnqueueResult{first, again, batch},
			[][]provider.EnqueueResult{{{}}, {{Duplicate: true}}, {{Duplicate: true}, {}, {}, {}}})

		// The key outlives the message: a consumed event is not raised again.
		for range 2 {
			e.ackStart(e.fetch())
		}
		mustEqual(e.t, "results after the turns", e.enqueue(keyed("a", "k1"), keyed("b", "k1")),
			[]provider.EnqueueResult{{Duplicate: true}, {Duplicate: true}})
		mustEqual(e.t, "events after the turns", []int{events("a"), events("b")}, []int{0, 0})

		// Bad keys are refused, writing nothing.
		withCreate := startMsg("c")
		withCreate.DedupKey = "k"
		e.wantErr(errOf(e.p.Enqueue(e.ctx, withCreate)), provider.ErrInvalidArgument, "DedupKey with Create")
		e.wantErr(errOf(e.p.Enqueue(e.ctx, keyed("a", strings.Repeat("k", 513)))), provider.ErrInvalidArgument, "long DedupKey")

		// A purge forgets the instance's keys.
		_, err := e.admin().PurgeInstances(e.ctx, []string{"a"}, provider.PurgeOptions{Force: true})
		e.noErr(err, "PurgeInstances")
		mustEqual(e.t, "results after the purge", e.enqueue(startMsg("a"), keyed("a", "k1")),
			[]provider.EnqueueResult{{}, {}})
		mustEqual(e.t, "events of the new a", events("a"), 1)
	}},
}
