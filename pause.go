package duroxide

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// Errors of Pause, Resume and Rewind.
var (
	// ErrAlreadyPaused: Pause named an instance that is paused.
	ErrAlreadyPaused = provider.ErrAlreadyPaused
	// ErrNotPaused: Resume named an instance that is not paused.
	ErrNotPaused = provider.ErrNotPaused
	// ErrStateConflict: the instance's state does not allow the call:
	// Pause of a Completed, Failed or Canceled instance, Rewind of one
	// that is not Failed or Canceled (nor Running, with
	// RewindOptions.Force; nor paused or in a turn, then), or that changed
	// while the rewind was planned, or a rewind that cannot resume the
	// history (a
	// sub-orchestration was in flight at the resume point). Nothing was
	// changed. The HTTP API answers 409.
	ErrStateConflict = provider.ErrStateConflict
)

// PauseInfo says who paused an instance, why and when (Status.Paused).
type PauseInfo = provider.PauseInfo

type actorKey struct{}

// WithActor returns a context that names who acts through the Client
// calls made with it: Pause records it as PauseInfo.By. The HTTP API, the
// CLI and the dashboard set it.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor WithActor put in ctx ("" for none).
func ActorFrom(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
}

// MaxReasonLength bounds the reason of a pause or rewind, in bytes.
const MaxReasonLength = 1024

func (c *Client) pauser() (provider.Pauser, error) {
	p, ok := c.p.(provider.Pauser)
	if !ok {
		return nil, fmt.Errorf("pausing instances: the store does not implement provider.Pauser: %w", ErrNotSupported)
	}
	return p, nil
}

// Pause holds instanceID: it takes no turn and starts no activity until
// Resume. Activities already running finish, and their results wait with
// the timers that fire and the events raised meanwhile. A turn in progress
// when the pause lands is discarded (its commit fails and writes nothing)
// and taken again after Resume. The pause is recorded with reason, who
// (WithActor) and when, and shown in Status.Paused and by Inspect (a
// WaitPaused entry; a paused instance is never stalled).
//
// ErrNotFound if the instance does not exist; *InstanceTerminalError
// (ErrInstanceTerminal) if it is Completed, Failed or Canceled;
// ErrAlreadyPaused if it is paused; ErrNotSupported if the store cannot
// pause.
func (c *Client) Pause(ctx context.Context, instanceID, reason string) error {
	if err := checkInstanceID(instanceID); err != nil {
		return err
	}
	if err := checkText("pause reason", reason, MaxReasonLength); err != nil && reason != "" {
		return err
	}
	p, err := c.pauser()
	if err != nil {
		return err
	}
	err = p.PauseInstance(ctx, instanceID, provider.PauseInfo{Reason: reason, By: ActorFrom(ctx)})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, provider.ErrStateConflict):
		if info, gerr := c.instance(ctx, instanceID); gerr == nil {
			return &InstanceTerminalError{InstanceID: instanceID, State: stateOf(info.Status)}
		}
	}
	return fmt.Errorf("pausing %q: %w", instanceID, err)
}

// Resume lifts the pause of instanceID: its waiting messages and held
// activities are taken at once. ErrNotFound if the instance does not
// exist; ErrNotPaused if it is not paused; ErrNotSupported if the store
// cannot pause.
func (c *Client) Resume(ctx context.Context, instanceID string) error {
	if err := checkInstanceID(instanceID); err != nil {
		return err
	}
	p, err := c.pauser()
	if err != nil {
		return err
	}
	if err := p.ResumeInstance(ctx, instanceID); err != nil {
		return fmt.Errorf("resuming %q: %w", instanceID, err)
	}
	return nil
}

// pauseOf returns the pause of instanceID, nil when it is not paused or
// the store cannot pause.
func (c *Client) pauseOf(ctx context.Context, instanceID string) (*PauseInfo, error) {
	p, ok := c.p.(provider.Pauser)
	if !ok {
		return nil, nil
	}
	info, err := p.GetPause(ctx, instanceID)
	if err != nil {
		return nil, fmt.Errorf("pause of %q: %w", instanceID, err)
	}
	return info, nil
}

// fillPauses sets Status.Paused on the live instances of page.
func (c *Client) fillPauses(ctx context.Context, sts []Status) error {
	p, ok := c.p.(provider.Pauser)
	if !ok {
		return nil
	}
	var ids []string
	for i := range sts {
		if !sts[i].State.IsTerminal() {
			ids = append(ids, sts[i].InstanceID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	pauses, err := p.ListPauses(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading pauses: %w", err)
	}
	for i := range sts {
		if info, ok := pauses[sts[i].InstanceID]; ok {
			sts[i].Paused = &info
		}
	}
	return nil
}

// Rewind resumes a Failed or Canceled instance with the code deployed
// now, from just before the step that failed: a new execution begins with
// the failed execution's history up to the start of the turn that led to
// the end, and goes on from there. The failed activity runs again (and
// any other activity pending at that point), the results that turn had
// received are given to the new execution again, timers still pending
// keep their times, and a canceled instance resumes from before its cancel
// request. The failed execution stays in the store as it was
// (ListExecutions shows both, GetHistory reads either), so the timeline
// keeps what happened; the new execution replays the kept history as any
// execution is replayed. A failure in the first turn starts the
// orchestration over with the same input.
//
// A rewound instance holds no execution lock (StartOptions.LockKey) and
// no timeout (StartOptions.Timeout) any more. reason is recorded nowhere
// but the caller's logs for now; it is validated like Pause's.
//
// A Running instance that is stuck is rewound only with
// RewindWithOptions and RewindOptions.Force.
//
// ErrNotFound if the instance does not exist; *InstanceStateError (which
// matches ErrStateConflict) if it is not Failed or Canceled, if it
// changed meanwhile, or if its history cannot be resumed (a
// sub-orchestration was in flight at the resume point); ErrNotSupported
// if the store cannot rewind.
func (c *Client) Rewind(ctx context.Context, instanceID, reason string) error {
	return c.RewindWithOptions(ctx, instanceID, &RewindOptions{Reason: reason})
}

// RewindOptions tunes RewindWithOptions.
type RewindOptions struct {
	// Reason says why (at most MaxReasonLength bytes). A forced rewind
	// records it in the error that ends the Running execution.
	Reason string
	// Force lets a Running instance be rewound: one that is stuck, such
	// as an activity failing and retrying until a partner is fixed, or a
	// wait for something that will never come. Its current execution
	// ends Canceled (an OrchestrationFailed event of kind canceled, code
	// history.CodeRewound, carrying Reason and who asked, WithActor),
	// its queued activities and its instance timeout are dropped (a worker running one loses its
	// lock, as for a canceled activity), and a new execution goes on
	// from the start of its last turn, the one that scheduled what it
	// is stuck on, with the code deployed now: that turn's received
	// results are given again and the activities pending before it run
	// again; events raised and not yet consumed go to the new
	// execution. When that turn is the first, the orchestration starts
	// over with the same input.
	//
	// Only a Running instance whose current execution has started is
	// taken: not a Pending one, not a paused one (resume it first), not
	// one in a turn (its lock held: retry), and not one whose resume
	// point leaves a sub-orchestration in flight, and not one whose cancel
	// is pending (Client.CancelInstance, a parent's cancel, a timeout that
	// is due): requested and in its grace period, or queued and not yet
	// taken by a turn. The store checks this in the rewind's transaction,
	// so a cancel arriving meanwhile is not missed. A forced rewind resumes from
	// the start of the last turn, which may be before the cancel
	// request: taking such an instance would drop the cancel silently
	// and keep alive an instance someone asked to stop. An operator who
	// wants it to go on anyway lets the cancel end it (at the latest
	// when RuntimeOptions.CancelGracePeriod runs out) and rewinds the
	// Canceled instance, which resumes from before the cancel request: a
	// deliberate undo of the cancel. Force is the caller's
	// judgment that the instance is stuck: nothing checks that it is
	// stalled (Inspect tells). Without Force, Running is refused.
	Force bool
}

// RewindWithOptions is Rewind with options: Force also takes a stuck
// Running instance (see RewindOptions.Force). ErrNotFound if the instance
// does not exist; *InstanceStateError (ErrStateConflict) for an instance
// the options do not allow; ErrNotSupported if the store cannot rewind.
func (c *Client) RewindWithOptions(ctx context.Context, instanceID string, opts *RewindOptions) error {
	if opts == nil {
		opts = &RewindOptions{}
	}
	reason := opts.Reason
	if err := checkInstanceID(instanceID); err != nil {
		return err
	}
	if err := checkText("rewind reason", reason, MaxReasonLength); err != nil && reason != "" {
		return err
	}
	rw, ok := c.p.(provider.Rewinder)
	if !ok {
		return fmt.Errorf("rewinding instances: the store does not implement provider.Rewinder: %w", ErrNotSupported)
	}
	info, err := c.instance(ctx, instanceID)
	if err != nil {
		return err
	}
	st := stateOf(info.Status)
	switch {
	case st == StateRunning && !opts.Force:
		return &InstanceStateError{InstanceID: instanceID, State: st, Op: "rewind",
			Reason: "a Running instance is rewound only with force (RewindOptions.Force)"}
	case st != StateFailed && st != StateCanceled && st != StateRunning:
		return &InstanceStateError{InstanceID: instanceID, State: st, Op: "rewind",
			Reason: "only a Failed or Canceled instance, or a Running one with force, can be rewound"}
	}
	hist, err := c.p.ReadHistory(ctx, instanceID, info.CurrentExecutionID)
	if err != nil {
		return fmt.Errorf("rewinding %q: %w", instanceID, err)
	}
	var end *history.Event
	if st == StateRunning {
		if len(hist) == 0 {
			return &InstanceStateError{InstanceID: instanceID, State: st, Op: "rewind", Reason: "its execution has not started"}
		}
		// Whether a cancel is pending (requested, or queued and not taken
		// yet) is checked by the store in the rewind's transaction.
		msg := "rewound"
		if by := ActorFrom(ctx); by != "" {
			msg += " by " + by
		}
		if reason != "" {
			msg += ": " + reason
		}
		end = &history.Event{EventID: hist[len(hist)-1].EventID + 1, Kind: history.OrchestrationFailed,
			TimestampMs: c.now().UnixMilli(),
			Error:       &history.ErrorDetails{Kind: history.ErrorCanceled, Code: history.CodeRewound, Message: msg}}
		hist = append(slices.Clip(hist), *end)
	}
	plan, err := replay.PlanRewind(instanceID, info.CurrentExecutionID, hist)
	if err != nil {
		return &InstanceStateError{InstanceID: instanceID, State: st, Op: "rewind", Reason: err.Error()}
	}
	next := info.CurrentExecutionID + 1
	req := &provider.RewindRequest{InstanceID: instanceID, FromExecutionID: info.CurrentExecutionID, ExecutionID: next,
		History: plan.History, End: end}
	for _, m := range plan.Messages {
		om := provider.OrchestratorMessage{InstanceID: instanceID, Item: m}
		if m.FireAtMs > 0 {
			om.VisibleAt = time.UnixMilli(m.FireAtMs)
		}
		req.Messages = append(req.Messages, om)
	}
	for _, a := range plan.Activities {
		req.Activities = append(req.Activities, provider.WorkerMessage{InstanceID: instanceID, ExecutionID: next,
			ActivityID: a.ID, SessionID: a.SessionID, Item: a})
	}
	if err := rw.RewindInstance(ctx, req); err != nil {
		if errors.Is(err, provider.ErrStateConflict) {
			st := StateRunning
			if now, gerr := c.instance(ctx, instanceID); gerr == nil {
				st = stateOf(now.Status)
			}
			reason := "the instance changed while the rewind was planned"
			if end != nil {
				// The store says why: paused, in a turn, no longer Running.
				reason = err.Error()
			}
			return &InstanceStateError{InstanceID: instanceID, State: st, Op: "rewind", Reason: reason}
		}
		return fmt.Errorf("rewinding %q: %w", instanceID, err)
	}
	return nil
}

// InstanceStateError reports that an instance's state does not allow an
// operation (Rewind of an instance that is not Failed or Canceled). It
// matches ErrStateConflict.
type InstanceStateError struct {
	InstanceID string
	State      State
	Op         string
	Reason     string
}

func (e *InstanceStateError) Error() string {
	return fmt.Sprintf("cannot %s instance %s (%s): %s", e.Op, e.InstanceID, e.State, e.Reason)
}

// Unwrap returns ErrStateConflict.
func (e *InstanceStateError) Unwrap() error { return ErrStateConflict }

// pausedWaits puts the pause first in the waits of a paused instance and
// clears their stalls: nothing it waits for progresses while it is paused,
// by the operator's choice.
func pausedWaits(waits []Wait, p *PauseInfo) []Wait {
	out := make([]Wait, 0, len(waits)+1)
	out = append(out, Wait{Kind: WaitPaused, Message: p.Reason, By: p.By, Since: p.At})
	for _, w := range waits {
		if w.Kind == WaitTurn {
			continue // the messages wait for the resume, not for a runtime
		}
		w.Stalled, w.StalledReason = false, ""
		if w.Kind == WaitActivity && w.ActivityState == ActivityQueued {
			w.RetryAt = time.Time{} // held until the resume
		}
		out = append(out, w)
	}
	return out
}
