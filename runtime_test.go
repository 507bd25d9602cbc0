package duroxide_test

import (
	"context"
	"errors"
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

// A Shutdown whose deadline passes cancels running activities and returns
// their work to the queue; the next runtime runs it again.
func TestShutdownDeadlineReturnsActivitiesToTheQueue(t *testing.T) {
	ctx := context.Background()
	attempts := make(chan int, 4)
	calls := 0 // runs are sequential: the first blocks until Shutdown cancels it
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Stubborn", func(ctx context.Context, _ struct{}) (string, error) {
		calls++
		// A delivery cut short by Shutdown does not count as an attempt.
		attempts <- duroxide.ActivityContextFrom(ctx).Attempt
		if calls == 1 {
			<-ctx.Done()
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
	if a := <-attempts; a != 1 {
		t.Fatalf("the redelivery is attempt %d, want 1 (shutdown gave the attempt back)", a)
	}
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
