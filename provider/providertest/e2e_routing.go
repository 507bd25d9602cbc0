package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// e2eRoutingCases cover activity heartbeats and routing: runtimes fetch
// only the activities they register, in the queues they serve.
var e2eRoutingCases = []e2eCase{
	{"HeartbeatTimeoutRetriesWithDetails", e2eHeartbeatTimeoutRetries},
	{"HeartbeatDetailsSurviveARestart", e2eHeartbeatSurvivesRestart},
	{"DisjointRegistrationsShareAStore", e2eDisjointRegistrations},
	{"DisjointOrchestrationsRunWhereRegistered", e2eDisjointOrchestrations},
	{"OrchestrationVersionsRunWhereRegistered", e2eVersionsRunWhereRegistered},
	{"QueueRoutesToServingRuntime", e2eQueueRouting},
	{"RewindKeepsTheActivityQueue", e2eRewindKeepsQueue},
	{"UnservedActivityReportedThenFailed", e2eUnservedActivity},
}

// signaled waits (bounded in real time) for a value on ch.
func (e *e2e) signaled(what string, ch <-chan struct{}) {
	e.t.Helper()
	select {
	case <-ch:
	case <-time.After(e2eTimeout):
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

// activityWait returns the instance's wait for the activity named name.
func (e *e2e) activityWait(id, name string) (duroxide.Wait, bool) {
	e.t.Helper()
	st, err := e.c.Inspect(e.ctx, id, &duroxide.WaitOptions{StalledAfter: time.Minute})
	if err != nil {
		e.t.Fatalf("Inspect(%s): %v", id, err)
	}
	for _, w := range st.WaitingFor {
		if w.Name == name {
			return w, true
		}
	}
	return duroxide.Wait{}, false
}

// A long activity reports progress with heartbeats; it hangs, misses its
// one-hour heartbeat timeout, fails with kind "timeout", and its retry
// resumes from the details the first attempt reported. Inspect shows the
// heartbeat while the first attempt runs.
func e2eHeartbeatTimeoutRetries(e *e2e) {
	reg := duroxide.NewRegistry()
	started := make(chan struct{}, 4)
	crunch := duroxide.RegisterActivity(reg, "Crunch", func(ctx context.Context, n int) (string, error) {
		ac := duroxide.ActivityContextFrom(ctx)
		var step int
		ok, err := ac.HeartbeatDetails(&step)
		if err != nil {
			return "", err
		}
		if ok {
			return fmt.Sprintf("resumed at step %d of %d", step, n), nil
		}
		if err := ac.Heartbeat(ctx, 3); err != nil {
			return "", err
		}
		started <- struct{}{}
		<-ctx.Done() // hangs: no more heartbeats
		return "", context.Cause(ctx)
	})
	duroxide.RegisterOrchestration(reg, "Heartbeats", func(ctx *duroxide.OrchestrationContext, attempts int) (string, error) {
		out, err := duroxide.CallActivity(ctx, crunch, 10, &duroxide.ActivityOptions{HeartbeatTimeout: time.Hour,
			Retry: &duroxide.RetryPolicy{MaxAttempts: attempts, InitialInterval: time.Second}}).Get()
		var ae *duroxide.ActivityError
		if errors.Is(err, duroxide.ErrTimeout) && errors.As(err, &ae) && ae.Kind == "timeout" {
			return "timed out", nil
		}
		return out, err
	})
	// Locks outlive the clock step, so only the heartbeat timeout fires.
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerLockTimeout = 3 * time.Hour })
	e.start("hb-retry", "Heartbeats", 2)
	e.start("hb-once", "Heartbeats", 1)
	e.signaled("the first attempt to heartbeat", started)
	e.signaled("the second instance's attempt to heartbeat", started)

	w, ok := e.activityWait("hb-retry", "Crunch")
	if !ok || w.ActivityState != duroxide.ActivityRunning || string(w.HeartbeatDetails) != "3" ||
		!w.HeartbeatAt.Equal(e.fc.Now()) || w.HeartbeatTimeoutMs != time.Hour.Milliseconds() {
		e.t.Fatalf("Inspect shows %+v, want a running Crunch with heartbeat 3 at %s and a one-hour timeout", w, e.fc.Now())
	}

	e.fc.Advance(time.Hour)
	for id, want := range map[string]string{"hb-retry": "resumed at step 3 of 10", "hb-once": "timed out"} {
		var out string
		st := e.advanceUntilDone(id)
		if err := st.Decode(&out); err != nil || out != want {
			e.t.Fatalf("%s: got %q, %v; want %q", id, out, err, want)
		}
	}
	h := e.history("hb-retry", 0)
	failed := find(h, history.ActivityFailed)
	if len(failed) != 1 || failed[0].Error.Kind != history.ErrorTimeout || string(failed[0].Data) != "3" {
		e.t.Fatalf("want one ActivityFailed of kind timeout carrying the details, got %+v", failed)
	}
	sched := find(h, history.ActivityScheduled)
	if len(sched) != 2 || string(sched[1].Data) != "3" || sched[1].HeartbeatTimeoutMs != time.Hour.Milliseconds() {
		e.t.Fatalf("want a retry handed the details, got %+v", sched)
	}
}

// A runtime stops while its activity runs (Shutdown past its deadline,
// as a crash would): the next runtime's delivery of the same attempt reads
// the details the first one stored with its heartbeat.
func e2eHeartbeatSurvivesRestart(e *e2e) {
	started := make(chan struct{}, 1)
	reg := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		scan := duroxide.RegisterActivity(reg, "Scan", func(ctx context.Context, _ struct{}) (string, error) {
			ac := duroxide.ActivityContextFrom(ctx)
			var page int
			if ok, err := ac.HeartbeatDetails(&page); err != nil || ok {
				return fmt.Sprintf("resumed at page %d, attempt %d", page, ac.Attempt), err
			}
			if err := ac.Heartbeat(ctx, 7); err != nil {
				return "", err
			}
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})
		duroxide.RegisterOrchestration(reg, "Scanner", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			return duroxide.CallActivity(ctx, scan, struct{}{}, nil).Get()
		})
		return reg
	}
	rt1 := e.runtime(reg())
	e.start("scan", "Scanner", struct{}{})
	e.signaled("the first run to heartbeat", started)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rt1.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("Shutdown past its deadline: %v, want DeadlineExceeded", err)
	}
	e.runtime(reg())
	var out string
	e.result("scan", &out)
	if out != "resumed at page 7, attempt 2" {
		e.t.Fatalf("got %q, want the second delivery to resume from the stored heartbeat", out)
	}
}

// Two runtimes share the store, each registering the orchestration and
// one of its two activities: every activity runs on the runtime that
// registers it, at its first delivery (no runtime fetched what it could
// not run).
func e2eDisjointRegistrations(e *e2e) {
	onA := duroxide.NewActivityRef[int, string]("OnA")
	onB := duroxide.NewActivityRef[int, string]("OnB")
	orch := func(ctx *duroxide.OrchestrationContext, n int) ([]string, error) {
		var fs []*duroxide.Future[string]
		for i := range n {
			fs = append(fs, duroxide.CallActivity(ctx, onA, i, nil), duroxide.CallActivity(ctx, onB, i, nil))
		}
		out := make([]string, 0, len(fs))
		for _, f := range fs {
			s, err := f.Get()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	where := func(ctx context.Context, i int) (string, error) {
		ac := duroxide.ActivityContextFrom(ctx)
		return fmt.Sprintf("%s(%d)@%s#%d", ac.Name, i, ac.WorkerID, ac.Attempt), nil
	}
	for _, node := range []struct{ id, act string }{{"node-a", "OnA"}, {"node-b", "OnB"}} {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Split", orch)
		duroxide.RegisterActivity(reg, node.act, where)
		e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = node.id })
	}
	const instances, n = 4, 3
	for i := range instances {
		e.start(fmt.Sprintf("split-%d", i), "Split", n)
	}
	for i := range instances {
		id := fmt.Sprintf("split-%d", i)
		var out []string
		e.result(id, &out)
		var want []string
		for j := range n {
			want = append(want, fmt.Sprintf("OnA(%d)@node-a#1", j), fmt.Sprintf("OnB(%d)@node-b#1", j))
		}
		if fmt.Sprint(out) != fmt.Sprint(want) {
			e.t.Fatalf("%s: got %v, want %v", id, out, want)
		}
		if k := count(e.history(id, 0), history.ActivityFailed); k != 0 {
			e.t.Fatalf("%s: %d activities failed", id, k)
		}
	}
}

// Two runtimes share a store with disjoint orchestration registrations:
// Front (node-a) calls an activity and a sub-orchestration, Back, that
// only node-b registers, and continues as new once. Every turn runs on the
// runtime that registers its orchestration, the activity's ack on node-b
// takes no turn of Front, and neither runtime gives a turn back: no
// delivery is counted against an instance a runtime cannot run.
func e2eDisjointOrchestrations(e *e2e) {
	stamp := duroxide.NewActivityRef[string, string]("Stamp")
	back := duroxide.NewOrchestrationRef[string, string]("Back")
	regA := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(regA, "Front", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
		s, err := duroxide.CallActivity(ctx, stamp, fmt.Sprint(round), nil).Get()
		if err != nil {
			return "", err
		}
		b, err := duroxide.CallSubOrchestration(ctx, back, "", s, nil).Get()
		if err != nil {
			return "", err
		}
		if round == 0 {
			return "", ctx.ContinueAsNew(1)
		}
		return "front@node-a " + b, nil
	})
	regB := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(regB, "Back", func(_ *duroxide.OrchestrationContext, in string) (string, error) {
		return "back@node-b(" + in + ")", nil
	})
	duroxide.RegisterActivity(regB, "Stamp", func(ctx context.Context, in string) (string, error) {
		return "stamp@" + duroxide.ActivityContextFrom(ctx).WorkerID + "(" + in + ")", nil
	})
	rtA := e.runtime(regA, func(o *duroxide.RuntimeOptions) { o.WorkerID = "node-a" })
	rtB := e.runtime(regB, func(o *duroxide.RuntimeOptions) { o.WorkerID = "node-b" })
	const instances = 4
	for i := range instances {
		e.start(fmt.Sprintf("front-%d", i), "Front", 0)
	}
	for i := range instances {
		id := fmt.Sprintf("front-%d", i)
		var out string
		e.result(id, &out)
		if want := "front@node-a back@node-b(stamp@node-b(1))"; out != want {
			e.t.Fatalf("%s: got %q, want %q", id, out, want)
		}
	}
	finished := func(rt *duroxide.Runtime) string {
		var parts []string
		for _, f := range rt.Metrics().Finished {
			parts = append(parts, fmt.Sprintf("%s %s %d", f.Orchestration, f.State, f.Count))
		}
		return strings.Join(parts, ", ")
	}
	// Each runtime ended only the instances of its orchestration: node-a
	// the Fronts, node-b their two Backs each.
	e.eventually("each runtime's finished counts", func() bool {
		return finished(rtA) == fmt.Sprintf("Front Completed %d", instances) &&
			finished(rtB) == fmt.Sprintf("Back Completed %d", 2*instances)
	})
	for name, rt := range map[string]*duroxide.Runtime{"node-a": rtA, "node-b": rtB} {
		if m := rt.Metrics(); m.Turns.Abandoned != 0 || m.Turns.LockLost != 0 || m.Turns.CommitFailed != 0 {
			e.t.Fatalf("%s: turns %+v, want none given back", name, m.Turns)
		}
	}
}

// A rolling deploy: node-old registers Flow 1.0.0, node-new Flow 1.0.0
// and 2.0.0, on one store. While only node-old runs, an instance pinned
// to 2.0.0 (when started, or by a ContinueAsNew from 1.0.0) waits,
// reported unserved by version and never delivered, and the others
// complete there (the unpinned one pinned to 1.0.0 by its
// first turn). Once node-new runs, instances pinned to 2.0.0 (by
// StartOptions.Version, or by a first turn on node-new) run every turn on
// node-new; no runtime gives a turn back.
func e2eVersionsRunWhereRegistered(e *e2e) {
	stamp := duroxide.NewActivityRef[string, string]("Stamp")
	node := func(id string, versions ...string) *duroxide.Runtime {
		reg := duroxide.NewRegistry()
		for _, v := range versions {
			duroxide.RegisterOrchestrationVersion(reg, "Flow", v, func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
				if in == "upgrade" {
					return "", ctx.ContinueAsNewVersion("2.0.0", "x")
				}
				a, err := duroxide.CallActivity(ctx, stamp, in, nil).Get()
				if err != nil {
					return "", err
				}
				b, err := duroxide.CallActivity(ctx, stamp, a, nil).Get()
				return fmt.Sprintf("%s: %s ran %s", b, v, id), err
			})
		}
		duroxide.RegisterActivity(reg, "Stamp", func(_ context.Context, in string) (string, error) { return in + "+", nil })
		return e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = id })
	}
	check := func(id, want string) {
		e.t.Helper()
		var out string
		if e.result(id, &out); !strings.HasPrefix(out, want) {
			e.t.Fatalf("%s: got %q, want %q…", id, out, want)
		}
		if st := e.status(id); st.LastError != nil {
			e.t.Fatalf("%s: LastError %+v", id, st.LastError)
		}
	}
	old := node("node-old", "1.0.0")
	e.startWith("early-2", "Flow", "x", &duroxide.StartOptions{Version: "2.0.0"})
	e.startWith("early-1", "Flow", "x", &duroxide.StartOptions{Version: "1.0.0"})
	e.start("early-any", "Flow", "x")
	e.startWith("early-upgrade", "Flow", "upgrade", &duroxide.StartOptions{Version: "1.0.0"}) // continues as 2.0.0
	check("early-1", "x++: 1.0.0 ran node-old")
	check("early-any", "x++: 1.0.0 ran node-old")
	want := "no runtime registers orchestration Flow version 2.0.0"
	for _, id := range []string{"early-2", "early-upgrade"} {
		e.eventually("Inspect to report "+id+" unserved", func() bool {
			st, err := e.c.Inspect(e.ctx, id, nil)
			if err != nil {
				return false
			}
			for _, w := range st.WaitingFor {
				if w.Kind == duroxide.WaitUnregisteredOrchestration && w.Unserved && w.Message == want && w.Attempt == 0 {
					return true
				}
			}
			return false
		})
	}

	nw := node("node-new", "1.0.0", "2.0.0")
	check("early-2", "x++: 2.0.0 ran node-new")
	check("early-upgrade", "x++: 2.0.0 ran node-new")
	for i := range 4 {
		e.startWith(fmt.Sprintf("late-2-%d", i), "Flow", "y", &duroxide.StartOptions{Version: "2.0.0"})
		e.startWith(fmt.Sprintf("late-1-%d", i), "Flow", "y", &duroxide.StartOptions{Version: "1.0.0"})
		e.start(fmt.Sprintf("late-any-%d", i), "Flow", "y")
	}
	for i := range 4 {
		check(fmt.Sprintf("late-2-%d", i), "y++: 2.0.0 ran node-new")
		check(fmt.Sprintf("late-1-%d", i), "y++: 1.0.0 ran node-")
		id := fmt.Sprintf("late-any-%d", i)
		if st := e.status(id); st.Version == "2.0.0" {
			check(id, "y++: 2.0.0 ran node-new")
		} else {
			check(id, "y++: 1.0.0 ran node-")
		}
	}
	for name, rt := range map[string]*duroxide.Runtime{"node-old": old, "node-new": nw} {
		if m := rt.Metrics(); m.Turns.Abandoned != 0 || m.Turns.LockLost != 0 || m.Turns.CommitFailed != 0 {
			e.t.Fatalf("%s: turns %+v, want none given back", name, m.Turns)
		}
	}
}

// An activity called with a Queue runs on the runtime serving that
// queue; one without runs on a runtime of the default queue, although
// both register it.
func e2eQueueRouting(e *e2e) {
	render := duroxide.NewActivityRef[int, string]("Render")
	for _, node := range []struct {
		id     string
		queues []string
	}{{"gpu-node", []string{"gpu"}}, {"cpu-node", nil}} {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Frames", func(ctx *duroxide.OrchestrationContext, _ struct{}) ([]string, error) {
			gpu := duroxide.CallActivity(ctx, render, 1, &duroxide.ActivityOptions{Queue: "gpu"})
			cpu := duroxide.CallActivity(ctx, render, 2, nil)
			a, err := gpu.Get()
			if err != nil {
				return nil, err
			}
			b, err := cpu.Get()
			return []string{a, b}, err
		})
		duroxide.RegisterActivity(reg, "Render", func(ctx context.Context, i int) (string, error) {
			ac := duroxide.ActivityContextFrom(ctx)
			return fmt.Sprintf("%d@%s[%s]", i, ac.WorkerID, ac.Queue), nil
		})
		e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID, o.Queues = node.id, node.queues })
	}
	for i := range 3 {
		id := fmt.Sprintf("frames-%d", i)
		e.start(id, "Frames", struct{}{})
		var out []string
		e.result(id, &out)
		if want := "[1@gpu-node[gpu] 2@cpu-node[]]"; fmt.Sprint(out) != want {
			e.t.Fatalf("%s: got %v, want %s", id, out, want)
		}
	}
}

// An activity no runtime registers waits (it is never delivered), Inspect
// and the stall rules say no runtime serves it, and it fails as
// "configuration" once RuntimeOptions.UnservedTimeout has passed.
func e2eUnservedActivity(e *e2e) {
	reg := duroxide.NewRegistry()
	ghost := duroxide.NewActivityRef[string, string]("Ghost")
	duroxide.RegisterOrchestration(reg, "Haunted", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		return duroxide.CallActivity(ctx, ghost, "boo", &duroxide.ActivityOptions{Queue: "spirits"}).Get()
	})
	// Long locks: the runtime's announcement (renewed every third of
	// WorkerLockTimeout) outlives the clock steps below, and its renewal
	// loop, asleep until the next hour, is the one that fails the work;
	// no turn's lock lapses while the clock is stepped.
	e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.UnservedTimeout, o.WorkerLockTimeout, o.OrchestratorLockTimeout = time.Hour, 3*time.Hour, 24*time.Hour
	})
	e.start("haunted", "Haunted", struct{}{})
	want := `no runtime serves activity Ghost (queue "spirits")`
	e.eventually("Inspect to report Ghost unserved", func() bool {
		w, ok := e.activityWait("haunted", "Ghost")
		return ok && w.Unserved && w.Message == want && w.Queue == "spirits"
	})
	e.fc.Advance(2 * time.Minute)
	e.eventually("the stall rules to name the unserved activity", func() bool {
		w, _ := e.activityWait("haunted", "Ghost")
		return w.Stalled && strings.Contains(w.StalledReason, want)
	})
	if w, _ := e.activityWait("haunted", "Ghost"); w.Deliveries != 0 {
		e.t.Fatalf("the unserved activity was delivered %d times", w.Deliveries)
	}
	// Past the timeout: the runtime's next look (hourly) fails it.
	e.fc.Advance(time.Hour)
	e.advanceUntil("the unserved activity to fail", time.Minute, func() bool {
		st, err := e.c.GetStatus(e.ctx, "haunted")
		return err == nil && st.State.IsTerminal()
	})
	oe := e.failed("haunted")
	if !strings.Contains(oe.Info.Message, want) {
		e.t.Fatalf("failure %q does not say %q", oe.Info.Message, want)
	}
	failed := find(e.history("haunted", 0), history.ActivityFailed)
	if len(failed) != 1 || failed[0].Error.Kind != history.ErrorConfiguration {
		e.t.Fatalf("want one configuration failure, got %+v", failed)
	}
}

// A rewound activity keeps its name and queue: the activity in queue "gpu"
// fails on the gpu node, is rewound after a fixed gpu node is deployed, and
// runs there again, never on the node that serves only the default queue
// (which registers the same name).
func e2eRewindKeepsQueue(e *e2e) {
	render := duroxide.NewActivityRef[int, string]("Render")
	node := func(id string, queues []string, broken bool) *duroxide.Runtime {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Frame", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			return duroxide.CallActivity(ctx, render, 1, &duroxide.ActivityOptions{Queue: "gpu"}).Get()
		})
		duroxide.RegisterActivity(reg, "Render", func(ctx context.Context, i int) (string, error) {
			if broken {
				return "", errors.New("render: bad deploy")
			}
			return fmt.Sprintf("%d@%s", i, duroxide.ActivityContextFrom(ctx).WorkerID), nil
		})
		return e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID, o.Queues = id, queues })
	}
	gpu := node("gpu-v1", []string{"gpu"}, true)
	e.start("frame", "Frame", struct{}{})
	e.failed("frame")
	e.shutdown(gpu)
	node("gpu-v2", []string{"gpu"}, false)
	node("cpu-node", nil, false)
	if err := e.c.Rewind(e.ctx, "frame", "fixed"); err != nil {
		e.t.Fatalf("Rewind: %v", err)
	}
	var out string
	e.result("frame", &out)
	if out != "1@gpu-v2" {
		e.t.Fatalf("the rewound activity ran as %q, want 1@gpu-v2 (its queue kept)", out)
	}
}
