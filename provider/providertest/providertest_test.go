package providertest

import "testing"

// The suite's own shape: every group has cases and names are unique (a
// duplicate would make `go test -run` select two cases).
func TestSuiteShape(t *testing.T) {
	t.Parallel()
	groupNames := map[string]bool{}
	for _, g := range groups() {
		if groupNames[g.name] {
			t.Errorf("group %q is listed twice", g.name)
		}
		groupNames[g.name] = true
		if len(g.cases) == 0 {
			t.Errorf("group %q has no cases", g.name)
		}
		caseNames := map[string]bool{}
		for _, c := range g.cases {
			if c.name == "" || c.run == nil {
				t.Errorf("group %q has a case without a name or a body", g.name)
			}
			if caseNames[c.name] {
				t.Errorf("group %q has two cases named %q", g.name, c.name)
			}
			caseNames[c.name] = true
		}
	}
}
