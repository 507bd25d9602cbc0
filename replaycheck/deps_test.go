package replaycheck_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module path of this repository.
const module = "github.com/duroxide/duroxide-go"

// deps lists the packages pkg imports, directly or not, with go list.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// heavy are the packages a binary embedding replay-check must not pull in:
// the HTTP API, the dashboard and the rest of the duroxide command.
var heavy = []string{module + "/httpapi", module + "/dashboard", module + "/internal/cli", module + "/demo", module + "/internal/bench"}

// TestNoHeavyDependencies: replaycheck imports none of heavy, directly or
// not, so that adding it to a binary costs the stores and little else.
func TestNoHeavyDependencies(t *testing.T) {
	t.Parallel()
	// The check can fail: the duroxide command does import them.
	if cli := deps(t, module+"/internal/cli"); !slices.Contains(cli, module+"/httpapi") {
		t.Fatalf("go list -deps does not list httpapi for internal/cli: %v", cli)
	}
	got := deps(t, module+"/replaycheck")
	if !slices.Contains(got, module+"/provider/sqlite") {
		t.Fatalf("go list -deps lists no store for replaycheck: %v", got)
	}
	for _, p := range heavy {
		if slices.Contains(got, p) {
			t.Errorf("replaycheck imports %s (go list -deps %s/replaycheck)", p, module)
		}
	}
}
