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
// Its help (-h) and its messages name the command after your binary
// ("myapp replay-check"); RunNamed takes the name to use instead.
//
// The package imports the root package and the two stores, not the HTTP
// API, the dashboard or the rest of the duroxide command: it adds little to
// a binary that already links a store.
//
// The library call behind it is duroxide.ReplayCheck.
package replaycheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/replaycmd"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/internal/termtext"
)

// Exit codes of Run and Main.
const (
	ExitOK       = 0 // every history checked replays
	ExitFailure  = 1 // the check could not run
	ExitUsage    = 2 // invalid flags
	ExitDiverged = 3 // at least one history diverged
)

// subcommand is the name Main strips from the arguments.
const subcommand = "replay-check"

// Main runs the replay-check command with the process's arguments after
// the subcommand (os.Args[2:] when os.Args[1] is "replay-check", else
// os.Args[1:]) and exits with its code. SIGINT and SIGTERM stop it. Its
// help and messages name the command as it was invoked: "myapp
// replay-check", or "myapp" when the binary is only this command.
func Main(reg *duroxide.Registry) {
	name, args := programName(), os.Args[1:]
	if len(args) > 0 && args[0] == subcommand {
		name, args = name+" "+subcommand, args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := RunNamed(ctx, name, reg, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the replay-check command with args (its flags) against the
// orchestrations registered in reg and returns the exit code. Its help and
// messages call the command "<binary> replay-check", after the base name
// of os.Args[0].
func Run(ctx context.Context, reg *duroxide.Registry, args []string, stdout, stderr io.Writer) int {
	return RunNamed(ctx, programName()+" "+subcommand, reg, args, stdout, stderr)
}

// RunNamed is Run for a command invoked as name (such as "myapp
// replay-check"), which its help and messages use. Errors are printed on
// stderr as one line after the first word of name.
func RunNamed(ctx context.Context, name string, reg *duroxide.Registry, args []string, stdout, stderr io.Writer) int {
	err := replaycmd.Run(ctx, replaycmd.Config{
		Name:     name,
		Summary:  "Replay stored histories against this binary's orchestrations; exit 3 if one diverges.",
		Registry: reg, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv,
	}, args)
	if err == nil {
		return ExitOK
	}
	prog, _, _ := strings.Cut(name, " ")
	fmt.Fprintf(stderr, "%s: %s\n", prog, termtext.Escape(termtext.OneLine(err.Error())))
	switch {
	case errors.As(err, new(*storeurl.UsageError)):
		return ExitUsage
	case errors.As(err, new(*replaycmd.DivergedError)):
		return ExitDiverged
	}
	return ExitFailure
}

// programName is the base name of the running binary.
func programName() string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return "replay-check"
	}
	return filepath.Base(os.Args[0])
}
