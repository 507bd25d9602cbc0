package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/duroxide/duroxide-go"
)

var versionCommand = &command{
	name:     "version",
	synopsis: "",
	summary:  "print the duroxide version, revision and Go version (also: --version)",
	details: `Prints the module version of duroxide in this binary (a release tag, a
pseudo-version, or "(devel)" when built without version control
information), the version control revision it was built from ("-dirty"
when the checkout had local changes), and the Go toolchain. GET /metrics of
'duroxide serve' has the same as the labels of duroxide_build_info.`,
	run: func(_ context.Context, inv *invocation, args []string) error {
		if err := inv.parse(args, 0); err != nil {
			return err
		}
		return printVersion(inv, duroxide.ReadBuildInfo())
	},
}

// printVersion prints bi on one line:
// "duroxide VERSION (revision REV) GOVERSION OS/ARCH".
func printVersion(inv *invocation, bi duroxide.BuildInfo) error {
	rev := ""
	if bi.Revision != "" {
		rev = " (revision " + bi.Revision + ")"
	}
	_, err := fmt.Fprintf(inv.stdout, "duroxide %s%s %s %s/%s\n", bi.Version, rev, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	return err
}
