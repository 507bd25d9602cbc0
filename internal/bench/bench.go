package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Workload names.
const (
	Sequence    = "sequence"
	FanOut      = "fanout"
	Timer       = "timer"
	Latency     = "latency"
	LongHistory = "longhistory"
)

// Workloads lists the workloads in the order `duroxide bench --workload all`
// runs them.
var Workloads = []string{Sequence, FanOut, Timer, Latency, LongHistory}

// SequenceLength is the number of chained activities of a sequence
// orchestration.
const SequenceLength = 5

// Errors.
var (
	// ErrWrongResult: an orchestration did not complete with the expected
	// result (or a timer fired early). The workload's Result has OK false.
	ErrWrongResult = errors.New("bench: wrong result")
	// ErrUnknownWorkload: Run was given a name not in Workloads.
	ErrUnknownWorkload = errors.New("bench: unknown workload")
	// ErrInvalidOptions: a size is out of range.
	ErrInvalidOptions = errors.New("bench: invalid options")
)

// Sizes scales the workloads. A zero field means its default.
type Sizes struct {
	// Sequence is the number of sequence orchestrations (default 1000).
	Sequence int
	// FanOut is the number of fanout orchestrations (default 100), each of
	// FanOutWidth parallel activities (default 100).
	FanOut, FanOutWidth int
	// Timer is the number of timer orchestrations (default 1000), each
	// sleeping TimerDelay (default 1s).
	Timer      int
	TimerDelay time.Duration
	// Latency is the number of one-after-another starts (default 200).
	Latency int
	// LongHistory is the number of steps of the longhistory orchestration
	// (default 5000, at least 2).
	LongHistory int
}

// Default sizes.
const (
	DefaultSequence    = 1000
	DefaultFanOut      = 100
	DefaultFanOutWidth = 100
	DefaultTimer       = 1000
	DefaultTimerDelay  = time.Second
	DefaultLatency     = 200
	DefaultLongHistory = 5000
)

// DefaultProgressInterval is how often Options.Progress is called by
// default.
const DefaultProgressInterval = 200 * time.Millisecond

func (s Sizes) withDefaults() (Sizes, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Sequence, DefaultSequence)
	def(&s.FanOut, DefaultFanOut)
	def(&s.FanOutWidth, DefaultFanOutWidth)
	def(&s.Timer, DefaultTimer)
	def(&s.Latency, DefaultLatency)
	def(&s.LongHistory, DefaultLongHistory)
	if s.TimerDelay == 0 {
		s.TimerDelay = DefaultTimerDelay
	}
	switch {
	case s.Sequence < 0, s.FanOut < 0, s.FanOutWidth < 0, s.Timer < 0, s.Latency < 0, s.LongHistory < 0, s.TimerDelay < 0:
		return s, fmt.Errorf("%w: sizes must not be negative: %+v", ErrInvalidOptions, s)
	case s.LongHistory < 2:
		return s, fmt.Errorf("%w: longhistory needs at least 2 steps, got %d", ErrInvalidOptions, s.LongHistory)
	}
	return s, nil
}

// Progress is a snapshot of a running workload, passed to
// Options.Progress.
type Progress struct {
	Workload string
	// Done counts the activity calls so far, capped at Total, the number
	// of activities the workload runs.
	Done, Total int
	// Elapsed is the time since the workload's first start.
	Elapsed time.Duration
}

// Options configures Run. A nil *Options means defaults.
type Options struct {
	// Store opens the fresh store of a workload (default: TempSQLite with
	// Synchronous and Logger).
	Store StoreFactory
	// Synchronous is the SQLite synchronous mode of the default store:
	// "NORMAL" (default) or "FULL" (see sqlite.Options.Synchronous).
	Synchronous string
	// Sizes scales the workloads.
	Sizes Sizes
	// Runtime configures the runtime (default: the runtime's defaults, with
	// Logger). Its Clock must be nil: the workloads measure real time.
	Runtime *duroxide.RuntimeOptions
	// Progress, if set, is called every ProgressInterval (default 200ms)
	// while a workload runs, and once when it ends, from a goroutine of its
	// own (one call at a time).
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Logger receives the store's and the runtime's logs (default: their
	// defaults, warnings and errors on standard error).
	Logger *slog.Logger

	// Fault, if set, replaces the n+1 of every activity: tests use it to
	// check that wrong results are caught.
	Fault func(n int) int
}

// Result is the outcome of one workload. The JSON names are those of
// `duroxide bench --json`; optional measures are omitted when the workload
// or the platform does not provide them (see the package documentation).
type Result struct {
	Workload             string   `json:"workload"`
	Orchestrations       int      `json:"orchestrations"`
	Activities           int      `json:"activities"`
	OrchestrationsPerSec float64  `json:"orchestrationsPerSec"`
	ActivitiesPerSec     float64  `json:"activitiesPerSec"`
	P50Ms                float64  `json:"p50Ms"`
	P99Ms                float64  `json:"p99Ms"`
	LatenessP50Ms        *float64 `json:"latenessP50Ms,omitempty"`
	LatenessP99Ms        *float64 `json:"latenessP99Ms,omitempty"`
	StepMsFirst          *float64 `json:"stepMsFirst,omitempty"`
	StepMsLast           *float64 `json:"stepMsLast,omitempty"`
	PeakRSSBytes         int64    `json:"peakRssBytes,omitempty"`
	StoreBytes           int64    `json:"storeBytes,omitempty"`
	BytesWrittenPerOrch  *float64 `json:"bytesWrittenPerOrch,omitempty"`
	CommitsPerOrch       *float64 `json:"commitsPerOrch,omitempty"`
	WallSeconds          float64  `json:"wallSeconds"`
	// Wall is WallSeconds unrounded.
	Wall time.Duration `json:"-"`
	OK   bool          `json:"ok"`
	// Error says why OK is false.
	Error string `json:"error,omitempty"`
}

// Run runs one workload on a fresh store and returns its result. A wrong
// result returns the Result (OK false) and an error matching
// ErrWrongResult; a failure to set up or to run returns the Result (OK
// false, Error set) and that error.
func Run(ctx context.Context, workload string, opts *Options) (*Result, error) {
	if opts == nil {
		opts = &Options{}
	}
	if !slices.Contains(Workloads, workload) {
		return nil, fmt.Errorf("%w %q (workloads: %v)", ErrUnknownWorkload, workload, Workloads)
	}
	sizes, err := opts.Sizes.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Runtime != nil && opts.Runtime.Clock != nil {
		return nil, fmt.Errorf("%w: the runtime must use the real clock", ErrInvalidOptions)
	}
	r := &run{opts: opts, sizes: sizes, res: &Result{Workload: workload}}
	err = r.run(ctx)
	if err != nil {
		r.res.OK = false
		if r.res.Error == "" {
			r.res.Error = err.Error()
		}
	}
	return r.res, err
}

// run is one Run in progress.
type run struct {
	opts   *Options
	sizes  Sizes
	res    *Result
	client *duroxide.Client

	activities atomic.Int64 // activity calls, for progress
	total      int          // activities the workload runs
	start, end time.Time    // first start, last completion
	started    atomic.Bool

	steps *stepClock // longhistory
	wrong wrongResults
}

func (r *run) run(ctx context.Context) error {
	factory := r.opts.Store
	if factory == nil {
		factory = TempSQLite(&sqlite.Options{Synchronous: r.opts.Synchronous, Logger: r.opts.Logger})
	}
	freeMemory()
	rssReset := resetPeakRSS()
	wrote0, wroteOK := writtenBytes()

	store, err := factory(ctx, r.res.Workload)
	if err != nil {
		return fmt.Errorf("opening the store of %s: %w", r.res.Workload, err)
	}
	commits := store.Commits
	if counter, ok := store.Provider.(interface{ Stats() sqlite.Stats }); ok && commits == nil {
		commits = func() int64 { return counter.Stats().Commits }
	}
	var commits0 int64
	if commits != nil {
		commits0 = commits()
	}

	werr := r.host(ctx, store)

	// The wall time ends at the last completion (r.end); nothing is
	// reported without one. The store closes after the runtime stopped; closing folds the WAL
	// into the file, so the size is taken then, and the writes of that
	// last checkpoint are counted.
	cerr := store.Close()
	res := r.res
	res.StoreBytes = store.size()
	if store.Cleanup != nil {
		_ = store.Cleanup()
	}
	if rssReset {
		res.PeakRSSBytes = peakRSS()
	}
	if orchs := float64(res.Orchestrations); orchs > 0 {
		if wrote1, ok := writtenBytes(); ok && wroteOK && !store.Remote {
			res.BytesWrittenPerOrch = ptr(round(float64(wrote1-wrote0) / orchs))
		}
		if commits != nil {
			res.CommitsPerOrch = ptr(round(float64(commits()-commits0) / orchs))
		}
	}
	if !r.start.IsZero() && !r.end.IsZero() {
		res.Wall = r.end.Sub(r.start)
		wall := res.Wall.Seconds()
		res.WallSeconds = round(wall)
		if wall > 0 {
			res.OrchestrationsPerSec = round(float64(res.Orchestrations) / wall)
			res.ActivitiesPerSec = round(float64(res.Activities) / wall)
		}
	}
	switch {
	case werr != nil:
		return werr
	case cerr != nil:
		return fmt.Errorf("closing the store: %w", cerr)
	}
	if err := r.wrong.err(res.Orchestrations); err != nil {
		res.Error = err.Error()
		return err
	}
	res.OK = true
	return nil
}

// host runs the workload on a runtime over store, and stops the runtime.
func (r *run) host(ctx context.Context, store *Store) error {
	if r.res.Workload == LongHistory {
		r.steps = newStepClock(r.sizes.LongHistory)
	}
	reg := duroxide.NewRegistry()
	r.register(reg)
	ro := duroxide.RuntimeOptions{}
	if r.opts.Runtime != nil {
		ro = *r.opts.Runtime
	}
	if ro.Logger == nil {
		ro.Logger = r.opts.Logger
	}
	rt, err := duroxide.StartRuntime(ctx, store.Provider, reg, &ro)
	if err != nil {
		return fmt.Errorf("starting the runtime: %w", err)
	}
	defer func() { _ = rt.Shutdown(context.WithoutCancel(ctx)) }()
	r.client = duroxide.NewClient(store.Provider)

	stopProgress := r.reportProgress()
	defer stopProgress()
	switch r.res.Workload {
	case Sequence:
		return r.sequence(ctx)
	case FanOut:
		return r.fanOut(ctx)
	case Timer:
		return r.timer(ctx)
	case Latency:
		return r.latency(ctx)
	default:
		return r.longHistory(ctx)
	}
}

// begin marks the start of the measured part of the workload.
func (r *run) begin(orchestrations, activities int) {
	r.res.Orchestrations, r.res.Activities = orchestrations, activities
	r.total = activities
	r.start = time.Now()
	r.started.Store(true)
}

// reportProgress calls Options.Progress every interval until the returned
// function is called, which reports once more and returns when no call
// runs.
func (r *run) reportProgress() (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.ProgressInterval
	if every <= 0 {
		every = DefaultProgressInterval
	}
	quit, done := make(chan struct{}), make(chan struct{})
	report := func() {
		if !r.started.Load() {
			return
		}
		d := min(int(r.activities.Load()), r.total)
		r.opts.Progress(Progress{Workload: r.res.Workload, Done: d, Total: r.total, Elapsed: time.Since(r.start)})
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				report()
				return
			case <-t.C:
				report()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// instance IDs.
func id(workload string, i int) string { return fmt.Sprintf("%s-%d", workload, i) }

// startAll starts n instances of orch with input(i).
func (r *run) startAll(ctx context.Context, n int, orch string, input func(i int) int) error {
	for i := range n {
		if err := r.client.StartOrchestration(ctx, id(r.res.Workload, i), orch, input(i), nil); err != nil {
			return err
		}
	}
	return nil
}

// waitAll waits for the n instances and checks that instance i returned
// want(i); it collects their store-clock latencies into P50Ms and P99Ms.
func (r *run) waitAll(ctx context.Context, n int, want func(i int) int) error {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		st, err := r.wait(ctx, id(r.res.Workload, i), want(i))
		if err != nil {
			return err
		}
		lat = append(lat, st.UpdatedAt.Sub(st.CreatedAt))
	}
	r.end = time.Now()
	r.res.P50Ms, r.res.P99Ms = percentileMs(lat, 50), percentileMs(lat, 99)
	return nil
}

// wait waits for one instance and checks its output.
func (r *run) wait(ctx context.Context, instanceID string, want int) (*duroxide.Status, error) {
	st, err := r.client.WaitForOrchestration(ctx, instanceID)
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", instanceID, err)
	}
	var got int
	if err := st.Decode(&got); err != nil {
		r.wrong.add(fmt.Sprintf("%s ended %s: %v", instanceID, st.State, err))
	} else if got != want {
		r.wrong.add(fmt.Sprintf("%s returned %d, want %d", instanceID, got, want))
	}
	return st, nil
}

func (r *run) sequence(ctx context.Context) error {
	n := r.sizes.Sequence
	r.begin(n, n*SequenceLength)
	if err := r.startAll(ctx, n, orchSequence, func(i int) int { return 10 * i }); err != nil {
		return err
	}
	return r.waitAll(ctx, n, func(i int) int { return 10*i + SequenceLength })
}

func (r *run) fanOut(ctx context.Context) error {
	n, w := r.sizes.FanOut, r.sizes.FanOutWidth
	r.begin(n, n*w)
	if err := r.startAll(ctx, n, orchFanOut, func(i int) int { return i }); err != nil {
		return err
	}
	// Activity j of orchestration i returns i+j+1.
	return r.waitAll(ctx, n, func(i int) int { return w*(i+1) + w*(w-1)/2 })
}

func (r *run) timer(ctx context.Context) error {
	n := r.sizes.Timer
	r.begin(n, n)
	if err := r.startAll(ctx, n, orchTimer, func(i int) int { return i }); err != nil {
		return err
	}
	if err := r.waitAll(ctx, n, func(i int) int { return i + 1 }); err != nil {
		return err
	}
	late := make([]time.Duration, 0, n)
	for i := range n {
		instanceID := id(Timer, i)
		evs, err := r.client.GetHistory(ctx, instanceID, 0)
		if err != nil {
			return err
		}
		fired := false
		for _, ev := range evs {
			if ev.Kind != history.TimerFired {
				continue
			}
			fired = true
			d := time.Duration(ev.TimestampMs-ev.FireAtMs) * time.Millisecond
			if d < 0 {
				r.wrong.add(fmt.Sprintf("%s: the timer fired %v early", instanceID, -d))
			}
			late = append(late, d)
		}
		if !fired {
			r.wrong.add(fmt.Sprintf("%s: no TimerFired event in history", instanceID))
		}
	}
	r.res.LatenessP50Ms, r.res.LatenessP99Ms = ptr(percentileMs(late, 50)), ptr(percentileMs(late, 99))
	return nil
}

func (r *run) latency(ctx context.Context) error {
	n := r.sizes.Latency
	r.begin(n, n)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		instanceID := id(Latency, i)
		t0 := time.Now()
		if err := r.client.StartOrchestration(ctx, instanceID, orchLatency, i, nil); err != nil {
			return err
		}
		if _, err := r.wait(ctx, instanceID, i+1); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	r.end = time.Now()
	r.res.P50Ms, r.res.P99Ms = percentileMs(lat, 50), percentileMs(lat, 99)
	return nil
}

func (r *run) longHistory(ctx context.Context) error {
	n := r.sizes.LongHistory
	r.begin(1, n)
	instanceID := id(LongHistory, 0)
	if err := r.client.StartOrchestration(ctx, instanceID, orchLongHistory, n, nil); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := r.wait(ctx, instanceID, n); err != nil {
		return err
	}
	r.end = time.Now()
	total := r.end.Sub(t0)
	r.res.P50Ms, r.res.P99Ms = ms(total), ms(total)
	first, last, ok := r.steps.windows(500)
	if !ok {
		r.wrong.add(fmt.Sprintf("%s: not every step ran", instanceID))
		return nil
	}
	r.res.StepMsFirst, r.res.StepMsLast = ptr(first), ptr(last)
	return nil
}

// wrongResults collects the wrong results of a workload.
type wrongResults struct {
	n     int
	first string
}

func (w *wrongResults) add(msg string) {
	if w.n == 0 {
		w.first = msg
	}
	w.n++
}

func (w *wrongResults) err(orchestrations int) error {
	if w.n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d wrong of %d orchestrations; first: %s", ErrWrongResult, w.n, orchestrations, w.first)
}

// percentileMs is the nearest-rank p-th percentile of ds, in milliseconds.
func percentileMs(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 · n)
	return ms(s[max(rank, 1)-1])
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// round keeps three decimals.
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

func ptr[T any](v T) *T { return &v }
