package httpapi

import (
	"os"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// TestOpenAPIListsEveryEventKind fails when a history event kind is added
// without adding it to the history endpoint's type enum.
func TestOpenAPIListsEveryEventKind(t *testing.T) {
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"OrchestrationStarted", `)
	if i < 0 {
		t.Fatal("openapi.json has no event type enum")
	}
	enum := string(b[i:])
	enum = enum[:strings.Index(enum, "]")]
	for _, k := range history.EventKinds {
		if !strings.Contains(enum, `"`+string(k)+`"`) {
			t.Errorf("openapi.json's event type enum lacks %s", k)
		}
	}
}
