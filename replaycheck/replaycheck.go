// Package replaycheck is a ready-made replay-check command for your own
// binary: it replays the stored histories of your orchestrations' instances
// against the code registered in your binary and exits non-zero when one of
// them no longer replays, so CI can run it against the production store
// before a deploy. Add it in one line, for example behind a subcommand:
//
//	if len(os.Args) > 1 && os.Args[1] == "replay-check" {
//		replaycheck.Main(reg) // reg: the *duroxide.Registry your runtime uses
//	}
//
// and run it as
//
//	myapp replay-check --db postgres://... --orchestration orders.Checkout --live
//
// Flags: --db (the store, as the duroxide command takes it: sqlite:PATH,
// PATH.db or postgres://...?schema=NAME; default $DUROXIDE_DB, else
// sqlite:duroxide.db), --orchestration NAME (repeatable, or NAME,NAME;
// default all), --last N (the newest N instances of each orchestration),
// --live (only Pending and Running instances) and --json. Progress goes to
// standard error every 1000 instances; the report to standard output.
//
// Exit codes: 0 every history checked replays; 3 at least one diverged, or
// names an orchestration or version the registry lacks; 1 the check could
// not run (the store could not be opened or read); 2 invalid flags.
//
// The library call behind it is duroxide.ReplayCheck.
package replaycheck

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/cli"
)

// Exit codes of Run and Main.
const (
	ExitOK       = 0 // every history checked replays
	ExitFailure  = 1 // the check could not run
	ExitUsage    = 2 // invalid flags
	ExitDiverged = 3 // at least one history diverged
)

// Main runs the replay-check command with the process's arguments after
// the subcommand (os.Args[2:] when os.Args[1] is the subcommand's name,
// else os.Args[1:]) and exits with its code. SIGINT and SIGTERM stop it.
func Main(reg *duroxide.Registry) {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "replay-check" {
		args = args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, reg, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the replay-check command with args (its flags) against the
// orchestrations registered in reg and returns the exit code.
func Run(ctx context.Context, reg *duroxide.Registry, args []string, stdout, stderr io.Writer) int {
	return cli.RunReplayCheck(ctx, reg, args, stdout, stderr)
}
