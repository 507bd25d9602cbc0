package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/httpapi"
)

// TestServeHelpTriggers: the trigger file shown in 'duroxide help serve'
// loads, and the help names every concurrency policy and both kinds of key
// template placeholder.
func TestServeHelpTriggers(t *testing.T) {
	t.Parallel()
	help := serveCommand.details
	start := strings.Index(help, `{"triggers"`)
	end := strings.Index(help, "}]}")
	if start < 0 || end < start {
		t.Fatalf("no trigger file example in the help:\n%s", help)
	}
	path := filepath.Join(t.TempDir(), "triggers.json")
	if err := os.WriteFile(path, []byte(help[start:end+len("}]}")]), 0o600); err != nil {
		t.Fatal(err)
	}
	triggers, err := httpapi.LoadTriggers(path)
	if err != nil {
		t.Fatalf("the help's example does not load: %v", err)
	}
	if len(triggers) != 1 || !strings.Contains(triggers[0].WorkflowID, "{/") {
		t.Fatalf("the example should show a templated workflowId: %+v", triggers)
	}
	for _, want := range []httpapi.Concurrency{httpapi.ConcurrencyExclusive, httpapi.ConcurrencyQueue, httpapi.ConcurrencyReplace, httpapi.ConcurrencyParallel} {
		if !strings.Contains(help, string(want)+" (") {
			t.Errorf("the help does not explain concurrency %q", want)
		}
	}
	for _, want := range []string{"{/json/pointer}", "{header:Name}"} {
		if !strings.Contains(help, want) {
			t.Errorf("the help does not mention %s", want)
		}
	}
}
