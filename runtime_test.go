package duroxide_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Shutdown drains a running activity, and after Shutdown and Close no
// goroutine of the runtime or the store is left.
func TestShutdownDrainsAndLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Slow", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-release
		return "done", nil
	})
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Slow", nil).Await(&s)
		return s, err
	})
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "o", "O", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Shutdown(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) while an activity was running", err)
	case <-time.After(50 * time.Millisecond): // observation window only
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The drained activity's result was committed.
	rt2, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.WaitForOrchestration(wctx, "o")
	if err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("after restart: %+v, %v", st, err)
	}
	if err := rt2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// A Shutdown whose deadline passes cancels running activities with cause
// ErrRuntimeStopped and returns their work to the queue; the next runtime
// runs it again. An activity that honors its context has returned when
// Shutdown returns, and no goroutine of the runtime is left. The
// interrupted run started the function, so it counts: the redelivery is
// attempt 2.
func TestShutdownDeadlineReturnsActivitiesToTheQueue(t *testing.T) {
	ctx := context.Background()
	attempts := make(chan int, 4)
	causes := make(chan error, 1)
	calls := 0 // runs are sequential: the first blocks until Shutdown cancels it
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Stubborn", func(ctx context.Context, _ struct{}) (string, error) {
		calls++
		attempts <- duroxide.ActivityContextFrom(ctx).Attempt
		if calls == 1 {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", context.Cause(ctx)
		}
		return "second time", nil
	})
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Stubborn", nil).Await(&s)
		return s, err
	})
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ignoreStore := goleak.IgnoreCurrent()
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "o", "O", nil, nil); err != nil {
		t.Fatal(err)
	}
	if a := <-attempts; a != 1 {
		t.Fatalf("first attempt numbered %d", a)
	}
	sctx, cancel := context.WithCancel(ctx)
	cancel() // the deadline has already passed
	if err := rt.Shutdown(sctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, duroxide.ErrRuntimeStopped) {
			t.Fatalf("the activity's context ended with cause %v, want ErrRuntimeStopped", cause)
		}
	default:
		t.Fatal("Shutdown returned before the canceled activity returned")
	}
	goleak.VerifyNone(t, ignoreStore)
	rt2, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Shutdown(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	st, err := c.WaitForOrchestration(wctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := st.Decode(&out); err != nil || out != "second time" {
		t.Fatalf("got %q, %v", out, err)
	}
	if a := <-attempts; a != 2 {
		t.Fatalf("the redelivery is attempt %d, want 2 (the interrupted run counts)", a)
	}
}

// recorder is a slog handler that keeps every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	// discarded receives a value when the runtime drops a late result.
	discarded chan struct{}
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	if strings.Contains(r.Message, "result discarded") {
		select {
		case h.discarded <- struct{}{}:
		default:
		}
	}
	return nil
}

// warnings returns the records of level Warn and above.
func (h *recorder) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level >= slog.LevelWarn {
			out = append(out, r.Level.String()+" "+r.Message)
		}
	}
	return out
}

// Shutdown returns when its context ends even if an activity ignores its
// context: the activity's work item goes back to the queue at once, and
// no goroutine of the runtime is left but the one running the stuck
// function. When that function finally returns, after the store was
// closed, its result is dropped quietly.
func TestShutdownDoesNotWaitForActivityIgnoringItsContext(t *testing.T) {
	ignoreBefore := goleak.IgnoreCurrent()
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	attempts := make(chan int, 2)
	calls := 0 // runs are sequential: the first one is stuck until release
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Deaf", func(ctx context.Context, _ struct{}) (string, error) {
		calls++
		attempts <- duroxide.ActivityContextFrom(ctx).Attempt
		if calls == 1 {
			close(started)
			<-release // ignores ctx
			return "late", nil
		}
		return "redelivered", nil
	})
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Deaf", nil).Await(&s)
		return s, err
	})
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ignoreStore := goleak.IgnoreCurrent()
	log := &recorder{discarded: make(chan struct{}, 1)}
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: slog.New(log), ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "o", "O", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Shutdown(sctx) }()
	cancel()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // guard against a hang, not a timing
		t.Fatal("Shutdown did not return while an activity ignored its context")
	}
	goleak.VerifyNone(t, ignoreStore, goleak.IgnoreAnyFunction(
		"github.com/duroxide/duroxide-go_test.TestShutdownDoesNotWaitForActivityIgnoringItsContext.func1"))

	// The work item was given back: another runtime runs it, as attempt 2.
	rt2, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	st, err := c.WaitForOrchestration(wctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := st.Decode(&out); err != nil || out != "redelivered" {
		t.Fatalf("got %q, %v", out, err)
	}
	if a := <-attempts; a != 1 {
		t.Fatalf("first run is attempt %d", a)
	}
	if a := <-attempts; a != 2 {
		t.Fatalf("the redelivery is attempt %d, want 2", a)
	}
	if err := rt2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// The stuck function returns after the store is closed.
	close(release)
	select {
	case <-log.discarded:
	case <-time.After(10 * time.Second): // guard against a hang, not a timing
		t.Fatalf("the late result was not discarded; logged: %q", log.warnings())
	}
	if w := log.warnings(); len(w) > 0 {
		t.Fatalf("the first runtime logged warnings: %q", w)
	}
	goleak.VerifyNone(t, ignoreBefore)
}

// Canceling an instance before its delayed start ends it Canceled at once;
// the start, when it comes due, is dropped and the code never runs.
func TestCancelBeforeDelayedStart(t *testing.T) {
	ran := false
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ran = true
		return "ran", nil
	})
	h := duroxidetest.New(t, reg, nil)
	h.StartWith("O", "d", nil, &duroxide.StartOptions{StartAt: h.Clock.Now().Add(time.Hour)})
	if err := h.Client.CancelInstance(context.Background(), "d", "not needed"); err != nil {
		t.Fatal(err)
	}
	st := h.Wait("d")
	if st.State != duroxide.StateCanceled || st.Error == nil || st.Error.Message != "not needed" {
		t.Fatalf("got %+v", st)
	}
	h.Advance(2 * time.Hour)
	if st := h.Status("d"); st.State != duroxide.StateCanceled || ran {
		t.Fatalf("after the start came due: %s, code ran: %v", st.State, ran)
	}
	if got := len(h.History("d")); got != 3 {
		t.Fatalf("history has %d events, want Started, CancelRequested, Failed", got)
	}
}

// Events raised before a delayed start wait, without polling, until the
// start comes due, and are delivered with it: an hour's delay costs one
// set-aside turn, not one per second.
func TestEventsBeforeADelayedStartWaitForIt(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	h := duroxidetest.New(t, reg, nil)
	start := h.Clock.Now().Add(time.Hour)
	h.StartWith("O", "d", nil, &duroxide.StartOptions{StartAt: start})
	h.RaiseEvent("d", "go", "early bird")
	h.WaitIdle()
	// The store is idle once the set-aside turn's messages are delayed;
	// the runtime counts the turn just after that commit returns.
	abandoned := func() uint64 { return h.Runtime.Metrics().Turns.Abandoned }
	for deadline := time.Now().Add(10 * time.Second); abandoned() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for range 59 { // the clock walks to a minute before the start
		h.Advance(time.Minute)
	}
	h.WaitIdle()
	if st := h.Status("d"); st.State != duroxide.StatePending {
		t.Fatalf("before the start: %s", st.State)
	}
	if n := abandoned(); n != 1 {
		t.Fatalf("turns set aside during the hour: %d, want 1 (the event waits for the start)", n)
	}
	h.Advance(time.Minute)
	st := h.Wait("d")
	var out string
	if err := st.Decode(&out); err != nil || out != "early bird" {
		t.Fatalf("output %q (%v), want the early event", out, err)
	}
}
