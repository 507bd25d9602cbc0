package duroxide

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go/provider"
)

// BulkAction names what a bulk action does to each instance it touches.
type BulkAction string

// The bulk actions.
const (
	// BulkCancel cancels each live instance (CancelInstance with
	// BulkRequest.Reason).
	BulkCancel BulkAction = "cancel"
	// BulkPurge purges each root instance (PurgeInstance; live ones only
	// with BulkRequest.Force). Sub-orchestrations go with their root and
	// are skipped on their own.
	BulkPurge BulkAction = "purge"
	// BulkRaiseEvent raises BulkRequest.EventName with EventData on each
	// live instance (RaiseEvent), once per instance even across a crash
	// of the job's runner (see RunBulkJob).
	BulkRaiseEvent BulkAction = "raiseEvent"
	// BulkRewind rewinds each Failed or Canceled instance (Rewind with
	// BulkRequest.Reason): it resumes with the code deployed now.
	BulkRewind BulkAction = "rewind"
	// BulkPause pauses each live instance (Pause with BulkRequest.Reason).
	BulkPause BulkAction = "pause"
	// BulkResume resumes each paused instance (Resume).
	BulkResume BulkAction = "resume"
)

// bulkActions are the actions BulkAction accepts.
var bulkActions = []BulkAction{BulkCancel, BulkPurge, BulkRaiseEvent, BulkRewind, BulkPause, BulkResume}

// BulkRequest is a bulk action: what to do (Action and its arguments) to
// which instances (Filter).
type BulkRequest struct {
	Action BulkAction `json:"action"`
	// Filter selects the instances, as ListInstances does. Its Cursor
	// must be empty and its Limit is ignored (see ChunkSize). The
	// instances are walked newest first, once: instances created after
	// the job started are not touched, and each instance is tested
	// against the filter when the walk reaches it.
	Filter ListOptions `json:"filter"`
	// Reason is recorded by cancel and pause, and given to rewind (at
	// most MaxReasonLength bytes).
	Reason string `json:"reason,omitempty"`
	// By names who asked for the action; pause records it (PauseInfo.By;
	// "" = "bulk job <id>"). At most MaxNameLength bytes.
	By string `json:"by,omitempty"`
	// EventName and EventData are the event of raiseEvent.
	EventName string          `json:"eventName,omitempty"`
	EventData json.RawMessage `json:"eventData,omitempty"`
	// Force lets purge delete live instances.
	Force bool `json:"force,omitempty"`
	// ChunkSize is how many instances one step of the job lists and acts
	// on before it records its cursor (0 = 100; at most 1000).
	ChunkSize int `json:"chunkSize,omitempty"`
	// DryRun previews the action: BulkAction returns how many instances
	// it would touch and the first of them, and changes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// JobID names the job ("" = a new UUID).
	JobID string `json:"jobId,omitempty"`
}

// BulkPreviewSize is how many instances BulkResult.Instances lists.
const BulkPreviewSize = 100

// BulkResult is the answer of BulkAction.
type BulkResult struct {
	DryRun bool `json:"dryRun,omitempty"`
	// Count is how many instances match the filter now: what the action
	// would touch.
	Count int64 `json:"count"`
	// Instances are the first of them (at most BulkPreviewSize), in the
	// order the job walks them.
	Instances []Status `json:"instances"`
	// Job is the job created to run the action (nil for a dry run).
	Job *BulkJob `json:"job,omitempty"`
}

// BulkJobState is the state of a bulk job.
type BulkJobState string

// Bulk job states.
const (
	// BulkJobPending: created, no runner has taken it yet.
	BulkJobPending BulkJobState = BulkJobState(provider.BulkJobPending)
	// BulkJobRunning: a runner works on it (or did, and its lease will
	// expire, letting another continue from the job's cursor).
	BulkJobRunning BulkJobState = BulkJobState(provider.BulkJobRunning)
	// BulkJobDone: every matching instance was visited.
	BulkJobDone BulkJobState = BulkJobState(provider.BulkJobDone)
	// BulkJobFailed: the job stopped on an error (Error says which).
	BulkJobFailed BulkJobState = BulkJobState(provider.BulkJobFailed)
	// BulkJobCanceled: CancelBulkJob stopped the job; its counts are
	// those its runner reached.
	BulkJobCanceled BulkJobState = BulkJobState(provider.BulkJobCanceled)
)

// BulkJob is the progress of a bulk action.
type BulkJob struct {
	ID     string       `json:"id"`
	Action BulkAction   `json:"action"`
	State  BulkJobState `json:"state"`
	// Total is the count of matching instances when the job was created.
	Total int64 `json:"total"`
	// Processed counts the instances visited: Succeeded were acted on,
	// Skipped needed nothing or could not take the action (already
	// finished, purged meanwhile, a sub-orchestration to purge),
	// Failed returned an error (the last one is in Error).
	Processed int64  `json:"processed"`
	Succeeded int64  `json:"succeeded"`
	Skipped   int64  `json:"skipped"`
	Failed    int64  `json:"failed"`
	Error     string `json:"error,omitempty"`
	// Owner is the runner holding the job's lease, if any.
	Owner     string      `json:"owner,omitempty"`
	CreatedAt time.Time   `json:"createdAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
	Request   BulkRequest `json:"request"`
}

// Done reports whether the job ended (Done, Failed or Canceled).
func (j *BulkJob) Done() bool { return provider.BulkJobState(j.State).IsFinal() }

// bulkLease is how long a runner holds a job between two steps.
const bulkLease = time.Minute

// bulkCursor is a job's position: the store cursor of the page being
// worked on and the instances of that page already acted on.
type bulkCursor struct {
	Page string   `json:"c,omitempty"`
	Done []string `json:"d,omitempty"`
}

func (c *Client) jobStore() (provider.BulkJobStore, error) {
	js, ok := c.p.(provider.BulkJobStore)
	if !ok {
		return nil, fmt.Errorf("%w: the store keeps no bulk jobs (provider.BulkJobStore)", ErrInvalidArgument)
	}
	return js, nil
}

func (r *BulkRequest) check(c *Client) error {
	if !slices.Contains(bulkActions, r.Action) {
		return fmt.Errorf("%w: unknown bulk action %q", ErrInvalidArgument, r.Action)
	}
	if r.Filter.Cursor != "" {
		return fmt.Errorf("%w: a bulk action's filter takes no cursor", ErrInvalidArgument)
	}
	if r.ChunkSize < 0 {
		return fmt.Errorf("%w: ChunkSize must not be negative", ErrInvalidArgument)
	}
	if r.Reason != "" {
		if err := checkText("reason", r.Reason, MaxReasonLength); err != nil {
			return err
		}
	}
	if r.By != "" {
		if err := ValidateText("by", r.By, MaxNameLength); err != nil {
			return err
		}
	}
	if r.JobID != "" {
		if err := checkInstanceID(r.JobID); err != nil {
			return fmt.Errorf("job ID: %w", err)
		}
	}
	if r.Action == BulkRaiseEvent {
		if err := checkText("event name", r.EventName, MaxNameLength); err != nil {
			return err
		}
		if len(r.EventData) > 0 && !json.Valid(r.EventData) {
			return fmt.Errorf("%w: event data is not JSON", ErrInvalidArgument)
		}
		if err := checkPayload("data of event "+r.EventName, r.EventData, c.maxPayload); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	if _, err := r.Filter.storeOptions(); err != nil {
		return err
	}
	return nil
}

// BulkAction applies req.Action to every instance req.Filter selects.
// With req.DryRun it only counts them and returns the first ones,
// changing nothing. Otherwise it counts them the same way, stores a job
// (provider.BulkJobStore) and returns it without running it: a runtime
// on the store runs it (RuntimeOptions.BulkJobInterval), or the caller
// does with RunBulkJob. The count walks every matching instance; with
// Filter.WaitKind or Filter.Stalled it inspects every live one.
func (c *Client) BulkAction(ctx context.Context, req *BulkRequest) (*BulkResult, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil bulk request", ErrInvalidArgument)
	}
	if err := req.check(c); err != nil {
		return nil, err
	}
	var js provider.BulkJobStore
	if !req.DryRun {
		var err error
		if js, err = c.jobStore(); err != nil {
			return nil, err
		}
	}
	res := &BulkResult{DryRun: req.DryRun, Instances: []Status{}}
	f := req.Filter
	f.Limit = 1000
	for {
		page, err := c.listPage(ctx, &f)
		if err != nil {
			return nil, err
		}
		for _, st := range page.Instances {
			if !req.applies(&st) {
				continue
			}
			res.Count++
			if len(res.Instances) < BulkPreviewSize {
				res.Instances = append(res.Instances, st)
			}
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	if req.DryRun {
		return res, nil
	}
	stored := *req
	stored.JobID = cmp.Or(req.JobID, uuid.NewString())
	spec, err := json.Marshal(bulkSpec{Request: stored, Total: res.Count})
	if err != nil {
		return nil, err
	}
	if err := js.CreateBulkJob(ctx, &provider.BulkJob{ID: stored.JobID, Spec: spec}); err != nil {
		if errors.Is(err, provider.ErrInstanceExists) {
			return nil, fmt.Errorf("bulk job %q: %w", stored.JobID, ErrInstanceExists)
		}
		return nil, fmt.Errorf("creating bulk job: %w", err)
	}
	if res.Job, err = c.GetBulkJob(ctx, stored.JobID); err != nil {
		return nil, err
	}
	return res, nil
}

// applies reports whether the action can touch st at all (a purge
// touches roots only: a sub-orchestration goes with its root).
func (r *BulkRequest) applies(st *Status) bool {
	switch r.Action {
	case BulkPurge:
		return st.ParentInstanceID == "" && (r.Force || st.State.IsTerminal())
	case BulkCancel, BulkRaiseEvent:
		return !st.State.IsTerminal()
	case BulkPause:
		return !st.State.IsTerminal() && st.Paused == nil
	case BulkResume:
		return !st.State.IsTerminal() && st.Paused != nil
	case BulkRewind:
		return st.State == StateFailed || st.State == StateCanceled
	}
	return true
}

// bulkSpec is what the store keeps of a job.
type bulkSpec struct {
	Request BulkRequest `json:"request"`
	Total   int64       `json:"total"`
}

// GetBulkJob returns the progress of a bulk job, or ErrNotFound.
func (c *Client) GetBulkJob(ctx context.Context, id string) (*BulkJob, error) {
	js, err := c.jobStore()
	if err != nil {
		return nil, err
	}
	if err := checkInstanceID(id); err != nil {
		return nil, fmt.Errorf("job ID: %w", err)
	}
	rec, err := js.GetBulkJob(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("bulk job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return bulkJobOf(rec)
}

// ListBulkJobs returns bulk jobs, newest first, at most 100; with
// unfinished only those not Done, Failed or Canceled.
func (c *Client) ListBulkJobs(ctx context.Context, unfinished bool) ([]BulkJob, error) {
	js, err := c.jobStore()
	if err != nil {
		return nil, err
	}
	recs, err := js.ListBulkJobs(ctx, provider.BulkJobListOptions{Unfinished: unfinished})
	if err != nil {
		return nil, fmt.Errorf("listing bulk jobs: %w", err)
	}
	out := make([]BulkJob, 0, len(recs))
	for i := range recs {
		j, err := bulkJobOf(&recs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *j)
	}
	return out, nil
}

func bulkJobOf(rec *provider.BulkJob) (*BulkJob, error) {
	var spec bulkSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return nil, fmt.Errorf("bulk job %q: spec: %w", rec.ID, provider.ErrCorruptData)
	}
	return &BulkJob{ID: rec.ID, Action: spec.Request.Action, State: BulkJobState(rec.State), Total: cmp.Or(rec.Total, spec.Total),
		Processed: rec.Processed, Succeeded: rec.Succeeded, Skipped: rec.Skipped, Failed: rec.Failed, Error: rec.Error,
		Owner: rec.Owner, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Request: spec.Request}, nil
}

// RunBulkJobOptions tunes RunBulkJob.
type RunBulkJobOptions struct {
	// Owner names the runner in the job's lease ("" = a new UUID).
	Owner string
	// Progress, when set, is called after each recorded step.
	Progress func(BulkJob)
}

// ErrBulkJobBusy is returned by RunBulkJob when another runner holds the
// job's lease.
var ErrBulkJobBusy = errors.New("bulk job is run by another runner")

// ErrBulkJobEnded is returned by CancelBulkJob for a job that already
// ended (Done, Failed or Canceled).
var ErrBulkJobEnded = errors.New("bulk job has already ended")

// CancelBulkJob cancels bulk job id, Pending or Running, and returns it,
// now Canceled. A Pending job never runs. The runner of a Running job
// stops at its next chunk boundary: it finishes the chunk it is acting
// on, records its cursor and counts (Processed, Succeeded...: what
// the job did before it stopped) and returns the job Canceled; until
// then GetBulkJob shows it Canceled with the counts of the last chunk
// recorded. What the job did is not undone. ErrNotFound for an unknown
// job; ErrBulkJobEnded for a job already Done, Failed or Canceled.
func (c *Client) CancelBulkJob(ctx context.Context, id string) (*BulkJob, error) {
	js, err := c.jobStore()
	if err != nil {
		return nil, err
	}
	if err := checkInstanceID(id); err != nil {
		return nil, fmt.Errorf("job ID: %w", err)
	}
	rec, err := js.CancelBulkJob(ctx, id)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return nil, fmt.Errorf("bulk job %q: %w", id, ErrNotFound)
	case errors.Is(err, provider.ErrStateConflict):
		return nil, fmt.Errorf("bulk job %q: %w", id, ErrBulkJobEnded)
	case err != nil:
		return nil, fmt.Errorf("canceling bulk job %q: %w", id, err)
	}
	return bulkJobOf(rec)
}

// bulkDedupKey is the deduplication key (provider.OrchestratorMessage.
// DedupKey, "bulk:" and the job's ID) of the events bulk job jobID
// raises: each instance receives the job's event once, even when a
// runner that crashed before recording its progress raises it again.
func bulkDedupKey(jobID string) string { return "bulk:" + jobID }

// RunBulkJob runs bulk job id to its end: it takes the job's lease
// (ErrBulkJobBusy while another runner holds it) and continues from the
// job's cursor, a chunk of instances at a time, recording the cursor and
// the counts after each chunk. A runner that stops before recording a
// chunk leaves it to be repeated: cancel, pause, resume, rewind and purge
// find the instances it already handled changed and skip them (the
// counts may then show them as skipped), and raiseEvent raises each
// event with a deduplication key naming the job (provider.
// OrchestratorMessage.DedupKey "bulk:<job ID>"), so an instance receives
// it once; the repeated raise is counted as succeeded, standing in for
// the count the crashed runner did not record. If
// ctx ends or the store fails, it returns with the job Running: its lease
// expires and a later RunBulkJob (or a runtime) continues it. A job
// already finished is returned as it is. A job canceled (CancelBulkJob)
// while it runs stops before its next chunk and is returned Canceled,
// with a nil error.
func (c *Client) RunBulkJob(ctx context.Context, id string, opts *RunBulkJobOptions) (*BulkJob, error) {
	js, err := c.jobStore()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &RunBulkJobOptions{}
	}
	owner := cmp.Or(opts.Owner, uuid.NewString())
	rec, err := js.ClaimBulkJob(ctx, id, owner, bulkLease)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return nil, fmt.Errorf("bulk job %q: %w", id, ErrNotFound)
	case errors.Is(err, provider.ErrLockLost):
		return nil, fmt.Errorf("bulk job %q: %w", id, ErrBulkJobBusy)
	case err != nil:
		return nil, fmt.Errorf("claiming bulk job %q: %w", id, err)
	}
	job, err := bulkJobOf(rec)
	if err != nil || job.Done() {
		return job, err
	}
	run := &bulkRun{c: c, js: js, owner: owner, job: job, progress: opts.Progress}
	if rec.Cursor != "" {
		if err := json.Unmarshal([]byte(rec.Cursor), &run.cur); err != nil {
			return job, run.fail(ctx, fmt.Errorf("bulk job %q: cursor: %w", id, provider.ErrCorruptData))
		}
	}
	if err := run.run(ctx); !errors.Is(err, errJobCanceled) {
		return job, err
	}
	return job, nil
}

// errJobCanceled stops a runner whose job was canceled.
var errJobCanceled = errors.New("bulk job canceled")

type bulkRun struct {
	c        *Client
	js       provider.BulkJobStore
	owner    string
	job      *BulkJob
	cur      bulkCursor
	progress func(BulkJob)
}

func (r *bulkRun) run(ctx context.Context) error {
	req := &r.job.Request
	ctx = WithActor(ctx, cmp.Or(req.By, "bulk job "+r.job.ID))
	f := req.Filter
	f.Limit = min(cmp.Or(req.ChunkSize, 100), 1000)
	for first := true; ; first = false {
		if !first {
			// A chunk boundary: stop here if the job was canceled.
			if rec, err := r.js.GetBulkJob(ctx, r.job.ID); err == nil && rec.State == provider.BulkJobCanceled {
				return r.save(ctx, BulkJobRunning)
			}
		}
		f.Cursor = r.cur.Page
		page, err := r.c.listPage(ctx, &f)
		if err != nil {
			if ctx.Err() != nil || provider.IsRetryable(err) {
				return err
			}
			return r.fail(ctx, err)
		}
		for i := range page.Instances {
			st := &page.Instances[i]
			if slices.Contains(r.cur.Done, st.InstanceID) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			r.apply(ctx, st)
			r.cur.Done = append(r.cur.Done, st.InstanceID)
		}
		r.cur = bulkCursor{Page: page.NextCursor}
		state := BulkJobRunning
		if page.NextCursor == "" {
			state = BulkJobDone
		}
		if err := r.save(ctx, state); err != nil {
			return err
		}
		if state == BulkJobDone {
			return nil
		}
	}
}

// apply acts on one instance and counts the outcome.
func (r *bulkRun) apply(ctx context.Context, st *Status) {
	req := &r.job.Request
	r.job.Processed++
	if !req.applies(st) {
		r.job.Skipped++
		return
	}
	var err error
	switch req.Action {
	case BulkCancel:
		err = r.c.CancelInstance(ctx, st.InstanceID, req.Reason)
	case BulkPurge:
		err = r.c.PurgeInstance(ctx, st.InstanceID, req.Force)
	case BulkRaiseEvent:
		// Once per (job, instance): a runner that repeats the raise
		// after a crash, before the job recorded it, raises nothing.
		_, err = r.c.raiseEvent(ctx, st.InstanceID, req.EventName, rawJSON(req.EventData), bulkDedupKey(r.job.ID))
	case BulkRewind:
		err = r.c.Rewind(ctx, st.InstanceID, req.Reason)
	case BulkPause:
		err = r.c.Pause(ctx, st.InstanceID, req.Reason)
	case BulkResume:
		err = r.c.Resume(ctx, st.InstanceID)
	}
	switch {
	case err == nil:
		r.job.Succeeded++
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInstanceTerminal), errors.Is(err, ErrStillRunning),
		errors.Is(err, ErrChildInstance), errors.Is(err, ErrAlreadyPaused), errors.Is(err, ErrNotPaused),
		errors.Is(err, ErrStateConflict):
		r.job.Skipped++
	default:
		r.job.Failed++
		r.job.Error = fmt.Sprintf("%s: %v", st.InstanceID, err)
	}
}

// rawJSON passes already-encoded event data through encodePayload.
type rawJSON json.RawMessage

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

func (r *bulkRun) save(ctx context.Context, state BulkJobState) error {
	cur, err := json.Marshal(r.cur)
	if err != nil {
		return err
	}
	j := r.job
	err = r.js.UpdateBulkJob(context.WithoutCancel(ctx), j.ID, r.owner, bulkLease, provider.BulkJobUpdate{
		State: provider.BulkJobState(state), Cursor: string(cur), Total: j.Total, Processed: j.Processed,
		Succeeded: j.Succeeded, Skipped: j.Skipped, Failed: j.Failed, Error: j.Error})
	if errors.Is(err, provider.ErrBulkJobCanceled) {
		j.State, j.Owner = BulkJobCanceled, ""
		if r.progress != nil {
			r.progress(*j)
		}
		return errJobCanceled
	}
	if err != nil {
		if errors.Is(err, provider.ErrLockLost) {
			return fmt.Errorf("bulk job %q: %w", j.ID, ErrBulkJobBusy)
		}
		return fmt.Errorf("recording bulk job %q: %w", j.ID, err)
	}
	j.State = state
	if r.progress != nil {
		r.progress(*j)
	}
	return nil
}

func (r *bulkRun) fail(ctx context.Context, err error) error {
	r.job.Error = err.Error()
	if serr := r.save(ctx, BulkJobFailed); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}
