package dispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// DurationBounds are the upper bounds (inclusive) of the buckets of every
// duration histogram, ascending; a last, unbounded bucket follows them.
// They run from 0.5ms to 10s in a 1-2-5 series, so the latency targets
// of the design (2ms, 5ms, 20ms) are bucket bounds and need no
// interpolation.
var DurationBounds = [...]time.Duration{
	500 * time.Microsecond,
	1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second,
}

// histogram counts durations in the DurationBounds buckets. Observing is
// two atomic adds and no allocation. Counts are kept per bucket (not
// cumulated), so a snapshot's count is exactly the sum of its buckets; the
// sum is read separately and may be off by observations in flight.
type histogram struct {
	buckets [len(DurationBounds) + 1]atomic.Uint64
	sumNs   atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(DurationBounds) && d > DurationBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

// HistogramSnapshot is a histogram's state at one moment.
type HistogramSnapshot struct {
	// Buckets[i] counts the observations in bucket i alone (not
	// cumulative): above DurationBounds[i-1] and at most DurationBounds[i];
	// the last bucket is unbounded.
	Buckets [len(DurationBounds) + 1]uint64
	// Sum is the total of the observations.
	Sum time.Duration
}

// Count is the number of observations.
func (s *HistogramSnapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Buckets {
		n += c
	}
	return n
}

func (h *histogram) snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
	}
	s.Sum = time.Duration(h.sumNs.Load())
	return s
}

// TurnResult is how a turn ended.
type TurnResult int

const (
	// TurnCommitted: the turn's results were committed.
	TurnCommitted TurnResult = iota
	// TurnAbandoned: the turn gave its messages back to the queue for a
	// later retry (unregistered orchestration, parked nondeterminism,
	// unreadable history, messages ahead of a delayed start).
	TurnAbandoned
	// TurnLockLost: the commit found the instance lock taken away; another
	// node redoes the turn.
	TurnLockLost
	// TurnCommitFailed: the commit failed; the turn is retried.
	TurnCommitFailed
	numTurnResults
)

// ActivityOutcome is how an activity function's run ended.
type ActivityOutcome int

const (
	// ActivityCompleted: it returned a result.
	ActivityCompleted ActivityOutcome = iota
	// ActivityFailed: it returned an error or panicked.
	ActivityFailed
	// ActivityCanceled: the runtime canceled it (its orchestration no
	// longer needed it, its lock was lost, or Shutdown's deadline passed)
	// and its result was dropped.
	ActivityCanceled
	numActivityOutcomes
)

// metrics are a runtime's counters since it started.
type metrics struct {
	turn       histogram
	turns      [numTurnResults]atomic.Uint64
	activities [numActivityOutcomes]histogram

	mu            sync.Mutex
	finished      map[FinishedKey]uint64 // guarded by mu
	finishedNames map[string]bool        // the names in finished; guarded by mu
}

// FinishedKey identifies a count of finished instances: the terminal status
// a turn committed (Completed, Failed or Canceled) and the orchestration's
// name, or OtherOrchestrations past MaxFinishedOrchestrations names.
type FinishedKey struct {
	Status        provider.Status
	Orchestration string
}

// MaxFinishedOrchestrations bounds the orchestration names the finished
// counts tell apart, so that a program with many names cannot grow the
// counts (and the series of a metrics exporter) without limit; the names
// past it are counted together as OtherOrchestrations.
const MaxFinishedOrchestrations = 200

// OtherOrchestrations is the name the finished counts use for the names
// past MaxFinishedOrchestrations.
const OtherOrchestrations = "(other)"

// observeFinished counts a committed turn that ended its instance with
// status (ContinuedAsNew and Running are not counted: the instance lives
// on).
func (m *metrics) observeFinished(status provider.Status, orchestration string) {
	switch status {
	case provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled:
	default:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finished == nil {
		m.finished = map[FinishedKey]uint64{}
		m.finishedNames = map[string]bool{}
	}
	if !m.finishedNames[orchestration] {
		if len(m.finishedNames) >= MaxFinishedOrchestrations {
			orchestration = OtherOrchestrations
		} else {
			m.finishedNames[orchestration] = true
		}
	}
	m.finished[FinishedKey{Status: status, Orchestration: orchestration}]++
}

// observeTurn records a turn that took d, from the start of the fetch
// that took its instance to the end of its commit or abandon.
func (m *metrics) observeTurn(res TurnResult, d time.Duration) {
	m.turn.observe(d)
	m.turns[res].Add(1)
}

// observeActivity records an activity function that ran for d.
func (m *metrics) observeActivity(o ActivityOutcome, d time.Duration) {
	m.activities[o].observe(d)
}

// MetricsSnapshot is what a runtime has done since it started.
type MetricsSnapshot struct {
	// TurnDuration is the duration of every turn, whatever its result.
	TurnDuration HistogramSnapshot
	// Turns counts turns by result.
	Turns [numTurnResults]uint64
	// ActivityDuration is the run time of activity functions, by outcome;
	// their counts count the activities.
	ActivityDuration [numActivityOutcomes]HistogramSnapshot
	// Finished counts the instances whose turn in this runtime ended them,
	// by terminal status and orchestration.
	Finished map[FinishedKey]uint64
}

// Metrics returns a snapshot of the runtime's metrics. Each value is read
// atomically, the snapshot as a whole is not: a turn ending meanwhile may
// be in the histogram and not yet in the result counts.
func (r *Runtime) Metrics() MetricsSnapshot {
	var s MetricsSnapshot
	s.TurnDuration = r.metrics.turn.snapshot()
	for i := range r.metrics.turns {
		s.Turns[i] = r.metrics.turns[i].Load()
	}
	for i := range r.metrics.activities {
		s.ActivityDuration[i] = r.metrics.activities[i].snapshot()
	}
	r.metrics.mu.Lock()
	s.Finished = make(map[FinishedKey]uint64, len(r.metrics.finished))
	for k, n := range r.metrics.finished {
		s.Finished[k] = n
	}
	r.metrics.mu.Unlock()
	return s
}
