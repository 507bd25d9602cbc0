package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// activityRegistry serves activities only.
type activityRegistry map[string]ActivityFunc

func (activityRegistry) Orchestration(string, string) (replay.Func, string, bool) {
	return nil, "", false
}

func (a activityRegistry) Activity(name string) (ActivityFunc, bool) {
	fn, ok := a[name]
	return fn, ok
}

// An activity fetched but not yet started when Shutdown's deadline passes
// is not started, even during the grace given to running ones: it goes back to the queue and the delivery does not
// count, so its next delivery is attempt 1.
func TestShutdownGivesBackUnstartedActivityUncounted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })

	ran := make(chan struct{}, 1)
	reg := activityRegistry{"A": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		ran <- struct{}{}
		return nil, nil
	}}
	stopped := make(chan error, 1)
	var r *Runtime
	o := Options{Logger: quiet}
	started := make(chan struct{}) // r is set
	o.testHookActivityStart = func() {
		<-started
		// Shutdown's deadline passes while the activity is about to start.
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		go func() { stopped <- r.Shutdown(gone) }()
		for r.acts.Err() == nil {
			runtime.Gosched()
		}
	}
	scheduleActivity(ctx, t, store)
	r, err = Start(store, reg, o)
	close(started)
	if err != nil {
		t.Fatal(err)
	}
	// The runtime fetches the queued activity.
	select {
	case err := <-stopped:
		if err != context.Canceled {
			t.Fatalf("Shutdown = %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("Shutdown did not return")
	}
	select {
	case <-ran:
		t.Fatal("the activity started after Shutdown gave up on activities")
	default:
	}
	leases, err := store.FetchWorkItems(ctx, provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 {
		t.Fatalf("%d work items back in the queue, want 1", len(leases))
	}
	if got := leases[0].AttemptCount; got != 1 {
		t.Fatalf("redelivery is attempt %d, want 1: the delivery given back unstarted counted", got)
	}
}

// scheduleActivity queues activity "A" (ID 2) of instance "i" the way a
// runtime does: a turn of instance i schedules it. The registry of the
// tests knows no orchestration, so this turn is taken and acked here,
// before the runtime starts.
func scheduleActivity(ctx context.Context, t *testing.T, store provider.Provider) {
	t.Helper()
	scheduleActivityOn(ctx, t, store, "i")
}

// scheduleActivityOn is scheduleActivity on instance id.
func scheduleActivityOn(ctx context.Context, t *testing.T, store provider.Provider, id string) {
	t.Helper()
	_, err := store.Enqueue(ctx, &provider.OrchestratorMessage{InstanceID: id,
		Item:   history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "T"},
		Create: &provider.NewInstance{OrchestrationName: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, store, provider.FetchOptions{LockTimeout: time.Minute})
	if err != nil || it == nil {
		t.Fatalf("FetchOrchestrationItem = %v, %v", it, err)
	}
	_, err = store.AckOrchestrationItem(ctx, &provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{
			{EventID: 1, Kind: history.OrchestrationStarted, Name: "T"},
			{EventID: 2, Kind: history.ActivityScheduled, Name: "A"},
		},
		Metadata: provider.ExecutionMetadata{OrchestrationName: "T", Status: provider.StatusRunning},
		WorkerItems: []*provider.WorkerMessage{{InstanceID: id, ExecutionID: 1, ActivityID: 2,
			Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: id, ExecutionID: 1, ID: 2, Name: "A"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// messages is a slog handler that keeps the messages logged.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (h *messages) Enabled(context.Context, slog.Level) bool { return true }
func (h *messages) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *messages) WithGroup(string) slog.Handler            { return h }
func (h *messages) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}

func (h *messages) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

// Once Shutdown's deadline passes, an activity that returns within the
// grace period gives its work back itself, and Shutdown waits for it: it
// is not cut loose as one that ignores its context is.
func TestShutdownGraceWaitsForCanceledActivities(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })

	started, seen, gate := make(chan struct{}), make(chan struct{}), make(chan struct{})
	reg := activityRegistry{"A": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(seen)
		<-gate // slow to wind down, but within the grace
		return nil, context.Cause(ctx)
	}}
	log := &messages{}
	scheduleActivity(ctx, t, store)
	r, err := Start(store, reg, Options{Logger: slog.New(log), ShutdownGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The runtime fetches the queued activity.
	<-started
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Shutdown(gone) }()
	<-seen
	close(gate)
	if err := <-stopped; err != context.Canceled {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	for _, m := range log.all() {
		if strings.Contains(m, "after shutdown") {
			t.Fatalf("the activity was cut loose (%q) although it returned within the grace", m)
		}
	}
	leases, err := store.FetchWorkItems(ctx, provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].AttemptCount != 2 {
		t.Fatalf("work back in the queue: %d items, want 1 at attempt 2", len(leases))
	}
}
