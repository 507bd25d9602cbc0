package providertest

import (
	"errors"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Detached starts.
var e2eDetachedCases = []e2eCase{
	{"DetachedStart", e2eDetachedStart},
	{"DetachedStartIDTaken", e2eDetachedStartIDTaken},
}

// detachedRegistry registers "Job" (waits for "go", returns its input
// doubled) and "Kick", which starts a Job detached as the ID of its input,
// waits for the start, and returns "started" or, on a taken ID, "taken".
func detachedRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	job := duroxide.RegisterOrchestration(reg, "Job", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := ctx.WaitForEvent("go").Await(nil); err != nil {
			return 0, err
		}
		return 2 * n, nil
	})
	duroxide.RegisterOrchestration(reg, "Kick", func(ctx *duroxide.OrchestrationContext, id string) (string, error) {
		err := duroxide.StartDetached(ctx, job, id, 21, nil).Await(nil)
		var de *duroxide.DetachedStartError
		switch {
		case err == nil:
			return "started", nil
		case errors.Is(err, duroxide.ErrInstanceExists) && errors.As(err, &de) && de.InstanceID == id:
			return "taken", nil
		}
		return "", err
	})
	return reg
}

// e2eDetachedStart: the starter completes at once; the started instance
// has no parent, starts once, and completes on its own afterwards.
func e2eDetachedStart(e *e2e) {
	reg := detachedRegistry()
	e.runtime(reg)
	e.start("k", "Kick", "job-1")
	var out string
	e.result("k", &out)
	if out != "started" {
		e.t.Fatalf("starter returned %q", out)
	}
	h := e.history("k", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.DetachedOrchestrationScheduled,
		history.SubOrchestrationCompleted, history.OrchestrationCompleted)
	if err := duroxide.ReplayHistory(reg, "k", h); err != nil {
		e.t.Fatalf("starter history does not replay: %v", err)
	}
	e.waitEvents("job-1", history.ExternalSubscribed, 1)
	if st := e.status("job-1"); st.State != duroxide.StateRunning || st.ParentInstanceID != "" || st.ExecutionID != 1 {
		e.t.Fatalf("started instance %s", describeStatus(st))
	}
	if err := e.c.RaiseEvent(e.ctx, "job-1", "go", nil); err != nil {
		e.t.Fatal(err)
	}
	var n int
	e.result("job-1", &n)
	if n != 42 {
		e.t.Fatalf("started instance returned %d", n)
	}
	jh := e.history("job-1", 0)
	if count(jh, history.OrchestrationStarted) != 1 {
		e.t.Fatalf("started instance history %v", eventKinds(jh))
	}
	if err := duroxide.ReplayHistory(reg, "job-1", jh); err != nil {
		e.t.Fatalf("started history does not replay: %v", err)
	}
}

// e2eDetachedStartIDTaken: on a taken ID the store queues the failure
// before the confirmation, so the task fails with ErrInstanceExists and
// the existing instance is untouched.
func e2eDetachedStartIDTaken(e *e2e) {
	reg := detachedRegistry()
	e.runtime(reg)
	e.start("job-1", "Job", 5)
	e.start("k", "Kick", "job-1")
	var out string
	e.result("k", &out)
	if out != "taken" {
		e.t.Fatalf("starter returned %q", out)
	}
	h := e.history("k", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.DetachedOrchestrationScheduled,
		history.SubOrchestrationFailed, history.OrchestrationCompleted)
	if err := duroxide.ReplayHistory(reg, "k", h); err != nil {
		e.t.Fatalf("starter history does not replay: %v", err)
	}
	if st := e.status("job-1"); string(st.Input) != "5" {
		e.t.Fatalf("taken instance changed: %s", describeStatus(st))
	}
}
