package duroxide_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// On a store that keeps no heartbeats (no provider.Heartbeater: here a
// wrapper that hides it), Heartbeat fails with ErrNotSupported instead of
// silently doing nothing, and HeartbeatDetails finds none.
func TestHeartbeatNeedsAStoreThatKeepsThem(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	probe := duroxide.RegisterActivity(reg, "Probe", func(ctx context.Context, _ struct{}) (string, error) {
		ac := duroxide.ActivityContextFrom(ctx)
		var v int
		if ok, err := ac.HeartbeatDetails(&v); ok || err != nil {
			return "", errors.New("details found on a store without heartbeats")
		}
		err := ac.Heartbeat(ctx, 1)
		if errors.Is(err, duroxide.ErrNotSupported) {
			return "not supported", nil
		}
		return "", err
	})
	duroxide.RegisterOrchestration(reg, "Beat", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		return duroxide.CallActivity(ctx, probe, struct{}{}, nil).Get()
	})
	quiet := slog.New(slog.DiscardHandler)
	p, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	store := plainStore{p} // only the methods of provider.Provider
	rt, err := duroxide.StartRuntime(context.Background(), store, reg, &duroxide.RuntimeOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.Shutdown(context.Background())
		_ = p.Close()
	})
	client := duroxide.NewClient(store)
	ref := duroxide.NewOrchestrationRef[struct{}, string]("Beat")
	ctx, cancel := context.WithTimeout(context.Background(), duroxidetest.DefaultTimeout)
	defer cancel()
	out, err := duroxide.RunTyped(ctx, client, ref, "beat-1", struct{}{}, nil)
	if err != nil || out != "not supported" {
		t.Fatalf("got %q, %v; want Heartbeat to fail with ErrNotSupported", out, err)
	}
}

// plainStore hides a store's optional capabilities.
type plainStore struct{ provider.Provider }

// Heartbeat outside a running activity is an invalid call, not a panic.
func TestHeartbeatOutsideAnActivity(t *testing.T) {
	t.Parallel()
	var ac *duroxide.ActivityContext
	if err := ac.Heartbeat(context.Background(), nil); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("nil ActivityContext: %v", err)
	}
	if err := (&duroxide.ActivityContext{}).Heartbeat(context.Background(), 1); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("a decoded ActivityContext: %v", err)
	}
	if ok, err := (&duroxide.ActivityContext{}).HeartbeatDetails(new(int)); ok || err != nil {
		t.Fatalf("HeartbeatDetails outside an activity: %v, %v", ok, err)
	}
}
