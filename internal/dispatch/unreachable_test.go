package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// downStore fails every fetch with ErrUnavailable while down is set.
type downStore struct {
	*sqlite.Provider
	down atomic.Bool
}

var errDown = fmt.Errorf("connecting: %w", provider.ErrUnavailable)

func (s *downStore) FetchOrchestrationItems(ctx context.Context, o provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Provider.FetchOrchestrationItems(ctx, o)
}

func (s *downStore) FetchWorkItems(ctx context.Context, o provider.WorkFetchOptions) ([]*provider.WorkItemLease, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Provider.FetchWorkItems(ctx, o)
}

// lineLog keeps the level and message of each record at Info and above.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (h *lineLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *lineLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.lines = append(h.lines, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}
func (h *lineLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineLog) WithGroup(string) slog.Handler      { return h }

func (h *lineLog) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// waitLog waits until the log has n lines starting with prefix.
func waitLog(t *testing.T, h *lineLog, prefix string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for h.count(prefix) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q", prefix)
		}
		<-tick.C
	}
}

// TestStoreUnreachableLoggedOnce: the runtime logs one line when the store
// becomes unreachable, however many fetches fail, and one when it is back.
func TestStoreUnreachableLoggedOnce(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := &downStore{Provider: db}
	store.down.Store(true)
	logs := &lineLog{}
	r, err := Start(store, activityRegistry{}, Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	waitLog(t, logs, "ERROR store unreachable", 1)
	// Both fetch loops fail, and keep retrying.
	waitLog(t, logs, "WARN fetch failed", 4)
	store.down.Store(false)
	waitLog(t, logs, "WARN store reachable again", 1)
	if n, m := logs.count("ERROR store unreachable"), logs.count("WARN store reachable again"); n != 1 || m != 1 {
		t.Fatalf("%d lines saying the store is unreachable and %d saying it is back, want 1 and 1", n, m)
	}
}
