package duroxide_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Golden histories of the typed form's features: timeouts, retries with
// jitter and non-retryable errors, canceled tasks and patches. They live in
// testdata/replay/features and must keep replaying in later releases.
// Regenerate with:
//
//	go test -run TestGoldenFeatureHistories -update-golden .
func featuresRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	echo := duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	wait := duroxide.RegisterActivity(reg, "WaitForCancel", func(ctx context.Context, s string) (string, error) {
		<-ctx.Done()
		return s, nil
	})
	attempts := map[string]int{}
	flaky := duroxide.RegisterActivity(reg, "FlakyThenFinal", func(_ context.Context, key string) (string, error) {
		attempts[key]++
		if attempts[key] < 3 {
			return "", fmt.Errorf("transient %d", attempts[key])
		}
		return "", duroxide.NonRetryable(errors.New("final"))
	})
	duroxide.RegisterOrchestration(reg, "Feature.Timeout", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		_, err := duroxide.CallActivity(ctx, wait, "x", &duroxide.ActivityOptions{ScheduleToCloseTimeout: 3 * time.Second}).Get()
		if !errors.Is(err, duroxide.ErrTimeout) {
			return "", fmt.Errorf("want a timeout, got %v", err)
		}
		return duroxide.CallActivity(ctx, echo, "after timeout", &duroxide.ActivityOptions{StartToCloseTimeout: time.Hour}).Get()
	})
	duroxide.RegisterOrchestration(reg, "Feature.Retry", func(ctx *duroxide.OrchestrationContext, key string) (string, error) {
		_, err := duroxide.CallActivity(ctx, flaky, key, &duroxide.ActivityOptions{
			Session: "s1",
			Retry:   &duroxide.RetryPolicy{MaxAttempts: 10, InitialInterval: time.Second, Jitter: 0.5},
		}).Get()
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return "", err
		}
		return ae.Message, nil
	})
	duroxide.RegisterOrchestration(reg, "Feature.Cancel", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		f := duroxide.CallActivity(ctx, echo, "fast", nil)
		timer := ctx.ScheduleTimer(time.Hour)
		ev := ctx.WaitForEvent("never")
		if ctx.Select(f.Task(), timer, ev) != 0 {
			return "", errors.New("the activity should win")
		}
		timer.Cancel()
		ev.Cancel()
		return f.Get()
	})
	duroxide.RegisterOrchestration(reg, "Feature.Patch", func(ctx *duroxide.OrchestrationContext, _ string) (string, error) {
		if ctx.Patched("greet-twice") {
			if _, err := duroxide.CallActivity(ctx, echo, "first", nil).Get(); err != nil {
				return "", err
			}
		}
		ctx.Deprecated("old-fix")
		return duroxide.CallActivity(ctx, echo, "second", nil).Get()
	})
	return reg
}

var featureRuns = []struct{ id, name string }{
	{"feature-timeout", "Feature.Timeout"},
	{"feature-retry", "Feature.Retry"},
	{"feature-cancel", "Feature.Cancel"},
	{"feature-patch", "Feature.Patch"},
}

func recordFeatures(t *testing.T) map[string]goldenFile {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, featuresRegistry(), &duroxide.RuntimeOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(ctx)
	c := duroxide.NewClient(store)
	out := map[string]goldenFile{}
	for _, run := range featureRuns {
		if err := c.StartOrchestration(ctx, run.id, run.name, run.id, nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, err := c.GetStatus(ctx, run.id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State.IsTerminal() {
				if st.State != duroxide.StateCompleted {
					t.Fatalf("%s ended %s: %+v", run.id, st.State, st.Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not finish: %+v", run.id, st)
			}
			clock.Advance(time.Second)
			time.Sleep(2 * time.Millisecond) // recording only: let the runtime react
		}
		h, err := c.GetHistory(ctx, run.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[run.id] = goldenFile{InstanceID: run.id, Events: h}
	}
	return out
}

func TestGoldenFeatureHistories(t *testing.T) {
	dir := filepath.Join("testdata", "replay", "features")
	if *updateGolden {
		writeGolden(t, dir, recordFeatures(t))
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != len(featureRuns) {
		t.Fatalf("want %d golden files in %s (run with -update-golden), got %d: %v", len(featureRuns), dir, len(files), err)
	}
	want := map[string][]history.EventKind{
		"feature-timeout": {history.ActivityCancelRequested, history.TimerCanceled},
		"feature-retry":   {history.ActivityFailed},
		"feature-cancel":  {history.TimerCanceled, history.ExternalSubscribedCanceled},
		"feature-patch":   {history.PatchRecorded},
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenFile
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			for _, k := range want[name] {
				if countKind(g.Events, k) == 0 {
					t.Fatalf("the recording has no %s event: %v", k, kinds(g.Events))
				}
			}
			if err := duroxide.ReplayHistory(featuresRegistry(), g.InstanceID, g.Events); err != nil {
				t.Fatalf("replay failed: %v", err)
			}
		})
	}
}
