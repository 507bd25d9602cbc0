package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

var pruneCommand = &command{
	name:     "prune",
	synopsis: "--older-than D [--keep-executions K] [--batch N] [--dry-run] [--json]",
	summary:  "delete instances that finished long ago and old executions of ContinueAsNew chains",
	details: `prune runs one retention pass over the store (a runtime runs them
periodically with RuntimeOptions.Retention): it purges the root instances,
with their sub-orchestrations, that finished more than --older-than ago, and
with --keep-executions K deletes all but the last K executions of every
instance that continued as new. Each batch of --batch instances is its own
transaction; progress is printed on standard error after each batch.
Idempotency keys are kept until their own retention ends.

--dry-run counts what would be deleted and prints the first IDs, and changes
nothing (the executions of at most 1000 chains are counted).

Example:
  duroxide prune --older-than 720h --keep-executions 10 --dry-run`,
	run: runPrune,
}

func runPrune(ctx context.Context, inv *invocation, args []string) error {
	olderThan := inv.fs.Duration("older-than", 0, "purge instances that finished more than this long ago, e.g. 720h")
	keep := inv.fs.Int("keep-executions", 0, "keep only the last K executions of each ContinueAsNew chain (0: keep all)")
	batch := inv.fs.Int("batch", duroxide.DefaultRetentionBatch, "instances per transaction, 1 to 1000")
	dryRun := inv.fs.Bool("dry-run", false, "count what would be deleted; change nothing")
	inv.jsonFlag("the report")
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	switch {
	case *olderThan < 0 || *keep < 0:
		return usageErrorf("prune: --older-than and --keep-executions must not be negative")
	case *olderThan == 0 && *keep == 0:
		return usageErrorf("prune: give --older-than (e.g. 720h), --keep-executions, or both")
	case *batch < 1 || *batch > 1000:
		return usageErrorf("prune: --batch must be between 1 and 1000, got %d", *batch)
	}
	client, done, err := inv.openClient(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	verb := "purged"
	if *dryRun {
		verb = "would purge"
	}
	rep, err := client.Prune(ctx, &duroxide.PruneOptions{OlderThan: *olderThan, KeepExecutions: *keep, BatchSize: *batch,
		DryRun: *dryRun, Progress: func(r duroxide.PruneReport) {
			fmt.Fprintf(inv.stderr, "prune: batch %d: %s %d instances, %d executions of %d chains\n",
				r.Batches, verb, r.Instances, r.Executions, r.Chains)
		}})
	if err != nil {
		return err
	}
	if inv.jsonOut {
		return inv.printJSON(rep)
	}
	w := inv.stdout
	fmt.Fprintf(w, "%s %d instances that finished before %s", verb, rep.Instances,
		formatTime(time.Now().Add(-*olderThan)))
	if *olderThan == 0 {
		fmt.Fprintf(w, " (none asked)")
	}
	fmt.Fprintln(w)
	if len(rep.InstanceIDs) > 0 {
		fmt.Fprintf(w, "  first: %s\n", safe(strings.Join(rep.InstanceIDs, ", ")))
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(w, "  skipped %d whose sub-orchestrations still run\n", rep.Skipped)
	}
	if *keep > 0 {
		more := ""
		if *dryRun && rep.More {
			more = " (counted in the first 1000 chains; there are more)"
		}
		fmt.Fprintf(w, "%s %d executions (%d events) of %d ContinueAsNew chains, keeping the last %d%s\n",
			strings.Replace(verb, "purge", "delete", 1), rep.Executions, rep.ExecutionEvents, rep.Chains, *keep, more)
		if len(rep.ChainIDs) > 0 {
			fmt.Fprintf(w, "  first: %s\n", safe(strings.Join(rep.ChainIDs, ", ")))
		}
	}
	if *dryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
	return nil
}

var bulkCommand = &command{
	name:     "bulk",
	synopsis: "ACTION [filter flags] [--dry-run] [--reason R] [--event NAME --data JSON] [--force] [--json] | --job ID | --cancel-job ID",
	summary:  "cancel, purge, raise an event, rewind, pause or resume every instance a filter selects",
	details: `ACTION is cancel, purge, raiseEvent, rewind, pause or resume. The filter
flags are those of list and combine with AND: --status, --orchestration,
--version, --prefix, --parent, --created-after, --created-before,
--finished-after, --finished-before (RFC 3339 times, or a duration meaning
that long ago, e.g. 24h), --error-kind, --wait-kind and --stalled.

--dry-run prints how many instances the action would touch and the first of
them, and changes nothing. Otherwise the action is stored as a job and run in
chunks, with a progress bar on standard error; the job records its cursor
after each chunk, so if this command stops, a runtime on the store continues
the job (or run the command again with --job ID to follow it).

--cancel-job ID cancels a Pending or Running job (ACTION is then not needed):
a pending job never runs, a running one stops at its next chunk boundary and
keeps the counts it reached. What the job did is not undone. A job that
already ended cannot be canceled (exit status 1).

Examples:
  duroxide bulk cancel --status Running --orchestration Checkout --dry-run
  duroxide bulk rewind --status Failed --orchestration Checkout --error-kind application
  duroxide bulk raiseEvent --prefix order- --event approve --data true
  duroxide bulk --cancel-job 5f0c...`,
	run: runBulk,
}

// bulkActionNames are the ACTION arguments bulk accepts.
var bulkActionNames = []duroxide.BulkAction{duroxide.BulkCancel, duroxide.BulkPurge, duroxide.BulkRaiseEvent,
	duroxide.BulkRewind, duroxide.BulkPause, duroxide.BulkResume}

func runBulk(ctx context.Context, inv *invocation, args []string) error {
	filter := filterFlags(inv)
	dryRun := inv.fs.Bool("dry-run", false, "print how many instances would be touched and the first ones; change nothing")
	reason := inv.fs.String("reason", "", "recorded by cancel and pause, given to rewind")
	event := inv.fs.String("event", "", "raiseEvent: the event name")
	data := inv.fs.String("data", "", "raiseEvent: the event payload as JSON")
	force := inv.fs.Bool("force", false, "purge: delete live instances too")
	chunk := inv.fs.Int("chunk", 100, "instances per step of the job, 1 to 1000")
	jobID := inv.fs.String("job", "", "follow an existing job instead of starting one (ACTION is then ignored)")
	cancelID := inv.fs.String("cancel-job", "", "cancel this Pending or Running job (ACTION is then ignored)")
	inv.jsonFlag("the preview or the finished job")
	inv.serverFlags()
	if err := inv.parse(args, 0, "ACTION"); err != nil {
		return err
	}
	action := duroxide.BulkAction(inv.arg(0))
	if *jobID == "" && *cancelID == "" {
		found := false
		for _, a := range bulkActionNames {
			if strings.EqualFold(string(a), string(action)) {
				action, found = a, true
			}
		}
		if !found {
			return usageErrorf("bulk: ACTION must be one of cancel, purge, raiseEvent, rewind, pause, resume; got %q", inv.arg(0))
		}
	}
	if *chunk < 1 || *chunk > 1000 {
		return usageErrorf("bulk: --chunk must be between 1 and 1000, got %d", *chunk)
	}
	opts, err := filter(time.Now())
	if err != nil {
		return err
	}
	raw, err := jsonArg("bulk", "data", *data)
	if err != nil {
		return err
	}
	req := &duroxide.BulkRequest{Action: action, Filter: opts, DryRun: *dryRun, Reason: *reason, EventName: *event,
		EventData: raw, Force: *force, ChunkSize: *chunk, By: "duroxide bulk"}
	base, err := inv.remoteURL()
	if err != nil {
		return err
	}
	var b bulkBackend
	if base != "" {
		r, _, err := inv.openBackend(ctx, storeurl.Existing)
		if err != nil {
			return err
		}
		b = remoteBulk{r.(*remote)}
	} else {
		client, done, err := inv.openClient(ctx, storeurl.Existing)
		if err != nil {
			return err
		}
		defer done()
		b = localBulk{client}
	}
	if *cancelID != "" {
		job, err := b.cancel(ctx, *cancelID)
		if err != nil {
			return err
		}
		if inv.jsonOut {
			return inv.printJSON(job)
		}
		fmt.Fprintf(inv.stdout, "job %s %s: %d of %d instances: %d succeeded, %d skipped, %d failed so far\n", safe(job.ID), job.State,
			job.Processed, job.Total, job.Succeeded, job.Skipped, job.Failed)
		return nil
	}
	bar := newBulkBar(inv.stderr)
	if *jobID != "" {
		job, err := b.follow(ctx, *jobID, bar.show)
		if err != nil {
			return err
		}
		return inv.printJob(job, bar)
	}
	res, err := b.start(ctx, req)
	if err != nil {
		return err
	}
	if *dryRun {
		if inv.jsonOut {
			return inv.printJSON(res)
		}
		fmt.Fprintf(inv.stdout, "%s would touch %d instances\n", action, res.Count)
		for _, st := range res.Instances {
			fmt.Fprintf(inv.stdout, "  %s\t%s\t%s\n", safe(st.InstanceID), safe(st.Orchestration), st.State)
		}
		if int64(len(res.Instances)) < res.Count {
			fmt.Fprintf(inv.stdout, "  ... and %d more\n", res.Count-int64(len(res.Instances)))
		}
		fmt.Fprintln(inv.stdout, "dry run: nothing was changed")
		return nil
	}
	fmt.Fprintf(inv.stderr, "bulk %s: job %s, %d instances\n", action, safe(res.Job.ID), res.Count)
	job, err := b.follow(ctx, res.Job.ID, bar.show)
	if err != nil {
		return fmt.Errorf("%w (the job continues on a runtime; follow it with 'duroxide bulk --job %s')", err, res.Job.ID)
	}
	return inv.printJob(job, bar)
}

func (inv *invocation) printJob(job *duroxide.BulkJob, bar *bulkBar) error {
	bar.end(job)
	if inv.jsonOut {
		if err := inv.printJSON(job); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(inv.stdout, "job %s %s: %d of %d instances: %d succeeded, %d skipped, %d failed\n", safe(job.ID), job.State,
			job.Processed, job.Total, job.Succeeded, job.Skipped, job.Failed)
	}
	if job.State == duroxide.BulkJobFailed || job.Failed > 0 {
		return fmt.Errorf("bulk job %s: %s", job.ID, job.Error)
	}
	return nil
}

// filterFlags adds the filter flags of bulk and returns the function that
// reads them (times relative to now).
func filterFlags(inv *invocation) func(now time.Time) (duroxide.ListOptions, error) {
	status := inv.fs.String("status", "", "keep instances in these states, e.g. Running or Failed,Canceled")
	fs := inv.fs
	var o duroxide.ListOptions
	fs.StringVar(&o.Orchestration, "orchestration", "", "keep instances of this orchestration")
	fs.StringVar(&o.Version, "version", "", "keep instances of this orchestration version")
	fs.StringVar(&o.IDPrefix, "prefix", "", "keep instances whose ID starts with this")
	fs.StringVar(&o.ParentInstanceID, "parent", "", "keep the sub-orchestrations of this instance")
	fs.StringVar(&o.ErrorKind, "error-kind", "", "keep instances whose error (or last error) has this kind, e.g. application")
	waitKind := fs.String("wait-kind", "", "keep live instances waiting for this (activity, timer, event, child, lock, ...)")
	fs.BoolVar(&o.Stalled, "stalled", false, "keep only stalled instances, with what they wait for")
	times := map[string]*string{}
	for _, n := range []string{"created-after", "created-before", "finished-after", "finished-before"} {
		times[n] = fs.String(n, "", "an RFC 3339 time, or a duration meaning that long ago (e.g. 24h)")
	}
	return func(now time.Time) (duroxide.ListOptions, error) {
		out := o
		out.WaitKind = duroxide.WaitKind(*waitKind)
		if out.WaitKind != "" && !slices.Contains(duroxide.WaitKinds(), out.WaitKind) {
			return out, usageErrorf("%s: unknown --wait-kind %q: use one of %v", inv.cmd.name, *waitKind, duroxide.WaitKinds())
		}
		if *status != "" {
			for _, s := range strings.Split(*status, ",") {
				st, ok := parseState(s)
				if !ok {
					return out, usageErrorf("%s: unknown --status %q: use Pending, Running, Completed, Failed or Canceled (several separated by commas)", inv.cmd.name, strings.TrimSpace(s))
				}
				out.States = append(out.States, st)
			}
		}
		for n, dst := range map[string]*time.Time{"created-after": &out.CreatedAfter, "created-before": &out.CreatedBefore,
			"finished-after": &out.FinishedAfter, "finished-before": &out.FinishedBefore} {
			v := *times[n]
			if v == "" {
				continue
			}
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				*dst = t
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return out, usageErrorf("%s: --%s %q is neither an RFC 3339 time nor a duration like 24h", inv.cmd.name, n, v)
			}
			*dst = now.Add(-d)
		}
		return out, nil
	}
}

// bulkBackend starts and follows bulk jobs: on the store, or through a
// server's HTTP API.
type bulkBackend interface {
	start(ctx context.Context, req *duroxide.BulkRequest) (*duroxide.BulkResult, error)
	// follow runs or watches the job to its end, calling progress.
	follow(ctx context.Context, id string, progress func(duroxide.BulkJob)) (*duroxide.BulkJob, error)
	// cancel cancels the job.
	cancel(ctx context.Context, id string) (*duroxide.BulkJob, error)
}

type localBulk struct{ c *duroxide.Client }

func (l localBulk) start(ctx context.Context, req *duroxide.BulkRequest) (*duroxide.BulkResult, error) {
	return l.c.BulkAction(ctx, req)
}

// follow runs the job here; if a runtime already runs it, it watches it.
func (l localBulk) follow(ctx context.Context, id string, progress func(duroxide.BulkJob)) (*duroxide.BulkJob, error) {
	job, err := l.c.RunBulkJob(ctx, id, &duroxide.RunBulkJobOptions{Progress: progress})
	if !errors.Is(err, duroxide.ErrBulkJobBusy) {
		return job, err
	}
	return poll(ctx, progress, func() (*duroxide.BulkJob, error) { return l.c.GetBulkJob(ctx, id) })
}

func (l localBulk) cancel(ctx context.Context, id string) (*duroxide.BulkJob, error) {
	return l.c.CancelBulkJob(ctx, id)
}

type remoteBulk struct{ r *remote }

func (rb remoteBulk) cancel(ctx context.Context, id string) (*duroxide.BulkJob, error) {
	var v httpapi.BulkJobView
	if _, _, err := rb.r.do(ctx, "POST", "/api/bulk/"+pathID(id)+"/cancel", nil, &v); err != nil {
		return nil, err
	}
	return jobOf(&v), nil
}

// jobOf reads the API's shape of a job.
func jobOf(v *httpapi.BulkJobView) *duroxide.BulkJob {
	return &duroxide.BulkJob{ID: v.ID, Action: duroxide.BulkAction(v.Action), State: duroxide.BulkJobState(v.State),
		Total: v.Total, Processed: v.Processed, Succeeded: v.Succeeded, Skipped: v.Skipped, Failed: v.Failed,
		Error: v.Error, Owner: v.Owner, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
}

func (rb remoteBulk) start(ctx context.Context, req *duroxide.BulkRequest) (*duroxide.BulkResult, error) {
	f := req.Filter
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	body := httpapi.BulkRequest{Action: string(req.Action), DryRun: req.DryRun, Reason: req.Reason, By: req.By,
		EventName: req.EventName, EventData: req.EventData, Force: req.Force, ChunkSize: req.ChunkSize,
		Filter: httpapi.BulkFilter{Orchestration: f.Orchestration, Version: f.Version, Parent: f.ParentInstanceID,
			Prefix: f.IDPrefix, ErrorKind: f.ErrorKind, WaitKind: string(f.WaitKind), Stalled: f.Stalled, // the server's stall threshold
			CreatedAfter: at(f.CreatedAfter), CreatedBefore: at(f.CreatedBefore),
			FinishedAfter: at(f.FinishedAfter), FinishedBefore: at(f.FinishedBefore)}}
	for _, s := range f.States {
		body.Filter.States = append(body.Filter.States, string(s))
	}
	var out struct {
		DryRun    bool                 `json:"dryRun"`
		Count     int64                `json:"count"`
		Instances []duroxide.Status    `json:"instances"`
		Job       *httpapi.BulkJobView `json:"job"`
	}
	if _, _, err := rb.r.do(ctx, "POST", "/api/bulk", body, &out); err != nil {
		return nil, err
	}
	res := &duroxide.BulkResult{DryRun: out.DryRun, Count: out.Count, Instances: out.Instances}
	if out.Job != nil {
		res.Job = jobOf(out.Job)
	}
	return res, nil
}

func (rb remoteBulk) follow(ctx context.Context, id string, progress func(duroxide.BulkJob)) (*duroxide.BulkJob, error) {
	return poll(ctx, progress, func() (*duroxide.BulkJob, error) {
		var v httpapi.BulkJobView
		if _, _, err := rb.r.do(ctx, "GET", "/api/bulk/"+pathID(id), nil, &v); err != nil {
			return nil, err
		}
		return jobOf(&v), nil
	})
}

// pollEvery is how often a job run elsewhere is read.
const pollEvery = 500 * time.Millisecond

// poll reads a job run elsewhere until it ends.
func poll(ctx context.Context, progress func(duroxide.BulkJob), get func() (*duroxide.BulkJob, error)) (*duroxide.BulkJob, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		job, err := get()
		if err != nil {
			return nil, err
		}
		progress(*job)
		if job.Done() {
			return job, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// bulkBar draws a job's progress on standard error: a bar redrawn in
// place on a terminal, a line per update (at most every plainEvery, and
// the last) otherwise.
type bulkBar struct {
	w        io.Writer
	terminal bool
	last     time.Time
	drawn    bool
}

func newBulkBar(w io.Writer) *bulkBar {
	b := &bulkBar{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			b.terminal = true
		}
	}
	return b
}

// barWidth is the width of the bar in characters.
const barWidth = 30

func (b *bulkBar) line(j *duroxide.BulkJob) string {
	filled := barWidth
	if j.Total > 0 {
		filled = int(min(j.Processed, j.Total) * barWidth / j.Total)
	}
	return fmt.Sprintf("[%s%s] %d/%d  succeeded %d  skipped %d  failed %d", strings.Repeat("#", filled),
		strings.Repeat(".", barWidth-filled), j.Processed, j.Total, j.Succeeded, j.Skipped, j.Failed)
}

func (b *bulkBar) show(j duroxide.BulkJob) {
	switch {
	case b.terminal:
		fmt.Fprintf(b.w, "\r\033[K%s", b.line(&j))
		b.drawn = true
	case b.last.IsZero() || time.Since(b.last) >= plainEvery || j.Done():
		b.last = time.Now()
		fmt.Fprintln(b.w, b.line(&j))
	}
}

// end finishes the bar's line.
func (b *bulkBar) end(*duroxide.BulkJob) {
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}
