package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/internal/bench"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider/postgres"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

var benchCommand = &command{
	name:     "bench",
	synopsis: "[--workload NAME|all] [--db sqlite:PATH|postgres://...] [--sync normal|full] [-n N] [--steps N] [--json]",
	summary:  "measure the engine's speed on standard workloads",
	details: `Runs benchmark workloads, each on a fresh store with a runtime in this
process, checks every result, and prints a table (or, with --json, one JSON
object per line per workload). The workloads:
  sequence     1000 orchestrations x 5 chained activities
  fanout       100 orchestrations x 100 parallel activities, summed
  timer        1000 orchestrations sleeping a 1s durable timer (--timer-delay)
  latency      one orchestration with one activity, started 200 times in a row
  longhistory  one orchestration of 5000 sequential activities (--steps)
  all          every workload in turn (the default)
-n N sets the size of each workload run: the orchestrations of sequence,
fanout and timer, the starts of latency, the steps of longhistory.

The store is an SQLite file in a temporary directory, removed afterwards.
--db sqlite:PATH uses PATH instead and keeps it; it must not exist or be
empty. With --workload all each workload gets its own file, named after it
(PATH bench.db gives bench-sequence.db, ...). sqlite::memory: runs on
in-memory stores. --db postgres://USER:PASSWORD@HOST/DB runs each workload in
a fresh schema of that database, created for it and dropped afterwards (named
duroxide_bench_WORKLOAD_N, or after ?schema=NAME as a prefix); the store's
size and the bytes written are not measured there. $DUROXIDE_DB is not used.

Measures (README, "Performance", defines them): orchestrations and
activities per second over the wall time from the first start to the last
completion; p50/p99 latency (latency: start to WaitForOrchestration
returning; others: completion minus creation, by the store's clock); timer
lateness; ms per step over the first and the last 500 steps of longhistory;
the process's peak RSS during the workload; the store's size; bytes written
(write syscalls) and store commits per orchestration.

A progress line is shown on standard error. A wrong result marks the
workload ok=false and the command exits 1 once every workload has run.`,
	run: runBench,
}

// benchHook, in tests, adjusts the options of every workload.
var benchHook func(*bench.Options)

func runBench(ctx context.Context, inv *invocation, args []string) error {
	inv.fs.Lookup("db").Usage = "the store: sqlite:PATH (must not exist or be empty; kept), sqlite::memory:, or postgres://... (a fresh schema per workload, dropped afterwards) (default: a temporary SQLite file, removed afterwards)"
	workload := inv.fs.String("workload", "all", "the workload: "+strings.Join(bench.Workloads, ", ")+" or all")
	syncMode := inv.fs.String("sync", "normal", "SQLite synchronous mode: normal or full")
	n := inv.fs.Int("n", 0, "the size of each workload: orchestrations, starts or steps (default: each workload's own)")
	steps := inv.fs.Int("steps", 0, "the steps of longhistory (default 5000, or -n)")
	delay := inv.fs.Duration("timer-delay", bench.DefaultTimerDelay, "the durable timer of the timer workload")
	inv.jsonFlag("one result object per line")
	if err := inv.parse(args, 0); err != nil {
		return err
	}

	var names []string
	switch *workload {
	case "all":
		names = bench.Workloads
	default:
		if !slices.Contains(bench.Workloads, *workload) {
			return usageErrorf("bench: unknown --workload %q: use one of %s, or all", *workload, strings.Join(bench.Workloads, ", "))
		}
		names = []string{*workload}
	}
	synchronous := strings.ToUpper(*syncMode)
	if synchronous != "NORMAL" && synchronous != "FULL" {
		return usageErrorf("bench: --sync %q: use normal or full", *syncMode)
	}
	switch {
	case *n < 0:
		return usageErrorf("bench: -n must be positive, got %d", *n)
	case *steps < 0 || *steps == 1 || (*steps == 0 && *n == 1 && slices.Contains(names, bench.LongHistory)):
		return usageErrorf("bench: longhistory needs at least 2 steps (--steps or -n)")
	case *delay <= 0:
		return usageErrorf("bench: --timer-delay must be positive, got %v", *delay)
	}
	sizes := bench.Sizes{Sequence: *n, FanOut: *n, Timer: *n, Latency: *n, LongHistory: *n, TimerDelay: *delay}
	if *steps > 0 {
		sizes.LongHistory = *steps
	}

	var factory bench.StoreFactory // nil: a temporary file per workload
	storeDesc := "a temporary file"
	if inv.db != "" {
		spec, err := storeurl.Parse(inv.db)
		if err != nil {
			return err
		}
		storeDesc = spec.Display
		if spec.Kind == storeurl.KindPostgres {
			factory = inv.postgresBenchStores(spec)
		} else {
			factory = fileStores(spec, len(names) > 1, &sqlite.Options{Synchronous: synchronous, Logger: inv.logger()})
		}
	}

	prog := newProgressLine(inv.stderr)
	var results []*bench.Result
	var failed []string
	for _, name := range names {
		opts := &bench.Options{Store: factory, Synchronous: synchronous, Sizes: sizes, Logger: inv.logger(), Progress: prog.show}
		if benchHook != nil {
			benchHook(opts)
		}
		res, err := bench.Run(ctx, name, opts)
		prog.done(res)
		if ctx.Err() != nil {
			return fmt.Errorf("bench: %s: interrupted: %w", name, ctx.Err())
		}
		if res == nil { // options refused
			return usageErrorf("bench: %v", err)
		}
		results = append(results, res)
		if err != nil {
			failed = append(failed, name+": "+res.Error)
		}
		if inv.jsonOut {
			line, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(inv.stdout, "%s\n", line); err != nil {
				return err
			}
		}
	}
	if !inv.jsonOut {
		engine := "SQLite synchronous=" + synchronous
		if strings.HasPrefix(storeDesc, "postgres") {
			engine = "PostgreSQL"
		}
		fmt.Fprintf(inv.stdout, "duroxide bench: %s, store %s, %s %s/%s, GOMAXPROCS %d\n\n",
			engine, storeDesc, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
		if err := printBenchTable(inv.stdout, results); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: %d of %d workloads failed: %s", len(failed), len(names), strings.Join(failed, "; "))
	}
	return nil
}

// postgresBenchStores gives each workload a fresh schema of the database
// spec names, dropped afterwards.
func (inv *invocation) postgresBenchStores(spec storeurl.Spec) bench.StoreFactory {
	return func(ctx context.Context, workload string) (*bench.Store, error) {
		// A new name each time: the schema is dropped afterwards, so it
		// must never be one that holds anything else.
		prefix := cmp.Or(spec.Schema, "duroxide_bench")
		schema := fmt.Sprintf("%.30s_%s_%d", prefix, workload, time.Now().UnixNano())
		bs := spec
		bs.Schema = schema
		p, err := storeurl.OpenPostgres(ctx, bs, storeurl.Create, inv.logger())
		if err != nil {
			return nil, spec.WrapErr(err, "opening PostgreSQL store %s (schema %s)", spec.Display, schema)
		}
		st := &bench.Store{
			Provider: p,
			Close:    p.Close,
			Remote:   true,
			Cleanup: func() error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := storeurl.DropPostgresSchema(ctx, spec.DSN, schema); err != nil {
					return spec.WrapErr(err, "dropping the bench schema %s", schema)
				}
				return nil
			},
		}
		if c, ok := p.(interface{ Stats() postgres.Stats }); ok {
			st.Commits = func() int64 { return c.Stats().Commits }
		}
		return st, nil
	}
}

// fileStores opens the store named by --db for each workload: the file
// itself for one workload, a file named after each workload for several.
func fileStores(spec storeurl.Spec, several bool, opts *sqlite.Options) bench.StoreFactory {
	return func(ctx context.Context, workload string) (*bench.Store, error) {
		path := spec.Path
		if path == "" && !spec.Memory {
			// Never derive a file name from nothing: "-"+workload would
			// land in the working directory.
			return nil, fmt.Errorf("--db %s names no SQLite file", spec.Display)
		}
		if several && !spec.Memory {
			ext := filepath.Ext(path)
			path = strings.TrimSuffix(path, ext) + "-" + workload + ext
		}
		s, err := bench.SQLiteFile(path, opts)(ctx, workload)
		if err != nil && errors.Is(err, bench.ErrStoreNotEmpty) {
			return nil, fmt.Errorf("--db %s: %w", spec.Display, err)
		}
		return s, err
	}
}

// progressLine shows a workload's progress on standard error: one line
// rewritten in place on a terminal; otherwise a plain line every
// plainEvery and one when the workload ends.
type progressLine struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	last     time.Time // of the last plain line
	now      func() time.Time
}

const plainEvery = 5 * time.Second

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w, now: time.Now}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

func (p *progressLine) show(pr bench.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("bench %s: %d/%d activities, %.1fs", pr.Workload, pr.Done, pr.Total, pr.Elapsed.Seconds())
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	case p.last.IsZero() || p.now().Sub(p.last) >= plainEvery:
		p.last = p.now()
		fmt.Fprintln(p.w, line)
	}
}

// done ends a workload's progress with its outcome.
func (p *progressLine) done(res *bench.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.last = time.Time{}
	if res == nil {
		return
	}
	outcome := "ok"
	if !res.OK {
		outcome = "FAILED"
	}
	fmt.Fprintf(p.w, "bench %s: %s in %.1fs\n", res.Workload, outcome, res.WallSeconds)
}

// printBenchTable prints the results as a table.
func printBenchTable(w io.Writer, results []*bench.Result) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "WORKLOAD\tOK\tORCH/S\tACT/S\tP50 MS\tP99 MS\tLATE P50\tLATE P99\tSTEP FIRST\tSTEP LAST\tPEAK RSS\tSTORE\tWRITTEN/ORCH\tCOMMITS/ORCH\tWALL S")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Workload, r.OK,
			num(r.OrchestrationsPerSec, 1), num(r.ActivitiesPerSec, 1), num(r.P50Ms, 1), num(r.P99Ms, 1),
			opt(r.LatenessP50Ms, 1), opt(r.LatenessP99Ms, 1), opt(r.StepMsFirst, 2), opt(r.StepMsLast, 2),
			size(r.PeakRSSBytes), size(r.StoreBytes), optSize(r.BytesWrittenPerOrch), opt(r.CommitsPerOrch, 1),
			num(r.WallSeconds, 1))
	}
	return tw.Flush()
}

func num(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func opt(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return num(*v, prec)
}

func optSize(v *float64) string {
	if v == nil {
		return "-"
	}
	return size(int64(*v))
}

// size formats a byte count with a binary unit; 0 is unknown.
func size(b int64) string {
	switch {
	case b <= 0:
		return "-"
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
