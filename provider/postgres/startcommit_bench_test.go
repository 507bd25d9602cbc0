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
// with its own key, and reports the rate. It reports no commit or WAL
// flush counts: the server's cumulative statistics (pg_stat_database,
// pg_stat_wal) take up to a second to include other connections' commits,
// so counts read right after a run are short.
func BenchmarkConcurrentStarts(b *testing.B) {
	for _, kind := range []string{"plain", "lock", "idem"} {
		for _, g := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", kind, g), func(b *testing.B) {
				p := openFresh(b, &Options{MaxConns: int32(g) + 2})
				ctx := b.Context()
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
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "starts/s")
			})
		}
	}
}
