package duroxide

import (
	"context"
	"errors"
	"fmt"
)

// ReplayCheckOptions selects the instances ReplayCheck replays.
type ReplayCheckOptions struct {
	// Orchestrations are the names whose instances are checked (empty: all
	// orchestrations).
	Orchestrations []string
	// Last checks at most the newest Last instances of each name (0: all).
	Last int
	// LiveOnly checks only live instances (Pending and Running): the ones a
	// deploy would resume with the new code.
	LiveOnly bool
	// MaxDivergences bounds how many divergences the report keeps (default
	// 100); the rest are counted in ReplayCheckReport.Diverged only.
	MaxDivergences int
	// Progress, when set, is called after each instance is checked with
	// the running totals, so a long check can show where it is.
	Progress func(ReplayCheckReport)
}

// ReplayCheckReport is the outcome of ReplayCheck.
type ReplayCheckReport struct {
	// Checked counts the histories replayed; Passed those the code
	// reproduced; Diverged those it did not (or could not run: see
	// Divergence.Err). Skipped counts instances with no history yet (a
	// start not taken by any runtime).
	Checked  int `json:"checked"`
	Passed   int `json:"passed"`
	Diverged int `json:"diverged"`
	Skipped  int `json:"skipped"`
	// Divergences describes the first MaxDivergences histories that
	// diverged, in the order they were checked.
	Divergences []Divergence `json:"divergences,omitempty"`
}

// OK reports whether every history checked replays.
func (r *ReplayCheckReport) OK() bool { return r.Diverged == 0 }

// Divergence is one history the registry's code does not reproduce.
type Divergence struct {
	InstanceID    string `json:"instanceId"`
	Orchestration string `json:"orchestration"`
	Version       string `json:"version,omitempty"`
	ExecutionID   int64  `json:"executionId"`
	State         State  `json:"status"`
	// EventID, Expected and Got describe the first differing event, from
	// the *NondeterminismError: what the history records at EventID and
	// what the code did instead. Empty when the history could not be
	// replayed at all (Message says why: the orchestration or version is
	// not registered, or the history is malformed).
	EventID  int64  `json:"eventId,omitempty"`
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
	// Message is the whole error, one line.
	Message string `json:"message"`
	// Err is the error: a *NondeterminismError, or one matching
	// ErrInvalidArgument.
	Err error `json:"-"`
}

// DefaultMaxDivergences is ReplayCheckOptions.MaxDivergences when zero.
const DefaultMaxDivergences = 100

// ReplayCheck replays the stored histories of instances of opts's
// orchestrations against the code registered in reg, as ReplayHistory
// does, and reports every history the code no longer reproduces. Run it
// from the build about to be deployed, against the production store,
// before deploying: an instance it reports would park (or fail) on the new
// code. Instances are taken newest first; for each, the current execution
// is replayed (earlier executions of a ContinueAsNew chain are done). No
// activity runs and nothing is written to the store.
//
// It returns an error only when the store cannot be read or the options
// are invalid; divergences are in the report (see ReplayCheckReport.OK).
func ReplayCheck(ctx context.Context, c *Client, reg *Registry, opts ReplayCheckOptions) (*ReplayCheckReport, error) {
	if c == nil || reg == nil {
		return nil, fmt.Errorf("%w: ReplayCheck needs a client and a registry", ErrInvalidArgument)
	}
	if err := reg.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if opts.Last < 0 || opts.MaxDivergences < 0 {
		return nil, fmt.Errorf("%w: Last and MaxDivergences must not be negative", ErrInvalidArgument)
	}
	if opts.MaxDivergences == 0 {
		opts.MaxDivergences = DefaultMaxDivergences
	}
	names := opts.Orchestrations
	if len(names) == 0 {
		names = []string{""}
	}
	for _, n := range names {
		if len(names) > 1 && n == "" {
			return nil, fmt.Errorf("%w: empty orchestration name", ErrInvalidArgument)
		}
	}
	rep := &ReplayCheckReport{}
	for _, name := range names {
		if err := replayCheckName(ctx, c, reg, name, opts, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// replayCheckName checks the instances of one orchestration name ("" for
// all), adding to rep.
func replayCheckName(ctx context.Context, c *Client, reg *Registry, name string, opts ReplayCheckOptions, rep *ReplayCheckReport) error {
	lo := &ListOptions{Orchestration: name, Limit: 100}
	if opts.LiveOnly {
		lo.States = []State{StatePending, StateRunning}
	}
	seen := 0
	for {
		page, err := c.ListInstances(ctx, lo)
		if err != nil {
			return err
		}
		for i := range page.Instances {
			if opts.Last > 0 && seen >= opts.Last {
				return nil
			}
			seen++
			if err := replayCheckOne(ctx, c, reg, &page.Instances[i], opts, rep); err != nil {
				return err
			}
			if opts.Progress != nil {
				opts.Progress(*rep)
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		lo.Cursor = page.NextCursor
	}
}

// replayCheckOne replays the current execution of one instance.
func replayCheckOne(ctx context.Context, c *Client, reg *Registry, st *Status, opts ReplayCheckOptions, rep *ReplayCheckReport) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st.ExecutionID == 0 {
		rep.Skipped++
		return nil
	}
	evs, err := c.GetHistory(ctx, st.InstanceID, st.ExecutionID)
	switch {
	case errors.Is(err, ErrNotFound):
		rep.Skipped++ // purged meanwhile
		return nil
	case err != nil:
		return fmt.Errorf("replay check of %q: %w", st.InstanceID, err)
	case len(evs) == 0:
		rep.Skipped++
		return nil
	}
	rep.Checked++
	err = replayHistory(reg, st.InstanceID, st.ExecutionID, evs)
	if err == nil {
		rep.Passed++
		return nil
	}
	rep.Diverged++
	if len(rep.Divergences) >= opts.MaxDivergences {
		return nil
	}
	d := Divergence{InstanceID: st.InstanceID, Orchestration: st.Orchestration, Version: st.Version,
		ExecutionID: st.ExecutionID, State: st.State, Message: err.Error(), Err: err}
	if evs[0].Version != "" {
		d.Version = evs[0].Version
	}
	var nd *NondeterminismError
	if errors.As(err, &nd) {
		d.EventID, d.Expected, d.Got = nd.EventID, nd.Expected, nd.Got
	}
	rep.Divergences = append(rep.Divergences, d)
	return nil
}
