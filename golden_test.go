package duroxide_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Golden histories: testdata/replay/must-replay holds histories recorded by
// running the orchestrations below; each must replay cleanly against them.
// testdata/replay/must-fail holds the same histories with one deliberate
// divergence each (what a careless code change produces); each must fail
// with *NondeterminismError. Regenerate with:
//
//	go test -run TestGoldenHistories -update-golden .
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/replay from fresh runs")

type goldenFile struct {
	Comment    string          `json:"comment,omitempty"`
	InstanceID string          `json:"instanceId"`
	Events     []history.Event `json:"events"`
}

func goldenRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	failures := map[string]int{}
	duroxide.RegisterActivity(reg, "Flaky", func(_ context.Context, key string) (string, error) {
		failures[key]++
		if failures[key] < 3 {
			return "", fmt.Errorf("flaky failure %d", failures[key])
		}
		return "ok after " + fmt.Sprint(failures[key]), nil
	})
	duroxide.RegisterActivity(reg, "Boom", func(_ context.Context, s string) (string, error) { return "", errors.New(s) })

	duroxide.RegisterOrchestration(reg, "Golden.Sequence", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for i := 0; i < 3; i++ {
			if err := ctx.ScheduleActivity("Inc", n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.FanOut", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var ts []*duroxide.Task
		for i := 0; i < n; i++ {
			ts = append(ts, ctx.ScheduleActivity("Inc", i))
		}
		sum := 0
		for _, t := range ts {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Select", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		act := ctx.ScheduleActivity("Echo", "fast")
		timer := ctx.ScheduleTimer(time.Hour)
		if ctx.Select(act, timer) == 1 {
			return "timer", nil
		}
		var s string
		err := act.Await(&s)
		return s, err
	})
	duroxide.RegisterOrchestration(reg, "Golden.Event", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ev := ctx.WaitForEvent("go")
		if ctx.Select(ev, ctx.ScheduleTimer(time.Hour)) == 1 {
			return "timeout", nil
		}
		var s string
		err := ev.Await(&s)
		return "got " + s, err
	})
	duroxide.RegisterOrchestration(reg, "Golden.Child", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		var out string
		err := ctx.ScheduleActivity("Echo", s+"!").Await(&out)
		return out, err
	})
	duroxide.RegisterOrchestration(reg, "Golden.Parent", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		var a, b string
		ta := ctx.ScheduleSubOrchestration("Golden.Child", "", s)
		tb := ctx.ScheduleSubOrchestration("Golden.Child", "", s+s)
		if err := ta.Await(&a); err != nil {
			return "", err
		}
		if err := tb.Await(&b); err != nil {
			return "", err
		}
		return a + "|" + b, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Retry", func(ctx *duroxide.OrchestrationContext, key string) (string, error) {
		var s string
		err := ctx.ScheduleActivityWithRetry("Flaky", key, duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second}).Await(&s)
		return s, err
	})
	duroxide.RegisterOrchestration(reg, "Golden.Values", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		t := ctx.Now()
		id := ctx.NewGUID()
		ctx.SetCustomStatus(map[string]string{"phase": "one"})
		var s string
		if err := ctx.ScheduleActivity("Echo", id).Await(&s); err != nil {
			return "", err
		}
		ctx.SetCustomStatus(map[string]string{"phase": "two"})
		return fmt.Sprintf("%d:%s", t.UnixMilli(), s), nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Loop", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if n >= 2 {
			return n, nil
		}
		if err := ctx.ScheduleActivity("Inc", n).Await(&n); err != nil {
			return 0, err
		}
		return 0, ctx.ContinueAsNew(n)
	})
	duroxide.RegisterOrchestration(reg, "Golden.Fail", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		if err := ctx.ScheduleActivity("Boom", s).Await(nil); err != nil {
			return "", fmt.Errorf("step failed: %w", err)
		}
		return "ok", nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Waiting", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var n int
		if err := ctx.ScheduleActivity("Inc", 1).Await(&n); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent("never").Await(&s)
		return s, err
	})
	return reg
}

// goldenRuns lists the recorded instances: orchestration, input, and
// whether the recording stops while the instance still waits.
var goldenRuns = []struct {
	id, name string
	input    any
	raise    string // event "go" data raised once the instance waits
	waiting  bool
}{
	{"sequence", "Golden.Sequence", 1, "", false},
	{"fanout", "Golden.FanOut", 4, "", false},
	{"select", "Golden.Select", struct{}{}, "", false},
	{"event", "Golden.Event", struct{}{}, "yes", false},
	{"parent", "Golden.Parent", "a", "", false},
	{"retry", "Golden.Retry", "k", "", false},
	{"values", "Golden.Values", struct{}{}, "", false},
	{"loop", "Golden.Loop", 0, "", false},
	{"fail", "Golden.Fail", "broken", "", false},
	{"waiting", "Golden.Waiting", struct{}{}, "", true},
}

// recordGolden runs every golden orchestration and returns the histories
// of each execution, keyed by file name.
func recordGolden(t *testing.T) map[string]goldenFile {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, goldenRegistry(), &duroxide.RuntimeOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(ctx)
	c := duroxide.NewClient(store)
	out := map[string]goldenFile{}
	for _, run := range goldenRuns {
		if err := c.StartOrchestration(ctx, run.id, run.name, run.input, nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, err := c.GetStatus(ctx, run.id)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := c.GetHistory(ctx, run.id, 0)
			waits := false
			for _, ev := range h {
				if ev.Kind == history.ExternalSubscribed {
					waits = true
				}
			}
			if st.State.IsTerminal() || (run.waiting && waits) {
				break
			}
			if waits && run.raise != "" {
				if err := c.RaiseEvent(ctx, run.id, "go", run.raise); err != nil {
					t.Fatal(err)
				}
				run.raise = ""
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not finish: %+v", run.id, st)
			}
			clock.Advance(time.Second)
			time.Sleep(2 * time.Millisecond) // observation only: let the runtime react
		}
		execs, err := c.ListExecutions(ctx, run.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range execs {
			h, err := c.GetHistory(ctx, run.id, ex.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			name := run.id
			if len(execs) > 1 {
				name = fmt.Sprintf("%s-exec%d", run.id, ex.ExecutionID)
			}
			out[name] = goldenFile{InstanceID: run.id, Events: h}
		}
		if run.name == "Golden.Parent" {
			kids, err := c.ListInstances(ctx, &duroxide.ListOptions{ParentInstanceID: run.id})
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range kids.Instances {
				h, err := c.GetHistory(ctx, k.InstanceID, 0)
				if err != nil {
					t.Fatal(err)
				}
				out[fmt.Sprintf("child%d", i+1)] = goldenFile{InstanceID: k.InstanceID, Events: h}
			}
		}
	}
	return out
}

// mutation is one deliberate divergence applied to a recorded history.
type mutation struct {
	file, source, comment string
	apply                 func(evs []history.Event) []history.Event
}

func find(evs []history.Event, kind history.EventKind, nth int) int {
	for i := range evs {
		if evs[i].Kind == kind {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	panic(fmt.Sprintf("no %s #%d", kind, nth))
}

var mutations = []mutation{
	{"renamed-activity", "sequence", "the second activity was renamed in code",
		func(e []history.Event) []history.Event {
			e[find(e, history.ActivityScheduled, 1)].Name = "Increment"
			return e
		}},
	{"changed-input", "fanout", "an activity input changed",
		func(e []history.Event) []history.Event {
			e[find(e, history.ActivityScheduled, 2)].Input = json.RawMessage(`99`)
			return e
		}},
	{"timer-became-activity", "select", "the code now schedules an activity where a timer was",
		func(e []history.Event) []history.Event {
			i := find(e, history.TimerCreated, 0)
			e[i] = history.Event{EventID: e[i].EventID, Kind: history.ActivityScheduled, TimestampMs: e[i].TimestampMs, Name: "Echo", Input: json.RawMessage(`"slow"`)}
			return e
		}},
	{"event-renamed", "event", "the code waits for another event name",
		func(e []history.Event) []history.Event {
			e[find(e, history.ExternalSubscribed, 0)].Name = "stop"
			return e
		}},
	{"child-renamed", "parent", "a sub-orchestration was renamed",
		func(e []history.Event) []history.Event {
			e[find(e, history.SubOrchestrationScheduled, 1)].Name = "Golden.Kid"
			return e
		}},
	{"extra-schedule-in-history", "sequence", "history has an activity the code no longer schedules",
		func(e []history.Event) []history.Event {
			i := find(e, history.ActivityScheduled, 0)
			extra := e[i]
			extra.Name = "Audit"
			out := append([]history.Event{}, e[:i+1]...)
			out = append(out, extra)
			out = append(out, e[i+1:]...)
			return renumber(out)
		}},
	{"code-schedules-more", "sequence", "the code schedules an activity after the end of history",
		func(e []history.Event) []history.Event {
			// Drop the last activity and its completion, keep the ending.
			i := find(e, history.ActivityScheduled, 2)
			out := append([]history.Event{}, e[:i]...)
			out = append(out, e[len(e)-1])
			return renumber(out)
		}},
	{"different-output", "fanout", "the code now returns a different result",
		func(e []history.Event) []history.Event { e[len(e)-1].Output = json.RawMessage(`7`); return e }},
	{"completion-kind-mismatch", "select", "a timer's completion was recorded as an activity completion",
		func(e []history.Event) []history.Event {
			i := find(e, history.ActivityCompleted, 0)
			e[i].SourceEventID = e[find(e, history.TimerCreated, 0)].EventID
			return e
		}},
	{"no-longer-fails", "fail", "history records a failure but the code now completes",
		func(e []history.Event) []history.Event {
			e[find(e, history.ActivityFailed, 0)] = history.Event{EventID: e[find(e, history.ActivityFailed, 0)].EventID,
				Kind: history.ActivityCompleted, SourceEventID: e[find(e, history.ActivityScheduled, 0)].EventID,
				TimestampMs: e[0].TimestampMs, Output: json.RawMessage(`"fine"`)}
			return e
		}},
	{"session-added", "sequence", "an activity moved to a session",
		func(e []history.Event) []history.Event {
			e[find(e, history.ActivityScheduled, 0)].SessionID = "s1"
			return e
		}},
	{"continue-input-changed", "loop-exec1", "the code continues as new with another input",
		func(e []history.Event) []history.Event { e[len(e)-1].Input = json.RawMessage(`5`); return e }},
	{"still-waiting-but-code-returns", "waiting", "history waits for an event but the code now returns",
		func(e []history.Event) []history.Event {
			i := find(e, history.ExternalSubscribed, 0)
			return renumber(append(append([]history.Event{}, e[:i]...), e[i+1:]...))
		}},
}

// renumber gives events consecutive IDs, fixing source references.
func renumber(evs []history.Event) []history.Event {
	ids := map[int64]int64{}
	for i := range evs {
		ids[evs[i].EventID] = int64(i + 1)
	}
	for i := range evs {
		evs[i].EventID = int64(i + 1)
		if evs[i].SourceEventID != 0 {
			evs[i].SourceEventID = ids[evs[i].SourceEventID]
		}
	}
	return evs
}

func TestGoldenHistories(t *testing.T) {
	dir := filepath.Join("testdata", "replay")
	if *updateGolden {
		recorded := recordGolden(t)
		writeGolden(t, filepath.Join(dir, "must-replay"), recorded)
		failing := map[string]goldenFile{}
		for _, m := range mutations {
			src, ok := recorded[m.source]
			if !ok {
				t.Fatalf("mutation %s: no recording %s", m.file, m.source)
			}
			evs := append([]history.Event(nil), src.Events...)
			b, _ := json.Marshal(evs) // deep copy
			_ = json.Unmarshal(b, &evs)
			failing[m.file] = goldenFile{Comment: m.comment + " (from " + m.source + ")", InstanceID: src.InstanceID, Events: m.apply(evs)}
		}
		writeGolden(t, filepath.Join(dir, "must-fail"), failing)
	}
	reg := goldenRegistry()
	replayGoldenDir(t, reg, filepath.Join(dir, "must-replay"), false)
	replayGoldenDir(t, reg, filepath.Join(dir, "must-fail"), true)
}

// replayGoldenDir replays every golden file of dir against reg, one
// subtest each: with wantFail each must fail as nondeterministic,
// otherwise each must replay.
func replayGoldenDir(t *testing.T, reg *duroxide.Registry, dir string, wantFail bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files in %s (run with -update-golden): %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(dir)+"/"+strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenFile
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			err = duroxide.ReplayHistory(reg, g.InstanceID, g.Events)
			var nd *duroxide.NondeterminismError
			switch {
			case wantFail && !errors.As(err, &nd):
				t.Fatalf("%s: want *NondeterminismError, got %v", g.Comment, err)
			case wantFail:
				t.Logf("%s: %v", g.Comment, err)
			case err != nil:
				t.Fatalf("replay failed: %v", err)
			}
		})
	}
}

func writeGolden(t *testing.T, dir string, files map[string]goldenFile) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		b, err := json.MarshalIndent(files[n], "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
