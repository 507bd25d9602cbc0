package duroxide_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// benchEnv is a runtime hosting the demo orchestrations on a file store.
func benchEnv(b *testing.B, cacheSize int) *duroxide.Client {
	b.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &sqlite.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{CacheSize: cacheSize, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rt.Shutdown(ctx)
		_ = store.Close()
	})
	return duroxide.NewClient(store)
}

func wait(b *testing.B, c *duroxide.Client, id string) {
	st, err := c.WaitForOrchestration(context.Background(), id)
	if err != nil || st.State != duroxide.StateCompleted {
		b.Fatalf("%s: %+v %v", id, st, err)
	}
}

// BenchmarkLatency starts demo.Hello (one activity) and waits for it, one
// at a time: start-to-complete latency, reported as p50/p99.
func BenchmarkLatency(b *testing.B) {
	c := benchEnv(b, 0)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprint("lat-", i)
		t0 := time.Now()
		if err := c.StartOrchestration(ctx, id, demo.Hello, "x", nil); err != nil {
			b.Fatal(err)
		}
		wait(b, c, id)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkSequence runs b.N demo.Sequence instances (5 chained
// activities each) concurrently: orchestrations/s and activities/s.
func BenchmarkSequence(b *testing.B) {
	for _, mode := range []struct {
		name  string
		cache int
	}{{"cache", 0}, {"nocache", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			c := benchEnv(b, mode.cache)
			ctx := context.Background()
			b.ResetTimer()
			t0 := time.Now()
			for i := 0; i < b.N; i++ {
				if err := c.StartOrchestration(ctx, fmt.Sprint("seq-", i), demo.Sequence, i, nil); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < b.N; i++ {
				wait(b, c, fmt.Sprint("seq-", i))
			}
			s := time.Since(t0).Seconds()
			b.ReportMetric(float64(b.N)/s, "orch/s")
			b.ReportMetric(float64(5*b.N)/s, "activities/s")
		})
	}
}

// BenchmarkFanOut runs b.N demo.FanOut instances of 100 parallel
// activities each: activities/s.
func BenchmarkFanOut(b *testing.B) {
	c := benchEnv(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if err := c.StartOrchestration(ctx, fmt.Sprint("fan-", i), demo.FanOut, 100, nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		wait(b, c, fmt.Sprint("fan-", i))
	}
	b.ReportMetric(float64(100*b.N)/time.Since(t0).Seconds(), "activities/s")
}
