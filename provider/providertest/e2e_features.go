package providertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// The programming model's features on every store: patches across a
// deploy, activity timeouts and canceling a task.
var e2eFeatureCases = []e2eCase{
	{"PatchedAcrossADeploy", e2ePatchedAcrossADeploy},
	{"ActivityScheduleToCloseTimeout", e2eScheduleToCloseTimeout},
	{"ActivityStartToCloseTimeoutRetries", e2eStartToCloseTimeoutRetries},
	{"CancelActivityThatLostASelect", e2eCancelLoser},
}

// shipRegistry registers "Ship" as release v of its code, all under
// version 1.0.0 (a code change, not a new version): v1 packs, waits for
// "go" and ships; v2 also notifies before packing and audits after
// shipping, both behind ctx.Patched; v3 retires the old branch of
// "notify" (ctx.Deprecated, notify unconditional).
func shipRegistry(v int) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	step := duroxide.RegisterActivity(reg, "Step", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, "Ship", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var done []string
		do := func(s string) error {
			out, err := duroxide.CallActivity(ctx, step, s, nil).Get()
			done = append(done, out)
			return err
		}
		switch {
		case v == 2 && ctx.Patched("notify"):
			if err := do("notify"); err != nil {
				return "", err
			}
		case v == 3:
			ctx.Deprecated("notify")
			if err := do("notify"); err != nil {
				return "", err
			}
		}
		if err := do("pack"); err != nil {
			return "", err
		}
		if err := ctx.WaitForEvent("go").Await(nil); err != nil {
			return "", err
		}
		if err := do("ship"); err != nil {
			return "", err
		}
		if v >= 2 && ctx.Patched("audit") {
			if err := do("audit"); err != nil {
				return "", err
			}
		}
		return strings.Join(done, ","), nil
	})
	return reg
}

// Instances of v1 run half-way (they wait for "go" after packing), v2 is
// deployed: every instance completes, the old ones skipping the patch
// their history went past (notify) and taking the one it had not reached
// (audit), new ones taking both. Inspect shows the patches recorded. v3
// (notify deprecated) replays the new instance's history, and its own
// instances record the patch, so v2 replays them. The replay rule on its
// own: v2 replays a v1 history recorded up to the wait (on the old branch
// of notify), not a finished v1 history (it ends before audit); v3 replays
// neither.
func e2ePatchedAcrossADeploy(e *e2e) {
	rt1 := e.runtime(shipRegistry(1))
	e.start("old", "Ship", struct{}{})
	e.start("v1", "Ship", struct{}{})
	e.waitEvents("old", history.ExternalSubscribed, 1)
	e.waitEvents("v1", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "v1", "go", true); err != nil {
		e.t.Fatal(err)
	}
	e.result("v1", nil)
	e.shutdown(rt1)
	v1 := e.history("v1", 0)
	waiting := v1[:indexOf(v1, history.ExternalSubscribed, 0)+1]
	for _, r := range []struct {
		v       int
		h       []history.Event
		replays bool
	}{{2, waiting, true}, {2, v1, false}, {3, waiting, false}, {3, v1, false}} {
		if err := duroxide.ReplayHistory(shipRegistry(r.v), "v1", r.h); (err == nil) != r.replays {
			e.t.Fatalf("v%d replaying a v1 history of %d events: %v, want replays=%v", r.v, len(r.h), err, r.replays)
		}
	}
	rt2 := e.runtime(shipRegistry(2))
	e.start("new", "Ship", struct{}{})
	e.waitEvents("new", history.ExternalSubscribed, 1)
	for id, want := range map[string][2]string{"old": {"pack,ship,audit", "[audit]"}, "new": {"notify,pack,ship,audit", "[notify audit]"}} {
		if err := e.c.RaiseEvent(e.ctx, id, "go", true); err != nil {
			e.t.Fatal(err)
		}
		var out string
		if e.result(id, &out); out != want[0] {
			e.t.Fatalf("%s: got %q, want %q", id, out, want[0])
		}
		st, err := e.c.Inspect(e.ctx, id, nil)
		if err != nil || "["+strings.Join(st.Patches, " ")+"]" != want[1] {
			e.t.Fatalf("%s: Inspect shows patches %v (%v), want %s", id, st.Patches, err, want[1])
		}
		if err := duroxide.ReplayHistory(shipRegistry(2), id, e.history(id, 0)); err != nil {
			e.t.Fatalf("%s: %v", id, err)
		}
	}
	if err := duroxide.ReplayHistory(shipRegistry(3), "new", e.history("new", 0)); err != nil {
		e.t.Fatalf("v3 does not replay a v2 history: %v", err)
	}
	e.shutdown(rt2)
	e.runtime(shipRegistry(3))
	e.start("new-3", "Ship", struct{}{})
	e.waitEvents("new-3", history.ExternalSubscribed, 1)
	if err := e.c.RaiseEvent(e.ctx, "new-3", "go", true); err != nil {
		e.t.Fatal(err)
	}
	var out string
	if e.result("new-3", &out); out != "notify,pack,ship,audit" {
		e.t.Fatalf("new-3: got %q", out)
	}
	h := e.history("new-3", 0)
	var recorded []string
	for _, ev := range find(h, history.PatchRecorded) {
		recorded = append(recorded, ev.Name)
	}
	if fmt.Sprint(recorded) != "[notify audit]" {
		e.t.Fatalf("v3 recorded patches %v, want [notify audit]", recorded)
	}
	if err := duroxide.ReplayHistory(shipRegistry(2), "new-3", h); err != nil {
		e.t.Fatalf("v2 does not replay a v3 history: %v", err)
	}
}

// hanging is an activity that blocks until its context is canceled,
// reporting its start and its cancellation.
type hanging struct {
	started, canceled chan struct{}
}

func newHanging() *hanging {
	return &hanging{started: make(chan struct{}, 4), canceled: make(chan struct{}, 4)}
}

func (h *hanging) run(ctx context.Context, _ string) (string, error) {
	h.started <- struct{}{}
	<-ctx.Done()
	h.canceled <- struct{}{}
	return "late", nil
}

// longLocks keeps locks and route announcements alive across the fake
// clock's steps, so only the timeouts under test fire.
func longLocks(o *duroxide.RuntimeOptions) {
	o.WorkerLockTimeout, o.OrchestratorLockTimeout = 3*time.Hour, 3*time.Hour
}

// A one-hour schedule-to-close timeout fails the hanging call with kind
// "timeout" and cancels the running attempt; its late result is not
// recorded.
func e2eScheduleToCloseTimeout(e *e2e) {
	reg := duroxide.NewRegistry()
	hang := newHanging()
	slow := duroxide.RegisterActivity(reg, "Slow", hang.run)
	duroxide.RegisterOrchestration(reg, "Deadline", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		out, err := duroxide.CallActivity(ctx, slow, "x", &duroxide.ActivityOptions{ScheduleToCloseTimeout: time.Hour}).Get()
		var ae *duroxide.ActivityError
		if errors.Is(err, duroxide.ErrTimeout) && errors.As(err, &ae) && ae.Kind == "timeout" {
			return "timed out", nil
		}
		return out, err
	})
	e.runtime(reg, longLocks)
	e.start("deadline", "Deadline", struct{}{})
	e.signaled("the activity to start", hang.started)
	e.fc.Advance(time.Hour)
	var out string
	if st := e.advanceUntilDone("deadline"); st.Decode(&out) != nil || out != "timed out" {
		e.t.Fatalf("got %q, want the call to fail with a timeout", out)
	}
	e.signaled("the attempt to be canceled", hang.canceled)
	h := e.history("deadline", 0)
	if count(h, history.ActivityCancelRequested) != 1 || count(h, history.ActivityCompleted) != 0 {
		e.t.Fatalf("want one cancel breadcrumb and no late result, got %v", eventKinds(h))
	}
	e.replays(reg, "deadline")
}

// A one-hour start-to-close timeout fails the hanging first attempt (kind
// "timeout") and cancels it; the retry succeeds.
func e2eStartToCloseTimeoutRetries(e *e2e) {
	reg := duroxide.NewRegistry()
	var once sync.Once
	started := make(chan struct{}, 1)
	flaky := duroxide.RegisterActivity(reg, "HangOnce", func(ctx context.Context, s string) (string, error) {
		hang := false
		once.Do(func() { hang = true })
		if hang {
			started <- struct{}{}
			<-ctx.Done()
			return "late", nil
		}
		return s + " on a retry", nil
	})
	duroxide.RegisterOrchestration(reg, "PerAttempt", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		return duroxide.CallActivity(ctx, flaky, "done", &duroxide.ActivityOptions{StartToCloseTimeout: time.Hour,
			Retry: &duroxide.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Minute}}).Get()
	})
	e.runtime(reg, longLocks)
	e.start("attempts", "PerAttempt", struct{}{})
	e.signaled("the first attempt to start", started)
	e.fc.Advance(time.Hour)
	var out string
	if st := e.advanceUntilDone("attempts"); st.Decode(&out) != nil || out != "done on a retry" {
		e.t.Fatalf("got %q, want the retry's result", out)
	}
	// The timeout is the attempt's durable timer; the timed-out attempt
	// is canceled (a breadcrumb) and retried.
	h := e.history("attempts", 0)
	if count(h, history.ActivityScheduled) != 2 || count(h, history.ActivityCancelRequested) != 1 || count(h, history.ActivityCompleted) != 1 {
		e.t.Fatalf("want 2 attempts, the first canceled by its timeout, got %v", eventKinds(h))
	}
	e.replays(reg, "attempts")
}

// The activity that lost a Select to a timer is canceled: its context is
// canceled, its Get returns ErrCanceled, and its late result does not
// replace the cancellation.
func e2eCancelLoser(e *e2e) {
	reg := duroxide.NewRegistry()
	hang := newHanging()
	slow := duroxide.RegisterActivity(reg, "Slow", hang.run)
	duroxide.RegisterOrchestration(reg, "Race", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		f := duroxide.CallActivity(ctx, slow, "x", nil)
		if ctx.Select(f.Task(), ctx.ScheduleTimer(time.Minute)) == 0 {
			return f.Get()
		}
		f.Cancel()
		if _, err := f.Get(); !errors.Is(err, duroxide.ErrCanceled) {
			return "", err
		}
		if err := ctx.ScheduleTimer(time.Hour).Await(nil); err != nil {
			return "", err
		}
		if _, err := f.Get(); !errors.Is(err, duroxide.ErrCanceled) {
			return "", errors.New("the late result replaced the cancellation")
		}
		return "gave up", nil
	})
	e.runtime(reg, longLocks)
	e.start("race", "Race", struct{}{})
	e.signaled("the activity to start", hang.started)
	e.fc.Advance(time.Minute)
	e.signaled("the losing activity to be canceled", hang.canceled)
	var out string
	if st := e.advanceUntilDone("race"); st.Decode(&out) != nil || out != "gave up" {
		e.t.Fatalf("got %q, want gave up", out)
	}
	if n := count(e.history("race", 0), history.ActivityCancelRequested); n != 1 {
		e.t.Fatalf("want one cancel breadcrumb, got %d", n)
	}
	e.replays(reg, "race")
}
