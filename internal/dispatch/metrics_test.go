package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	last := len(DurationBounds)
	for _, tc := range []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0},
		{time.Nanosecond, 0},
		{500 * time.Microsecond, 0}, // bounds are inclusive, as Prometheus's le
		{500*time.Microsecond + 1, 1},
		{time.Millisecond, 1},
		{3 * time.Millisecond, 3},
		{time.Second, 10},
		{10 * time.Second, last - 1},
		{10*time.Second + 1, last},
		{time.Hour, last},
	} {
		var h histogram
		h.observe(tc.d)
		s := h.snapshot()
		for i, n := range s.Buckets {
			if want := uint64(0); i == tc.bucket {
				want = 1
				if n != want {
					t.Errorf("%v: bucket %d has %d, want 1", tc.d, i, n)
				}
			} else if n != want {
				t.Errorf("%v: bucket %d has %d, want 0 (expected bucket %d)", tc.d, i, n, tc.bucket)
			}
		}
		if s.Sum != tc.d || s.Count() != 1 {
			t.Errorf("%v: sum %v count %d", tc.d, s.Sum, s.Count())
		}
	}
	for i := 1; i < len(DurationBounds); i++ {
		if DurationBounds[i] <= DurationBounds[i-1] {
			t.Fatalf("bounds not ascending at %d: %v", i, DurationBounds)
		}
	}
}

func TestHistogramConcurrent(t *testing.T) {
	t.Parallel()
	var h histogram
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				h.observe(time.Duration(g*each+i) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	s := h.snapshot()
	if s.Count() != goroutines*each {
		t.Fatalf("count %d, want %d", s.Count(), goroutines*each)
	}
	n := goroutines * each
	if want := time.Duration(n*(n-1)/2) * time.Millisecond; s.Sum != want {
		t.Fatalf("sum %v, want %v", s.Sum, want)
	}
}

// TestObserveAllocFree is not parallel: AllocsPerRun refuses parallel tests.
func TestObserveAllocFree(t *testing.T) {
	var m metrics
	if a := testing.AllocsPerRun(100, func() {
		m.observeTurn(TurnCommitted, 3*time.Millisecond)
		m.observeActivity(ActivityFailed, time.Millisecond)
	}); a != 0 {
		t.Fatalf("observing allocates %v times", a)
	}
}

// metricsRegistry has one orchestration, "twoSteps": it runs "echo"
// (completes) then "boom" (fails), and returns echo's output.
type metricsRegistry struct{}

func (metricsRegistry) Orchestration(name, _ string) (replay.Func, string, bool) {
	if name != "twoSteps" {
		return nil, "", false
	}
	return func(c *replay.Context, in json.RawMessage) (json.RawMessage, error) {
		echo := c.ScheduleActivity("echo", in, "")
		c.Await(echo)
		out, _ := echo.Result()
		boom := c.ScheduleActivity("boom", nil, "")
		c.Await(boom)
		if _, fail := boom.Result(); fail == nil {
			return nil, errors.New("boom did not fail")
		}
		return out, nil
	}, "1.0.0", true
}

func (metricsRegistry) Activity(name string) (ActivityFunc, bool) {
	switch name {
	case "echo":
		return func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }, true
	case "boom":
		return func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, errors.New("boom") }, true
	}
	return nil, false
}

func TestRuntimeMetricsCount(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "metrics.db"), &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r, err := Start(store, metricsRegistry{}, Options{Logger: quiet, CacheSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = r.Shutdown(context.Background())
		}
	})

	const n = 5
	for i := range n {
		id := fmt.Sprint("metrics-", i)
		_, err := store.Enqueue(ctx, &provider.OrchestratorMessage{
			InstanceID: id,
			Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1,
				Name: "twoSteps", Input: json.RawMessage(`"hi"`)},
			Create: &provider.NewInstance{OrchestrationName: "twoSteps", Input: json.RawMessage(`"hi"`)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprint("metrics-", i)
		changed, stop := store.WatchInstance(id)
		for {
			info, err := store.GetInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.Status.IsTerminal() {
				if info.Status != provider.StatusCompleted {
					t.Fatalf("%s ended %s: %+v", id, info.Status, info.Error)
				}
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("%s did not finish: %v", id, ctx.Err())
			}
		}
		stop()
	}
	// Shutdown waits for the turns in flight: their results are counted
	// after their instance has changed.
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true

	m := r.Metrics()
	// Three turns each: the start, then one per activity completion.
	if got := m.Turns; got != [numTurnResults]uint64{TurnCommitted: 3 * n} {
		t.Errorf("turns by result %v, want %d committed", got, 3*n)
	}
	if got := m.TurnDuration.Count(); got != 3*n {
		t.Errorf("turn duration count %d, want %d", got, 3*n)
	}
	for o, want := range [numActivityOutcomes]uint64{ActivityCompleted: n, ActivityFailed: n} {
		if got := m.ActivityDuration[o].Count(); got != want {
			t.Errorf("activities of outcome %d: %d, want %d", o, got, want)
		}
	}
	if m.TurnDuration.Sum <= 0 {
		t.Errorf("turn duration sum %v", m.TurnDuration.Sum)
	}
}

// BenchmarkObserve is the hot-path cost of recording a turn.
func BenchmarkObserve(b *testing.B) {
	var m metrics
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d += 37 * time.Microsecond
			m.observeTurn(TurnCommitted, d%(20*time.Millisecond))
		}
	})
}
