package duroxide

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

// RetentionOptions makes a runtime delete what the store no longer needs
// (RuntimeOptions.Retention): every Interval it runs one retention pass
// (Client.Prune) of the whole store. Runtimes sharing a store take turns
// through a lease in the store (provider.Leaser, the lease
// "duroxide/retention"), so one pass runs at a time.
//
// Idempotency keys keep their own retention: purging an instance keeps
// the keys that started it until each key's StartOptions.IdempotencyRetention
// ends (a repeated start is still refused, reporting when the instance was
// purged), and the runtime's lock cleanup (LockCleanupInterval) deletes
// them then.
type RetentionOptions struct {
	// FinishedOlderThan purges the instances (with their
	// sub-orchestrations and history) that finished more than this long
	// ago (0: none).
	FinishedOlderThan time.Duration
	// KeepExecutions, when positive, deletes all but the last
	// KeepExecutions executions of each ContinueAsNew chain (0: keep all).
	KeepExecutions int
	// BatchSize bounds the instances one store transaction deletes
	// (0 = DefaultRetentionBatch).
	BatchSize int
	// Interval is the time between passes (0 = 1h). The first pass runs
	// when the runtime starts.
	Interval time.Duration
}

// DefaultRetentionInterval is the default RetentionOptions.Interval.
const DefaultRetentionInterval = time.Hour

// RetentionLease is the name of the lease a retention pass holds.
const RetentionLease = "duroxide/retention"

// DefaultBulkJobInterval is the default RuntimeOptions.BulkJobInterval.
const DefaultBulkJobInterval = 10 * time.Second

// RetentionMetrics counts the retention passes of a runtime
// (RuntimeMetrics.Retention).
type RetentionMetrics struct {
	// Passes counts the passes this runtime ran; Skipped the ones it left
	// to another runtime holding the lease; Failures the passes that
	// stopped on an error.
	Passes, Skipped, Failures uint64
	// InstancesPurged, ExecutionsPruned and EventsDeleted count what the
	// passes deleted (EventsDeleted: history events of purged instances
	// and of pruned executions).
	InstancesPurged, ExecutionsPruned, EventsDeleted uint64
}

// maintainer runs a runtime's store maintenance: retention passes and
// bulk jobs. Its goroutines end in stop.
type maintainer struct {
	c         *Client
	clock     clockwork.Clock
	log       *slog.Logger
	owner     string
	retention *RetentionOptions
	bulkEvery time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// kick wakes the bulk job loop (Runtime.WakeBulkJobs).
	kick chan struct{}

	passes, skipped, failures, purged, pruned, events atomic.Uint64
}

func (o *RuntimeOptions) checkMaintenance() error {
	if r := o.Retention; r != nil {
		if r.FinishedOlderThan < 0 || r.KeepExecutions < 0 || r.BatchSize < 0 || r.Interval < 0 {
			return fmt.Errorf("%w: Retention options must not be negative", ErrInvalidArgument)
		}
		if r.FinishedOlderThan == 0 && r.KeepExecutions == 0 {
			return fmt.Errorf("%w: Retention needs FinishedOlderThan or KeepExecutions", ErrInvalidArgument)
		}
	}
	return nil
}

// startMaintainer starts the maintenance loops opts asks for (none when
// neither retention nor bulk jobs apply to the store).
func startMaintainer(store provider.Provider, opts *RuntimeOptions) *maintainer {
	m := &maintainer{c: NewClient(store), clock: opts.Clock, log: opts.Logger, retention: opts.Retention,
		owner: cmp.Or(opts.WorkerID, fmt.Sprintf("%s-%d-%s", hostname(), os.Getpid(), uuid.NewString()[:8]))}
	if m.clock == nil {
		m.clock = clockwork.NewRealClock()
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if _, ok := store.(provider.BulkJobStore); ok && opts.BulkJobInterval >= 0 {
		m.bulkEvery = cmp.Or(opts.BulkJobInterval, DefaultBulkJobInterval)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.kick = make(chan struct{}, 1)
	if m.retention != nil {
		m.wg.Add(1)
		go m.every(cmp.Or(m.retention.Interval, DefaultRetentionInterval), m.retentionPass, nil)
	}
	if m.bulkEvery > 0 {
		m.wg.Add(1)
		go m.every(m.bulkEvery, m.runBulkJobs, m.kick)
	}
	return m
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "host"
	}
	return h
}

// stop ends the loops and waits for them.
func (m *maintainer) stop() {
	m.cancel()
	m.wg.Wait()
}

// every runs fn now and then every d (or when kicked) until stop.
func (m *maintainer) every(d time.Duration, fn func(), kick <-chan struct{}) {
	defer m.wg.Done()
	for {
		fn()
		t := m.clock.NewTimer(d)
		select {
		case <-m.ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-kick:
			t.Stop()
		}
	}
}

// WakeBulkJobs makes the runtime look for bulk jobs to run now instead of
// at its next BulkJobInterval (the HTTP API calls it after creating one).
// It does nothing when the runtime runs no bulk jobs.
func (r *Runtime) WakeBulkJobs() {
	select {
	case r.m.kick <- struct{}{}:
	default:
	}
}

// retentionPass runs one retention pass if this runtime gets the lease.
func (m *maintainer) retentionPass() {
	r := m.retention
	every := cmp.Or(r.Interval, DefaultRetentionInterval)
	if l, ok := m.c.p.(provider.Leaser); ok {
		got, err := l.AcquireLease(m.ctx, RetentionLease, m.owner, every+time.Minute)
		if err != nil {
			m.failures.Add(1)
			m.log.Warn("retention: taking the lease failed", logkey.Error, err)
			return
		}
		if !got {
			m.skipped.Add(1)
			return
		}
	}
	rep, err := m.c.Prune(m.ctx, &PruneOptions{OlderThan: r.FinishedOlderThan, KeepExecutions: r.KeepExecutions,
		BatchSize: r.BatchSize, Now: m.clock.Now()})
	m.passes.Add(1)
	if rep != nil {
		m.purged.Add(uint64(rep.Instances))
		m.pruned.Add(uint64(rep.Executions))
		m.events.Add(uint64(rep.Events + rep.ExecutionEvents))
	}
	if err != nil {
		if m.ctx.Err() == nil {
			m.failures.Add(1)
			m.log.Warn("retention pass failed", logkey.Error, err)
		}
		return
	}
	if rep.Instances > 0 || rep.Executions > 0 {
		m.log.Info("retention pass", logkey.Instances, rep.Instances, logkey.Executions, rep.Executions, logkey.Skipped, rep.Skipped)
	}
}

// runBulkJobs runs the store's unfinished bulk jobs that no other runner
// holds, one after the other.
func (m *maintainer) runBulkJobs() {
	jobs, err := m.c.ListBulkJobs(m.ctx, true)
	if err != nil {
		if m.ctx.Err() == nil {
			m.log.Warn("listing bulk jobs failed", logkey.Error, err)
		}
		return
	}
	for _, j := range jobs {
		if m.ctx.Err() != nil {
			return
		}
		_, err := m.c.RunBulkJob(m.ctx, j.ID, &RunBulkJobOptions{Owner: m.owner})
		if err != nil && !errors.Is(err, ErrBulkJobBusy) && m.ctx.Err() == nil {
			m.log.Warn("bulk job stopped", logkey.Job, j.ID, logkey.Error, err)
		}
	}
}

func (m *maintainer) metrics() RetentionMetrics {
	if m == nil {
		return RetentionMetrics{}
	}
	return RetentionMetrics{Passes: m.passes.Load(), Skipped: m.skipped.Load(), Failures: m.failures.Load(),
		InstancesPurged: m.purged.Load(), ExecutionsPruned: m.pruned.Load(), EventsDeleted: m.events.Load()}
}
