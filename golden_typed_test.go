package duroxide_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// goldenTypedRegistry is goldenRegistry rewritten in the typed form
// (typed references, CallActivity, CallSubOrchestration, Future.Get). The
// histories in testdata/replay were recorded by the by-name form; the typed
// form records the same events, so they must replay against it unchanged.
func goldenTypedRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	inc := duroxide.RegisterActivity(reg, "Inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	echo := duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	flaky := duroxide.NewActivityRef[string, string]("Flaky")
	boom := duroxide.NewActivityRef[string, string]("Boom")

	duroxide.RegisterOrchestration(reg, "Golden.Sequence", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for i := 0; i < 3; i++ {
			var err error
			if n, err = duroxide.CallActivity(ctx, inc, n, nil).Get(); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.FanOut", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var fs []*duroxide.Future[int]
		for i := 0; i < n; i++ {
			fs = append(fs, duroxide.CallActivity(ctx, inc, i, nil))
		}
		sum := 0
		for _, f := range fs {
			v, err := f.Get()
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Select", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		act := duroxide.CallActivity(ctx, echo, "fast", nil)
		if ctx.Select(act.Task(), ctx.ScheduleTimer(time.Hour)) == 1 {
			return "timer", nil
		}
		return act.Get()
	})
	duroxide.RegisterOrchestration(reg, "Golden.Event", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ev := ctx.WaitForEvent("go")
		if ctx.Select(ev, ctx.ScheduleTimer(time.Hour)) == 1 {
			return "timeout", nil
		}
		var s string
		err := ev.Await(&s)
		return "got " + s, err
	})
	child := duroxide.RegisterOrchestration(reg, "Golden.Child", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		return duroxide.CallActivity(ctx, echo, s+"!", nil).Get()
	})
	duroxide.RegisterOrchestration(reg, "Golden.Parent", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		fa := duroxide.CallSubOrchestration(ctx, child, "", s, nil)
		fb := duroxide.CallSubOrchestration(ctx, child, "", s+s, nil)
		a, err := fa.Get()
		if err != nil {
			return "", err
		}
		b, err := fb.Get()
		if err != nil {
			return "", err
		}
		return a + "|" + b, nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Retry", func(ctx *duroxide.OrchestrationContext, key string) (string, error) {
		return duroxide.CallActivity(ctx, flaky, key, &duroxide.ActivityOptions{
			Retry: &duroxide.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second},
		}).Get()
	})
	duroxide.RegisterOrchestration(reg, "Golden.Values", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		t := ctx.Now()
		id := ctx.NewGUID()
		ctx.SetCustomStatus(map[string]string{"phase": "one"})
		s, err := duroxide.CallActivity(ctx, echo, id, nil).Get()
		if err != nil {
			return "", err
		}
		ctx.SetCustomStatus(map[string]string{"phase": "two"})
		return fmt.Sprintf("%d:%s", t.UnixMilli(), s), nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Loop", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if n >= 2 {
			return n, nil
		}
		n, err := duroxide.CallActivity(ctx, inc, n, nil).Get()
		if err != nil {
			return 0, err
		}
		return 0, ctx.ContinueAsNew(n)
	})
	duroxide.RegisterOrchestration(reg, "Golden.Fail", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		if _, err := duroxide.CallActivity(ctx, boom, s, nil).Get(); err != nil {
			return "", fmt.Errorf("step failed: %w", err)
		}
		return "ok", nil
	})
	duroxide.RegisterOrchestration(reg, "Golden.Waiting", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		if _, err := duroxide.CallActivity(ctx, inc, 1, nil).Get(); err != nil {
			return "", err
		}
		var s string
		err := ctx.WaitForEvent("never").Await(&s)
		return s, err
	})
	return reg
}

// TestGoldenHistoriesTypedForm replays the histories recorded by the
// by-name form against the typed form: every one must replay, and every
// deliberate divergence must still be caught.
func TestGoldenHistoriesTypedForm(t *testing.T) {
	t.Parallel()
	reg := goldenTypedRegistry()
	replayGoldenDir(t, reg, filepath.Join("testdata", "replay", "must-replay"), false)
	replayGoldenDir(t, reg, filepath.Join("testdata", "replay", "must-fail"), true)
}
