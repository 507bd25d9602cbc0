package duroxide_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// waitsOf returns the waits of id, failing the test on error.
func waitsOf(t *testing.T, h *duroxidetest.Harness, id string) (*duroxide.Status, []duroxide.Wait) {
	t.Helper()
	st, err := h.Client.Inspect(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("Inspect(%s): %v", id, err)
	}
	return st, st.WaitingFor
}

// wantKinds fails unless ws has exactly these kinds, in order.
func wantKinds(t *testing.T, ws []duroxide.Wait, kinds ...duroxide.WaitKind) {
	t.Helper()
	if len(ws) != len(kinds) {
		t.Fatalf("waits %+v, want kinds %v", ws, kinds)
	}
	for i := range ws {
		if ws[i].Kind != kinds[i] {
			t.Fatalf("waits %+v, want kinds %v", ws, kinds)
		}
	}
}

// TestWaitingForThroughRuntime runs real orchestrations on duroxidetest's
// runtime and checks what each says it waits for.
func TestWaitingForThroughRuntime(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	var fails atomic.Int32
	duroxide.RegisterActivity(reg, "Block", func(ctx context.Context, _ string) (string, error) {
		running <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "ok", nil
	})
	duroxide.RegisterActivity(reg, "Flaky", func(context.Context, string) (string, error) {
		fails.Add(1)
		return "", context.DeadlineExceeded
	})
	duroxide.RegisterOrchestration(reg, "Approve", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		ev, timer := ctx.WaitForEvent("approval"), ctx.ScheduleTimer(time.Hour)
		ctx.Select(ev, timer)
		return "done", nil
	})
	duroxide.RegisterOrchestration(reg, "RunBlock", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		var s string
		return s, ctx.ScheduleActivity("Block", "x").Await(&s)
	})
	duroxide.RegisterOrchestration(reg, "Retry", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		var s string
		return s, ctx.ScheduleActivityWithRetry("Flaky", "x", duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Minute}).Await(&s)
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		var s string
		return s, ctx.ScheduleSubOrchestration("Approve", "child-of-parent", "x").Await(&s)
	})
	duroxide.RegisterOrchestration(reg, "CallsMissing", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		var s string
		return s, ctx.ScheduleActivity("Missing", "x").Await(&s)
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{MaxAttempts: 10}})
	t0 := h.Clock.Now()

	// Event and timer.
	h.Start("Approve", "approve", "x")
	h.WaitIdle()
	_, ws := waitsOf(t, h, "approve")
	wantKinds(t, ws, duroxide.WaitEvent, duroxide.WaitTimer)
	if ws[0].Name != "approval" || !ws[1].FiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("waits %+v", ws)
	}

	// A child, Running.
	h.Start("Parent", "parent", "x")
	h.WaitIdle()
	_, ws = waitsOf(t, h, "parent")
	wantKinds(t, ws, duroxide.WaitChild)
	if ws[0].InstanceID != "child-of-parent" || ws[0].ChildState != duroxide.StateRunning {
		t.Fatalf("child wait %+v", ws[0])
	}

	// A durable retry after a failed attempt.
	h.Start("Retry", "retry", "x")
	h.WaitIdle()
	_, ws = waitsOf(t, h, "retry")
	wantKinds(t, ws, duroxide.WaitActivity)
	if ws[0].ActivityState != duroxide.ActivityRetrying || ws[0].Attempt != 2 || !ws[0].RetryAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("retry wait %+v (after %d failures)", ws[0], fails.Load())
	}

	// Unregistered activity: never delivered, reported unserved.
	h.Start("CallsMissing", "missing-act", "x")
	h.WaitIdle()
	_, ws = waitsOf(t, h, "missing-act")
	wantKinds(t, ws, duroxide.WaitActivity)
	if w := ws[0]; w.Name != "Missing" || !w.Unserved || w.Message != `no runtime serves activity Missing (queue "")` || w.Deliveries != 0 {
		t.Fatalf("unregistered activity wait %+v", w)
	}

	// Unregistered orchestration.
	h.Start("Nope", "missing-orch", "x")
	h.WaitIdle()
	st, ws := waitsOf(t, h, "missing-orch")
	wantKinds(t, ws, duroxide.WaitUnregisteredOrchestration)
	if ws[0].Name != "Nope" || st.Stalled {
		t.Fatalf("unregistered orchestration wait %+v", ws[0])
	}

	// Delayed start.
	h.StartWith("Approve", "later", "x", &duroxide.StartOptions{StartAt: t0.Add(24 * time.Hour)})
	_, ws = waitsOf(t, h, "later")
	wantKinds(t, ws, duroxide.WaitDelayedStart)
	if !ws[0].At.Equal(t0.Add(24 * time.Hour)) {
		t.Fatalf("delayed start wait %+v", ws[0])
	}

	// Queued behind an execution lock.
	h.StartWith("Approve", "holder", "x", &duroxide.StartOptions{LockKey: "wf"})
	h.StartWith("Approve", "queued", "x", &duroxide.StartOptions{LockKey: "wf", QueueIfLocked: true})
	h.WaitIdle()
	_, ws = waitsOf(t, h, "queued")
	wantKinds(t, ws, duroxide.WaitLock)
	if ws[0].LockKey != "wf" || ws[0].Holder != "holder" || ws[0].QueuePosition != 1 {
		t.Fatalf("lock wait %+v", ws[0])
	}

	// The unregistered orchestration and activity stall once the
	// threshold passes without progress; the event and timer waits do not.
	h.Clock.Advance(duroxide.DefaultStalledAfter + time.Second)
	for _, id := range []string{"missing-orch", "missing-act"} {
		if st, _ := waitsOf(t, h, id); !st.Stalled {
			t.Fatalf("%s not stalled: %+v", id, st.WaitingFor)
		}
	}
	if st, _ := waitsOf(t, h, "approve"); st.Stalled {
		t.Fatalf("an instance waiting on an event is stalled: %+v", st.WaitingFor)
	}
	page, err := h.Client.ListInstances(context.Background(), &duroxide.ListOptions{Stalled: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range page.Instances {
		ids = append(ids, in.InstanceID)
	}
	if len(ids) != 2 {
		t.Fatalf("stalled instances %v, want missing-act and missing-orch", ids)
	}

	// An activity running on a worker (last: it holds the worker).
	h.Start("RunBlock", "block", "x")
	<-running
	_, ws = waitsOf(t, h, "block")
	close(release)
	wantKinds(t, ws, duroxide.WaitActivity)
	if ws[0].Name != "Block" || ws[0].ActivityState != duroxide.ActivityRunning || ws[0].LockedUntil.IsZero() || ws[0].Deliveries != 1 {
		t.Fatalf("running activity wait %+v", ws[0])
	}
	h.Wait("block")
}

// TestWaitingForParked changes an orchestration's code under a live
// instance: its next turn parks it, and its wait says where replay diverged.
func TestWaitingForParked(t *testing.T) {
	t.Parallel()
	var changed atomic.Bool
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Drift", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		if changed.Load() {
			ctx.ScheduleTimer(time.Minute)
		}
		var s string
		return s, ctx.WaitForEvent("go").Await(&s)
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{CacheSize: -1}})
	h.Start("Drift", "drift", "x")
	h.WaitIdle()
	changed.Store(true)
	h.RaiseEvent("drift", "go", "now")
	h.WaitIdle()
	st, ws := waitsOf(t, h, "drift")
	if len(ws) == 0 || ws[0].Kind != duroxide.WaitParked {
		t.Fatalf("waits %+v, want parked first", ws)
	}
	p := ws[0]
	if p.EventID != 2 || p.Expected == "" || p.Found == "" || p.Since.IsZero() || st.Stalled {
		t.Fatalf("parked wait %+v", p)
	}
	h.Clock.Advance(duroxide.DefaultStalledAfter + time.Second)
	if st, _ := waitsOf(t, h, "drift"); !st.Stalled || !st.WaitingFor[0].Stalled {
		t.Fatalf("parked instance not stalled after the threshold: %+v", st.WaitingFor)
	}
}
