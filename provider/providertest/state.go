package providertest

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// readHistory reads an execution's history, failing the case on error.
func (e *env) readHistory(instanceID string, executionID int64) []history.Event {
	e.t.Helper()
	evs, err := e.p.ReadHistory(e.ctx, instanceID, executionID)
	if err != nil {
		e.t.Fatalf("ReadHistory(%q, %d): %v", instanceID, executionID, err)
	}
	return evs
}

// instanceState is everything observable about one instance.
type instanceState struct {
	Known      bool                      // ReadHistory(id, 0) did not return ErrNotFound
	Current    []history.Event           // ReadHistory(id, 0)
	Executions map[int64][]history.Event // ReadHistory(id, n) for every readable n
	Info       *provider.InstanceInfo    // Admin only
	ExecInfos  []provider.ExecutionInfo  // Admin only
}

// storeState is what a case compares before and after a call that must write nothing.
type storeState struct {
	Instances map[string]instanceState
	Depths    *provider.QueueDepths // Admin only
	Counts    *provider.Counts      // Admin only
}

// snapshot reads the observable state of the named instances and, with
// Admin, the store-wide queue depths and counts. It does not fetch, so it
// changes nothing.
func (e *env) snapshot(ids ...string) storeState {
	e.t.Helper()
	s := storeState{Instances: map[string]instanceState{}}
	a := e.admin()
	for _, id := range ids {
		var is instanceState
		cur, err := e.p.ReadHistory(e.ctx, id, 0)
		switch {
		case errors.Is(err, provider.ErrNotFound):
		case err != nil:
			e.t.Fatalf("ReadHistory(%q, 0): %v", id, err)
		default:
			is.Known, is.Current = true, cur
			is.Executions = map[int64][]history.Event{}
			for x := int64(1); x <= 20; x++ {
				evs, err := e.p.ReadHistory(e.ctx, id, x)
				if errors.Is(err, provider.ErrNotFound) {
					break
				}
				if err != nil {
					e.t.Fatalf("ReadHistory(%q, %d): %v", id, x, err)
				}
				is.Executions[x] = evs
			}
		}
		if a != nil {
			info, err := a.GetInstance(e.ctx, id)
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				e.t.Fatalf("GetInstance(%q): %v", id, err)
			}
			is.Info = info
			execs, err := a.ListExecutions(e.ctx, id)
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				e.t.Fatalf("ListExecutions(%q): %v", id, err)
			}
			is.ExecInfos = execs
		}
		s.Instances[id] = is
	}
	if a != nil {
		d, err := a.QueueDepths(e.ctx)
		e.noErr(err, "QueueDepths")
		c, err := a.Counts(e.ctx)
		e.noErr(err, "Counts")
		s.Depths, s.Counts = d, c
	}
	return s
}

// unchanged fails the case unless the store looks exactly as in before.
func (e *env) unchanged(before storeState) {
	e.t.Helper()
	ids := slices.Collect(maps.Keys(before.Instances))
	after := e.snapshot(ids...)
	for _, id := range ids {
		mustEqual(e.t, fmt.Sprintf("state of instance %q", id), after.Instances[id], before.Instances[id])
	}
	mustEqual(e.t, "queue depths", after.Depths, before.Depths)
	mustEqual(e.t, "store counts", after.Counts, before.Counts)
}

// absent fails the case unless instance id does not exist: ReadHistory and,
// with Admin, GetInstance return ErrNotFound.
func (e *env) absent(id string) {
	e.t.Helper()
	_, err := e.p.ReadHistory(e.ctx, id, 0)
	e.wantErr(err, provider.ErrNotFound, "ReadHistory("+id+")")
	{
		a := e.admin()
		_, err := a.GetInstance(e.ctx, id)
		e.wantErr(err, provider.ErrNotFound, "GetInstance("+id+")")
	}
}

// wantStatus fails the case unless instance id exists with status st (the
// status is checked with Admin only; without it, existence).
func (e *env) wantStatus(id string, st provider.Status) {
	e.t.Helper()
	_, err := e.p.ReadHistory(e.ctx, id, 0)
	e.noErr(err, "ReadHistory("+id+")")
	{
		a := e.admin()
		info, err := a.GetInstance(e.ctx, id)
		e.noErr(err, "GetInstance("+id+")")
		mustEqual(e.t, "status of "+id, info.Status, st)
	}
}

// depths reads the queue depths, failing on error.
func (e *env) depths() provider.QueueDepths {
	e.t.Helper()
	d, err := e.admin().QueueDepths(e.ctx)
	e.noErr(err, "QueueDepths")
	return *d
}

// counts reads the store totals, failing on error.
func (e *env) counts() provider.Counts {
	e.t.Helper()
	c, err := e.admin().Counts(e.ctx)
	e.noErr(err, "Counts")
	return *c
}

// instance reads one instance, failing on error.
func (e *env) instance(instanceID string) *provider.InstanceInfo {
	e.t.Helper()
	info, err := e.admin().GetInstance(e.ctx, instanceID)
	e.noErr(err, "GetInstance("+instanceID+")")
	return info
}

// listAll walks every page of ListInstances with opts and returns the IDs in order.
func (e *env) listAll(opts provider.ListInstancesOptions) []string {
	e.t.Helper()
	var ids []string
	for range 1000 {
		page, err := e.admin().ListInstances(e.ctx, opts)
		e.noErr(err, "ListInstances")
		for _, in := range page.Instances {
			ids = append(ids, in.InstanceID)
		}
		if page.NextCursor == "" {
			return ids
		}
		opts.Cursor = page.NextCursor
	}
	e.t.Fatal("ListInstances: more than 1000 pages")
	return nil
}

// purge purges ids.
func (e *env) purge(force bool, ids ...string) (*provider.PurgeResult, error) {
	return e.admin().PurgeInstances(e.ctx, ids, provider.PurgeOptions{Force: force})
}

// mustPurge purges ids, failing on error.
func (e *env) mustPurge(force bool, ids ...string) provider.PurgeResult {
	e.t.Helper()
	r, err := e.purge(force, ids...)
	e.noErr(err, "PurgeInstances")
	return *r
}
