package duroxide

import (
	"fmt"

	"github.com/duroxide/duroxide-go/history"
)

// DetachedStartOptions tunes a detached start (see
// OrchestrationContext.StartOrchestration).
type DetachedStartOptions struct {
	// Version pins the started orchestration's version (default "": the
	// reference's version, or, for an unpinned one or a start by name, the
	// one the new instance's runtime picks for new instances).
	Version string
}

// StartOrchestration starts the orchestration name as an independent
// instance (fire-and-forget): the start is recorded in this instance's
// history and happens once, atomically with the turn that recorded it, so
// replays and restarts never start it twice. The new instance has no
// parent: it is not canceled with this one, and this one never waits for
// it to finish.
//
// An empty instanceID derives a deterministic ID from this instance (as
// for sub-orchestrations). The returned task completes when the start is
// committed; if the ID is already taken nothing is started and the task
// fails with a *DetachedStartError matching ErrInstanceExists.
// Awaiting the task is optional.
func (c *OrchestrationContext) StartOrchestration(name, instanceID string, input any, opts *DetachedStartOptions) *Task {
	version := ""
	if opts != nil {
		version = opts.Version
	}
	raw, err := c.encode("detached start of "+name, input)
	if err != nil {
		return &Task{ctx: c, err: err}
	}
	return &Task{ctx: c, t: c.c.StartOrchestration(name, version, instanceID, raw)}
}

// StartDetached is the typed form of OrchestrationContext.StartOrchestration:
// it starts the orchestration ref as an independent instance with a typed
// input. A pinned reference starts its version unless opts.Version says
// otherwise.
func StartDetached[I, O any](ctx *OrchestrationContext, ref Orchestration[I, O], instanceID string, input I, opts *DetachedStartOptions) *Task {
	if ref.name == "" {
		return &Task{ctx: ctx, err: fmt.Errorf("%w: StartDetached with a zero Orchestration reference (use RegisterOrchestration or NewOrchestrationRef)", ErrInvalidArgument)}
	}
	o := DetachedStartOptions{Version: ref.version}
	if opts != nil && opts.Version != "" {
		o.Version = opts.Version
	}
	return ctx.StartOrchestration(ref.name, instanceID, input, &o)
}

// DetachedStartError is the failure of a detached start's task: nothing
// was started. It matches ErrInstanceExists when the instance ID was
// already taken.
type DetachedStartError struct {
	// Name is the orchestration the start asked for; InstanceID the ID.
	Name       string
	InstanceID string
	Kind       string
	Message    string
	Code       string
}

func (e *DetachedStartError) Error() string {
	return fmt.Sprintf("detached start of %s as %q: %s", e.Name, e.InstanceID, e.Message)
}

// Is makes errors.Is(err, ErrInstanceExists) true for a taken ID.
func (e *DetachedStartError) Is(target error) bool {
	return target == ErrInstanceExists && e.Code == string(history.CodeInstanceExists)
}
