package duroxide_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// shipRegistry registers the orchestration "Ship" as release v of its
// code, all under version 1.0.0 (a code change, not a new version):
//
//	v1: pack, wait for "go", ship
//	v2: [notify] pack, wait for "go", ship [audit] - both behind Patched
//	v3: notify pack, wait for "go", ship audit - "notify" deprecated
func shipRegistry(v int) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	step := duroxide.RegisterActivity(reg, "Step", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, "Ship", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var done []string
		do := func(s string) error {
			out, err := duroxide.CallActivity(ctx, step, s, nil).Get()
			done = append(done, out)
			return err
		}
		switch {
		case v == 2 && ctx.Patched("notify"):
			if err := do("notify"); err != nil {
				return "", err
			}
		case v == 3:
			ctx.Deprecated("notify")
			if err := do("notify"); err != nil {
				return "", err
			}
		}
		if err := do("pack"); err != nil {
			return "", err
		}
		if err := ctx.WaitForEvent("go").Await(nil); err != nil {
			return "", err
		}
		if err := do("ship"); err != nil {
			return "", err
		}
		if v >= 2 && ctx.Patched("audit") {
			if err := do("audit"); err != nil {
				return "", err
			}
		}
		return strings.Join(done, ","), nil
	})
	return reg
}

func patches(h []history.Event) []string {
	var out []string
	for _, ev := range h {
		if ev.Kind == history.PatchRecorded {
			out = append(out, ev.Name)
		}
	}
	return out
}

// TestPatchedAcrossADeploy runs v1 instances half-way, deploys v2 (the
// same orchestration version with two patches), and checks that every
// instance completes: the old ones take the old branch where their history
// already went past the patch and the new branch where it had not; new
// instances take the new branches.
func TestPatchedAcrossADeploy(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, shipRegistry(1), nil)
	for _, id := range []string{"old-1", "old-2"} {
		h.Start("Ship", id, struct{}{})
	}
	h.WaitIdle() // both wait for "go", after pack

	ctx := context.Background()
	if err := h.Runtime.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rt, err := duroxide.StartRuntime(ctx, h.Store, shipRegistry(2), &duroxide.RuntimeOptions{Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })

	h.Start("Ship", "new-1", struct{}{})
	h.WaitIdle()
	want := map[string]string{
		"old-1": "pack,ship,audit",
		"old-2": "pack,ship,audit",
		"new-1": "notify,pack,ship,audit",
	}
	wantPatches := map[string]string{"old-1": "[audit]", "old-2": "[audit]", "new-1": "[notify audit]"}
	for id, w := range want {
		h.RaiseEvent(id, "go", true)
		var out string
		if err := h.Wait(id).Decode(&out); err != nil || out != w {
			t.Fatalf("%s: got %q, %v; want %q", id, out, err, w)
		}
		hist := h.History(id)
		if got := strings.Join(patches(hist), " "); "["+got+"]" != wantPatches[id] {
			t.Fatalf("%s: recorded patches [%s], want %s", id, got, wantPatches[id])
		}
		st, err := h.Client.Inspect(ctx, id, nil)
		if err != nil || fmt.Sprint(st.Patches) != wantPatches[id] {
			t.Fatalf("%s: Inspect shows patches %v (%v), want %s", id, st.Patches, err, wantPatches[id])
		}
		// The finished history replays against the code that finished it.
		if err := duroxide.ReplayHistory(shipRegistry(2), id, hist); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}

	// Retiring "notify": v3 (Deprecated) replays the histories that took
	// the new branch, and records the patch for new instances so v2
	// replays them.
	newHist := h.History("new-1")
	if err := duroxide.ReplayHistory(shipRegistry(3), "new-1", newHist); err != nil {
		t.Fatalf("v3 does not replay a v2 history: %v", err)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rt3, err := duroxide.StartRuntime(ctx, h.Store, shipRegistry(3), &duroxide.RuntimeOptions{Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt3.Shutdown(context.Background()) })
	h.Start("Ship", "new-3", struct{}{})
	h.WaitIdle()
	h.RaiseEvent("new-3", "go", true)
	h.Wait("new-3")
	hist3 := h.History("new-3")
	if got := strings.Join(patches(hist3), " "); got != "notify audit" {
		t.Fatalf("v3 recorded patches %q", got)
	}
	if err := duroxide.ReplayHistory(shipRegistry(2), "new-3", hist3); err != nil {
		t.Fatalf("v2 does not replay a v3 history: %v", err)
	}
}

// TestPatchedReplaysOldHistory checks the replay rule on its own: a
// history recorded before the patch replays on the old branch, and the
// new branch would not replay it.
func TestPatchedReplaysOldHistory(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, shipRegistry(1), nil)
	h.Start("Ship", "v1", struct{}{})
	h.WaitIdle()
	h.RaiseEvent("v1", "go", true)
	h.Wait("v1")
	hist := h.History("v1")
	if err := duroxide.ReplayHistory(shipRegistry(2), "v1", hist); err == nil {
		// v2 adds "audit" after ship, past the end of the finished v1
		// history: a completed history cannot take it.
		t.Fatal("v2 replayed a completed v1 history that ends before its audit patch")
	}
	// Cut at the wait: the recorded schedules end before ship, so the
	// notify patch is inside history (old branch) and audit is not reached.
	var cut []history.Event
	for i, ev := range hist {
		if ev.Kind == history.ExternalSubscribed {
			cut = hist[:i+1]
			break
		}
	}
	if err := duroxide.ReplayHistory(shipRegistry(2), "v1", cut); err != nil {
		t.Fatalf("v2 does not replay a v1 history waiting for the event: %v", err)
	}
	if err := duroxide.ReplayHistory(shipRegistry(3), "v1", cut); err == nil {
		t.Fatal("v3 (notify unconditional) replayed a v1 history without notify")
	}
}
