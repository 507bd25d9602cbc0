package provider

import "context"

// FetchOrchestrationItem locks one instance. It returns nil, nil when no
// instance is eligible.
func FetchOrchestrationItem(ctx context.Context, p Provider, opts FetchOptions) (*OrchestrationItem, error) {
	opts.Max = 1
	items, err := p.FetchOrchestrationItems(ctx, opts)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}

// FetchWorkItem locks one worker-queue row. It returns nil, nil when none is eligible.
func FetchWorkItem(ctx context.Context, p Provider, opts WorkFetchOptions) (*WorkItemLease, error) {
	opts.Max = 1
	items, err := p.FetchWorkItems(ctx, opts)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}
