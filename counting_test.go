package duroxide_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// countingStore is an in-memory SQLite store that counts the turns it
// delivers (by a fetch, or taken by an activity's ack) with the whole
// history (full) or only what the runtime's cache lacked (partial), the
// turns taken by activity acks, the turns committed with an activity's
// result (fused: run on the cached execution, loading nothing), the
// fused turns the store refused (the instance was not quiet), and the
// activities fetched from the worker queue.
type countingStore struct {
	*sqlite.Provider
	full, partial, takenTurns, fusedTurns, refusedFused, fetchedWork atomic.Int64
}

func (s *countingStore) count(it *provider.OrchestrationItem) {
	if it.HistoryAfter > 0 {
		s.partial.Add(1)
	} else if len(it.History) > 0 {
		s.full.Add(1)
	}
}

func (s *countingStore) FetchOrchestrationItems(ctx context.Context, opts provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	items, err := s.Provider.FetchOrchestrationItems(ctx, opts)
	for _, it := range items {
		s.count(it)
	}
	return items, err
}

func (s *countingStore) AckWorkItem(ctx context.Context, ack *provider.WorkAck) (provider.WorkResult, error) {
	res, err := s.Provider.AckWorkItem(ctx, ack)
	if err == nil && res.Then != nil {
		s.fusedTurns.Add(1)
	}
	if err == nil && ack.Then != nil && res.Then == nil {
		s.refusedFused.Add(1)
	}
	if err == nil && res.Turn != nil {
		s.takenTurns.Add(1)
		s.count(res.Turn)
	}
	return res, err
}

func (s *countingStore) FetchWorkItems(ctx context.Context, opts provider.WorkFetchOptions) ([]*provider.WorkItemLease, error) {
	ls, err := s.Provider.FetchWorkItems(ctx, opts)
	s.fetchedWork.Add(int64(len(ls)))
	return ls, err
}

// countingRuntime starts a runtime hosting reg on a fresh countingStore,
// stopped and closed when the test ends, and returns the store, the
// runtime and a client of it.
func countingRuntime(t *testing.T, reg *duroxide.Registry, opts *duroxide.RuntimeOptions) (*countingStore, *duroxide.Runtime, *duroxide.Client) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	if opts == nil {
		opts = &duroxide.RuntimeOptions{}
	}
	opts.Logger = quiet
	p, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Provider: p}
	rt, err := duroxide.StartRuntime(context.Background(), store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.Shutdown(context.Background())
		_ = p.Close()
	})
	return store, rt, duroxide.NewClient(store)
}
