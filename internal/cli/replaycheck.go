package cli

import (
	"context"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/internal/replaycmd"
)

// exitDiverged is the exit code of replay-check when a history diverged.
const exitDiverged = 3

// replayCheckCommand checks the stored histories against the demo
// orchestrations (package replaycheck builds the same command into users'
// binaries, against theirs).
var replayCheckCommand = &command{
	name:     "replay-check",
	synopsis: replaycmd.Synopsis,
	summary:  "replay stored histories against the demo orchestrations' code; exit 3 if one diverges",
	run: func(ctx context.Context, inv *invocation, args []string) error {
		reg := duroxide.NewRegistry()
		demo.Register(reg)
		return replaycmd.Run(ctx, replaycmd.Config{
			Name:     "duroxide replay-check",
			Summary:  inv.cmd.summary,
			More:     "This binary's registry holds the demo orchestrations (demo.Hello, demo.Sequence, ...):\nto check your own, build replay-check into your binary (package replaycheck).",
			Registry: reg, Stdout: inv.stdout, Stderr: inv.stderr, Getenv: inv.getenv,
		}, args)
	},
}
