package providertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Operating at volume: retention passes and bulk actions by filter.
var e2eBulkCases = []e2eCase{
	{"RetentionPurgesOldFinishedInstances", e2eRetention},
	{"RetentionPrunesContinueAsNewChains", e2eRetentionChains},
	{"BulkCancelByFilterWithPreview", e2eBulkCancel},
	{"BulkRaiseResumesWithoutRepeats", e2eBulkRaiseResume},
	{"BulkPurgeRunByRuntime", e2eBulkPurgeByRuntime},
	{"BulkRewindByFilterAfterAFixedDeploy", e2eBulkRewind},
	{"BulkPauseThenResumeByFilter", e2eBulkPauseResume},
	{"BulkJobCanceledMidJob", e2eBulkCancelJob},
	{"BulkRaiseExactlyOnceAcrossACrash", e2eBulkRaiseCrash},
}

// noBulkJobs keeps a runtime from running bulk jobs, so a scenario runs
// them itself.
func noBulkJobs(o *duroxide.RuntimeOptions) { o.BulkJobInterval = -1 }

// registerHold registers "Hold", which waits for the event "release".
func registerHold(reg *duroxide.Registry) {
	duroxide.RegisterOrchestration(reg, "Hold", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("release").Await(&s)
		return s, err
	})
}

// storeCounts reads the store's totals and queue depths: what a dry run
// must leave as they are.
func (e *e2e) storeCounts() []any {
	e.t.Helper()
	c, err := e.admin().Counts(e.ctx)
	if err != nil {
		e.t.Fatalf("Counts: %v", err)
	}
	d, err := e.admin().QueueDepths(e.ctx)
	if err != nil {
		e.t.Fatalf("QueueDepths: %v", err)
	}
	// Each instance as a client sees it, its pause included (a pause or
	// a resume changes no count), and the bulk jobs (a dry run stores
	// none).
	var insts []string
	opts := &duroxide.ListOptions{Limit: 1000}
	for {
		page, err := e.c.ListInstances(e.ctx, opts)
		if err != nil {
			e.t.Fatalf("ListInstances: %v", err)
		}
		for _, st := range page.Instances {
			insts = append(insts, fmt.Sprintf("%s %s paused=%v updated=%s", st.InstanceID, st.ETag, st.Paused != nil, st.UpdatedAt))
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	var jobs int
	if _, ok := e.store.(provider.BulkJobStore); ok {
		js, err := e.c.ListBulkJobs(e.ctx, false)
		if err != nil {
			e.t.Fatalf("ListBulkJobs: %v", err)
		}
		jobs = len(js)
	}
	return []any{c, d, insts, jobs}
}

func e2eRetention(e *e2e) {
	reg := helloRegistry()
	registerHold(reg)
	rt := e.runtime(reg)
	for i := range 3 {
		e.startWith(fmt.Sprintf("old-%d", i), "Greet", "x", &duroxide.StartOptions{IdempotencyKey: fmt.Sprintf("key-%d", i),
			IdempotencyRetention: 60 * 24 * time.Hour})
		e.wait(fmt.Sprintf("old-%d", i))
	}
	e.start("live", "Hold", nil)
	e.eventually("live running", func() bool { return e.status("live").State == duroxide.StateRunning })
	e.shutdown(rt)
	e.fc.Advance(721 * time.Hour)
	e.start("recent", "Greet", "y")

	// A dry run counts and touches nothing.
	before := e.storeCounts()
	rep, err := e.c.Prune(e.ctx, &duroxide.PruneOptions{OlderThan: 720 * time.Hour, DryRun: true, Now: e.fc.Now()})
	if err != nil {
		e.t.Fatalf("Prune dry run: %v", err)
	}
	if rep.Instances != 3 || len(rep.InstanceIDs) != 3 {
		e.t.Fatalf("dry run: %+v, want 3 instances", rep)
	}
	mustEqual(e.t, "store after the dry run", e.storeCounts(), before)

	// A runtime with retention runs a pass when it starts.
	rt = e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.Retention = &duroxide.RetentionOptions{FinishedOlderThan: 720 * time.Hour, BatchSize: 2}
	})
	e.eventually("the retention pass", func() bool { return rt.Metrics().Retention.Passes == 1 })
	m := rt.Metrics().Retention
	if m.InstancesPurged != 3 || m.Failures != 0 || m.EventsDeleted == 0 {
		e.t.Fatalf("retention metrics %+v", m)
	}
	for i := range 3 {
		if _, err := e.c.GetStatus(e.ctx, fmt.Sprintf("old-%d", i)); !errors.Is(err, duroxide.ErrNotFound) {
			e.t.Fatalf("old-%d after retention: %v, want ErrNotFound", i, err)
		}
	}
	e.wait("recent")
	if st := e.status("live"); st.State != duroxide.StateRunning {
		e.t.Fatalf("live instance after retention: %s", st.State)
	}
	// Idempotency keys keep their own retention.
	var dup *duroxide.DuplicateStartError
	err = e.c.StartOrchestration(e.ctx, "again", "Greet", "x", &duroxide.StartOptions{IdempotencyKey: "key-0"})
	if !errors.As(err, &dup) || dup.InstanceID != "old-0" || dup.PurgedAt.IsZero() {
		e.t.Fatalf("repeat start after retention: %v, want a DuplicateStartError naming purged old-0", err)
	}

	// A second runtime leaves the pass to the lease holder.
	other := e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.Retention = &duroxide.RetentionOptions{FinishedOlderThan: 720 * time.Hour}
	})
	e.eventually("the second runtime's skipped pass", func() bool { return other.Metrics().Retention.Skipped == 1 })
	if p := other.Metrics().Retention.Passes; p != 0 {
		e.t.Fatalf("second runtime ran %d passes while the first held the lease", p)
	}
}

func e2eRetentionChains(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Loop", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if n < 5 {
			return 0, ctx.ContinueAsNew(n + 1)
		}
		return n, nil
	})
	e.runtime(reg)
	e.start("loop", "Loop", 0)
	e.wait("loop")
	if _, ok := e.store.(provider.ExecutionPruner); !ok {
		e.t.Skip("store does not implement provider.ExecutionPruner")
	}
	dry, err := e.c.Prune(e.ctx, &duroxide.PruneOptions{KeepExecutions: 2, DryRun: true})
	if err != nil {
		e.t.Fatalf("Prune dry run: %v", err)
	}
	if dry.Chains != 1 || dry.Executions != 4 {
		e.t.Fatalf("dry run %+v, want 1 chain, 4 executions", dry)
	}
	if ex, _ := e.c.ListExecutions(e.ctx, "loop"); len(ex) != 6 {
		e.t.Fatalf("dry run deleted executions: %d left", len(ex))
	}
	rep, err := e.c.Prune(e.ctx, &duroxide.PruneOptions{KeepExecutions: 2})
	if err != nil {
		e.t.Fatalf("Prune: %v", err)
	}
	ex, err := e.c.ListExecutions(e.ctx, "loop")
	if err != nil {
		e.t.Fatalf("ListExecutions: %v", err)
	}
	if rep.Executions != 4 || len(ex) != 2 || ex[0].ExecutionID != 5 || ex[1].ExecutionID != 6 {
		e.t.Fatalf("after pruning: report %+v, executions %+v", rep, ex)
	}
	var out int
	e.result("loop", &out)
	if out != 5 {
		e.t.Fatalf("output %d", out)
	}
}

func e2eBulkCancel(e *e2e) {
	reg := helloRegistry()
	registerHold(reg)
	e.runtime(reg, noBulkJobs)
	for i := range 7 {
		e.start(fmt.Sprintf("hold-%d", i), "Hold", nil)
	}
	e.start("done", "Greet", "z")
	e.wait("done")
	filter := duroxide.ListOptions{States: []duroxide.State{duroxide.StateRunning, duroxide.StatePending}, Orchestration: "Hold"}
	e.eventually("the holds waiting", func() bool {
		page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{Orchestration: "Hold", WaitKind: duroxide.WaitEvent})
		return err == nil && len(page.Instances) == 7
	})
	before := e.storeCounts()
	prev, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkCancel, Filter: filter, DryRun: true})
	if err != nil {
		e.t.Fatalf("dry run: %v", err)
	}
	if prev.Count != 7 || len(prev.Instances) != 7 || prev.Job != nil {
		e.t.Fatalf("dry run: count %d, %d instances, job %v", prev.Count, len(prev.Instances), prev.Job)
	}
	mustEqual(e.t, "store after the dry run", e.storeCounts(), before)
	if jobs, _ := e.c.ListBulkJobs(e.ctx, false); len(jobs) != 0 {
		e.t.Fatalf("the dry run stored %d jobs", len(jobs))
	}

	res, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkCancel, Filter: filter, Reason: "incident", ChunkSize: 3})
	if err != nil {
		e.t.Fatalf("BulkAction: %v", err)
	}
	if res.Job == nil || res.Job.State != duroxide.BulkJobPending || res.Job.Total != 7 {
		e.t.Fatalf("job %+v", res.Job)
	}
	var steps []int64
	job, err := e.c.RunBulkJob(e.ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Progress: func(j duroxide.BulkJob) {
		steps = append(steps, j.Processed)
	}})
	if err != nil {
		e.t.Fatalf("RunBulkJob: %v", err)
	}
	mustEqual(e.t, "progress", steps, []int64{3, 6, 7})
	if job.State != duroxide.BulkJobDone || job.Succeeded != 7 || job.Failed != 0 {
		e.t.Fatalf("job %+v", job)
	}
	for i := range 7 {
		if st := e.wait(fmt.Sprintf("hold-%d", i)); st.State != duroxide.StateCanceled {
			e.t.Fatalf("hold-%d: %s", i, st.State)
		}
	}
	if st := e.status("done"); st.State != duroxide.StateCompleted {
		e.t.Fatalf("an instance outside the filter changed: %s", st.State)
	}
	got, err := e.c.GetBulkJob(e.ctx, res.Job.ID)
	if err != nil || got.State != duroxide.BulkJobDone || got.Processed != 7 {
		e.t.Fatalf("GetBulkJob: %+v, %v", got, err)
	}
}

func e2eBulkRaiseResume(e *e2e) {
	// No runtime: the events stay queued, so each instance's queue shows
	// how many were raised.
	for i := range 5 {
		e.start(fmt.Sprintf("w-%d", i), "Hold", nil)
	}
	res, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkRaiseEvent, EventName: "release",
		EventData: []byte(`"go"`), Filter: duroxide.ListOptions{IDPrefix: "w-"}, ChunkSize: 2})
	if err != nil {
		e.t.Fatalf("BulkAction: %v", err)
	}
	// The first runner stops (a crash) after its first chunk.
	ctx, cancel := context.WithCancel(e.ctx)
	_, err = e.c.RunBulkJob(ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Owner: "first", Progress: func(j duroxide.BulkJob) {
		if j.Processed == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		e.t.Fatalf("first runner: %v, want context.Canceled", err)
	}
	if _, err := e.c.RunBulkJob(e.ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Owner: "second"}); !errors.Is(err, duroxide.ErrBulkJobBusy) {
		e.t.Fatalf("second runner while the first holds the lease: %v, want ErrBulkJobBusy", err)
	}
	e.fc.Advance(2 * time.Minute) // the first runner's lease expires
	job, err := e.c.RunBulkJob(e.ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Owner: "second"})
	if err != nil {
		e.t.Fatalf("second runner: %v", err)
	}
	if job.State != duroxide.BulkJobDone || job.Processed != 5 || job.Succeeded != 5 {
		e.t.Fatalf("job %+v", job)
	}
	for i := range 5 {
		q, err := e.admin().InstanceQueue(e.ctx, fmt.Sprintf("w-%d", i))
		if err != nil {
			e.t.Fatalf("InstanceQueue: %v", err)
		}
		n := 0
		for _, m := range q.Messages {
			if m.Item.Kind == history.WorkExternalRaised {
				n++
			}
		}
		if n != 1 {
			e.t.Fatalf("w-%d has %d events queued, want 1", i, n)
		}
	}
}

func e2eBulkPurgeByRuntime(e *e2e) {
	rt := e.runtime(helloRegistry(), noBulkJobs)
	for i := range 4 {
		e.start(fmt.Sprintf("p-%d", i), "Greet", "x")
		e.wait(fmt.Sprintf("p-%d", i))
	}
	e.shutdown(rt)
	before := e.storeCounts()
	dry, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkPurge, DryRun: true,
		Filter: duroxide.ListOptions{States: []duroxide.State{duroxide.StateCompleted}}})
	if err != nil || dry.Count != 4 {
		e.t.Fatalf("purge dry run: %+v, %v", dry, err)
	}
	mustEqual(e.t, "store after the purge dry run", e.storeCounts(), before)
	res, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkPurge,
		Filter: duroxide.ListOptions{States: []duroxide.State{duroxide.StateCompleted}}})
	if err != nil {
		e.t.Fatalf("BulkAction: %v", err)
	}
	// A runtime takes the job when it starts.
	e.runtime(helloRegistry())
	e.eventually("the job done", func() bool {
		j, err := e.c.GetBulkJob(e.ctx, res.Job.ID)
		return err == nil && j.State == duroxide.BulkJobDone
	})
	page, err := e.c.ListInstances(e.ctx, nil)
	if err != nil || len(page.Instances) != 0 {
		e.t.Fatalf("after the purge job: %d instances, %v", len(page.Instances), err)
	}
}

// runBulk previews req (a dry run that must touch nothing and count
// want), then creates its job and runs it here to its end.
func (e *e2e) runBulk(req duroxide.BulkRequest, want int64) *duroxide.BulkJob {
	e.t.Helper()
	before := e.storeCounts()
	dry := req
	dry.DryRun = true
	prev, err := e.c.BulkAction(e.ctx, &dry)
	if err != nil {
		e.t.Fatalf("%s dry run: %v", req.Action, err)
	}
	if prev.Count != want || int64(len(prev.Instances)) != min(want, duroxide.BulkPreviewSize) || prev.Job != nil {
		e.t.Fatalf("%s dry run: count %d, %d instances listed, job %v; want count %d", req.Action, prev.Count, len(prev.Instances), prev.Job, want)
	}
	mustEqual(e.t, "store after the dry run", e.storeCounts(), before)
	res, err := e.c.BulkAction(e.ctx, &req)
	if err != nil {
		e.t.Fatalf("%s: %v", req.Action, err)
	}
	job, err := e.c.RunBulkJob(e.ctx, res.Job.ID, nil)
	if err != nil {
		e.t.Fatalf("RunBulkJob %s: %v", req.Action, err)
	}
	if job.State != duroxide.BulkJobDone || job.Total != want || job.Processed != want || job.Succeeded != want {
		e.t.Fatalf("%s job %+v, want %d done", req.Action, job, want)
	}
	return job
}

// e2eBulkRewind fails 200 instances through a bad activity, deploys the
// fixed one, previews a rewind of every failed Order (200, nothing
// touched) and rewinds them by filter: all complete.
func e2eBulkRewind(e *e2e) {
	const n = 200
	var reserves, charges atomic.Int64
	rt := e.runtime(rewindRegistry(true, &reserves, &charges), noBulkJobs)
	for i := range n {
		e.start(fmt.Sprintf("order-%03d", i), "Order", i)
	}
	for i := range n {
		e.failed(fmt.Sprintf("order-%03d", i))
	}
	e.shutdown(rt)
	e.runtime(rewindRegistry(false, &reserves, &charges), noBulkJobs)
	e.runBulk(duroxide.BulkRequest{Action: duroxide.BulkRewind, Reason: "fixed Charge",
		Filter: duroxide.ListOptions{States: []duroxide.State{duroxide.StateFailed}, Orchestration: "Order", ErrorKind: "application"}}, n)
	for i := range n {
		var out string
		e.result(fmt.Sprintf("order-%03d", i), &out)
		if want := fmt.Sprintf("reserved %d/charged %d", i, i); out != want {
			e.t.Fatalf("order-%03d: %q, want %q", i, out, want)
		}
	}
	if reserves.Load() != n || charges.Load() != 2*n {
		e.t.Fatalf("Reserve ran %d times (want %d), Charge %d (want %d)", reserves.Load(), n, charges.Load(), 2*n)
	}
}

// e2eBulkPauseResume pauses every waiting Hold by filter: an event raised
// meanwhile waits; a bulk resume lets them complete with it.
func e2eBulkPauseResume(e *e2e) {
	reg := duroxide.NewRegistry()
	registerHold(reg)
	e.runtime(reg, noBulkJobs)
	const n = 6
	for i := range n {
		e.start(fmt.Sprintf("h-%d", i), "Hold", nil)
	}
	filter := duroxide.ListOptions{Orchestration: "Hold", WaitKind: duroxide.WaitEvent}
	e.eventually("the holds waiting", func() bool {
		page, err := e.c.ListInstances(e.ctx, &filter)
		return err == nil && len(page.Instances) == n
	})
	e.runBulk(duroxide.BulkRequest{Action: duroxide.BulkPause, Reason: "dependency down", Filter: filter}, n)
	e.runBulk(duroxide.BulkRequest{Action: duroxide.BulkRaiseEvent, EventName: "release", EventData: []byte(`"ok"`),
		Filter: duroxide.ListOptions{IDPrefix: "h-"}}, n)
	for i := range n {
		if st := e.status(fmt.Sprintf("h-%d", i)); st.State != duroxide.StateRunning || st.Paused == nil {
			e.t.Fatalf("h-%d while paused: %s, paused %v", i, st.State, st.Paused)
		}
	}
	e.runBulk(duroxide.BulkRequest{Action: duroxide.BulkResume, Filter: duroxide.ListOptions{IDPrefix: "h-"}}, n)
	for i := range n {
		var out string
		e.result(fmt.Sprintf("h-%d", i), &out)
		if out != "ok" {
			e.t.Fatalf("h-%d: %q", i, out)
		}
	}
}

// e2eBulkCancelJob cancels a bulk pause job after its first chunk: the
// runner stops at the chunk boundary, the job ends Canceled with the
// first chunk's counts, and the instances after it are untouched. A
// finished job cannot be canceled.
func e2eBulkCancelJob(e *e2e) {
	// No runtime: pausing needs none, and nothing else moves.
	for i := range 7 {
		e.start(fmt.Sprintf("c-%d", i), "Hold", nil)
	}
	res, err := e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkPause, Reason: "incident",
		Filter: duroxide.ListOptions{IDPrefix: "c-"}, ChunkSize: 3})
	if err != nil {
		e.t.Fatalf("BulkAction: %v", err)
	}
	id := res.Job.ID
	var steps []string
	job, err := e.c.RunBulkJob(e.ctx, id, &duroxide.RunBulkJobOptions{Progress: func(j duroxide.BulkJob) {
		steps = append(steps, fmt.Sprintf("%s %d", j.State, j.Processed))
		if j.Processed == 3 && j.State == duroxide.BulkJobRunning {
			c, err := e.c.CancelBulkJob(e.ctx, id)
			if err != nil || c.State != duroxide.BulkJobCanceled {
				e.t.Errorf("CancelBulkJob: %+v, %v", c, err)
			}
		}
	}})
	if err != nil {
		e.t.Fatalf("RunBulkJob: %v", err)
	}
	mustEqual(e.t, "progress", steps, []string{"Running 3", "Canceled 3"})
	if job.State != duroxide.BulkJobCanceled || job.Processed != 3 || job.Succeeded != 3 || job.Total != 7 {
		e.t.Fatalf("job %+v, want Canceled after 3 of 7", job)
	}
	got, err := e.c.GetBulkJob(e.ctx, id)
	if err != nil || got.State != duroxide.BulkJobCanceled || got.Processed != 3 || got.Owner != "" {
		e.t.Fatalf("GetBulkJob: %+v, %v", got, err)
	}
	paused := 0
	for i := range 7 {
		if e.status(fmt.Sprintf("c-%d", i)).Paused != nil {
			paused++
		}
	}
	if paused != 3 {
		e.t.Fatalf("%d instances paused, want the first chunk's 3", paused)
	}
	// Running it again does nothing; canceling it again is refused.
	if j, err := e.c.RunBulkJob(e.ctx, id, nil); err != nil || j.State != duroxide.BulkJobCanceled || j.Processed != 3 {
		e.t.Fatalf("RunBulkJob of the canceled job: %+v, %v", j, err)
	}
	if _, err := e.c.CancelBulkJob(e.ctx, id); !errors.Is(err, duroxide.ErrBulkJobEnded) {
		e.t.Fatalf("CancelBulkJob of a canceled job: %v, want ErrBulkJobEnded", err)
	}
	if _, err := e.c.CancelBulkJob(e.ctx, "nope"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("CancelBulkJob of an unknown job: %v, want ErrNotFound", err)
	}
	// A pending job canceled before it runs never runs.
	res, err = e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkResume, Filter: duroxide.ListOptions{IDPrefix: "c-"}})
	if err != nil {
		e.t.Fatalf("BulkAction resume: %v", err)
	}
	if c, err := e.c.CancelBulkJob(e.ctx, res.Job.ID); err != nil || c.State != duroxide.BulkJobCanceled {
		e.t.Fatalf("CancelBulkJob of a pending job: %+v, %v", c, err)
	}
	if j, err := e.c.RunBulkJob(e.ctx, res.Job.ID, nil); err != nil || j.State != duroxide.BulkJobCanceled || j.Processed != 0 {
		e.t.Fatalf("RunBulkJob of the canceled pending job: %+v, %v", j, err)
	}
	// A finished job cannot be canceled.
	res, err = e.c.BulkAction(e.ctx, &duroxide.BulkRequest{Action: duroxide.BulkResume, Filter: duroxide.ListOptions{IDPrefix: "c-"}})
	if err != nil {
		e.t.Fatalf("BulkAction resume: %v", err)
	}
	job, err = e.c.RunBulkJob(e.ctx, res.Job.ID, nil)
	if err != nil || job.State != duroxide.BulkJobDone || job.Succeeded != 3 {
		e.t.Fatalf("resume job: %+v, %v", job, err)
	}
	if _, err := e.c.CancelBulkJob(e.ctx, job.ID); !errors.Is(err, duroxide.ErrBulkJobEnded) {
		e.t.Fatalf("CancelBulkJob of a done job: %v, want ErrBulkJobEnded", err)
	}
}

// crashingJobs is the store with a runner that "crashes" when it records
// its progress: UpdateBulkJob fails, as if the process died after acting
// on the chunk and before its cursor advanced.
type crashingJobs struct {
	provider.Provider
	provider.BulkJobStore
}

func (crashingJobs) UpdateBulkJob(context.Context, string, string, time.Duration, provider.BulkJobUpdate) error {
	return fmt.Errorf("crash before recording: %w", provider.ErrUnavailable)
}

// e2eBulkRaiseCrash raises an event by filter with a runner that crashes
// after raising the first chunk's events and before recording them; a
// second runner repeats that chunk from the job's cursor. Every instance
// holds the event once, and a second job raising the same event raises
// it again (the key is the job's).
func e2eBulkRaiseCrash(e *e2e) {
	js, ok := e.store.(provider.BulkJobStore)
	if !ok {
		e.t.Skip("store does not implement provider.BulkJobStore")
	}
	// No runtime: the events stay queued, so each instance's queue shows
	// how many were raised.
	for i := range 5 {
		e.start(fmt.Sprintf("x-%d", i), "Hold", nil)
	}
	req := duroxide.BulkRequest{Action: duroxide.BulkRaiseEvent, EventName: "release",
		EventData: []byte(`"go"`), Filter: duroxide.ListOptions{IDPrefix: "x-"}, ChunkSize: 3}
	res, err := e.c.BulkAction(e.ctx, &req)
	if err != nil {
		e.t.Fatalf("BulkAction: %v", err)
	}
	crashed := duroxide.NewClient(crashingJobs{e.store, js})
	if _, err := crashed.RunBulkJob(e.ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Owner: "first"}); !errors.Is(err, provider.ErrUnavailable) {
		e.t.Fatalf("crashing runner: %v, want its crash", err)
	}
	queued := func() []int {
		out := make([]int, 5)
		for i := range 5 {
			q, err := e.admin().InstanceQueue(e.ctx, fmt.Sprintf("x-%d", i))
			if err != nil {
				e.t.Fatalf("InstanceQueue: %v", err)
			}
			for _, m := range q.Messages {
				if m.Item.Kind == history.WorkExternalRaised {
					out[i]++
				}
			}
		}
		return out
	}
	// The crash came after the first chunk's raises (newest first: x-4,
	// x-3, x-2) and before the job recorded them.
	mustEqual(e.t, "events after the crash", queued(), []int{0, 0, 1, 1, 1})
	if j, err := e.c.GetBulkJob(e.ctx, res.Job.ID); err != nil || j.Processed != 0 || j.State != duroxide.BulkJobRunning {
		e.t.Fatalf("job after the crash: %+v, %v", j, err)
	}
	e.fc.Advance(2 * time.Minute) // the crashed runner's lease expires
	job, err := e.c.RunBulkJob(e.ctx, res.Job.ID, &duroxide.RunBulkJobOptions{Owner: "second"})
	if err != nil {
		e.t.Fatalf("second runner: %v", err)
	}
	if job.State != duroxide.BulkJobDone || job.Processed != 5 || job.Succeeded != 5 {
		e.t.Fatalf("job %+v", job)
	}
	mustEqual(e.t, "events after the resumed job", queued(), []int{1, 1, 1, 1, 1})

	// Another job is another key: it raises again.
	res, err = e.c.BulkAction(e.ctx, &req)
	if err != nil {
		e.t.Fatalf("BulkAction again: %v", err)
	}
	if job, err := e.c.RunBulkJob(e.ctx, res.Job.ID, nil); err != nil || job.Succeeded != 5 {
		e.t.Fatalf("second job: %+v, %v", job, err)
	}
	mustEqual(e.t, "events after the second job", queued(), []int{2, 2, 2, 2, 2})
}
