package providertest

import "github.com/duroxide/duroxide-go/provider"

// fetchOpts are the options most cases fetch with.
func fetchOpts() provider.FetchOptions {
	return provider.FetchOptions{LockTimeout: lockTimeout}
}

// workOpts are the options most worker cases fetch with (no session).
func workOpts() provider.WorkFetchOptions {
	return provider.WorkFetchOptions{LockTimeout: lockTimeout}
}

// sessionOpts are worker fetch options for session owner owner.
func sessionOpts(owner string) provider.WorkFetchOptions {
	return provider.WorkFetchOptions{
		LockTimeout: lockTimeout,
		Session:     &provider.SessionOptions{OwnerID: owner, LockTimeout: sessionLease},
	}
}

// withMax returns opts with Max set to n.
func withMax(opts provider.WorkFetchOptions, n int) provider.WorkFetchOptions {
	opts.Max = n
	return opts
}

// fetch fetches one orchestration item and fails the case if there is none.
func (e *env) fetch() *provider.OrchestrationItem {
	e.t.Helper()
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
	if err != nil {
		e.t.Fatalf("FetchOrchestrationItem: %v", err)
	}
	if it == nil {
		e.t.Fatal("FetchOrchestrationItem returned nothing, want an item")
	}
	return it
}

// fetchFor fetches one item and fails unless it is for instanceID.
func (e *env) fetchFor(instanceID string) *provider.OrchestrationItem {
	e.t.Helper()
	it := e.fetch()
	if it.InstanceID != instanceID {
		e.t.Fatalf("fetched instance %q, want %q", it.InstanceID, instanceID)
	}
	return it
}

// fetchNone asserts that no orchestration item is fetchable.
func (e *env) fetchNone() {
	e.t.Helper()
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
	if err != nil {
		e.t.Fatalf("FetchOrchestrationItem: %v", err)
	}
	if it != nil {
		e.t.Fatalf("FetchOrchestrationItem returned instance %q with %d messages, want nothing", it.InstanceID, len(it.Messages))
	}
}

// fetchMax fetches up to max items in one call.
func (e *env) fetchMax(max int) []*provider.OrchestrationItem {
	e.t.Helper()
	items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: max})
	e.noErr(err, "FetchOrchestrationItems")
	return items
}

// fetchMaxRetry fetches up to max items, retrying retryable errors.
func (e *env) fetchMaxRetry(max int) ([]*provider.OrchestrationItem, error) {
	var items []*provider.OrchestrationItem
	err := retryErr(func() error {
		var err error
		items, err = e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: max})
		return err
	})
	return items, err
}

// fetchEach fetches one item at a time until none is left and returns them by instance.
func (e *env) fetchEach() map[string]*provider.OrchestrationItem {
	e.t.Helper()
	got := map[string]*provider.OrchestrationItem{}
	for {
		it, err := provider.FetchOrchestrationItem(e.ctx, e.p, fetchOpts())
		e.noErr(err, "FetchOrchestrationItem")
		if it == nil {
			return got
		}
		if got[it.InstanceID] != nil {
			e.t.Fatalf("instance %q fetched twice while locked", it.InstanceID)
		}
		got[it.InstanceID] = it
	}
}

// fetchWork fetches one worker item without session and fails if there is none.
func (e *env) fetchWork() *provider.WorkItemLease {
	e.t.Helper()
	return e.fetchWorkWith(workOpts())
}

// fetchWorkWith fetches one worker item and fails if there is none.
func (e *env) fetchWorkWith(opts provider.WorkFetchOptions) *provider.WorkItemLease {
	e.t.Helper()
	w, err := provider.FetchWorkItem(e.ctx, e.p, opts)
	if err != nil {
		e.t.Fatalf("FetchWorkItem: %v", err)
	}
	if w == nil {
		e.t.Fatal("FetchWorkItem returned nothing, want an item")
	}
	return w
}

// fetchWorkN fetches up to max worker items with opts, failing on error.
func (e *env) fetchWorkN(opts provider.WorkFetchOptions, max int) []*provider.WorkItemLease {
	e.t.Helper()
	ls, err := e.p.FetchWorkItems(e.ctx, withMax(opts, max))
	e.noErr(err, "FetchWorkItems")
	return ls
}

// fetchWorkNone asserts that no worker item is fetchable with opts.
func (e *env) fetchWorkNone(opts provider.WorkFetchOptions) {
	e.t.Helper()
	w, err := provider.FetchWorkItem(e.ctx, e.p, opts)
	if err != nil {
		e.t.Fatalf("FetchWorkItem: %v", err)
	}
	if w != nil {
		e.t.Fatalf("FetchWorkItem returned activity %d of %q, want nothing", w.ActivityID, w.InstanceID)
	}
}
