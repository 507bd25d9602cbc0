package duroxide_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// loop continues as new once, then waits on activity name at its second
// execution: a live instance whose current execution is 2.
func loopRegistry(name string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Loop", func(ctx *duroxide.OrchestrationContext, round int) (int, error) {
		if round == 0 {
			return 0, ctx.ContinueAsNew(1)
		}
		if err := ctx.ScheduleActivity(name, round).Await(nil); err != nil {
			return 0, err
		}
		return round, ctx.WaitForEvent("stop").Await(nil)
	})
	duroxide.RegisterActivity(reg, name, func(ctx context.Context, n int) (int, error) { return n, nil })
	return reg
}

func TestReplayCheckCurrentExecution(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, loopRegistry("Work"), nil)
	h.Start("Loop", "loop-1", 0)
	h.WaitIdle()
	ctx := context.Background()

	rep, err := duroxide.ReplayCheck(ctx, h.Client, loopRegistry("Work"), duroxide.ReplayCheckOptions{Orchestrations: []string{"Loop"}, LiveOnly: true})
	if err != nil || !rep.OK() || rep.Checked != 1 {
		t.Fatalf("same code: %+v, %v", rep, err)
	}
	var seen []duroxide.ReplayCheckReport
	rep, err = duroxide.ReplayCheck(ctx, h.Client, loopRegistry("Rework"), duroxide.ReplayCheckOptions{
		Orchestrations: []string{"Loop"}, Progress: func(r duroxide.ReplayCheckReport) { seen = append(seen, r) }})
	if err != nil || rep.OK() || len(rep.Divergences) != 1 {
		t.Fatalf("changed code: %+v, %v", rep, err)
	}
	d := rep.Divergences[0]
	var nd *duroxide.NondeterminismError
	if d.InstanceID != "loop-1" || d.ExecutionID != 2 || !errors.As(d.Err, &nd) || nd.ExecutionID != 2 ||
		!strings.Contains(d.Expected, `"Work"`) || !strings.Contains(d.Got, `"Rework"`) {
		t.Fatalf("divergence %+v", d)
	}
	if len(seen) != 1 || seen[0].Diverged != 1 {
		t.Fatalf("progress %+v", seen)
	}
}

func TestReplayCheckOptions(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, loopRegistry("Work"), nil)
	ctx := context.Background()
	for _, o := range []duroxide.ReplayCheckOptions{{Last: -1}, {MaxDivergences: -1}, {Orchestrations: []string{"Loop", ""}}} {
		if _, err := duroxide.ReplayCheck(ctx, h.Client, loopRegistry("Work"), o); !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := duroxide.ReplayCheck(ctx, h.Client, nil, duroxide.ReplayCheckOptions{}); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Errorf("nil registry: %v", err)
	}
}
