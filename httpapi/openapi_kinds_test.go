package httpapi

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
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

// TestOpenAPIDescribesEveryWaitAndEventField fails when a field is added
// to the JSON of a Wait (an instance's waitingFor) or a history Event
// without adding it to the schema's properties.
func TestOpenAPIDescribesEveryWaitAndEventField(t *testing.T) {
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, typ := range map[string]reflect.Type{
		"Wait":  reflect.TypeFor[duroxide.Wait](),
		"Event": reflect.TypeFor[history.Event](),
	} {
		props := doc.Components.Schemas[schema].Properties
		if len(props) == 0 {
			t.Fatalf("openapi.json has no properties at components.schemas.%s", schema)
		}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || schema == "Event" && name == "timestampMs" { // served as timestamp
				continue
			}
			if _, ok := props[name]; !ok {
				t.Errorf("openapi.json's %s schema lacks %s (%s.%s)", schema, name, typ.Name(), f.Name)
			}
		}
	}
}
