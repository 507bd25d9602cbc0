package dispatch

import (
	"fmt"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

// TestFinishedCounts: terminal statuses are counted by orchestration,
// others not at all, and the names told apart are bounded.
func TestFinishedCounts(t *testing.T) {
	t.Parallel()
	var m metrics
	m.observeFinished(provider.StatusCompleted, "a")
	m.observeFinished(provider.StatusCompleted, "a")
	m.observeFinished(provider.StatusFailed, "a")
	m.observeFinished(provider.StatusCanceled, "b")
	m.observeFinished(provider.StatusContinuedAsNew, "a")
	m.observeFinished(provider.StatusRunning, "a")
	m.observeFinished("", "a")
	want := map[FinishedKey]uint64{
		{provider.StatusCompleted, "a"}: 2,
		{provider.StatusFailed, "a"}:    1,
		{provider.StatusCanceled, "b"}:  1,
	}
	if fmt.Sprint(m.finished) != fmt.Sprint(want) {
		t.Fatalf("finished = %v, want %v", m.finished, want)
	}

	for i := range 3 * MaxFinishedOrchestrations {
		m.observeFinished(provider.StatusFailed, fmt.Sprint("name-", i))
	}
	m.observeFinished(provider.StatusCompleted, "a") // a known name stays itself
	if len(m.finishedNames) != MaxFinishedOrchestrations {
		t.Fatalf("%d names told apart, want %d", len(m.finishedNames), MaxFinishedOrchestrations)
	}
	if len(m.finished) > 2*MaxFinishedOrchestrations {
		t.Fatalf("%d series after %d names", len(m.finished), 3*MaxFinishedOrchestrations)
	}
	if m.finished[FinishedKey{provider.StatusCompleted, "a"}] != 3 {
		t.Fatalf("a known name was counted as other: %v", m.finished[FinishedKey{provider.StatusCompleted, "a"}])
	}
	var total uint64
	for _, n := range m.finished {
		total += n
	}
	if other := m.finished[FinishedKey{provider.StatusFailed, OtherOrchestrations}]; other == 0 || total != 4+3*MaxFinishedOrchestrations+1 {
		t.Fatalf("other = %d, total = %d", other, total)
	}
}
