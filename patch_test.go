package duroxide_test

import (
	"context"
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
