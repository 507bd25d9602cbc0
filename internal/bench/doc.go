// Package bench runs the performance workloads of `duroxide bench` and of the
// root package's Go benchmarks, through the public API only (package
// duroxide and a provider.Provider such as provider/sqlite).
//
// Each Run opens a fresh store from Options.Store, starts a runtime on it,
// runs one workload, checks every result, and reports a Result:
//
//   - sequence: Sizes.Sequence orchestrations (default 1000) of
//     SequenceLength (5) chained activities, each returning its input + 1;
//     orchestration i starts from 10·i and must return 10·i + 5.
//   - fanout: Sizes.FanOut orchestrations (default 100) of Sizes.FanOutWidth
//     (default 100) parallel activities, summed; orchestration i calls the
//     activity with i+j for j in [0, width) and must return the exact sum.
//   - timer: Sizes.Timer orchestrations (default 1000), each sleeping one
//     durable timer of Sizes.TimerDelay (default 1s), then calling one
//     activity; the timer must not fire early and the result must be right.
//   - latency: one orchestration with one activity, started Sizes.Latency
//     times (default 200) one after another; each start waits for the
//     previous instance to finish.
//   - longhistory: one orchestration of Sizes.LongHistory sequential
//     activities (default 5000), each returning its input + 1; it must
//     return the step count.
//
// The orchestrations of a workload are started one after another from one
// goroutine while the runtime runs them, then waited for.
//
// # Measures
//
//   - WallSeconds: from the first start to the last completion (store and
//     runtime set-up excluded). OrchestrationsPerSec and ActivitiesPerSec
//     divide the counts by it.
//   - P50Ms, P99Ms (nearest-rank percentiles): for latency, start to the
//     client's WaitForOrchestration returning, timed by the client; for the
//     other workloads, an instance's UpdatedAt minus its CreatedAt, both
//     stamped by the store's clock (milliseconds) when it created the
//     instance and when it committed the turn that completed it.
//   - LatenessP50Ms, LatenessP99Ms (timer only): the TimestampMs of the
//     TimerFired event minus its FireAtMs, read from history. TimestampMs is
//     the runtime's wall clock when the turn that delivered the firing began,
//     FireAtMs when the timer was due; so lateness is how long after its due
//     time the orchestration was resumed by it, with millisecond resolution
//     (the commit of that turn comes after).
//   - StepMsFirst, StepMsLast (longhistory only): the mean wall time per step
//     over the first and the last min(500, (steps-1)/2) steps. A step's time
//     is the interval between the starts of two consecutive activities, read
//     from time.Now in the activity (the runtime's process), so it covers the
//     activity's completion, the orchestration turn over an ever longer
//     history, and the dispatch of the next activity.
//   - PeakRSSBytes: the resident set high-water mark of the process while the
//     workload ran (Linux VmHWM, reset through /proc/self/clear_refs before
//     the workload after a GC; it includes the Go runtime and whatever the
//     heap still holds). Omitted where the platform cannot tell.
//   - StoreBytes: the size of the SQLite file once the workload ended and
//     the store closed (closing folds the WAL into the file; a -wal file
//     left behind is counted too); omitted for stores without a file.
//   - BytesWrittenPerOrch: bytes the process handed to write(2)/pwrite(2)
//     while the workload ran (Linux /proc/self/io wchar: WAL appends and
//     checkpoint copies into the database file, plus a few bytes of
//     progress output), divided by the orchestrations. It counts what SQLite
//     writes, not what the disk absorbs. Omitted without /proc.
//   - CommitsPerOrch: write transactions the store committed while the
//     workload ran (sqlite.Provider.Stats), divided by the orchestrations.
//     Omitted for stores that do not count them.
//
// A wrong result makes the Result's OK false, names the first wrong
// instance in Error, and makes Run return an error matching
// ErrWrongResult.
package bench
