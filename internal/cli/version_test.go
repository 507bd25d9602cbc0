package cli

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	bi := duroxide.ReadBuildInfo()
	want := "duroxide " + bi.Version
	if bi.Revision != "" {
		want += " (revision " + bi.Revision + ")"
	}
	want += " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"-v"}} {
		if r := runCLI(t, args...).wantCode(t, 0); r.stdout != want || r.stderr != "" {
			t.Errorf("%v printed %q (stderr %q), want %q", args, r.stdout, r.stderr, want)
		}
	}
	runCLI(t, "version", "extra").wantErr(t, 2, "unexpected argument")
	if r := runCLI(t, "help").wantCode(t, 0); !strings.Contains(r.stdout, "  version ") {
		t.Errorf("help does not list version:\n%s", r.stdout)
	}
}

func TestPrintVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	inv := &invocation{stdout: &out}
	if err := printVersion(inv, duroxide.BuildInfo{Version: "v1.2.3", Revision: "abc123-dirty", GoVersion: "go1.26.8"}); err != nil {
		t.Fatal(err)
	}
	if want := "duroxide v1.2.3 (revision abc123-dirty) go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}
