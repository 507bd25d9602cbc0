package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// E2EHarness tells the end-to-end suite how to build stores.
type E2EHarness struct {
	// New returns a fresh, empty provider that reads the time only from
	// clock. The suite closes it when the test ends (t.Cleanup).
	New func(t testing.TB, clock func() time.Time) provider.Provider
}

// e2eCase is one end-to-end scenario: real runtimes and a real client on a
// fresh store, driven by a fake clock.
type e2eCase struct {
	name string
	run  func(e *e2e)
}

// e2eGroups lists the scenarios, grouped by feature.
func e2eGroups() [][]e2eCase {
	return [][]e2eCase{
		e2eActivityCases,
		e2eCompositionCases,
		e2eTimerCases,
		e2eAheadCases,
		e2eEventCases,
		e2eRetryCases,
		e2eSubOrchestrationCases,
		e2eContinueAsNewCases,
		e2eCancellationCases,
		e2eCancelGraceCases,
		e2eStatusCases,
		e2eVersioningCases,
		e2eRecoveryCases,
		e2eManagementCases,
		e2eDetachedCases,
		e2eSignalStartCases,
		e2eReplaceCases,
		e2eValueCases,
		e2eBulkCases,
		e2eRoutingCases,
		e2ePauseCases,
		e2eScheduleCases,
		e2eFeatureCases,
		e2eModelCases,
	}
}

func e2eCases() []e2eCase {
	var all []e2eCase
	for _, g := range e2eGroups() {
		all = append(all, g...)
	}
	return all
}

// E2ECaseCount returns the number of scenarios; RunEndToEnd runs each twice.
func E2ECaseCount() int { return len(e2eCases()) }

// RunEndToEnd runs the end-to-end orchestration suite against the stores h
// builds: every scenario once with the runtime's instance cache ("cache")
// and once without it ("nocache"), so pure replay is always covered. Time is
// a fake clock shared by the store and the runtimes: timers fire when a
// scenario advances it, never by waiting.
func RunEndToEnd(t *testing.T, h E2EHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("providertest: E2EHarness.New is nil")
	}
	cases := e2eCases()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("providertest: duplicate end-to-end scenario %q", c.name)
		}
		seen[c.name] = true
	}
	for _, mode := range []string{"cache", "nocache"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(newE2E(t, h, mode == "nocache"))
				})
			}
		})
	}
}

// e2eStart is the fake clock's initial time: fixed, so failures reproduce.
var e2eStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// e2eTimeout bounds every wait of the suite (real time).
const e2eTimeout = 20 * time.Second

// e2e is what a scenario works with.
type e2e struct {
	t       *testing.T
	ctx     context.Context
	fc      *clockwork.FakeClock
	store   provider.Provider
	c       *duroxide.Client
	nocache bool
	log     *slog.Logger
}

func newE2E(t *testing.T, h E2EHarness, nocache bool) *e2e {
	fc := clockwork.NewFakeClockAt(e2eStart)
	store := h.New(t, fc.Now)
	if store == nil {
		t.Fatal("E2EHarness.New returned nil")
	}
	t.Cleanup(func() { _ = store.Close() })
	return &e2e{
		t: t, ctx: t.Context(), fc: fc, store: store,
		c: duroxide.NewClient(store), nocache: nocache,
		log: slog.New(newTestHandler(t, slog.LevelWarn)),
	}
}

// options returns the runtime options every scenario starts from.
func (e *e2e) options() *duroxide.RuntimeOptions {
	o := &duroxide.RuntimeOptions{Clock: e.fc, Logger: e.log}
	if e.nocache {
		o.CacheSize = -1
	}
	return o
}

// runtime starts a runtime on the scenario's store; mods adjust its
// options. It is shut down when the test ends (or earlier by the scenario).
func (e *e2e) runtime(reg *duroxide.Registry, mods ...func(*duroxide.RuntimeOptions)) *duroxide.Runtime {
	e.t.Helper()
	o := e.options()
	for _, m := range mods {
		m(o)
	}
	rt, err := duroxide.StartRuntime(e.ctx, e.store, reg, o)
	if err != nil {
		e.t.Fatalf("StartRuntime: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			e.t.Errorf("Shutdown: %v", err)
		}
	})
	return rt
}

// shutdown stops rt gracefully, failing the test if it does not drain.
func (e *e2e) shutdown(rt *duroxide.Runtime) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		e.t.Fatalf("Shutdown: %v", err)
	}
}

// start starts an instance and fails the test on error.
func (e *e2e) start(id, name string, input any) {
	e.t.Helper()
	e.startWith(id, name, input, nil)
}

func (e *e2e) startWith(id, name string, input any, opts *duroxide.StartOptions) {
	e.t.Helper()
	if err := e.c.StartOrchestration(e.ctx, id, name, input, opts); err != nil {
		e.t.Fatalf("StartOrchestration(%s, %s): %v", id, name, err)
	}
}

// wait waits for id to reach a terminal state.
func (e *e2e) wait(id string) *duroxide.Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e2eTimeout)
	defer cancel()
	st, err := e.c.WaitForOrchestration(ctx, id)
	if err != nil {
		cur, _ := e.c.GetStatus(e.ctx, id)
		e.t.Fatalf("WaitForOrchestration(%s): %v (last status %s)\n%s", id, err, describeStatus(cur), e.diagnose(id))
	}
	return st
}

// diagnose describes what the store holds for id, for the message of a
// wait that timed out: its executions, the end of its current history,
// its queued messages and activities, its instance lock, and the queues'
// depths.
func (e *e2e) diagnose(id string) string {
	var b strings.Builder
	if ex, err := e.c.ListExecutions(e.ctx, id); err != nil {
		fmt.Fprintf(&b, "executions: %v\n", err)
	} else {
		for _, x := range ex {
			fmt.Fprintf(&b, "execution %d: %s, %d events\n", x.ExecutionID, x.Status, x.EventCount)
		}
	}
	if h, err := e.c.GetHistory(e.ctx, id, 0); err != nil {
		fmt.Fprintf(&b, "history: %v\n", err)
	} else {
		fmt.Fprintf(&b, "current history: %v\n", eventKinds(h[max(0, len(h)-8):]))
	}
	now := e.fc.Now()
	if q, err := e.admin().InstanceQueue(e.ctx, id); err != nil {
		fmt.Fprintf(&b, "queue: %v\n", err)
	} else {
		for _, m := range q.Messages {
			fmt.Fprintf(&b, "message %s exec %d id %d: visible %s, attempts %d, locked %t\n",
				m.Item.Kind, m.Item.ExecutionID, m.Item.ID, m.VisibleAt.Sub(now), m.Attempts, m.Locked)
		}
		for _, a := range q.Activities {
			lock := "unlocked"
			if !a.LockedUntil.IsZero() {
				lock = "locked until " + a.LockedUntil.Sub(now).String()
			}
			fmt.Fprintf(&b, "activity %s exec %d id %d: visible %s, attempts %d, %s\n",
				a.Name, a.ExecutionID, a.ActivityID, a.VisibleAt.Sub(now), a.Attempts, lock)
		}
		if l := q.InstanceLock; l != nil {
			fmt.Fprintf(&b, "instance lock until %s\n", l.LockedUntil.Sub(now))
		}
	}
	if d, err := e.admin().QueueDepths(e.ctx); err == nil {
		fmt.Fprintf(&b, "queues: %+v (times relative to the fake clock, at %s)", d, now.Sub(e2eStart))
	}
	return b.String()
}

// result waits for id, requires it Completed, and decodes its output.
func (e *e2e) result(id string, out any) *duroxide.Status {
	e.t.Helper()
	st := e.wait(id)
	if st.State != duroxide.StateCompleted {
		e.t.Fatalf("instance %s: state %s, want Completed (%s)", id, st.State, describeStatus(st))
	}
	if err := st.Decode(out); err != nil {
		e.t.Fatalf("instance %s: Decode: %v", id, err)
	}
	return st
}

// failed waits for id, requires it Failed, and returns the decode error.
func (e *e2e) failed(id string) *duroxide.OrchestrationError {
	e.t.Helper()
	return e.terminalError(id, duroxide.StateFailed)
}

func (e *e2e) terminalError(id string, want duroxide.State) *duroxide.OrchestrationError {
	e.t.Helper()
	st := e.wait(id)
	if st.State != want {
		e.t.Fatalf("instance %s: state %s, want %s (%s)", id, st.State, want, describeStatus(st))
	}
	err := st.Decode(nil)
	var oe *duroxide.OrchestrationError
	if !errors.As(err, &oe) {
		e.t.Fatalf("instance %s: Decode error %v (%T), want *OrchestrationError", id, err, err)
	}
	if st.Error == nil {
		e.t.Fatalf("instance %s: %s without Error", id, st.State)
	}
	return oe
}

// status returns the current status of id.
func (e *e2e) status(id string) *duroxide.Status {
	e.t.Helper()
	st, err := e.c.GetStatus(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetStatus(%s): %v", id, err)
	}
	return st
}

// history returns one execution's history (0 = current).
func (e *e2e) history(id string, exec int64) []history.Event {
	e.t.Helper()
	h, err := e.c.GetHistory(e.ctx, id, exec)
	if err != nil {
		e.t.Fatalf("GetHistory(%s, %d): %v", id, exec, err)
	}
	return h
}

// eventually polls cond (for observation only; time never drives the
// scenario) until it holds or the suite timeout passes.
func (e *e2e) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// advanceUntil moves the fake clock forward by step, again and again, until
// cond holds. Dispatchers sleep at most their poll interval (5s of fake
// time by default), so a step at least that long wakes them; shorter steps
// rely on the store's notifications and timers.
func (e *e2e) advanceUntil(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out advancing the clock until %s (fake time %s)", what, e.fc.Now().Sub(e2eStart))
		}
		e.fc.Advance(step)
		time.Sleep(2 * time.Millisecond)
	}
}

// advanceTimersUntil lets time pass until cond holds: whenever both queues
// are idle (no turn or activity in flight or ready), it jumps the clock to
// the next moment a queued message becomes visible (a timer, a delayed
// start, a backoff). A jump never outruns the lock of work in progress,
// however long the timers are, and however slow the machine.
func (e *e2e) advanceTimersUntil(what string, cond func() bool) {
	e.t.Helper()
	waker, ok := e.store.(provider.Waker)
	if !ok {
		e.advanceUntil(what, 5*time.Second, cond) // the default PollInterval
		return
	}
	a := e.admin()
	deadline := time.Now().Add(e2eTimeout)
	waiting := 0
	for !cond() {
		d, err := a.QueueDepths(e.ctx)
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out letting time pass until %s (fake time %s, queues %+v)", what, e.fc.Now().Sub(e2eStart), d)
		}
		if err != nil {
			e.t.Fatalf("QueueDepths: %v", err)
		}
		if d.OrchestratorLocked+d.WorkerLocked > 0 {
			waiting = 0
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if d.OrchestratorReady+d.WorkerReady > 0 {
			// Ready work nobody has taken yet. A dispatcher asleep on a
			// timer that is not due yet only wakes when time passes: after
			// a while, nudge the clock (no lock is held, so none expires).
			if waiting++; waiting > 10 {
				e.fc.Advance(5 * time.Millisecond)
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		waiting = 0
		// Idle: cond may have come true while the work drained.
		if cond() {
			return
		}
		var next time.Time
		for _, q := range []provider.Queue{provider.QueueOrchestrator, provider.QueueWorker} {
			t, err := waker.NextVisible(e.ctx, q)
			if err != nil {
				e.t.Fatalf("NextVisible: %v", err)
			}
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if step := next.Sub(e.fc.Now()); !next.IsZero() && step > 0 {
			e.fc.Advance(step)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// advanceUntilDone lets time pass (advanceTimersUntil) until id is
// terminal, and returns its status.
func (e *e2e) advanceUntilDone(id string) *duroxide.Status {
	e.t.Helper()
	e.advanceTimersUntil(id+" is terminal", func() bool {
		st, err := e.c.GetStatus(e.ctx, id)
		return err == nil && st.State.IsTerminal()
	})
	return e.wait(id)
}

// stepUntilDone advances the clock by step, again and again, until id is
// terminal: for scenarios where time must pass while work is in flight.
func (e *e2e) stepUntilDone(id string, step time.Duration) *duroxide.Status {
	e.t.Helper()
	e.advanceUntil(id+" is terminal", step, func() bool {
		st, err := e.c.GetStatus(e.ctx, id)
		return err == nil && st.State.IsTerminal()
	})
	return e.wait(id)
}

// count returns how many events of kind h holds.
func count(h []history.Event, kind history.EventKind) int {
	n := 0
	for _, ev := range h {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// waitEvents waits until the current history of id holds at least n events
// of kind, and returns that history.
func (e *e2e) waitEvents(id string, kind history.EventKind, n int) []history.Event {
	e.t.Helper()
	var h []history.Event
	e.eventually(fmt.Sprintf("%d %s event(s) in the history of %s", n, kind, id), func() bool {
		var err error
		h, err = e.c.GetHistory(e.ctx, id, 0)
		return err == nil && count(h, kind) >= n
	})
	return h
}

// admin returns the store's Admin side.
func (e *e2e) admin() provider.Admin { return e.store }

// drained waits until no orchestrator message is ready or being processed
// (delayed messages such as pending timers may remain).
func (e *e2e) drained() {
	e.t.Helper()
	a := e.admin()
	e.eventually("the orchestrator queue to drain", func() bool {
		d, err := a.QueueDepths(e.ctx)
		return err == nil && d.OrchestratorReady == 0 && d.OrchestratorLocked == 0
	})
}

// eventKinds lists the kinds of h.
func eventKinds(h []history.Event) []history.EventKind {
	out := make([]history.EventKind, len(h))
	for i, ev := range h {
		out[i] = ev.Kind
	}
	return out
}

// wantKinds requires h to have exactly the kinds want, in order.
func (e *e2e) wantKinds(h []history.Event, want ...history.EventKind) {
	e.t.Helper()
	if got := eventKinds(h); !slices.Equal(got, want) {
		e.t.Fatalf("history kinds:\n got %v\nwant %v", got, want)
	}
}

// checkHistory checks invariants every history must hold: contiguous event
// IDs from 1, OrchestrationStarted first, completions after their schedule.
func (e *e2e) checkHistory(h []history.Event) {
	e.t.Helper()
	if len(h) == 0 || h[0].Kind != history.OrchestrationStarted {
		e.t.Fatalf("history does not start with OrchestrationStarted: %v", eventKinds(h))
	}
	pos := map[int64]history.EventKind{}
	for i, ev := range h {
		if ev.EventID != int64(i+1) {
			e.t.Fatalf("event %d has ID %d; IDs must be contiguous from 1: %v", i, ev.EventID, eventKinds(h))
		}
		if ev.SourceEventID != 0 {
			if _, ok := pos[ev.SourceEventID]; !ok {
				e.t.Fatalf("event %d (%s) refers to event %d, which does not precede it", ev.EventID, ev.Kind, ev.SourceEventID)
			}
		}
		pos[ev.EventID] = ev.Kind
	}
}

// find returns the events of kind in h.
func find(h []history.Event, kind history.EventKind) []history.Event {
	var out []history.Event
	for _, ev := range h {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// indexOf returns the position of the first event of kind whose source is
// src (src 0: any), or -1.
func indexOf(h []history.Event, kind history.EventKind, src int64) int {
	for i, ev := range h {
		if ev.Kind == kind && (src == 0 || ev.SourceEventID == src) {
			return i
		}
	}
	return -1
}

func describeStatus(st *duroxide.Status) string {
	if st == nil {
		return "<none>"
	}
	s := fmt.Sprintf("state=%s exec=%d version=%s", st.State, st.ExecutionID, st.Version)
	if st.Error != nil {
		s += fmt.Sprintf(" error=%s: %s", st.Error.Kind, st.Error.Message)
	}
	if st.LastError != nil {
		s += fmt.Sprintf(" lastError=%s: %s", st.LastError.Kind, st.LastError.Message)
	}
	if len(st.Output) > 0 {
		s += " output=" + string(st.Output)
	}
	return s
}

// gate is a barrier an activity waits on until the scenario opens it.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// counter counts calls, safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// e2eError is the error type activities return in the suite.
type e2eError struct{ Code int }

func (e *e2eError) Error() string { return fmt.Sprintf("e2e failure code %d", e.Code) }

// jsonOf encodes v for comparisons.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

// testHandler sends log records to t.Log (shown for failing tests and with
// -v), and drops them once the test has ended. DUROXIDE_E2E_LOG=debug
// lowers the level.
type testHandler struct {
	mu    *sync.Mutex
	done  *bool
	t     testing.TB
	level slog.Level
	attrs []slog.Attr
}

func newTestHandler(t testing.TB, level slog.Level) *testHandler {
	if os.Getenv("DUROXIDE_E2E_LOG") == "debug" {
		level = slog.LevelDebug
	}
	h := &testHandler{mu: &sync.Mutex{}, done: new(bool), t: t, level: level}
	t.Cleanup(func() {
		h.mu.Lock()
		*h.done = true
		h.mu.Unlock()
	})
	return h
}

func (h *testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !*h.done {
		h.t.Log(b.String())
	}
	return nil
}

func (h *testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), as...)
	return &c
}

func (h *testHandler) WithGroup(string) slog.Handler { return h }
