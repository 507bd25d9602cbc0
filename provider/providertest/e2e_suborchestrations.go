package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Sub-orchestrations.
var e2eSubOrchestrationCases = []e2eCase{
	{"SubOrchestrationAutoIDs", e2eSubAutoIDs},
	{"SubOrchestrationExplicitID", e2eSubExplicitID},
	{"SubOrchestrationIDCollision", e2eSubIDCollision},
	{"SubOrchestrationFailure", e2eSubFailure},
	{"SubOrchestrationNested3", e2eSubNested},
	{"SubOrchestrationFanOut", e2eSubFanOut},
	{"SubOrchestrationAfterContinueAsNew", e2eSubAfterContinueAsNew},
	{"SubOrchestrationVersion", e2eSubVersion},
	{"SubOrchestrationContinuesAsNew", e2eSubContinuesAsNew},
	{"ParentFailureCancelsChildren", e2eParentFailureCancelsChildren},
	{"ParentCompletionCancelsUnawaitedChild", e2eParentCompletionCancelsChild},
}

// childRegistry registers "Double" (an activity-backed child) and "Parent"
// (which runs children with the given IDs, "" for automatic).
func childRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Double", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var v int
		err := ctx.ScheduleActivity("Times2", n).Await(&v)
		return v, err
	})
	duroxide.RegisterActivity(reg, "Times2", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, ids []string) ([]int, error) {
		ts := make([]*duroxide.Task, len(ids))
		for i, id := range ids {
			ts[i] = ctx.ScheduleSubOrchestration("Double", id, i+1)
		}
		// A timer forces a later turn, so replays recompute the child IDs.
		if err := ctx.ScheduleTimer(0).Await(nil); err != nil {
			return nil, err
		}
		out := make([]int, len(ts))
		for i, t := range ts {
			if err := t.Await(&out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	return reg
}

func e2eSubAutoIDs(e *e2e) {
	e.runtime(childRegistry())
	e.start("p", "Parent", []string{"", ""})
	var out []int
	e.result("p", &out)
	if jsonOf(e.t, out) != `[2,4]` {
		e.t.Fatalf("output %v", out)
	}
	h := e.history("p", 0)
	e.checkHistory(h)
	sched := find(h, history.SubOrchestrationScheduled)
	if len(sched) != 2 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
	for i, ev := range sched {
		want := fmt.Sprintf("p::sub::%d", ev.EventID)
		if ev.ChildInstanceID != want {
			e.t.Fatalf("child %d has ID %q, want %q", i, ev.ChildInstanceID, want)
		}
		if ev.EventID != int64(i+2) {
			e.t.Fatalf("child %d scheduled at event %d, want %d", i, ev.EventID, i+2)
		}
		st := e.status(want)
		if st.State != duroxide.StateCompleted || st.ParentInstanceID != "p" || st.Orchestration != "Double" {
			e.t.Fatalf("child %s: %s parent=%q", want, describeStatus(st), st.ParentInstanceID)
		}
		ch := e.history(want, 0)
		if p := ch[0].Parent; p == nil || p.InstanceID != "p" || p.ExecutionID != 1 || p.EventID != ev.EventID {
			e.t.Fatalf("child %s OrchestrationStarted parent %+v", want, p)
		}
	}
	if n := count(h, history.SubOrchestrationCompleted); n != 2 {
		e.t.Fatalf("%d SubOrchestrationCompleted", n)
	}
	page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{ParentInstanceID: "p"})
	if err != nil || len(page.Instances) != 2 {
		e.t.Fatalf("children listed: %v (%v)", page, err)
	}
}

func e2eSubExplicitID(e *e2e) {
	e.runtime(childRegistry())
	e.start("p", "Parent", []string{"kid-a", ""})
	var out []int
	e.result("p", &out)
	if jsonOf(e.t, out) != `[2,4]` {
		e.t.Fatalf("output %v", out)
	}
	st := e.status("kid-a")
	if st.State != duroxide.StateCompleted || st.ParentInstanceID != "p" || string(st.Output) != "2" {
		e.t.Fatalf("explicit child: %s parent %q", describeStatus(st), st.ParentInstanceID)
	}
	if _, err := e.c.GetStatus(e.ctx, "p::sub::2"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("an explicit ID also created an automatic one: %v", err)
	}
}

func e2eSubIDCollision(e *e2e) {
	reg := childRegistry()
	duroxide.RegisterOrchestration(reg, "Collide", func(ctx *duroxide.OrchestrationContext, id string) (string, error) {
		err := ctx.ScheduleSubOrchestration("Double", id, 5).Await(nil)
		var se *duroxide.SubOrchestrationError
		switch {
		case err == nil:
			return "no error", nil
		case !errors.As(err, &se):
			return "", fmt.Errorf("want *SubOrchestrationError, got %T %v", err, err)
		case !errors.Is(err, duroxide.ErrInstanceExists):
			return "", fmt.Errorf("error %v does not match ErrInstanceExists", err)
		case errors.Is(err, duroxide.ErrCanceled):
			return "", fmt.Errorf("error %v matches ErrCanceled", err)
		}
		return "collision on " + se.InstanceID, nil
	})
	duroxide.RegisterOrchestration(reg, "Hold", func(ctx *duroxide.OrchestrationContext, _ any) (any, error) {
		return nil, ctx.WaitForEvent("release").Await(nil)
	})
	e.runtime(reg)
	e.start("taken", "Double", 1)
	e.wait("taken")
	e.start("p", "Collide", "taken")
	var out string
	e.result("p", &out)
	if out != "collision on taken" {
		e.t.Fatalf("output %q", out)
	}
	// The existing instance is untouched.
	st := e.status("taken")
	if st.State != duroxide.StateCompleted || string(st.Output) != "2" || st.ParentInstanceID != "" {
		e.t.Fatalf("existing instance changed: %s parent %q", describeStatus(st), st.ParentInstanceID)
	}
	// Also when the taken instance is still running: it is left alone.
	e.start("running", "Hold", nil)
	e.waitEvents("running", history.ExternalSubscribed, 1)
	e.start("p2", "Collide", "running")
	var out2 string
	e.result("p2", &out2)
	if out2 != "collision on running" {
		e.t.Fatalf("output %q", out2)
	}
	if st := e.status("running"); st.State != duroxide.StateRunning || st.ParentInstanceID != "" {
		e.t.Fatalf("running instance changed: %s parent %q", describeStatus(st), st.ParentInstanceID)
	}
	// A free explicit ID works.
	e.start("p3", "Collide", "free")
	var out3 string
	e.result("p3", &out3)
	if out3 != "no error" {
		e.t.Fatalf("a free explicit ID: %q", out3)
	}
}

func e2eSubFailure(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, code int) (int, error) {
		return 0, ctx.ScheduleActivity("Boom", code).Await(nil)
	})
	duroxide.RegisterActivity(reg, "Boom", func(_ context.Context, code int) (int, error) { return 0, &e2eError{Code: code} })
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (duroxide.SubOrchestrationError, error) {
		err := ctx.ScheduleSubOrchestration("Child", "kid", 9).Await(nil)
		var se *duroxide.SubOrchestrationError
		if !errors.As(err, &se) {
			return duroxide.SubOrchestrationError{}, fmt.Errorf("want *SubOrchestrationError, got %T %v", err, err)
		}
		if errors.Is(err, duroxide.ErrCanceled) || errors.Is(err, duroxide.ErrInstanceExists) {
			return duroxide.SubOrchestrationError{}, fmt.Errorf("failure %v matches a sentinel", err)
		}
		return *se, nil
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	var se duroxide.SubOrchestrationError
	e.result("p", &se)
	if se.Name != "Child" || se.InstanceID != "kid" || se.Kind != "application" || !strings.Contains(se.Message, "e2e failure code 9") {
		e.t.Fatalf("child failure %+v", se)
	}
	if st := e.status("kid"); st.State != duroxide.StateFailed {
		e.t.Fatalf("child %s", describeStatus(st))
	}
	h := e.history("p", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.SubOrchestrationScheduled, history.SubOrchestrationFailed, history.OrchestrationCompleted)
}

func e2eSubNested(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Level", func(ctx *duroxide.OrchestrationContext, depth int) (string, error) {
		var me string
		if err := ctx.ScheduleActivity("Name", depth).Await(&me); err != nil {
			return "", err
		}
		if depth == 3 {
			return me, nil
		}
		var below string
		if err := ctx.ScheduleSubOrchestration("Level", "", depth+1).Await(&below); err != nil {
			return "", err
		}
		return me + ">" + below, nil
	})
	duroxide.RegisterActivity(reg, "Name", func(ctx context.Context, depth int) (string, error) {
		return fmt.Sprintf("L%d(%s)", depth, duroxide.ActivityContextFrom(ctx).InstanceID), nil
	})
	e.runtime(reg)
	e.start("root", "Level", 1)
	var out string
	e.result("root", &out)
	if out != "L1(root)>L2(root::sub::4)>L3(root::sub::4::sub::4)" {
		e.t.Fatalf("output %q", out)
	}
	if st := e.status("root::sub::4::sub::4"); st.ParentInstanceID != "root::sub::4" {
		e.t.Fatalf("grandchild parent %q", st.ParentInstanceID)
	}
}

func e2eSubFanOut(e *e2e) {
	const n = 20
	ids := make([]string, n)
	e.runtime(childRegistry())
	e.start("p", "Parent", ids)
	var out []int
	e.result("p", &out)
	if len(out) != n {
		e.t.Fatalf("output %v", out)
	}
	for i, v := range out {
		if v != 2*(i+1) {
			e.t.Fatalf("output %v", out)
		}
	}
	page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{ParentInstanceID: "p", States: []duroxide.State{duroxide.StateCompleted}})
	if err != nil || len(page.Instances) != n {
		e.t.Fatalf("completed children listed: %d (%v)", len(page.Instances), err)
	}
}

func e2eSubAfterContinueAsNew(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, round int) (string, error) {
		child := ctx.ScheduleSubOrchestration("Waiter", fmt.Sprintf("kid-%d", round), nil)
		if round == 1 {
			// Hand over without waiting for the first child; its completion
			// addresses execution 1 and must not reach execution 2, whose
			// child is scheduled at the same event ID.
			if err := ctx.WaitForEvent("next").Await(nil); err != nil {
				return "", err
			}
			return "", ctx.ContinueAsNew(2)
		}
		var s string
		if err := child.Await(&s); err != nil {
			return "", err
		}
		return fmt.Sprintf("exec %d got %s", ctx.ExecutionID(), s), nil
	})
	e.runtime(reg)
	e.start("p", "Parent", 1)
	e.waitEvents("kid-1", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "p", "next", nil); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("kid-2", history.ExternalSubscribed, 1)
	// kid-1 ends (canceled or completed) and notifies execution 1.
	if err := e.c.RaiseEvent(e.ctx, "kid-1", "go", "from kid-1"); err != nil &&
		!errors.Is(err, duroxide.ErrNotFound) && !errors.Is(err, duroxide.ErrInstanceTerminal) {
		e.t.Fatal(err)
	}
	e.wait("kid-1")
	e.drained()
	if st := e.status("p"); st.State != duroxide.StateRunning || st.ExecutionID != 2 {
		e.t.Fatalf("parent after kid-1 ended: %s", describeStatus(st))
	}
	if err := e.c.RaiseEvent(e.ctx, "kid-2", "go", "from kid-2"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("p", &out)
	if out != "exec 2 got from kid-2" {
		e.t.Fatalf("output %q", out)
	}
	h2 := e.history("p", 2)
	e.checkHistory(h2)
	e.wantKinds(h2, history.OrchestrationStarted, history.SubOrchestrationScheduled, history.SubOrchestrationCompleted, history.OrchestrationCompleted)
	if p := e.history("kid-2", 0)[0].Parent; p == nil || p.ExecutionID != 2 {
		e.t.Fatalf("kid-2's parent link %+v, want execution 2", p)
	}
}

func e2eSubVersion(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestrationVersion(reg, "Kid", "1.0.0", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "kid v1 " + ctx.Version(), nil
	})
	duroxide.RegisterOrchestrationVersion(reg, "Kid", "2.0.0", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "kid v2 " + ctx.Version(), nil
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		out := make([]string, 2)
		if err := ctx.ScheduleSubOrchestrationVersion("Kid", "1.0.0", "", nil).Await(&out[0]); err != nil {
			return nil, err
		}
		if err := ctx.ScheduleSubOrchestration("Kid", "", nil).Await(&out[1]); err != nil {
			return nil, err
		}
		return out, nil
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	var out []string
	e.result("p", &out)
	if jsonOf(e.t, out) != `["kid v1 1.0.0","kid v2 2.0.0"]` {
		e.t.Fatalf("output %v", out)
	}
	if v := e.status("p::sub::2").Version; v != "1.0.0" {
		e.t.Fatalf("pinned child version %q", v)
	}
}

func e2eParentFailureCancelsChildren(e *e2e) {
	reg := holdRegistry()
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		ctx.ScheduleSubOrchestration("Hold", "kid-a", nil)
		ctx.ScheduleSubOrchestration("Hold", "kid-b", nil)
		if err := ctx.WaitForEvent("fail").Await(nil); err != nil {
			return "", err
		}
		return "", errors.New("parent gives up")
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	e.waitEvents("kid-a", history.ExternalSubscribed, 1)
	e.waitEvents("kid-b", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "p", "fail", nil); err != nil {
		e.t.Fatal(err)
	}
	if oe := e.failed("p"); oe.Info.Message != "parent gives up" {
		e.t.Fatalf("parent failure %+v", oe.Info)
	}
	for _, id := range []string{"kid-a", "kid-b"} {
		e.terminalError(id, duroxide.StateCanceled)
	}
}

func e2eParentCompletionCancelsChild(e *e2e) {
	reg := holdRegistry()
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		ctx.ScheduleSubOrchestration("Hold", "kid", nil) // never awaited
		if err := ctx.WaitForEvent("done").Await(nil); err != nil {
			return "", err
		}
		return "parent done", nil
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	e.waitEvents("kid", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "p", "done", nil); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("p", &out)
	if out != "parent done" {
		e.t.Fatalf("output %q", out)
	}
	e.terminalError("kid", duroxide.StateCanceled)
	h := e.history("p", 0)
	if count(h, history.SubOrchestrationCancelRequested) != 1 || h[len(h)-1].Kind != history.OrchestrationCompleted {
		e.t.Fatalf("parent history %v", eventKinds(h))
	}
}

func e2eSubContinuesAsNew(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Countdown", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		if n > 0 {
			return "", ctx.ContinueAsNew(n - 1)
		}
		return fmt.Sprintf("liftoff in execution %d", ctx.ExecutionID()), nil
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleSubOrchestration("Countdown", "kid", 3).Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.start("p", "Parent", nil)
	var out string
	e.result("p", &out)
	if out != "liftoff in execution 4" {
		e.t.Fatalf("output %q: the parent gets the result of the child's last execution", out)
	}
	if st := e.status("kid"); st.ParentInstanceID != "p" || st.ExecutionID != 4 {
		e.t.Fatalf("child %s parent %q", describeStatus(st), st.ParentInstanceID)
	}
	if n := count(e.history("p", 0), history.SubOrchestrationCompleted); n != 1 {
		e.t.Fatalf("%d completions", n)
	}
}
