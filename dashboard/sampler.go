package dashboard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

// sample is one reading of the store: queue depths and instance counts.
type sample struct {
	At     time.Time
	Depths provider.QueueDepths
	// ByStatus counts instances per state as of CountedAt, which is At or,
	// when the counts were not read again for this sample, earlier.
	ByStatus  map[provider.Status]int64
	CountedAt time.Time
}

// countsCostFactor spaces the reads of provider.Admin.Counts, which
// counts whole tables: the next one comes at least this many times its
// duration after the last, so it takes at most about 2% of the time of one
// reader, whatever the store's size. Queue depths are read every sample.
const countsCostFactor = 50

// count returns the number of instances in state st (Running includes
// instances between two executions of a ContinueAsNew).
func (s *sample) count(st duroxide.State) int64 {
	if st == duroxide.StateRunning {
		return s.ByStatus[provider.StatusRunning] + s.ByStatus[provider.StatusContinuedAsNew]
	}
	return s.ByStatus[provider.Status(st)]
}

// finished counts the instances that have ended.
func (s *sample) finished() int64 {
	return s.ByStatus[provider.StatusCompleted] + s.ByStatus[provider.StatusFailed] + s.ByStatus[provider.StatusCanceled]
}

// sampler reads the store every interval and keeps the last samples in a
// ring buffer.
type sampler struct {
	store    provider.Provider
	clock    clockwork.Clock
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	ring []sample
	next int // where the next sample goes
	n    int // samples held

	// counts and countedAt are the last counts read, and countsEvery the
	// time until the next read (only the sampling goroutine uses them).
	counts      map[provider.Status]int64
	countedAt   time.Time
	countsEvery time.Duration

	cancel context.CancelFunc
	done   chan struct{}
	// sampled, when set (tests), receives a value after each sample.
	sampled chan struct{}
}

// startSampler takes a first sample at once, then one every interval, until
// stop.
func startSampler(store provider.Provider, clock clockwork.Clock, interval time.Duration, keep int, log *slog.Logger) *sampler {
	return startSamplerNotify(store, clock, interval, keep, log, nil)
}

func startSamplerNotify(store provider.Provider, clock clockwork.Clock, interval time.Duration, keep int, log *slog.Logger, sampled chan struct{}) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{store: store, clock: clock, interval: interval, log: log, ring: make([]sample, keep),
		cancel: cancel, done: make(chan struct{}), sampled: sampled}
	go s.run(ctx)
	return s
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	t := s.clock.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.take(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// take reads the store once and records the sample; a failed read is
// logged and skipped.
func (s *sampler) take(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, max(s.interval, 10*time.Second))
	defer cancel()
	depths, err := s.store.QueueDepths(rctx)
	if err == nil && (s.counts == nil || s.clock.Since(s.countedAt) >= s.countsEvery) {
		began := s.clock.Now()
		var counts *provider.Counts
		if counts, err = s.store.Counts(rctx); err == nil {
			s.counts, s.countedAt = counts.ByStatus, s.clock.Now()
			s.countsEvery = countsCostFactor * s.countedAt.Sub(began)
		}
	}
	if err == nil {
		s.add(sample{At: s.clock.Now(), Depths: *depths, ByStatus: s.counts, CountedAt: s.countedAt})
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("dashboard health sample failed", logkey.Error, err)
	}
	if s.sampled != nil {
		select {
		case s.sampled <- struct{}{}:
		case <-ctx.Done():
		}
	}
}

func (s *sampler) add(x sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = x
	s.next = (s.next + 1) % len(s.ring)
	s.n = min(s.n+1, len(s.ring))
}

// samples returns the samples held, oldest first.
func (s *sampler) samples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sample, 0, s.n)
	for i := range s.n {
		out = append(out, s.ring[(s.next-s.n+i+len(s.ring))%len(s.ring)])
	}
	return out
}

// latest returns the newest sample.
func (s *sampler) latest() (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return sample{}, false
	}
	return s.ring[(s.next-1+len(s.ring))%len(s.ring)], true
}

// stop ends the sampling goroutine and waits for it.
func (s *sampler) stop() {
	s.cancel()
	<-s.done
}
