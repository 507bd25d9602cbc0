package duroxide_test

import (
	"context"
	"errors"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// detachedRegistry registers "Worker" (waits for "go", returns its input
// with "!") and "Starter", which starts a Worker detached as the instance
// named by its input ("" = derived), waits for the start, and then, when
// hold is set, waits for "done" before returning the started ID.
func detachedRegistry(hold bool) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	worker := duroxide.RegisterOrchestration(reg, "Worker", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		if err := ctx.WaitForEvent("go").Await(nil); err != nil {
			return "", err
		}
		return in + "!", nil
	})
	duroxide.RegisterOrchestration(reg, "Starter", func(ctx *duroxide.OrchestrationContext, id string) (string, error) {
		task := duroxide.StartDetached(ctx, worker, id, "job", nil)
		if err := task.Await(nil); err != nil {
			if errors.Is(err, duroxide.ErrInstanceExists) {
				return "taken: " + err.Error(), nil
			}
			return "", err
		}
		if hold {
			if err := ctx.WaitForEvent("done").Await(nil); err != nil {
				return "", err
			}
		}
		return id, nil
	})
	return reg
}

// startedOnce checks that the starter recorded one detached start of id
// and its confirmation, and that id runs with no parent.
func startedOnce(t *testing.T, h *duroxidetest.Harness, starter, id string) {
	t.Helper()
	hist := h.History(starter)
	if n := countKind(hist, history.DetachedOrchestrationScheduled); n != 1 {
		t.Fatalf("%s recorded %d detached starts, want 1", starter, n)
	}
	for _, ev := range hist {
		if ev.Kind == history.DetachedOrchestrationScheduled && ev.ChildInstanceID != id {
			t.Fatalf("detached start of %q, want %q", ev.ChildInstanceID, id)
		}
	}
	if n := countKind(hist, history.SubOrchestrationCompleted); n != 1 {
		t.Fatalf("%s recorded %d start confirmations, want 1", starter, n)
	}
	st := h.Status(id)
	if st.ParentInstanceID != "" || st.ExecutionID != 1 || string(st.Input) != `"job"` {
		t.Fatalf("started instance: parent %q, execution %d, input %s", st.ParentInstanceID, st.ExecutionID, st.Input)
	}
	if n := countKind(h.History(id), history.OrchestrationStarted); n != 1 {
		t.Fatalf("%s started %d times", id, n)
	}
}

// TestDetachedStartRunsIndependently: the starter ends as soon as the
// start is recorded; the started instance, with a derived ID, runs on
// and completes on its own.
func TestDetachedStartRunsIndependently(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := detachedRegistry(false)
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Starter", "s", "")
		if st := h.Wait("s"); st.State != duroxide.StateCompleted {
			t.Fatalf("starter: %s %+v", st.State, st.Error)
		}
		h.WaitIdle()
		var id string
		for _, ev := range h.History("s") {
			if ev.Kind == history.DetachedOrchestrationScheduled {
				id = ev.ChildInstanceID
			}
		}
		if id != "s::sub::2" {
			t.Fatalf("derived ID %q, want s::sub::2 (the starter's ID and the event's)", id)
		}
		if st := h.Status(id); st.State.IsTerminal() {
			t.Fatalf("started instance ended with its starter: %s", st.State)
		}
		startedOnce(t, h, "s", id)
		h.RaiseEvent(id, "go", nil)
		var out string
		if err := h.Wait(id).Decode(&out); err != nil || out != "job!" {
			t.Fatalf("started instance: %q, %v", out, err)
		}
		replays(t, reg, h, "s")
		replays(t, reg, h, id)
	})
}

// TestDetachedStartOutlivesCanceledStarter: canceling the starter does
// not cancel the instance it started.
func TestDetachedStartOutlivesCanceledStarter(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := detachedRegistry(true)
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Starter", "s", "w")
		h.WaitIdle()
		if err := h.Client.CancelInstance(context.Background(), "s", "stop"); err != nil {
			t.Fatal(err)
		}
		if st := h.Wait("s"); st.State != duroxide.StateCanceled {
			t.Fatalf("starter: %s", st.State)
		}
		h.WaitIdle()
		if st := h.Status("w"); st.State.IsTerminal() {
			t.Fatalf("started instance ended with its canceled starter: %s %+v", st.State, st.Error)
		}
		startedOnce(t, h, "s", "w")
		h.RaiseEvent("w", "go", nil)
		if st := h.Wait("w"); st.State != duroxide.StateCompleted {
			t.Fatalf("started instance: %s", st.State)
		}
		replays(t, reg, h, "s")
		replays(t, reg, h, "w")
	})
}

// TestDetachedStartNotRepeatedAfterRestart: a runtime restart after the
// turn that recorded the start replays that turn without starting the
// instance again.
func TestDetachedStartNotRepeatedAfterRestart(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := detachedRegistry(true)
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Starter", "s", "w")
		h.WaitIdle()
		ctx := context.Background()
		if err := h.Runtime.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		ro.Clock = h.Clock
		rt, err := duroxide.StartRuntime(ctx, h.Store, reg, &ro)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
		h.RaiseEvent("s", "done", nil)
		var out string
		if err := h.Wait("s").Decode(&out); err != nil || out != "w" {
			t.Fatalf("starter: %q, %v", out, err)
		}
		startedOnce(t, h, "s", "w")
		h.RaiseEvent("w", "go", nil)
		h.Wait("w")
		replays(t, reg, h, "s")
	})
}

// TestDetachedStartIDTaken: a detached start on a taken ID starts nothing
// and fails its task with an error matching ErrInstanceExists.
func TestDetachedStartIDTaken(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := detachedRegistry(false)
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Worker", "w", "mine")
		h.Start("Starter", "s", "w")
		var out string
		if err := h.Wait("s").Decode(&out); err != nil {
			t.Fatal(err)
		}
		const want = `taken: detached start of Worker as "w": instance already exists`
		if out != want {
			t.Fatalf("starter returned %q, want %q", out, want)
		}
		hist := h.History("s")
		if n := countKind(hist, history.SubOrchestrationFailed); n != 1 {
			t.Fatalf("%d failures recorded, want 1", n)
		}
		if n := countKind(hist, history.SubOrchestrationCompleted); n != 0 {
			t.Fatalf("the dropped confirmation was recorded (%d)", n)
		}
		if st := h.Status("w"); string(st.Input) != `"mine"` {
			t.Fatalf("the taken instance changed: input %s", st.Input)
		}
		replays(t, reg, h, "s")
	})
}

// TestDetachedStartFireAndForget: a starter that ends in the turn of the
// start, without awaiting it, completes cleanly; its late confirmation is
// dropped (no dead letter, no leftover message), and the started instance
// runs.
func TestDetachedStartFireAndForget(t *testing.T) {
	t.Parallel()
	eachCacheMode(t, func(t *testing.T, ro duroxide.RuntimeOptions) {
		reg := duroxide.NewRegistry()
		worker := duroxide.RegisterOrchestration(reg, "Worker", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
			return in + "!", nil
		})
		duroxide.RegisterOrchestration(reg, "Starter", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			duroxide.StartDetached(ctx, worker, "w", "job", nil)
			return "done", nil
		})
		h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &ro})
		h.Start("Starter", "s", struct{}{})
		if st := h.Wait("s"); st.State != duroxide.StateCompleted {
			t.Fatalf("starter: %s", st.State)
		}
		var out string
		if err := h.Wait("w").Decode(&out); err != nil || out != "job!" {
			t.Fatalf("started instance: %q, %v", out, err)
		}
		h.WaitIdle()
		ctx := context.Background()
		d, err := h.Store.QueueDepths(ctx)
		if err != nil || d.OrchestratorReady != 0 || d.OrchestratorLocked != 0 {
			t.Fatalf("queue depths %+v, %v", d, err)
		}
		dead, err := h.Store.ListDeadLetters(ctx, 10)
		if err != nil || len(dead) != 0 {
			t.Fatalf("dead letters %+v, %v", dead, err)
		}
		hist := h.History("s")
		if countKind(hist, history.DetachedOrchestrationScheduled) != 1 || countKind(hist, history.SubOrchestrationCompleted) != 0 {
			t.Fatalf("starter history %+v", hist)
		}
		replays(t, reg, h, "s")
		replays(t, reg, h, "w")
	})
}
