package duroxide_test

import (
	"log/slog"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/bench"
)

// The benchmarks run the workloads of `duroxide bench` (package
// internal/bench) with b.N as their size, each on a fresh SQLite file. ns/op
// is the workload's wall time (first start to last completion, set-up
// excluded) divided by b.N; the other metrics are those of the workload.

// runWorkload runs a workload and fails the benchmark on any error or
// wrong result.
func runWorkload(b *testing.B, workload string, opts *bench.Options) *bench.Result {
	b.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	res, err := bench.Run(b.Context(), workload, opts)
	if err != nil {
		b.Fatalf("%s: %v", workload, err)
	}
	b.ReportMetric(float64(res.Wall.Nanoseconds())/float64(b.N), "ns/op")
	if res.CommitsPerOrch != nil {
		b.ReportMetric(*res.CommitsPerOrch, "commits/orch")
	}
	return res
}

// BenchmarkLatency starts an orchestration of one activity and waits for
// it, b.N times one after another: start-to-completion latency.
func BenchmarkLatency(b *testing.B) {
	res := runWorkload(b, bench.Latency, &bench.Options{Sizes: bench.Sizes{Latency: b.N}})
	b.ReportMetric(res.P50Ms, "p50-ms")
	b.ReportMetric(res.P99Ms, "p99-ms")
}

// BenchmarkSequence runs b.N orchestrations of 5 chained activities
// concurrently, with the orchestration cache and without (every turn
// replays its history).
func BenchmarkSequence(b *testing.B) {
	for _, mode := range []struct {
		name  string
		cache int
	}{{"cache", 0}, {"nocache", -1}} {
		b.Run(mode.name, func(b *testing.B) {
			res := runWorkload(b, bench.Sequence, &bench.Options{
				Sizes:   bench.Sizes{Sequence: b.N},
				Runtime: &duroxide.RuntimeOptions{CacheSize: mode.cache},
			})
			b.ReportMetric(res.OrchestrationsPerSec, "orch/s")
			b.ReportMetric(res.ActivitiesPerSec, "activities/s")
		})
	}
}

// BenchmarkFanOut runs b.N orchestrations of 100 parallel activities each.
func BenchmarkFanOut(b *testing.B) {
	res := runWorkload(b, bench.FanOut, &bench.Options{Sizes: bench.Sizes{FanOut: b.N}})
	b.ReportMetric(res.ActivitiesPerSec, "activities/s")
}

// BenchmarkTimer runs b.N orchestrations that each sleep a 1s durable
// timer: how late the timers fire.
func BenchmarkTimer(b *testing.B) {
	res := runWorkload(b, bench.Timer, &bench.Options{Sizes: bench.Sizes{Timer: b.N}})
	b.ReportMetric(*res.LatenessP50Ms, "late-p50-ms")
	b.ReportMetric(*res.LatenessP99Ms, "late-p99-ms")
}

// BenchmarkLongHistory runs one orchestration of b.N (at least 2)
// sequential activities: ms per step at the start and at the end, as the
// history grows.
func BenchmarkLongHistory(b *testing.B) {
	res := runWorkload(b, bench.LongHistory, &bench.Options{Sizes: bench.Sizes{LongHistory: max(b.N, 2)}})
	b.ReportMetric(*res.StepMsFirst, "step-ms-first")
	b.ReportMetric(*res.StepMsLast, "step-ms-last")
}
