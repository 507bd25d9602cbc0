package bench

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

var quiet = slog.New(slog.DiscardHandler)

// tiny runs every workload in milliseconds.
var tiny = Sizes{Sequence: 5, FanOut: 3, FanOutWidth: 4, Timer: 5, TimerDelay: time.Millisecond, Latency: 5, LongHistory: 20}

func tinyOptions() *Options { return &Options{Sizes: tiny, Logger: quiet} }

func TestWorkloads(t *testing.T) {
	t.Parallel()
	for _, w := range Workloads {
		t.Run(w, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var last Progress
			calls := 0
			opts := tinyOptions()
			opts.Progress = func(p Progress) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				last = p
			}
			res, err := Run(t.Context(), w, opts)
			if err != nil {
				t.Fatalf("Run(%s): %v (result %+v)", w, err, res)
			}
			if !res.OK || res.Error != "" || res.Workload != w {
				t.Fatalf("result %+v: want ok, no error, workload %s", res, w)
			}
			counts := map[string][2]int{ // orchestrations, activities
				Sequence:    {5, 5 * SequenceLength},
				FanOut:      {3, 12},
				Timer:       {5, 5},
				Latency:     {5, 5},
				LongHistory: {1, 20},
			}[w]
			wantOrch, wantAct := counts[0], counts[1]
			if res.Orchestrations != wantOrch || res.Activities != wantAct {
				t.Fatalf("counted %d orchestrations and %d activities, want %d and %d", res.Orchestrations, res.Activities, wantOrch, wantAct)
			}
			if res.WallSeconds <= 0 || res.OrchestrationsPerSec <= 0 || res.ActivitiesPerSec <= 0 {
				t.Fatalf("rates not measured: %+v", res)
			}
			if res.StoreBytes <= 0 {
				t.Fatalf("StoreBytes = %d, want the file's size", res.StoreBytes)
			}
			if res.CommitsPerOrch == nil || *res.CommitsPerOrch <= 0 {
				t.Fatalf("CommitsPerOrch = %v, want a positive count", res.CommitsPerOrch)
			}
			if (res.LatenessP50Ms != nil) != (w == Timer) || (res.LatenessP99Ms != nil) != (w == Timer) {
				t.Fatalf("lateness %v/%v: want it for the timer workload only", res.LatenessP50Ms, res.LatenessP99Ms)
			}
			if (res.StepMsFirst != nil) != (w == LongHistory) || (res.StepMsLast != nil) != (w == LongHistory) {
				t.Fatalf("step times %v/%v: want them for longhistory only", res.StepMsFirst, res.StepMsLast)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls == 0 || last.Workload != w || last.Done != wantAct || last.Total != wantAct {
				t.Fatalf("%d progress calls, last %+v: want a final one with %d of %d done", calls, last, wantAct, wantAct)
			}
		})
	}
}

// A wrong activity result makes every workload fail loudly.
func TestWrongResultsAreReported(t *testing.T) {
	t.Parallel()
	for _, w := range Workloads {
		t.Run(w, func(t *testing.T) {
			t.Parallel()
			opts := tinyOptions()
			opts.Fault = func(n int) int {
				if n == 2 {
					return 1000
				}
				return n + 1
			}
			res, err := Run(t.Context(), w, opts)
			if !errors.Is(err, ErrWrongResult) {
				t.Fatalf("Run(%s) with a wrong activity: %v, want ErrWrongResult", w, err)
			}
			if res == nil || res.OK || !strings.Contains(res.Error, "want") {
				t.Fatalf("result %+v: want ok=false and an error naming the expected value", res)
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		workload string
		opts     *Options
		want     error
	}{
		{"unknown workload", "nope", nil, ErrUnknownWorkload},
		{"negative size", Sequence, &Options{Sizes: Sizes{Sequence: -1}}, ErrInvalidOptions},
		{"one step", LongHistory, &Options{Sizes: Sizes{LongHistory: 1}}, ErrInvalidOptions},
		{"fake clock", Latency, &Options{Runtime: &duroxide.RuntimeOptions{Clock: clockwork.NewFakeClock()}}, ErrInvalidOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Run(t.Context(), tc.workload, tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("Run: %v, want %v", err, tc.want)
			}
		})
	}
}

// Options.Synchronous reaches the default store, which refuses a bad mode.
func TestSynchronousReachesTheStore(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"full", "FULL", "normal"} {
		opts := tinyOptions()
		opts.Synchronous = mode
		if res, err := Run(t.Context(), Latency, opts); err != nil || !res.OK {
			t.Fatalf("synchronous %q: %+v, %v", mode, res, err)
		}
	}
	opts := tinyOptions()
	opts.Synchronous = "OFF"
	res, err := Run(t.Context(), Latency, opts)
	if err == nil || res.OK {
		t.Fatalf("synchronous OFF: %+v, %v; want the store to refuse it", res, err)
	}
}

func TestSQLiteFileRefusesANonEmptyStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "used.db")
	opts := tinyOptions()
	opts.Store = SQLiteFile(path, &sqlite.Options{Logger: quiet})
	if res, err := Run(t.Context(), Latency, opts); err != nil || !res.OK {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	res, err := Run(t.Context(), Latency, opts)
	if !errors.Is(err, ErrStoreNotEmpty) {
		t.Fatalf("second run on the same file: %v, want ErrStoreNotEmpty", err)
	}
	if res.OK || res.Error == "" {
		t.Fatalf("result %+v: want ok=false with the error", res)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // 100ms..1ms, unsorted
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    int
		want float64
	}{
		{ds, 50, 50},
		{ds, 99, 99},
		{ds, 100, 100},
		{ds[:1], 99, 100},
		{[]time.Duration{3 * time.Millisecond, time.Millisecond}, 50, 1},
		{nil, 50, 0},
	} {
		if got := percentileMs(tc.in, tc.p); got != tc.want {
			t.Errorf("percentileMs(%d values, %d) = %v, want %v", len(tc.in), tc.p, got, tc.want)
		}
	}
}

func TestStepWindows(t *testing.T) {
	t.Parallel()
	c := newStepClock(7)
	t0 := time.Unix(0, 0)
	// Steps 1 ms apart at first, 4 ms apart at the end.
	for i, off := range []int{0, 1, 2, 3, 7, 11, 15} {
		c.record(i, t0.Add(time.Duration(off)*time.Millisecond))
	}
	c.record(0, t0.Add(time.Hour))    // a rerun keeps the first time
	first, last, ok := c.windows(500) // window (7-1)/2 = 3
	if !ok || first != 1 || last != 4 {
		t.Fatalf("windows = %v, %v, %v; want 1, 4, true", first, last, ok)
	}
	c = newStepClock(3)
	c.record(0, t0)
	if _, _, ok := c.windows(500); ok {
		t.Fatal("windows with missing steps: ok, want not ok")
	}
}

func TestTempSQLiteRemovesItsStore(t *testing.T) {
	t.Parallel()
	s, err := TempSQLite(&sqlite.Options{Logger: quiet})(t.Context(), Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path); err != nil {
		t.Fatalf("the store's file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.size() <= 0 {
		t.Fatalf("size of the closed store = %d, want its file's size", s.size())
	}
	if err := s.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(s.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the store's directory after Cleanup: %v, want it gone", err)
	}
}
