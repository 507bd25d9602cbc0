package httpapi

import (
	"encoding/json"
	"os"
	"slices"
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
	var doc struct {
		Components struct {
			Schemas struct {
				Event struct {
					Properties struct {
						Type struct {
							Enum []string `json:"enum"`
						} `json:"type"`
					} `json:"properties"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.Event.Properties.Type.Enum
	if len(enum) == 0 {
		t.Fatal("openapi.json has no event type enum at components.schemas.Event.properties.type")
	}
	for _, k := range history.EventKinds {
		if !slices.Contains(enum, string(k)) {
			t.Errorf("openapi.json's event type enum lacks %s", k)
		}
	}
}
