package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// A runtime fetches delayed work shortly before it is due
// (provider.FetchOptions.Ahead) and holds the turn until the due time:
// taken early, a timer, a delayed start or a timeout's cancel is still
// never decided before it is due.
var e2eAheadCases = []e2eCase{
	{"TimerTakenEarlyFiresOnTime", e2eTimerTakenEarly},
	{"DelayedStartTakenEarlyStartsOnTime", e2eDelayedStartTakenEarly},
	{"TimeoutTakenEarlyCancelsOnTime", e2eTimeoutTakenEarly},
}

func e2eTimerTakenEarly(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Nap", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		if err := ctx.ScheduleTimer(time.Hour).Await(nil); err != nil {
			return "", err
		}
		return "woke", nil
	})
	e.runtime(reg)
	e.start("nap", "Nap", nil)
	h := e.waitEvents("nap", history.TimerCreated, 1)
	var due time.Time
	for _, ev := range h {
		if ev.Kind == history.TimerCreated {
			due = time.UnixMilli(ev.FireAtMs)
		}
	}
	e.takenEarly("nap", due, history.TimerFired)
}

func e2eDelayedStartTakenEarly(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Later", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "started", nil
	})
	e.runtime(reg)
	due := e.fc.Now().Add(time.Hour)
	e.startWith("later", "Later", nil, &duroxide.StartOptions{StartAt: due})
	e.takenEarly("later", due, history.OrchestrationStarted)
}

func e2eTimeoutTakenEarly(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Idle", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.WaitForEvent("never").Await(&s)
		return s, err
	})
	e.runtime(reg)
	e.startWith("idle", "Idle", nil, &duroxide.StartOptions{Timeout: time.Hour})
	h := e.waitEvents("idle", history.OrchestrationStarted, 1)
	e.drained()
	if h[0].FireAtMs == 0 {
		e.t.Fatal("no deadline in the start of an instance started with a timeout")
	}
	e.takenEarly("idle", time.UnixMilli(h[0].FireAtMs), history.OrchestrationCancelRequested)
}

// takenEarly lets the fake clock reach 10 ms before due, when the runtime
// fetches id's message due then (the instance is locked), checks that no
// event of kind was recorded, lets the clock reach due, and checks that
// once id finished the event of kind was decided at or after due.
func (e *e2e) takenEarly(id string, due time.Time, kind history.EventKind) {
	e.t.Helper()
	e.fc.Advance(due.Sub(e.fc.Now()) - 10*time.Millisecond)
	a := e.admin()
	recorded := func() bool {
		h, err := e.c.GetHistory(e.ctx, id, 0)
		return err == nil && count(h, kind) != 0
	}
	e.eventually(id+" fetched before its due time", func() bool {
		d, err := a.QueueDepths(e.ctx)
		return err == nil && d.OrchestratorLocked > 0 || recorded()
	})
	if recorded() {
		e.t.Fatalf("%s recorded 10ms before it was due", kind)
	}
	e.fc.Advance(10 * time.Millisecond)
	e.advanceUntilDone(id)
	for _, ev := range e.history(id, 0) {
		if ev.Kind == kind && ev.TimestampMs < due.UnixMilli() {
			e.t.Fatalf("%s decided %v before it was due", kind, time.Duration(due.UnixMilli()-ev.TimestampMs)*time.Millisecond)
		}
		if ev.Kind == kind {
			return
		}
	}
	e.t.Fatalf("no %s in the history of %s", kind, id)
}
