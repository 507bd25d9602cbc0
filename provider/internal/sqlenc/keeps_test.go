package sqlenc

import (
	"encoding/json"
	"testing"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// TestKeepsMetadata: which turn acks leave their execution's row (and
// the instance's status, name and version) as they are. The stores skip
// the statements that would rewrite them for those only.
func TestKeepsMetadata(t *testing.T) {
	raw := json.RawMessage(`1`)
	cases := []struct {
		name      string
		md        provider.ExecutionMetadata
		execution bool // KeepsExecution
		metadata  bool // KeepsMetadata
	}{
		{"none", provider.ExecutionMetadata{}, true, true},
		{"custom status", provider.ExecutionMetadata{CustomStatus: &provider.CustomStatusUpdate{Value: raw}}, true, true},
		{"parent", provider.ExecutionMetadata{ParentInstanceID: "p", ParentExecutionID: 1}, true, true},
		{"Running", provider.ExecutionMetadata{Status: provider.StatusRunning}, true, false},
		{"name", provider.ExecutionMetadata{OrchestrationName: "o"}, true, false},
		{"version", provider.ExecutionMetadata{OrchestrationVersion: "1"}, true, false},
		{"input", provider.ExecutionMetadata{Input: raw}, false, false},
		{"output", provider.ExecutionMetadata{Output: raw}, false, false},
		{"error", provider.ExecutionMetadata{Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "m"}}, false, false},
		{"Completed", provider.ExecutionMetadata{Status: provider.StatusCompleted}, false, false},
		{"Failed", provider.ExecutionMetadata{Status: provider.StatusFailed}, false, false},
		{"ContinuedAsNew", provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew}, false, false},
	}
	for _, c := range cases {
		a, err := EncodeTurn(&provider.TurnAck{ExecutionID: 1, Metadata: c.md})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := a.KeepsExecution(); got != c.execution {
			t.Errorf("%s: KeepsExecution = %v, want %v", c.name, got, c.execution)
		}
		if got := a.KeepsMetadata(); got != c.metadata {
			t.Errorf("%s: KeepsMetadata = %v, want %v", c.name, got, c.metadata)
		}
	}
}
