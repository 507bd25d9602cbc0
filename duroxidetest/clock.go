package duroxidetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// WaitIdle waits until nothing in the store can run without the clock
// moving or a message from outside: no orchestration message is ready or
// being processed, and no activity is queued or running. Every instance is
// then finished or parked at a durable wait (a timer, an event, a child).
// It fails the test if that does not happen within Options.Timeout (an
// activity that never returns, an orchestration that never stops
// scheduling work).
func (h *Harness) WaitIdle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	if err := h.waitIdle(ctx); err != nil {
		h.t.Fatalf("duroxidetest: %v", err)
	}
}

// Advance moves the clock forward by d as if d had passed: it waits until
// the store is idle, then steps the clock to each due message in turn (a
// timer, a delayed start, a retry after backoff), waiting until the store
// is idle after each step, and finally to now+d. When it returns, every
// timer due by then has fired and the orchestrations have done everything
// they can do at the new time.
func (h *Harness) Advance(d time.Duration) {
	h.t.Helper()
	if d < 0 {
		h.t.Fatalf("duroxidetest: Advance(%v): the clock cannot go back", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	target := h.Clock.Now().Add(d)
	for {
		if err := h.waitIdle(ctx); err != nil {
			h.t.Fatalf("duroxidetest: Advance(%v): %v", d, err)
		}
		next, err := h.nextDue(ctx)
		if err != nil {
			h.t.Fatalf("duroxidetest: Advance(%v): %v", d, err)
		}
		if next.IsZero() || next.After(target) {
			break
		}
		h.moveTo(next)
	}
	h.moveTo(target)
	if err := h.waitIdle(ctx); err != nil {
		h.t.Fatalf("duroxidetest: Advance(%v): %v", d, err)
	}
}

// AdvanceUntilDone runs instanceID to its end and returns its final status:
// whenever the store is idle, it jumps the clock to the next due message (a
// timer, a delayed start, a retry after backoff). It fails the test if the
// instance waits for something other than time (an event nobody raises),
// or if it has not finished within Options.Timeout of real time (an
// eternal orchestration).
func (h *Harness) AdvanceUntilDone(instanceID string) *duroxide.Status {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	fail := func(format string, args ...any) {
		h.t.Helper()
		h.t.Fatalf("duroxidetest: AdvanceUntilDone(%s): %s\n%s", instanceID, fmt.Sprintf(format, args...), h.describe(instanceID))
	}
	for {
		if err := h.waitIdle(ctx); err != nil {
			fail("%v", err)
		}
		st, err := h.Client.GetStatus(ctx, instanceID)
		if err != nil {
			fail("%v", err)
		}
		if st.State.IsTerminal() {
			return st
		}
		next, err := h.nextDue(ctx)
		if err != nil {
			fail("%v", err)
		}
		if next.IsZero() {
			fail("the instance is %s and no timer is pending: it waits for an event (RaiseEvent) or for something outside the store", st.State)
		}
		h.moveTo(next)
	}
}

// moveTo sets the clock to t unless it is already past it, and wakes the
// dispatchers: one may have armed its sleep timer just before the clock
// moved, computed from the old time.
func (h *Harness) moveTo(t time.Time) {
	if d := t.Sub(h.Clock.Now()); d > 0 {
		h.Clock.Advance(d)
	}
	h.Store.WakeAll()
}

// idle reports whether nothing in the store can run at the current time.
// Orchestrations no runtime registers and activities no runtime serves
// wait for one and do not count.
func idle(d *provider.QueueDepths) bool {
	return d.OrchestratorReady == d.OrchestratorUnserved && d.OrchestratorLocked == 0 && d.WorkerReady == d.WorkerUnserved && d.WorkerLocked == 0
}

// waitIdle polls the store until it is idle or ctx ends.
func (h *Harness) waitIdle(ctx context.Context) error {
	err := h.poll(ctx, nil, func(d *provider.QueueDepths) (bool, error) { return idle(d), nil })
	if errors.Is(err, context.DeadlineExceeded) {
		d, _ := h.Store.QueueDepths(context.Background())
		if d == nil {
			d = &provider.QueueDepths{}
		}
		return fmt.Errorf("the runtime did not become idle within %v (orchestrator messages: %d ready, %d in a turn; activities: %d queued, %d running)",
			h.timeout, d.OrchestratorReady, d.OrchestratorLocked, d.WorkerReady, d.WorkerLocked)
	}
	return err
}

// poll calls done with the store's queue depths until it reports true,
// sleeping between calls until changed delivers or a short delay passes.
//
// It also wakes the runtime's dispatchers whenever the store holds ready
// work: with a fake clock their sleep timers fire only when the clock
// moves, so a dispatcher that went to sleep just before work became
// visible (a race with a clock step or with a wake-up) would otherwise
// sleep until the next step.
func (h *Harness) poll(ctx context.Context, changed <-chan struct{}, done func(*provider.QueueDepths) (bool, error)) error {
	delay := 100 * time.Microsecond
	for {
		d, err := h.Store.QueueDepths(ctx)
		if err != nil {
			return fmt.Errorf("reading queue depths: %w", err)
		}
		ok, err := done(d)
		if err != nil || ok {
			return err
		}
		if d.OrchestratorReady > d.OrchestratorUnserved || d.WorkerReady > d.WorkerUnserved {
			h.Store.WakeAll()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-changed:
		case <-t.C:
			delay = min(delay*2, 5*time.Millisecond)
		}
		t.Stop()
	}
}

// nextDue returns the earliest time after now at which a queued message
// becomes visible (a timer, a delayed start, a retry after backoff), or the
// zero time if there is none.
func (h *Harness) nextDue(ctx context.Context) (time.Time, error) {
	now := h.Clock.Now()
	var next time.Time
	for _, q := range []provider.Queue{provider.QueueOrchestrator, provider.QueueWorker} {
		t, err := h.Store.NextVisible(ctx, q)
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the next visible time: %w", err)
		}
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next, nil
}
