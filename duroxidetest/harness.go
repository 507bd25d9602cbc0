package duroxidetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TB is the part of testing.TB the harness uses. *testing.T, *testing.B and
// *testing.F implement it.
type TB interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// DefaultStart is where the fake clock starts unless Options.Start says
// otherwise: a fixed date, so timestamps in a test are reproducible.
var DefaultStart = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// DefaultTimeout bounds every wait of the harness in real time.
const DefaultTimeout = 30 * time.Second

// Options configures New. A nil pointer or a zero field means the documented
// default.
type Options struct {
	// Runtime configures the runtime (default: duroxide's defaults). Its
	// Clock is always replaced by the harness's fake clock, and a nil
	// Logger by Options.Logger.
	Runtime *duroxide.RuntimeOptions
	// Start is the fake clock's initial time (default DefaultStart).
	Start time.Time
	// Timeout bounds each wait (Wait, WaitIdle, Advance, AdvanceUntilDone,
	// and the shutdown at the end of the test) in real time (default
	// DefaultTimeout).
	Timeout time.Duration
	// Logger receives the store's and the runtime's logs (default: warnings
	// and errors, written to the test's log).
	Logger *slog.Logger
}

// Harness is a store, a runtime and a client on one fake clock. Its
// methods fail the test (Fatalf) on error, so they must be called from the
// test's goroutine; the fields may be used directly for anything else.
type Harness struct {
	// Client controls orchestrations in Store.
	Client *duroxide.Client
	// Store is the harness's private in-memory store.
	Store *sqlite.Provider
	// Clock is the time of the store, the runtime and the orchestrations.
	// Prefer Advance to Clock.Advance: moving the clock while a turn or an
	// activity runs can expire its lock.
	Clock *clockwork.FakeClock
	// Runtime runs the registry's orchestrations and activities.
	Runtime *duroxide.Runtime

	t       TB
	timeout time.Duration
}

// New starts a store and a runtime hosting reg on a fake clock, and
// registers their shutdown with t.Cleanup. It fails the test if they cannot
// start (for example, registration mistakes in reg).
func New(t TB, reg *duroxide.Registry, opts *Options) *Harness {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	start := opts.Start
	if start.IsZero() {
		start = DefaultStart
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	logger := opts.Logger
	var tl *testLog
	if logger == nil {
		tl = &testLog{t: t}
		logger = slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	clock := clockwork.NewFakeClockAt(start)

	ctx := context.Background()
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Clock: clock.Now, Logger: logger})
	if err != nil {
		t.Fatalf("duroxidetest: opening the store: %v", err)
	}
	ro := duroxide.RuntimeOptions{}
	if opts.Runtime != nil {
		ro = *opts.Runtime
	}
	ro.Clock = clock
	if ro.Logger == nil {
		ro.Logger = logger
	}
	rt, err := duroxide.StartRuntime(ctx, store, reg, &ro)
	if err != nil {
		_ = store.Close()
		t.Fatalf("duroxidetest: starting the runtime: %v", err)
	}
	h := &Harness{
		Client:  duroxide.NewClientWithOptions(store, &duroxide.ClientOptions{MaxPayloadBytes: ro.MaxPayloadBytes}),
		Store:   store,
		Clock:   clock,
		Runtime: rt,
		t:       t,
		timeout: timeout,
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := rt.Shutdown(sctx); err != nil {
			t.Errorf("duroxidetest: shutting down the runtime: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("duroxidetest: closing the store: %v", err)
		}
		if tl != nil {
			tl.close()
		}
	})
	return h
}

// Start starts the orchestration name as instanceID with input.
func (h *Harness) Start(name, instanceID string, input any) {
	h.t.Helper()
	h.StartWith(name, instanceID, input, nil)
}

// StartWith is Start with options (a version, a delayed start).
func (h *Harness) StartWith(name, instanceID string, input any, opts *duroxide.StartOptions) {
	h.t.Helper()
	if err := h.Client.StartOrchestration(context.Background(), instanceID, name, input, opts); err != nil {
		h.t.Fatalf("duroxidetest: %v", err)
	}
}

// RaiseEvent raises the external event name with data on instanceID. Call
// WaitIdle first when the test means the event to arrive after the
// instance reached a particular wait.
func (h *Harness) RaiseEvent(instanceID, name string, data any) {
	h.t.Helper()
	if err := h.Client.RaiseEvent(context.Background(), instanceID, name, data); err != nil {
		h.t.Fatalf("duroxidetest: %v", err)
	}
}

// Status returns the status of instanceID.
func (h *Harness) Status(instanceID string) *duroxide.Status {
	h.t.Helper()
	st, err := h.Client.GetStatus(context.Background(), instanceID)
	if err != nil {
		h.t.Fatalf("duroxidetest: %v", err)
	}
	return st
}

// History returns the events of the current execution of instanceID.
func (h *Harness) History(instanceID string) []history.Event {
	h.t.Helper()
	evs, err := h.Client.GetHistory(context.Background(), instanceID, 0)
	if err != nil {
		h.t.Fatalf("duroxidetest: %v", err)
	}
	return evs
}

// Wait waits in real time, without moving the clock, until instanceID is
// Completed, Failed or Canceled, and returns its status. An instance
// waiting for a timer never finishes this way: use AdvanceUntilDone. On
// timeout the test fails with the instance's status and history.
func (h *Harness) Wait(instanceID string) *duroxide.Status {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	changed, stop := h.Store.WatchInstance(instanceID)
	defer stop()
	var st *duroxide.Status
	err := h.poll(ctx, changed, func(*provider.QueueDepths) (bool, error) {
		var err error
		st, err = h.Client.GetStatus(ctx, instanceID)
		return err == nil && st.State.IsTerminal(), err
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		h.t.Fatalf("duroxidetest: instance %s did not finish within %v%s\n%s", instanceID, h.timeout, h.blockedHint(), h.describe(instanceID))
	case err != nil:
		h.t.Fatalf("duroxidetest: waiting for %s: %v", instanceID, err)
	}
	return st
}

// blockedHint explains a wait that timed out while the store is idle.
func (h *Harness) blockedHint() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := h.Store.QueueDepths(ctx)
	if err != nil || !idle(d) {
		return ""
	}
	next, err := h.nextDue(ctx)
	if err == nil && !next.IsZero() {
		return fmt.Sprintf("; nothing can run before %s, when a timer or another delayed message is due (fake clock at %s): use Advance or AdvanceUntilDone",
			next.Format(time.RFC3339Nano), h.Clock.Now().Format(time.RFC3339Nano))
	}
	return "; nothing can run: it waits for an event (RaiseEvent) or for something outside the store"
}

// describe renders the status and history of instanceID for a failure message.
func (h *Harness) describe(instanceID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	st, err := h.Client.GetStatus(ctx, instanceID)
	if err != nil {
		fmt.Fprintf(&b, "status: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "status: %s (execution %d, orchestration %s %s)\n", st.State, st.ExecutionID, st.Orchestration, st.Version)
	if st.Error != nil {
		fmt.Fprintf(&b, "error: %s\n", st.Error.Error())
	}
	if st.LastError != nil {
		fmt.Fprintf(&b, "last error: %s\n", st.LastError.Error())
	}
	if len(st.CustomStatus) > 0 {
		fmt.Fprintf(&b, "custom status: %s\n", st.CustomStatus)
	}
	evs, err := h.Client.GetHistory(ctx, instanceID, 0)
	if err != nil {
		fmt.Fprintf(&b, "history: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "history (%d events):\n", len(evs))
	for _, e := range evs {
		b.WriteString("  " + formatEvent(e) + "\n")
	}
	return b.String()
}

// formatEvent renders one event on one line, with the fields that matter.
func formatEvent(e history.Event) string {
	s := fmt.Sprintf("%3d %s", e.EventID, e.Kind)
	add := func(k, v string) {
		if v != "" {
			s += " " + k + "=" + v
		}
	}
	if e.SourceEventID != 0 {
		add("source", fmt.Sprint(e.SourceEventID))
	}
	add("name", e.Name)
	add("child", e.ChildInstanceID)
	add("input", string(e.Input))
	add("output", string(e.Output))
	add("data", string(e.Data))
	if e.FireAtMs != 0 {
		add("fireAt", time.UnixMilli(e.FireAtMs).UTC().Format(time.RFC3339Nano))
	}
	if e.Error != nil {
		add("error", fmt.Sprintf("%s: %q", e.Error.Kind, e.Error.Message))
	}
	add("reason", e.Reason)
	if e.TimeMs != 0 {
		add("time", time.UnixMilli(e.TimeMs).UTC().Format(time.RFC3339Nano))
	}
	add("guid", e.GUID)
	add("status", string(e.CustomStatus))
	return s
}
