package duroxide

import (
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// TestDeriveWaitsErrorBetweenReads derives the waits of an instance whose
// first turn recorded an error between the read of the instance (no
// LastError yet) and the read of its queue state (LastErrorSince set):
// the derivation goes by what the instance read says instead of
// dereferencing the missing error (it panicked, failing Inspect and the
// dashboard's instance page on busy machines).
func TestDeriveWaitsErrorBetweenReads(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	info := &provider.InstanceInfo{InstanceID: "i", OrchestrationName: "Unknown", Status: provider.StatusPending}
	q := &provider.InstanceQueueState{Now: t0.Add(time.Minute), LastProgressAt: t0, LastErrorSince: t0.Add(time.Second),
		Messages: []provider.QueuedMessage{{Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "i", Name: "Unknown"},
			VisibleAt: t0, EnqueuedAt: t0, Attempts: 1}}}
	waits := deriveWaits(waitInput{Info: info, Queue: q, StalledAfter: time.Millisecond})
	if len(waits) != 1 || waits[0].Kind != WaitTurn || !waits[0].Stalled {
		t.Fatalf("waits %+v, want one stalled turn (as the instance read shows no error)", waits)
	}
}
