package duroxide

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/duroxide/duroxide-go/provider"
)

// waitKinds are the kinds ListOptions.WaitKind accepts.
var waitKinds = []WaitKind{WaitActivity, WaitTimer, WaitEvent, WaitChild, WaitLock, WaitDelayedStart,
	WaitUnregisteredOrchestration, WaitUnregisteredActivity, WaitParked, WaitPaused, WaitTurn}

// WaitKinds returns every WaitKind, the values ListOptions.WaitKind
// accepts.
func WaitKinds() []WaitKind { return slices.Clone(waitKinds) }

// storeOptions is the part of o the store answers.
func (o *ListOptions) storeOptions() (provider.ListInstancesOptions, error) {
	po := provider.ListInstancesOptions{Orchestration: o.Orchestration, ParentInstanceID: o.ParentInstanceID,
		IDPrefix: o.IDPrefix, Version: o.Version, CreatedAfter: o.CreatedAfter, CreatedBefore: o.CreatedBefore,
		FinishedAfter: o.FinishedAfter, FinishedBefore: o.FinishedBefore, Limit: o.Limit, Cursor: o.Cursor}
	if o.Limit < 0 || o.StalledAfter < 0 {
		return po, fmt.Errorf("%w: Limit and StalledAfter must not be negative", ErrInvalidArgument)
	}
	if o.WaitKind != "" && !slices.Contains(waitKinds, o.WaitKind) {
		return po, fmt.Errorf("%w: unknown wait kind %q", ErrInvalidArgument, o.WaitKind)
	}
	if len(o.ErrorKind) > MaxNameLength {
		return po, fmt.Errorf("%w: error kind over %d bytes", ErrInvalidArgument, MaxNameLength)
	}
	for _, s := range o.States {
		switch s {
		case StatePending, StateCompleted, StateFailed, StateCanceled:
			po.Statuses = append(po.Statuses, provider.Status(s))
		case StateRunning:
			po.Statuses = append(po.Statuses, provider.StatusRunning, provider.StatusContinuedAsNew)
		default:
			return po, fmt.Errorf("%w: unknown state %q", ErrInvalidArgument, s)
		}
	}
	if o.WaitKind != "" || o.Stalled {
		// Only live instances wait.
		live := []provider.Status{provider.StatusPending, provider.StatusRunning, provider.StatusContinuedAsNew}
		if len(po.Statuses) == 0 {
			po.Statuses = live
		} else {
			var keep []provider.Status
			for _, s := range po.Statuses {
				if !s.IsTerminal() {
					keep = append(keep, s)
				}
			}
			po.Statuses = keep
		}
	}
	return po, nil
}

// noMatch reports that the store filters of o can match nothing (they
// ask for waits of finished instances only).
func (o *ListOptions) noMatch(po provider.ListInstancesOptions) bool {
	return (o.WaitKind != "" || o.Stalled) && len(po.Statuses) == 0
}

// matchPage applies the filters the store does not answer (ErrorKind,
// WaitKind and, outside ListInstances' one-page listing, Stalled) to st,
// a status read from a store page. It returns the status to report (with
// WaitingFor filled when it inspected the instance) and whether it
// matches. An instance purged meanwhile does not match.
func (c *Client) matchPage(ctx context.Context, o *ListOptions, st *Status) (*Status, bool, error) {
	if o.ErrorKind != "" && !errorKindIs(st, o.ErrorKind) {
		return st, false, nil
	}
	if o.WaitKind == "" && !o.Stalled {
		return st, true, nil
	}
	if st.State.IsTerminal() {
		return st, false, nil
	}
	in, err := c.Inspect(ctx, st.InstanceID, &WaitOptions{StalledAfter: o.StalledAfter})
	if errors.Is(err, ErrNotFound) {
		return st, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if o.Stalled && !in.Stalled {
		return in, false, nil
	}
	if o.WaitKind != "" && !waitsFor(in, o.WaitKind) {
		return in, false, nil
	}
	return in, true, nil
}

func errorKindIs(st *Status, kind string) bool {
	return st.Error != nil && strings.EqualFold(st.Error.Kind, kind) ||
		st.LastError != nil && strings.EqualFold(st.LastError.Kind, kind)
}

func waitsFor(st *Status, kind WaitKind) bool {
	for _, w := range st.WaitingFor {
		if w.Kind == kind {
			return true
		}
	}
	return false
}

// matchStalled applies the filters of o other than Stalled to st, an
// inspected stalled instance (the one-page stalled listing).
func (o *ListOptions) matchStalled(st *Status) bool {
	keep := len(o.States) == 0
	for _, s := range o.States {
		keep = keep || s == st.State
	}
	switch {
	case !keep,
		o.Orchestration != "" && st.Orchestration != o.Orchestration,
		o.ParentInstanceID != "" && st.ParentInstanceID != o.ParentInstanceID,
		o.Version != "" && st.Version != o.Version,
		o.IDPrefix != "" && !strings.HasPrefix(st.InstanceID, o.IDPrefix),
		!o.CreatedAfter.IsZero() && st.CreatedAt.Before(o.CreatedAfter),
		!o.CreatedBefore.IsZero() && !st.CreatedAt.Before(o.CreatedBefore),
		!o.FinishedAfter.IsZero() || !o.FinishedBefore.IsZero(), // live instances have not finished
		o.ErrorKind != "" && !errorKindIs(st, o.ErrorKind),
		o.WaitKind != "" && !waitsFor(st, o.WaitKind):
		return false
	}
	return true
}
