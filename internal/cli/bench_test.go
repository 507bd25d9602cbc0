package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/bench"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// tinyBench are flags that make every workload take milliseconds.
var tinyBench = []string{"-n", "2", "--steps", "6", "--timer-delay", "1ms"}

func benchArgs(extra ...string) []string {
	return append(append([]string{"bench"}, tinyBench...), extra...)
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		args  []string
		parts []string
	}{
		{"unknown workload", []string{"bench", "--workload", "nope"}, []string{`unknown --workload "nope"`, "sequence, fanout, timer, latency, longhistory"}},
		{"bad sync", []string{"bench", "--sync", "off"}, []string{`--sync "off"`, "normal or full"}},
		{"negative n", []string{"bench", "-n", "-1"}, []string{"-n must be positive"}},
		{"one step", []string{"bench", "--workload", "longhistory", "--steps", "1"}, []string{"at least 2 steps"}},
		{"n of one with longhistory", []string{"bench", "-n", "1"}, []string{"at least 2 steps"}},
		{"zero timer delay", []string{"bench", "--timer-delay", "0s"}, []string{"--timer-delay must be positive"}},
		{"unknown flag", []string{"bench", "--frob"}, []string{"-frob", "duroxide bench -h"}},
		{"not a number", []string{"bench", "-n", "many"}, []string{"-n"}},
		{"argument", []string{"bench", "sequence"}, []string{`unexpected argument "sequence"`}},
		{"postgres without server", []string{"bench", "--db", "postgres:///db"}, []string{"names no server"}},
		{"unknown db", []string{"bench", "--db", "mysql://x"}, []string{"cannot tell which store"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runCLI(t, tt.args...).wantErr(t, 2, tt.parts...)
		})
	}
}

// TestBenchJSON runs every workload at tiny sizes and checks the shape of
// the JSON lines.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, benchArgs("--json", "--sync", "FULL")...).wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != len(bench.Workloads) {
		t.Fatalf("%d lines, want one per workload:\n%s", len(lines), r.stdout)
	}
	common := []string{"workload", "orchestrations", "activities", "orchestrationsPerSec", "activitiesPerSec",
		"p50Ms", "p99Ms", "peakRssBytes", "storeBytes", "bytesWrittenPerOrch", "commitsPerOrch", "wallSeconds", "ok"}
	for i, line := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d is not a JSON object (%v): %s", i, err, line)
		}
		w := bench.Workloads[i]
		if obj["workload"] != w || obj["ok"] != true {
			t.Fatalf("line %d: %s; want workload %s, ok true", i, line, w)
		}
		want := append([]string(nil), common...)
		switch w {
		case bench.Timer:
			want = append(want, "latenessP50Ms", "latenessP99Ms")
		case bench.LongHistory:
			want = append(want, "stepMsFirst", "stepMsLast")
		}
		for _, k := range want {
			if _, ok := obj[k].(float64); !ok && k != "workload" && k != "ok" {
				t.Fatalf("%s: %q is %v, want a number: %s", w, k, obj[k], line)
			}
		}
		if len(obj) != len(want) {
			t.Fatalf("%s: %d keys, want exactly %v: %s", w, len(obj), want, line)
		}
	}
	for _, w := range bench.Workloads {
		if !strings.Contains(r.stderr, "bench "+w+": ok") {
			t.Fatalf("stderr does not report %s as ok:\n%s", w, r.stderr)
		}
	}
}

func TestBenchTable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, benchArgs("--workload", "latency")...).wantCode(t, 0)
	for _, want := range []string{"synchronous=NORMAL", "WORKLOAD", "P99 MS", "PEAK RSS", "COMMITS/ORCH", "\nlatency "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "sequence") {
		t.Fatalf("--workload latency ran more:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "bench latency: ") || strings.Contains(r.stderr, "\r") {
		t.Fatalf("stderr is not plain progress lines:\n%q", r.stderr)
	}
}

func TestBenchDB(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "b.db")
	runCLI(t, benchArgs("--workload", "latency", "--db", db)...).wantCode(t, 0)
	if fi, err := os.Stat(filepath.Join(dir, "b.db")); err != nil || fi.Size() == 0 {
		t.Fatalf("--db store not kept: %v", err)
	}
	// The store is no longer fresh.
	r := runCLI(t, benchArgs("--workload", "latency", "--db", db)...).wantCode(t, 1)
	if !strings.Contains(r.stderr, "duroxide: bench: 1 of 1 workloads failed") || !strings.Contains(r.stderr, "b.db exists") {
		t.Fatalf("stderr does not explain the refusal:\n%s", r.stderr)
	}
	// Several workloads: one file each.
	db = "sqlite:" + filepath.Join(dir, "all.db")
	runCLI(t, benchArgs("--db", db, "--json")...).wantCode(t, 0)
	for _, w := range bench.Workloads {
		if _, err := os.Stat(filepath.Join(dir, "all-"+w+".db")); err != nil {
			t.Fatalf("store of %s: %v", w, err)
		}
	}
	// In memory.
	runCLI(t, benchArgs("--workload", "sequence", "--db", "sqlite::memory:", "--json")...).wantCode(t, 0)
}

// --sync and the sizes reach the workloads.
func TestBenchOptions(t *testing.T) { // not parallel: it sets benchHook
	var got []bench.Options
	benchHook = func(o *bench.Options) {
		got = append(got, *o)
		o.Sizes = bench.Sizes{Sequence: 1, FanOut: 1, FanOutWidth: 1, Timer: 1, TimerDelay: time.Millisecond, Latency: 1, LongHistory: 2}
	}
	t.Cleanup(func() { benchHook = nil })
	runCLI(t, "bench", "--sync", "full", "-n", "7", "--steps", "9", "--timer-delay", "3ms", "--json").wantCode(t, 0)
	if len(got) != len(bench.Workloads) {
		t.Fatalf("%d workloads ran, want %d", len(got), len(bench.Workloads))
	}
	want := bench.Sizes{Sequence: 7, FanOut: 7, Timer: 7, TimerDelay: 3 * time.Millisecond, Latency: 7, LongHistory: 9}
	for _, o := range got {
		if o.Synchronous != "FULL" || o.Store != nil || o.Sizes != want {
			t.Fatalf("options %+v: want synchronous FULL, the default store and sizes %+v", o, want)
		}
	}
}

// Canceling the context (Ctrl-C) stops the run: exit 1, no table.
func TestBenchInterrupted(t *testing.T) { // not parallel: it sets benchHook
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	benchHook = func(o *bench.Options) {
		o.Sizes.Sequence = 100000 // far more than the test waits for
		o.ProgressInterval = time.Millisecond
		o.Progress = func(bench.Progress) { cancel() }
	}
	t.Cleanup(func() { benchHook = nil })
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"bench", "--workload", "sequence"}, &stdout, &stderr, func(string) string { return "" })
	if code != exitFailure || stdout.Len() != 0 || !strings.Contains(stderr.String(), "duroxide: bench: sequence: interrupted") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1, nothing, and the interruption", code, stdout.String(), stderr.String())
	}
}

// A wrong result exits 1, after reporting it.
func TestBenchWrongResult(t *testing.T) { // not parallel: it sets benchHook
	benchHook = func(o *bench.Options) { o.Fault = func(n int) int { return n + 2 } }
	t.Cleanup(func() { benchHook = nil })
	r := runCLI(t, benchArgs("--workload", "sequence", "--json")...).wantCode(t, 1)
	var res bench.Result
	r.decode(t, &res)
	if res.OK || !strings.Contains(res.Error, "wrong") {
		t.Fatalf("result %+v: want ok false and the wrong result", res)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "duroxide: bench: 1 of 1 workloads failed: sequence: ") {
		t.Fatalf("last stderr line %q does not report the failure", last)
	}
}

func TestBenchProgressLine(t *testing.T) {
	t.Parallel()
	at := time.Unix(1000, 0)
	pr := func(done int) bench.Progress {
		return bench.Progress{Workload: "sequence", Done: done, Total: 10, Elapsed: 1500 * time.Millisecond}
	}
	ok := &bench.Result{Workload: "sequence", OK: true, WallSeconds: 2}

	// On a terminal: one line rewritten in place, cleared at the end.
	var term bytes.Buffer
	p := &progressLine{w: &term, terminal: true, now: func() time.Time { return at }}
	p.show(pr(3))
	p.show(pr(7))
	p.done(ok)
	want := "\r\033[Kbench sequence: 3/10 activities, 1.5s\r\033[Kbench sequence: 7/10 activities, 1.5s\r\033[Kbench sequence: ok in 2.0s\n"
	if term.String() != want {
		t.Fatalf("terminal output %q, want %q", term.String(), want)
	}

	// Elsewhere: plain lines, at most one per plainEvery.
	var plain bytes.Buffer
	p = &progressLine{w: &plain, now: func() time.Time { return at }}
	p.show(pr(3))
	p.show(pr(4)) // too soon: dropped
	at = at.Add(plainEvery)
	p.show(pr(7))
	p.done(&bench.Result{Workload: "sequence", WallSeconds: 2})
	want = "bench sequence: 3/10 activities, 1.5s\nbench sequence: 7/10 activities, 1.5s\nbench sequence: FAILED in 2.0s\n"
	if plain.String() != want {
		t.Fatalf("plain output %q, want %q", plain.String(), want)
	}
}

// TestBenchPostgres runs a workload on PostgreSQL: a fresh schema, named
// after the ?schema= prefix, dropped afterwards; the bytes written are not
// reported.
func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	db := postgresTestDB(t, "bench") // a unique prefix; the schema itself is never created
	r := runCLI(t, benchArgs("--workload", "sequence", "--db", db, "--json")...).wantCode(t, 0)
	var res map[string]any
	r.decode(t, &res)
	if res["ok"] != true || res["workload"] != "sequence" {
		t.Fatalf("bench on PostgreSQL: %s", r.stdout)
	}
	for _, absent := range []string{"bytesWrittenPerOrch", "storeBytes"} {
		if _, ok := res[absent]; ok {
			t.Errorf("bench on PostgreSQL reports %s: %s", absent, r.stdout)
		}
	}
	if _, ok := res["commitsPerOrch"]; !ok {
		t.Errorf("bench on PostgreSQL does not report commitsPerOrch: %s", r.stdout)
	}
	spec, err := storeurl.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), spec.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)`, spec.Schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d schemas named %s... are left after the bench", left, spec.Schema)
	}
}
