package duroxide

import (
	"context"
	"fmt"
)

// Activity is a typed reference to the activity Name, taking I and
// returning O. RegisterActivity returns one; NewActivityRef declares one
// for an activity registered elsewhere (another binary). Orchestrations
// call it with CallActivity, so a misspelled name or a wrong input type is
// a compile error instead of a failing instance.
type Activity[I, O any] struct{ name string }

// NewActivityRef declares the activity name, taking I and returning O,
// without its function: for orchestration code in a binary that does not
// run the activity. The types must match the registration's.
func NewActivityRef[I, O any](name string) Activity[I, O] { return Activity[I, O]{name: name} }

// Name is the activity's registered name.
func (a Activity[I, O]) Name() string { return a.name }

// Orchestration is a typed reference to the orchestration Name, taking I
// and returning O. RegisterOrchestration and RegisterOrchestrationVersion
// return one; NewOrchestrationRef declares one for an orchestration
// registered elsewhere. Use it with CallSubOrchestration, StartTyped and
// WaitTyped.
type Orchestration[I, O any] struct{ name, version string }

// NewOrchestrationRef declares the orchestration name, taking I and
// returning O, without its function. New instances started through it run
// the version the runtime picks for new instances.
func NewOrchestrationRef[I, O any](name string) Orchestration[I, O] {
	return Orchestration[I, O]{name: name}
}

// Name is the orchestration's registered name.
func (o Orchestration[I, O]) Name() string { return o.name }

// Version is the version the reference pins ("" = the default for new
// instances: the latest, or the one SetDefaultVersion names).
// RegisterOrchestration returns an unpinned reference,
// RegisterOrchestrationVersion one pinned to its version.
func (o Orchestration[I, O]) Version() string { return o.version }

// WithVersion returns the reference pinned to version ("" unpins it).
func (o Orchestration[I, O]) WithVersion(version string) Orchestration[I, O] {
	o.version = version
	return o
}

// Future is the typed result of CallActivity or CallSubOrchestration.
type Future[O any] struct{ task *Task }

// Get blocks (durably) until the call completes and returns its result.
// Failures are typed as for Task.Await: *ActivityError,
// *SubOrchestrationError, errors matching ErrCanceled or ErrTimeout.
func (f *Future[O]) Get() (O, error) {
	var out O
	err := f.task.Await(&out)
	return out, err
}

// Task returns the underlying task, to pass to OrchestrationContext.Select
// beside other tasks. Call Get on the future once Select picked it.
func (f *Future[O]) Task() *Task { return f.task }

// Done reports whether the call has completed, without blocking.
func (f *Future[O]) Done() bool { return f.task.Done() }

// Cancel gives up on the call (see Task.Cancel); Get then returns an error
// matching ErrCanceled.
func (f *Future[O]) Cancel() { f.task.Cancel() }

// CallActivity starts the activity ref with input as opts says (nil:
// defaults) and returns its typed future. It records exactly the events of
// the by-name ScheduleActivity* forms, so a change between the two forms
// replays.
func CallActivity[I, O any](ctx *OrchestrationContext, ref Activity[I, O], input I, opts *ActivityOptions) *Future[O] {
	if ref.name == "" {
		return &Future[O]{task: &Task{ctx: ctx, err: fmt.Errorf("%w: CallActivity with a zero Activity reference (use RegisterActivity or NewActivityRef)", ErrInvalidArgument)}}
	}
	return &Future[O]{task: ctx.ScheduleActivityWithOptions(ref.name, input, opts)}
}

// SubOrchestrationOptions shape one sub-orchestration call. A nil
// *SubOrchestrationOptions means the defaults.
type SubOrchestrationOptions struct {
	// Version pins the child's version (default "": the reference's
	// version, or, for an unpinned reference, the one the child's runtime
	// picks for new instances).
	Version string
}

// CallSubOrchestration starts the orchestration ref as a child of this one
// and returns its typed future. An empty instanceID gives the child a
// deterministic ID derived from the parent (see ScheduleSubOrchestration).
func CallSubOrchestration[I, O any](ctx *OrchestrationContext, ref Orchestration[I, O], instanceID string, input I, opts *SubOrchestrationOptions) *Future[O] {
	if ref.name == "" {
		return &Future[O]{task: &Task{ctx: ctx, err: fmt.Errorf("%w: CallSubOrchestration with a zero Orchestration reference (use RegisterOrchestration or NewOrchestrationRef)", ErrInvalidArgument)}}
	}
	version := ref.version
	if opts != nil && opts.Version != "" {
		version = opts.Version
	}
	return &Future[O]{task: ctx.ScheduleSubOrchestrationVersion(ref.name, version, instanceID, input)}
}

// StartTyped starts an instance of the orchestration ref with a typed
// input (see Client.StartOrchestration). A pinned reference starts its
// version unless opts.Version says otherwise.
func StartTyped[I, O any](ctx context.Context, c *Client, ref Orchestration[I, O], instanceID string, input I, opts *StartOptions) error {
	if ref.version != "" && (opts == nil || opts.Version == "") {
		o := StartOptions{}
		if opts != nil {
			o = *opts
		}
		o.Version = ref.version
		opts = &o
	}
	return c.StartOrchestration(ctx, instanceID, ref.name, input, opts)
}

// WaitTyped waits until the instance ends (see
// Client.WaitForOrchestration) and returns its typed output. A Failed or
// Canceled instance returns an *OrchestrationError (errors.Is(err,
// ErrCanceled) for a canceled one). ref names the orchestration the caller
// expects; an instance of another orchestration is an ErrInvalidArgument
// error rather than a misdecoded value.
func WaitTyped[I, O any](ctx context.Context, c *Client, ref Orchestration[I, O], instanceID string) (O, error) {
	var out O
	st, err := c.WaitForOrchestration(ctx, instanceID)
	if err != nil {
		return out, err
	}
	if st.Orchestration != ref.name {
		return out, fmt.Errorf("%w: instance %s runs orchestration %s, not %s", ErrInvalidArgument, instanceID, st.Orchestration, ref.name)
	}
	err = st.Decode(&out)
	return out, err
}

// RunTyped starts an instance of ref and waits for its output: StartTyped
// then WaitTyped.
func RunTyped[I, O any](ctx context.Context, c *Client, ref Orchestration[I, O], instanceID string, input I, opts *StartOptions) (O, error) {
	if err := StartTyped(ctx, c, ref, instanceID, input, opts); err != nil {
		var zero O
		return zero, err
	}
	return WaitTyped(ctx, c, ref, instanceID)
}
