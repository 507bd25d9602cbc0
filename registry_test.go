package duroxide_test

import (
	"testing"

	"github.com/duroxide/duroxide-go"
)

func TestRegistryHasOrchestration(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	orch := func(ctx *duroxide.OrchestrationContext, in string) (string, error) { return in, nil }
	duroxide.RegisterOrchestrationVersion(reg, "o", "1.0.0", orch)
	duroxide.RegisterOrchestrationVersion(reg, "o", "1.2.0", orch)
	duroxide.RegisterOrchestrationVersion(reg, "d", "2.0.0", orch)
	reg.SetDefaultVersion("d", "3.0.0") // not registered: no default to start
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"o", "", true},
		{"o", "1.0.0", true},
		{"o", "1.2.0", true},
		{"o", "1.1.0", false},
		{"p", "", false},
		{"p", "1.0.0", false},
		{"d", "2.0.0", true},
		{"d", "", false},
	} {
		if got := reg.HasOrchestration(tc.name, tc.version); got != tc.want {
			t.Errorf("HasOrchestration(%q, %q) = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
}
