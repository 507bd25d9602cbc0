package duroxide

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/internal/dispatch"
)

// RuntimeMetrics is what a Runtime has done since it started, as returned
// by Runtime.Metrics: plain numbers, to be exposed through whatever
// monitoring system the program uses (httpapi serves them on GET /metrics
// in the Prometheus format). Counters only grow while the runtime lives.
//
// Durations are measured on the real clock, even when RuntimeOptions.Clock
// is a fake one: they tell how long the work took.
type RuntimeMetrics struct {
	// TurnDuration is the duration of orchestration turns, whatever their
	// result: from the start of the store fetch that took the instance to
	// the end of the commit (or abandon) of the turn's results. It spans
	// the replay of the orchestration code and two store round trips.
	TurnDuration Histogram
	// Turns counts orchestration turns by result.
	Turns TurnCounts
	// Activities is the run time of activity functions by outcome; each
	// histogram's Count counts the activities that ended so. Activities
	// that never ran (unregistered, or poisoned by too many deliveries)
	// are not counted.
	Activities ActivityDurations
	// Finished counts the instances this runtime ended, by terminal state
	// and orchestration, sorted by orchestration then state; a failure rate
	// is Failed over all. Each is counted by the runtime whose turn ended
	// it, so with several runtimes on one store, add their counts up. The
	// names told apart are bounded (the first 200 seen); later ones are
	// counted under the name "(other)".
	Finished []FinishedCount
	// Retention counts the retention passes of this runtime
	// (RuntimeOptions.Retention).
	Retention RetentionMetrics
}

// FinishedCount is how many instances of an orchestration ended in a
// terminal state (Completed, Failed or Canceled; not ContinuedAsNew).
type FinishedCount struct {
	Orchestration string
	State         State
	Count         uint64
}

// TurnCounts counts orchestration turns by result.
type TurnCounts struct {
	// Committed turns stored their history and sent their messages.
	Committed uint64
	// Abandoned turns gave their messages back to the queue to be retried
	// later: the orchestration is not registered here, its code is
	// nondeterministic (parked), its history cannot be read, or the
	// messages arrived ahead of a delayed start.
	Abandoned uint64
	// LockLost turns found, when committing, that their instance lock had
	// expired and been taken by another runtime, which redoes the turn.
	LockLost uint64
	// CommitFailed turns could not be committed (a store error); they are
	// retried.
	CommitFailed uint64
}

// ActivityDurations are the run times of activity functions, one
// histogram per outcome.
type ActivityDurations struct {
	// Completed activities returned a result.
	Completed Histogram
	// Failed activities returned an error or panicked.
	Failed Histogram
	// Canceled activities were canceled by the runtime: their orchestration
	// no longer needed them, their lock was lost, or Shutdown's deadline
	// passed. Their result, if any, was dropped.
	Canceled Histogram
}

// Histogram is a distribution of durations in cumulative buckets, the
// shape of a Prometheus histogram. Bounds is the same for every histogram
// of a runtime: 0.5ms to 10s in a 1-2-5 series.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending. The last bucket,
	// with no upper bound (+Inf), is not listed: its count is Count.
	Bounds []time.Duration
	// Counts[i] is the number of observations at most Bounds[i]
	// (cumulative, so non-decreasing); len(Counts) == len(Bounds).
	Counts []uint64
	// Count is the number of observations.
	Count uint64
	// Sum is their total duration.
	Sum time.Duration
}

// Metrics returns a snapshot of the runtime's metrics. It is cheap (no
// store access) and safe to call concurrently, also after Shutdown. Each
// number is read atomically, the snapshot as a whole is not: a turn ending
// meanwhile may be counted in TurnDuration and not yet in Turns.
func (r *Runtime) Metrics() RuntimeMetrics {
	s := r.d.Metrics()
	return RuntimeMetrics{
		TurnDuration: histogramOf(&s.TurnDuration),
		Turns: TurnCounts{
			Committed:    s.Turns[dispatch.TurnCommitted],
			Abandoned:    s.Turns[dispatch.TurnAbandoned],
			LockLost:     s.Turns[dispatch.TurnLockLost],
			CommitFailed: s.Turns[dispatch.TurnCommitFailed],
		},
		Activities: ActivityDurations{
			Completed: histogramOf(&s.ActivityDuration[dispatch.ActivityCompleted]),
			Failed:    histogramOf(&s.ActivityDuration[dispatch.ActivityFailed]),
			Canceled:  histogramOf(&s.ActivityDuration[dispatch.ActivityCanceled]),
		},
		Finished:  finishedOf(s.Finished),
		Retention: r.m.metrics(),
	}
}

// finishedOf lists the dispatcher's finished counts in order.
func finishedOf(m map[dispatch.FinishedKey]uint64) []FinishedCount {
	out := make([]FinishedCount, 0, len(m))
	for k, n := range m {
		out = append(out, FinishedCount{Orchestration: k.Orchestration, State: stateOf(k.Status), Count: n})
	}
	slices.SortFunc(out, func(a, b FinishedCount) int {
		return cmp.Or(cmp.Compare(a.Orchestration, b.Orchestration), cmp.Compare(a.State, b.State))
	})
	return out
}

// histogramOf cumulates a dispatcher histogram's buckets.
func histogramOf(s *dispatch.HistogramSnapshot) Histogram {
	h := Histogram{
		Bounds: slices.Clone(dispatch.DurationBounds[:]), // a copy: callers may modify it
		Counts: make([]uint64, len(dispatch.DurationBounds)),
		Sum:    s.Sum,
	}
	for i := range h.Counts {
		h.Count += s.Buckets[i]
		h.Counts[i] = h.Count
	}
	h.Count += s.Buckets[len(dispatch.DurationBounds)]
	return h
}

// modulePath is this module's path, to find its version in a binary's
// build information.
const modulePath = "github.com/duroxide/duroxide-go"

// BuildInfo says which duroxide a binary runs, from the build information
// the Go toolchain embeds (runtime/debug.ReadBuildInfo).
type BuildInfo struct {
	// Version is the module version of duroxide in the binary: a release
	// tag or pseudo-version ("v0.0.0-20261124...-abcdef123456"), or
	// "(devel)" for a binary built in a duroxide checkout without version
	// control information; "unknown" when the binary has no build
	// information.
	Version string
	// Revision is the version control revision the binary was built from
	// (vcs.revision), with "-dirty" when the checkout had local changes;
	// "" when the build did not record it (a dependency's build, or
	// -buildvcs=false).
	Revision string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// ReadBuildInfo returns the build information of the running binary.
func ReadBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{Version: "unknown", GoVersion: runtime.Version()}
	}
	return buildInfoOf(bi)
}

// buildInfoOf reads a binary's build information.
func buildInfoOf(bi *debug.BuildInfo) BuildInfo {
	out := BuildInfo{Version: "unknown", GoVersion: bi.GoVersion}
	if bi.Main.Path == modulePath {
		out.Version = cmp.Or(bi.Main.Version, "(devel)")
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && out.Revision != "" {
			out.Revision += "-dirty"
		}
		return out
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			if d.Replace != nil {
				d = d.Replace
			}
			out.Version = cmp.Or(d.Version, "(devel)") // no version: replaced by a directory
		}
	}
	return out
}
