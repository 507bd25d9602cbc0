package demo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// testTimeout bounds how long a broken test hangs; it asserts no speed.
// The largest workload here (a fan-out of demo.MaxFanOut activities under
// -race on a loaded 2-core machine) took over 20 s once.
const testTimeout = 2 * time.Minute

var discard = slog.New(slog.DiscardHandler)

// timerStore is the SQLite store that reports each committed turn which
// scheduled a durable timer, so a test can advance a fake clock once the
// timer exists instead of sleeping.
type timerStore struct {
	*sqlite.Provider
	timers chan struct{}
}

func (s *timerStore) AckOrchestrationItem(ctx context.Context, a *provider.TurnAck) (provider.TurnResult, error) {
	res, err := s.Provider.AckOrchestrationItem(ctx, a)
	if err != nil {
		return res, err
	}
	for _, ev := range a.History {
		if ev.Kind == history.TimerCreated {
			select {
			case s.timers <- struct{}{}:
			default: // the test stopped listening
			}
			break
		}
	}
	return res, nil
}

// env is a runtime hosting the demo orchestrations on an in-memory store,
// and a client of that store.
type env struct {
	client *duroxide.Client
	// clock and store.timers are set by newFakeClockEnv.
	clock *clockwork.FakeClock
	store *timerStore
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store := openStore(t, nil)
	startRuntime(t, store, nil)
	return &env{client: duroxide.NewClient(store)}
}

// newFakeClockEnv runs the store and the runtime on a fake clock.
func newFakeClockEnv(t *testing.T) *env {
	t.Helper()
	clock := clockwork.NewFakeClock()
	store := &timerStore{Provider: openStore(t, clock.Now), timers: make(chan struct{}, 16)}
	startRuntime(t, store, clock)
	return &env{client: duroxide.NewClient(store), clock: clock, store: store}
}

func openStore(t *testing.T, now func() time.Time) *sqlite.Provider {
	t.Helper()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Clock: now, Logger: discard})
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	return store
}

func startRuntime(t *testing.T, store provider.Provider, clock clockwork.Clock) {
	t.Helper()
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	rt, err := duroxide.StartRuntime(context.Background(), store, reg, &duroxide.RuntimeOptions{Clock: clock, Logger: discard})
	if err != nil {
		t.Fatalf("starting runtime: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("runtime shutdown: %v", err)
		}
	})
}

func (e *env) start(t *testing.T, id, name string, input any) {
	t.Helper()
	if err := e.client.StartOrchestration(context.Background(), id, name, input, nil); err != nil {
		t.Fatalf("starting %s as %s: %v", name, id, err)
	}
}

// run starts name with input as instance id and waits until it finishes.
func (e *env) run(t *testing.T, id, name string, input any) *duroxide.Status {
	t.Helper()
	e.start(t, id, name, input)
	return e.wait(t, id)
}

func (e *env) wait(t *testing.T, id string) *duroxide.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := e.client.WaitForOrchestration(ctx, id)
	if err != nil {
		t.Fatalf("waiting for %s: %v", id, err)
	}
	return st
}

func (e *env) raise(t *testing.T, id string, data any) {
	t.Helper()
	if err := e.client.RaiseEvent(context.Background(), id, demo.ApprovalEvent, data); err != nil {
		t.Fatalf("raising %s on %s: %v", demo.ApprovalEvent, id, err)
	}
}

// output decodes the output of a Completed instance.
func output[T any](t *testing.T, st *duroxide.Status) T {
	t.Helper()
	var out T
	if err := st.Decode(&out); err != nil {
		t.Fatalf("%s ended %s: %v", st.InstanceID, st.State, err)
	}
	return out
}

func TestHello(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ in, want string }{
		{"Ada", "Hello, Ada!"},
		{"", "Hello, !"},
		{"Grace Hopper", "Hello, Grace Hopper!"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			st := e.run(t, "hello-"+tc.in, demo.Hello, tc.in)
			if got := output[string](t, st); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSequence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, n := range []int{0, 37, -5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("sequence-%d", n)
			st := e.run(t, id, demo.Sequence, n)
			if got := output[int](t, st); got != n+5 {
				t.Fatalf("got %d, want %d", got, n+5)
			}
			// Five chained activities, each scheduled after the previous one completed.
			evs, err := e.client.GetHistory(context.Background(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []history.EventKind
			for _, ev := range evs {
				if ev.Kind == history.ActivityScheduled || ev.Kind == history.ActivityCompleted {
					kinds = append(kinds, ev.Kind)
				}
			}
			if len(kinds) != 10 {
				t.Fatalf("%d activity events, want 10: %v", len(kinds), kinds)
			}
			for i, k := range kinds {
				if want := []history.EventKind{history.ActivityScheduled, history.ActivityCompleted}[i%2]; k != want {
					t.Fatalf("activity event %d is %s, want %s (activities not chained): %v", i, k, want, kinds)
				}
			}
		})
	}
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ n, want int }{
		{0, 0},
		{1, 0},
		{50, 50 * 49 / 2},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("fanout-%d", tc.n)
			st := e.run(t, id, demo.FanOut, tc.n)
			if got := output[int](t, st); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
			evs, err := e.client.GetHistory(context.Background(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			scheduled := 0
			for _, ev := range evs {
				if ev.Kind == history.ActivityScheduled {
					scheduled++
				}
			}
			if scheduled != tc.n {
				t.Fatalf("%d activities scheduled, want %d", scheduled, tc.n)
			}
		})
	}
}

// Inputs out of range fail the instance at its first turn with a message
// naming the range, before anything is scheduled: ten million fan-out
// activities would take gigabytes.
func TestInputsOutOfRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		id, name string
		input    any
		want     string
	}{
		{"fanout-negative", demo.FanOut, -1, "demo.FanOut: n must be from 0 to 1000, got -1"},
		{"fanout-huge", demo.FanOut, 10_000_000, "demo.FanOut: n must be from 0 to 1000, got 10000000"},
		{"sequence-huge", demo.Sequence, 9_000_000_000_000_000_000, "demo.Sequence: n must be from -1000000000 to 1000000000, got 9000000000000000000"},
		{"sequence-very-negative", demo.Sequence, -2_000_000_000, "demo.Sequence: n must be from -1000000000 to 1000000000, got -2000000000"},
		{"countdown-negative", demo.Countdown, -3, "demo.Countdown: n must be from 0 to 1000, got -3"},
		{"countdown-huge", demo.Countdown, 1_000_000, "demo.Countdown: n must be from 0 to 1000, got 1000000"},
		{"approval-negative", demo.Approval, demo.ApprovalInput{TimeoutSeconds: -1}, "demo.Approval: timeoutSeconds must be from 0 to 2592000, got -1"},
		{"approval-huge", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 1e300}, "demo.Approval: timeoutSeconds must be from 0 to 2592000, got 1e+300"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			t.Parallel()
			st := e.run(t, tc.id, tc.name, tc.input)
			if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Message != tc.want {
				t.Fatalf("got %s %+v, want Failed with %q", st.State, st.Error, tc.want)
			}
			evs, err := e.client.GetHistory(context.Background(), tc.id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[1].Kind != history.OrchestrationFailed {
				t.Fatalf("history %+v, want OrchestrationStarted and OrchestrationFailed", evs)
			}
		})
	}
	// The bounds themselves are accepted.
	st := e.run(t, "fanout-max", demo.FanOut, demo.MaxFanOut)
	if got := output[int](t, st); got != demo.MaxFanOut*(demo.MaxFanOut-1)/2 {
		t.Fatalf("fan-out %d: %d", demo.MaxFanOut, got)
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hour := demo.ApprovalInput{TimeoutSeconds: 3600}
	for _, tc := range []struct {
		name string
		data any
		want string
	}{
		{"approved", true, "approved"},
		{"rejected", false, "rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "approval-" + tc.name
			e.start(t, id, demo.Approval, hour)
			e.raise(t, id, tc.data)
			if got := output[string](t, e.wait(t, id)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("event that is not a boolean", func(t *testing.T) {
		t.Parallel()
		e.start(t, "approval-bad", demo.Approval, hour)
		e.raise(t, "approval-bad", "yes please")
		st := e.wait(t, "approval-bad")
		if st.State != duroxide.StateFailed || st.Error == nil {
			t.Fatalf("got %s %+v, want Failed", st.State, st.Error)
		}
	})
	t.Run("timeout on the real clock", func(t *testing.T) {
		t.Parallel()
		// The one real wait of these tests: a 10 ms durable timer.
		st := e.run(t, "approval-timeout-real", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 0.01})
		if got := output[string](t, st); got != "timeout" {
			t.Fatalf("got %q, want timeout", got)
		}
	})
	t.Run("an event after the timeout is refused", func(t *testing.T) {
		t.Parallel()
		st := e.run(t, "approval-late", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 0.001})
		if err := e.client.RaiseEvent(context.Background(), "approval-late", demo.ApprovalEvent, true); !errors.Is(err, duroxide.ErrInstanceTerminal) {
			t.Fatalf("a late event: %v, want ErrInstanceTerminal", err)
		}
		if got := output[string](t, st); got != "timeout" {
			t.Fatalf("got %q, want timeout", got)
		}
		if st2 := e.wait(t, "approval-late"); st2.State != duroxide.StateCompleted || string(st2.Output) != `"timeout"` {
			t.Fatalf("a late event changed the result: %s %s", st2.State, st2.Output)
		}
	})
}

// TestApprovalTimeout runs demo.Approval's timer on a fake clock: the
// instance waits an hour of fake time, and times out only once the clock
// passes the hour.
func TestApprovalTimeout(t *testing.T) {
	t.Parallel()
	e := newFakeClockEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	e.start(t, "approval-timeout", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 3600})
	select {
	case <-e.store.timers:
	case <-ctx.Done():
		t.Fatal("the orchestration never scheduled its timer")
	}
	pokes := 0
	// advance moves the fake clock, then starts an unrelated instance and
	// waits for it: an enqueue wakes the orchestration dispatcher, so its
	// next fetch sees the clock's new time even if it was between reading
	// the next visible time and going to sleep when the clock moved.
	advance := func(d time.Duration) {
		t.Helper()
		e.clock.Advance(d)
		pokes++
		e.run(t, fmt.Sprintf("poke-%d", pokes), demo.Hello, "poke")
	}

	advance(59 * time.Minute)
	if st, err := e.client.GetStatus(ctx, "approval-timeout"); err != nil || st.State.IsTerminal() {
		t.Fatalf("before the hour: %v %v", st, err)
	}
	advance(2 * time.Minute)
	st := e.wait(t, "approval-timeout")
	if got := output[string](t, st); got != "timeout" {
		t.Fatalf("got %q, want timeout", got)
	}
	evs, err := e.client.GetHistory(ctx, "approval-timeout", 0)
	if err != nil {
		t.Fatal(err)
	}
	var created, fired *history.Event
	for i := range evs {
		switch evs[i].Kind {
		case history.TimerCreated:
			created = &evs[i]
		case history.TimerFired:
			fired = &evs[i]
		}
	}
	if created == nil || fired == nil || fired.SourceEventID != created.EventID {
		t.Fatalf("history lacks a fired timer: %+v", evs)
	}
	if d := time.Duration(fired.TimestampMs-created.TimestampMs) * time.Millisecond; d < time.Hour {
		t.Fatalf("timer fired %v after it was created, want at least an hour of fake time", d)
	}
}

func TestCountdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := e.run(t, "countdown", demo.Countdown, 3)
	if got := output[int](t, st); got != 0 {
		t.Fatalf("got %d, want 0", got)
	}
	if st.ExecutionID != 4 {
		t.Fatalf("ended in execution %d, want 4 (3 → 2 → 1 → 0)", st.ExecutionID)
	}
	exs, err := e.client.ListExecutions(context.Background(), "countdown")
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 4 {
		t.Fatalf("%d executions, want 4", len(exs))
	}
	for i, ex := range exs {
		want := provider.StatusContinuedAsNew
		if i == 3 {
			want = provider.StatusCompleted
		}
		if ex.ExecutionID != int64(i+1) || ex.Status != want || string(ex.Input) != fmt.Sprint(3-i) {
			t.Errorf("execution %d: id %d status %s input %s, want status %s input %d", i+1, ex.ExecutionID, ex.Status, ex.Input, want, 3-i)
		}
	}

	t.Run("zero", func(t *testing.T) {
		t.Parallel()
		st := e.run(t, "countdown-zero", demo.Countdown, 0)
		if output[int](t, st) != 0 || st.ExecutionID != 1 {
			t.Fatalf("countdown 0: output %s in execution %d, want 0 in 1", st.Output, st.ExecutionID)
		}
	})
}

func TestFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, msg := range []string{"payment declined", "ünïcödé: 🙂"} {
		t.Run(msg, func(t *testing.T) {
			t.Parallel()
			st := e.run(t, "fail-"+msg, demo.Fail, msg)
			if st.State != duroxide.StateFailed {
				t.Fatalf("state %s, want Failed", st.State)
			}
			if st.Error == nil || st.Error.Message != msg || st.Error.Kind != string(history.ErrorApplication) {
				t.Fatalf("error %+v, want an application error %q", st.Error, msg)
			}
			var oe *duroxide.OrchestrationError
			if err := st.Decode(nil); !errors.As(err, &oe) || oe.Info.Message != msg {
				t.Fatalf("Decode: %v, want *OrchestrationError with message %q", err, msg)
			}
		})
	}
}
