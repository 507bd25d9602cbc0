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

// e2eModelCases cover the programming model on every store: retry
// policies (sessions, non-retryable failures, jitter), typed references
// and client helpers, canceling timers and children, cancellation seen by
// the code and its grace period across a restart, and orchestrations no
// runtime registers failing after UnservedTimeout.
var e2eModelCases = []e2eCase{
	{"RetryOnSession", e2eRetryOnSession},
	{"RetryNonRetryableAndJitter", e2eRetryNonRetryable},
	{"TypedReferencesAndClientHelpers", e2eTypedReferences},
	{"CancelTimerAndChild", e2eCancelTimerAndChild},
	{"CanceledTimerIsNoLongerAWait", e2eCanceledTimerNotAWait},
	{"CancelCascadeCleansUpChild", e2eCancelCascadeCleansUp},
	{"CancelWithoutGraceEndsAtOnce", e2eCancelWithoutGrace},
	{"CancelGraceSurvivesRestart", e2eCancelGraceSurvivesRestart},
	{"UnservedOrchestrationFailsAfterTimeout", e2eUnservedOrchestrationFails},
}

// replays requires the current execution of id to replay against reg.
func (e *e2e) replays(reg *duroxide.Registry, id string) {
	e.t.Helper()
	if err := duroxide.ReplayHistory(reg, id, e.history(id, 0)); err != nil {
		e.t.Fatalf("%s does not replay its own history: %v", id, err)
	}
}

// cancel cancels id with reason, failing the test on error.
func (e *e2e) cancel(id, reason string) {
	e.t.Helper()
	if err := e.c.CancelInstance(e.ctx, id, reason); err != nil {
		e.t.Fatalf("CancelInstance(%s): %v", id, err)
	}
}

// A retried call on a session keeps every attempt on that session.
func e2eRetryOnSession(e *e2e) {
	reg := duroxide.NewRegistry()
	var mu sync.Mutex
	var sessions []string
	act := duroxide.RegisterActivity(reg, "Pinned", func(ctx context.Context, _ struct{}) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		sessions = append(sessions, duroxide.ActivityContextFrom(ctx).SessionID)
		if len(sessions) < 3 {
			return 0, errors.New("not yet")
		}
		return len(sessions), nil
	})
	duroxide.RegisterOrchestration(reg, "SessionRetry", func(ctx *duroxide.OrchestrationContext, _ struct{}) (int, error) {
		return duroxide.CallActivity(ctx, act, struct{}{}, &duroxide.ActivityOptions{
			Session: "gpu-1",
			Retry:   &duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second},
		}).Get()
	})
	e.runtime(reg)
	e.start("sess-retry", "SessionRetry", struct{}{})
	var n int
	if st := e.advanceUntilDone("sess-retry"); st.Decode(&n) != nil || n != 3 {
		e.t.Fatalf("got %d (%s), want success at the third attempt", n, describeStatus(st))
	}
	sched := find(e.history("sess-retry", 0), history.ActivityScheduled)
	if len(sched) != 3 {
		e.t.Fatalf("%d attempts scheduled, want 3", len(sched))
	}
	for _, ev := range sched {
		if ev.SessionID != "gpu-1" {
			e.t.Fatalf("ActivityScheduled %d on session %q, want gpu-1", ev.EventID, ev.SessionID)
		}
	}
	mu.Lock()
	if fmt.Sprint(sessions) != "[gpu-1 gpu-1 gpu-1]" {
		e.t.Fatalf("attempts ran on sessions %v, want gpu-1 each time", sessions)
	}
	mu.Unlock()
	e.replays(reg, "sess-retry")
}

// An error the activity marks NonRetryable, or whose Go type the policy
// lists, ends the retries at the first attempt; another error is retried
// to MaxAttempts, after waits the policy's Jitter shortens (each within
// [d*(1-Jitter), d], not all the nominal d).
func e2eRetryNonRetryable(e *e2e) {
	reg := duroxide.NewRegistry()
	calls := newCounter()
	act := duroxide.RegisterActivity(reg, "Validate", func(_ context.Context, how string) (string, error) {
		calls.inc(how)
		switch how {
		case "marked":
			return "", duroxide.NonRetryable(fmt.Errorf("bad input: %w", errors.New("empty")))
		case "typed":
			return "", &e2eError{Code: 7}
		}
		return "", errors.New("transient")
	})
	const jitter = 0.5
	duroxide.RegisterOrchestration(reg, "Validate", func(ctx *duroxide.OrchestrationContext, how string) (string, error) {
		_, err := duroxide.CallActivity(ctx, act, how, &duroxide.ActivityOptions{Retry: &duroxide.RetryPolicy{
			MaxAttempts: 4, InitialInterval: time.Second, Jitter: jitter,
			NonRetryable: []string{fmt.Sprintf("%T", &e2eError{})},
		}}).Get()
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return "", fmt.Errorf("want an *ActivityError, got %v", err)
		}
		return ae.Message, nil
	})
	e.runtime(reg)
	cases := []struct {
		how, msg string
		attempts int
	}{
		{"marked", "bad input: empty", 1},
		{"typed", "e2e failure code 7", 1},
		{"other", "transient", 4},
	}
	for _, tc := range cases {
		e.start(tc.how, "Validate", tc.how)
	}
	for _, tc := range cases {
		var msg string
		if st := e.advanceUntilDone(tc.how); st.Decode(&msg) != nil || msg != tc.msg {
			e.t.Fatalf("%s: got %q (%s), want %q", tc.how, msg, describeStatus(st), tc.msg)
		}
		if n := calls.get(tc.how); n != tc.attempts {
			e.t.Fatalf("%s: %d attempts, want %d", tc.how, n, tc.attempts)
		}
		e.replays(reg, tc.how)
	}
	delays := retryDelays(e, e.history("other", 0))
	if len(delays) != 3 {
		e.t.Fatalf("retry waits %v, want 3", delays)
	}
	nominal := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	jittered := false
	for i, d := range delays {
		lo := time.Duration(float64(nominal[i]) * (1 - jitter))
		if d < lo-time.Millisecond || d > nominal[i] {
			e.t.Fatalf("retry wait %d is %s, want within [%s, %s]", i+1, d, lo, nominal[i])
		}
		jittered = jittered || d != nominal[i]
	}
	if !jittered {
		e.t.Fatalf("retry waits %v are the nominal ones: Jitter was ignored", delays)
	}
}

type quote struct {
	Item  string `json:"item"`
	Cents int    `json:"cents"`
}

// Typed references: a reference pinned to a version starts that version
// (from the client and as a child), an unpinned one the latest, an
// option's Version overrides the pin; RunTyped returns a failed instance
// as *OrchestrationError and refuses a reference of another orchestration.
func e2eTypedReferences(e *e2e) {
	reg := duroxide.NewRegistry()
	price := duroxide.RegisterActivity(reg, "Price", func(_ context.Context, item string) (quote, error) {
		if item == "" {
			return quote{}, duroxide.NonRetryable(errors.New("no item"))
		}
		return quote{Item: item, Cents: 100 * len(item)}, nil
	})
	v1 := duroxide.RegisterOrchestrationVersion(reg, "Quote", "1.0.0", func(ctx *duroxide.OrchestrationContext, item string) (quote, error) {
		return duroxide.CallActivity(ctx, price, item, nil).Get()
	})
	duroxide.RegisterOrchestrationVersion(reg, "Quote", "2.0.0", func(ctx *duroxide.OrchestrationContext, item string) (quote, error) {
		q, err := duroxide.CallActivity(ctx, price, item, nil).Get()
		q.Cents *= 2
		return q, err
	})
	parent := duroxide.RegisterOrchestration(reg, "Quotes", func(ctx *duroxide.OrchestrationContext, item string) ([]quote, error) {
		a := duroxide.CallSubOrchestration(ctx, v1, "", item, nil)                 // pinned to 1.0.0
		b := duroxide.CallSubOrchestration(ctx, v1.WithVersion(""), "", item, nil) // the latest
		c := duroxide.CallSubOrchestration(ctx, v1, "", item, &duroxide.SubOrchestrationOptions{Version: "2.0.0"})
		var out []quote
		for _, f := range []*duroxide.Future[quote]{a, b, c} {
			q, err := f.Get()
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
		return out, nil
	})
	e.runtime(reg)
	ctx, cancel := context.WithTimeout(e.ctx, e2eTimeout)
	defer cancel()

	if err := duroxide.StartTyped(ctx, e.c, v1, "q1", "tea", nil); err != nil {
		e.t.Fatal(err)
	}
	if q, err := duroxide.WaitTyped(ctx, e.c, v1, "q1"); err != nil || q != (quote{Item: "tea", Cents: 300}) {
		e.t.Fatalf("pinned reference: %+v, %v; want version 1.0.0's quote", q, err)
	}
	if q, err := duroxide.RunTyped(ctx, e.c, duroxide.NewOrchestrationRef[string, quote]("Quote"), "q2", "tea", nil); err != nil || q.Cents != 600 {
		t := e.status("q2")
		e.t.Fatalf("unpinned reference: %+v, %v (%s); want the latest version's quote", q, err, describeStatus(t))
	}
	for id, want := range map[string]string{"q1": "1.0.0", "q2": "2.0.0"} {
		if v := e.status(id).Version; v != want {
			e.t.Fatalf("%s ran version %q, want %s", id, v, want)
		}
	}

	qs, err := duroxide.RunTyped(ctx, e.c, parent, "quotes", "cake", nil)
	if err != nil || len(qs) != 3 || qs[0].Cents != 400 || qs[1].Cents != 800 || qs[2].Cents != 800 {
		e.t.Fatalf("children: %+v, %v; want 400 (pinned), 800 (latest), 800 (option)", qs, err)
	}
	var versions []string
	for _, ev := range find(e.history("quotes", 0), history.SubOrchestrationScheduled) {
		versions = append(versions, ev.Version)
	}
	if fmt.Sprintf("%q", versions) != `["1.0.0" "" "2.0.0"]` {
		e.t.Fatalf("children scheduled with versions %q", versions)
	}

	_, err = duroxide.RunTyped(ctx, e.c, v1, "q3", "", nil)
	var oe *duroxide.OrchestrationError
	if !errors.As(err, &oe) || oe.State != duroxide.StateFailed {
		e.t.Fatalf("failed instance: %v, want an *OrchestrationError in state Failed", err)
	}
	if _, err := duroxide.WaitTyped(ctx, e.c, parent, "q1"); !errors.Is(err, duroxide.ErrInvalidArgument) {
		e.t.Fatalf("a reference to another orchestration: %v, want ErrInvalidArgument", err)
	}
	for _, id := range []string{"q1", "q2", "quotes"} {
		e.replays(reg, id)
	}
}

// Canceling a pending timer fails its Await with ErrCanceled at once (the
// one-hour timer does not delay the instance); canceling a child fails its
// call with ErrCanceled (a *SubOrchestrationError) and cancels the child.
func e2eCancelTimerAndChild(e *e2e) {
	reg := duroxide.NewRegistry()
	child := duroxide.RegisterOrchestration(reg, "Forever", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		return "", ctx.WaitForEvent("never").Await(nil)
	})
	duroxide.RegisterOrchestration(reg, "Canceler", func(ctx *duroxide.OrchestrationContext, _ struct{}) ([]bool, error) {
		timer := ctx.ScheduleTimer(time.Hour)
		timer.Cancel()
		terr := timer.Await(nil)

		kid := duroxide.CallSubOrchestration(ctx, child, "kid", struct{}{}, nil)
		if err := ctx.ScheduleTimer(time.Second).Await(nil); err != nil { // lets the child start
			return nil, err
		}
		kid.Cancel()
		_, kerr := kid.Get()
		var se *duroxide.SubOrchestrationError
		return []bool{errors.Is(terr, duroxide.ErrCanceled), errors.Is(kerr, duroxide.ErrCanceled), errors.As(kerr, &se)}, nil
	})
	e.runtime(reg)
	e.start("canceler", "Canceler", struct{}{})
	st := e.advanceUntilDone("canceler")
	var got []bool
	if err := st.Decode(&got); err != nil || fmt.Sprint(got) != "[true true true]" {
		e.t.Fatalf("got %v, %v (%s); want the timer and the child canceled", got, err, describeStatus(st))
	}
	if kst := e.wait("kid"); kst.State != duroxide.StateCanceled {
		e.t.Fatalf("child is %s, want Canceled", kst.State)
	}
	if d := st.UpdatedAt.Sub(e2eStart); d >= time.Hour {
		e.t.Fatalf("the canceled one-hour timer delayed the instance: it ended %s after its start", d)
	}
	e.replays(reg, "canceler")
}

// Inspect stops listing a timer the code canceled, and a call's
// schedule-to-close deadline once the call has ended.
func e2eCanceledTimerNotAWait(e *e2e) {
	reg := duroxide.NewRegistry()
	quick := duroxide.RegisterActivity(reg, "Quick", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, "Abandon", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ctx.ScheduleTimer(time.Hour).Cancel()
		if _, err := duroxide.CallActivity(ctx, quick, "x", &duroxide.ActivityOptions{ScheduleToCloseTimeout: time.Hour}).Get(); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.start("abandon", "Abandon", struct{}{})
	e.waitEvents("abandon", history.ExternalSubscribed, 1)
	waits, err := e.c.WaitingFor(e.ctx, "abandon", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(waits) != 1 || waits[0].Kind != duroxide.WaitEvent || waits[0].Name != "go" {
		e.t.Fatalf("waits %+v, want only the event", waits)
	}
	if err := e.c.RaiseEvent(e.ctx, "abandon", "go", "done"); err != nil {
		e.t.Fatal(err)
	}
	var out string
	if e.result("abandon", &out); out != "done" {
		e.t.Fatalf("got %q", out)
	}
	e.replays(reg, "abandon")
}

// Canceling a parent cancels its child; both see it (the child through
// CancelRequested in a Select, the parent as its child's call failing
// with ErrCanceled) and both run a cleanup activity before they end
// Canceled.
func e2eCancelCascadeCleansUp(e *e2e) {
	reg := duroxide.NewRegistry()
	cleaned := newCounter()
	undo := duroxide.RegisterActivity(reg, "Undo", func(_ context.Context, who string) (struct{}, error) {
		cleaned.inc(who)
		return struct{}{}, nil
	})
	child := duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		notice := ctx.CancelRequested()
		if ctx.Select(ctx.WaitForEvent("go"), notice) != 1 {
			return "went", nil
		}
		if err := notice.Await(nil); !errors.Is(err, duroxide.ErrCanceled) {
			return "", errors.New("the notice does not fail with ErrCanceled")
		}
		_, err := duroxide.CallActivity(ctx, undo, "child", nil).Get()
		return "", err
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		_, err := duroxide.CallSubOrchestration(ctx, child, "parent-child", struct{}{}, nil).Get()
		if !errors.Is(err, duroxide.ErrCanceled) {
			return "", errors.New("the child's call did not fail with ErrCanceled")
		}
		_, err = duroxide.CallActivity(ctx, undo, "parent", nil).Get()
		return "", err
	})
	e.runtime(reg)
	e.start("parent", "Parent", struct{}{})
	e.waitEvents("parent-child", history.ExternalSubscribed, 1)
	e.cancel("parent", "abort")
	for _, id := range []string{"parent", "parent-child"} {
		if oe := e.terminalError(id, duroxide.StateCanceled); !errors.Is(oe, duroxide.ErrCanceled) {
			e.t.Fatalf("%s: %v, want ErrCanceled", id, oe)
		}
		if n := count(e.history(id, 0), history.ActivityCompleted); n != 1 {
			e.t.Fatalf("%s: %d cleanups recorded, want 1", id, n)
		}
		e.replays(reg, id)
	}
	if cleaned.get("parent") != 1 || cleaned.get("child") != 1 {
		e.t.Fatalf("cleanups ran parent %d, child %d times, want once each", cleaned.get("parent"), cleaned.get("child"))
	}
}

// A negative CancelGracePeriod ends a canceled instance at once: the code
// does not run again and no deadline is recorded.
func e2eCancelWithoutGrace(e *e2e) {
	reg := duroxide.NewRegistry()
	ran := newCounter()
	duroxide.RegisterOrchestration(reg, "Waiter", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		err := ctx.WaitForEvent("x").Await(nil)
		ran.inc("after the wait")
		return "", err
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = -1 })
	e.start("waiter", "Waiter", struct{}{})
	e.waitEvents("waiter", history.ExternalSubscribed, 1)
	e.cancel("waiter", "now")
	e.terminalError("waiter", duroxide.StateCanceled)
	h := e.history("waiter", 0)
	req := find(h, history.OrchestrationCancelRequested)
	if n := ran.get("after the wait"); n != 0 || len(req) != 1 || req[0].FireAtMs != 0 {
		e.t.Fatalf("the code ran %d times after the cancel, cancel requests %+v: want none and no deadline", n, req)
	}
	e.replays(reg, "waiter")
}

// A runtime stops in the middle of a grace period; the next runtime
// (configured with no grace at all) keeps the deadline the cancel
// recorded, Inspect shows it, and the instance ends there.
func e2eCancelGraceSurvivesRestart(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stubborn", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		_ = ctx.WaitForEvent("a").Await(nil)
		return "", ctx.WaitForEvent("b").Await(nil) // waits out the grace period
	})
	rt1 := e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = time.Hour })
	e.start("stubborn", "Stubborn", struct{}{})
	e.waitEvents("stubborn", history.ExternalSubscribed, 1)
	canceledAt := e.fc.Now()
	e.cancel("stubborn", "stop")
	e.waitEvents("stubborn", history.ExternalSubscribed, 2) // it saw the cancel
	e.shutdown(rt1)

	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.CancelGracePeriod = -1 })
	req := find(e.history("stubborn", 0), history.OrchestrationCancelRequested)
	deadline := canceledAt.Add(time.Hour).UnixMilli()
	if len(req) != 1 || req[0].FireAtMs != deadline {
		e.t.Fatalf("cancel requests %+v, want one with the deadline %v", req, time.UnixMilli(deadline))
	}
	waits, err := e.c.WaitingFor(e.ctx, "stubborn", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	graceWait := false
	for _, w := range waits {
		graceWait = graceWait || (w.Kind == duroxide.WaitTimer && w.Name == duroxide.CancelGraceWaitName && w.FiresAt.UnixMilli() == deadline)
	}
	if !graceWait {
		e.t.Fatalf("WaitingFor %+v does not show the grace deadline", waits)
	}
	// A turn on the new runtime (an event the code does not wait for) is
	// still in the grace period.
	if err := e.c.RaiseEvent(e.ctx, "stubborn", "ping", nil); err != nil {
		e.t.Fatal(err)
	}
	e.waitEvents("stubborn", history.ExternalEvent, 1)
	e.endsAtGraceDeadline("stubborn")
	e.replays(reg, "stubborn")
}

// An orchestration no runtime registers, by name or by the version an
// instance is pinned to, is never delivered: Inspect and the stall rules
// say so, and it fails with kind "configuration" once UnservedTimeout has
// passed, without a turn given back.
func e2eUnservedOrchestrationFails(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Flow", func(*duroxide.OrchestrationContext, string) (string, error) { return "v1", nil })
	// The routes' ttl (WorkerLockTimeout) outlasts the clock steps, so the
	// runtime's announcement stays live when its hourly look runs, and so
	// does the failing turn's lock.
	rt := e.runtime(reg, func(o *duroxide.RuntimeOptions) {
		o.MaxAttempts, o.BackoffBase, o.UnservedTimeout = 3, time.Second, time.Hour
		o.WorkerLockTimeout, o.OrchestratorLockTimeout = 3*time.Hour, 3*time.Hour
	})
	e.start("ghost", "Ghost", nil)
	e.startWith("flow-2", "Flow", "x", &duroxide.StartOptions{Version: "2.0.0"})
	unserved := map[string]string{
		"ghost":  "no runtime registers orchestration Ghost",
		"flow-2": "no runtime registers orchestration Flow version 2.0.0",
	}
	e.fc.Advance(2 * time.Second)
	for id, want := range unserved {
		e.eventually(id+" to be reported unserved and stalled", func() bool {
			st, err := e.c.Inspect(e.ctx, id, &duroxide.WaitOptions{StalledAfter: time.Second})
			if err != nil || st.State != duroxide.StatePending || len(st.WaitingFor) != 1 {
				return false
			}
			w := st.WaitingFor[0]
			return w.Kind == duroxide.WaitUnregisteredOrchestration && w.Unserved && w.Attempt == 0 &&
				w.Message == want && w.Stalled && strings.Contains(w.StalledReason, want+" since ")
		})
	}
	e.advanceUntil("the unserved instances to fail", time.Minute, func() bool {
		for id := range unserved {
			if st, err := e.c.GetStatus(e.ctx, id); err != nil || !st.State.IsTerminal() {
				return false
			}
		}
		return true
	})
	for id, want := range unserved {
		oe := e.failed(id)
		if want += " for 1h0m0s (UnservedTimeout)"; oe.Info.Kind != "configuration" || oe.Info.Message != want {
			e.t.Fatalf("%s: failed with %+v, want configuration: %s", id, oe.Info, want)
		}
	}
	e.shutdown(rt)
	if m := rt.Metrics(); m.Turns.Abandoned != 0 || m.Turns.Committed != 2 {
		e.t.Fatalf("turns %+v, want none given back and 2 committed (the failures)", m.Turns)
	}
}
