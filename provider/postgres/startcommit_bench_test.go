package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// BenchmarkConcurrentStarts measures starts that commit one by one (they
// join no group commit) from several goroutines: plain starts, starts
// taking an execution lock, and starts carrying an idempotency key, each
// with its own key. Besides the rate it reports the store database's
// commits per start (pg_stat_database) and the server's WAL flushes per
// start (pg_stat_wal, the whole server's: run it on an otherwise idle
// server). Commits from different connections can share a WAL flush; one
// flush per start means they did not.
func BenchmarkConcurrentStarts(b *testing.B) {
	for _, kind := range []string{"plain", "lock", "idem"} {
		for _, g := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", kind, g), func(b *testing.B) {
				p := openFresh(b, &Options{MaxConns: int32(g) + 2})
				ctx := b.Context()
				stats := func() (commits, syncs float64) {
					if err := p.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&commits); err != nil {
						b.Fatal(err)
					}
					if err := p.pool.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&syncs); err != nil {
						b.Fatal(err)
					}
					return commits, syncs
				}
				var seq sync.Mutex
				next := 0
				take := func() (int, bool) {
					seq.Lock()
					defer seq.Unlock()
					if next == b.N {
						return 0, false
					}
					next++
					return next, true
				}
				c0, s0 := stats()
				b.ResetTimer()
				var wg sync.WaitGroup
				for range g {
					wg.Go(func() {
						for {
							i, ok := take()
							if !ok {
								return
							}
							id := fmt.Sprintf("s%d", i)
							m := providertest.HammerStart(id)
							switch kind {
							case "lock":
								m.Create.Lock = &provider.LockRequest{Key: id, TTL: time.Hour}
							case "idem":
								m.Create.IdempotencyKey, m.Create.IdempotencyTTL = id, time.Hour
							}
							if _, err := p.Enqueue(ctx, m); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				c1, s1 := stats()
				n := float64(b.N)
				b.ReportMetric(n/b.Elapsed().Seconds(), "starts/s")
				b.ReportMetric((c1-c0-2)/n, "commits/start") // less stats' own two
				b.ReportMetric((s1-s0)/n, "walsyncs/start")
			})
		}
	}
}
