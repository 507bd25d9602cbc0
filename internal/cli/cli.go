// Package cli implements the duroxide command line: serve, start,
// status, history, list, raise, cancel, pause, resume, rewind, purge, bulk,
// prune, locks, migrate, bench, copy, replay-check and version, on an
// SQLite or a PostgreSQL store.
//
// Run is the whole program minus process set-up, so tests drive every
// command in-process; cmd/duroxide only wires it to os.Args, the standard
// streams and SIGINT/SIGTERM. Errors are one line, "duroxide: <message>", on
// standard error; the exit code is 0 on success, 1 when the command failed
// (including start --wait on an instance that ended Failed or Canceled, and
// raise or cancel on an instance that already ended),
// 2 when it was invoked wrongly (unknown command or flag, missing argument,
// malformed --db, --input or --data), and 3 when replay-check found a
// history the code no longer reproduces.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/duroxide/duroxide-go/internal/replaycmd"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/internal/termtext"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand.
type command struct {
	name     string
	synopsis string // arguments after the name, for usage lines
	summary  string // one line for the command list
	details  string // paragraphs printed by `duroxide NAME -h`
	// run parses args (flags and positional arguments after the command
	// name) with inv and runs the command.
	run func(ctx context.Context, inv *invocation, args []string) error
}

// commands lists the subcommands in the order help shows them.
var commands = []*command{
	serveCommand,
	startCommand,
	statusCommand,
	historyCommand,
	listCommand,
	valuesCommand,
	raiseCommand,
	cancelCommand,
	pauseCommand,
	resumeCommand,
	rewindCommand,
	purgeCommand,
	bulkCommand,
	pruneCommand,
	locksCommand,
	scheduleCommand,
	migrateCommand,
	benchCommand,
	copyCommand,
	replayCheckCommand,
	versionCommand,
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func commandNames() string {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, "help"), ", ")
}

// Run runs the duroxide command line with args (without the program name)
// and returns the process exit code. Canceling ctx stops a running command:
// serve shuts down gracefully, start --wait stops waiting, and a store call
// in progress returns (on PostgreSQL, its connection is dropped) even while
// it waits on a stuck server. cmd/duroxide cancels it on SIGINT and SIGTERM.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr, os.Getenv)
}

// run is Run with the environment lookup injected, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return exitCode(dispatch(ctx, args, stdout, stderr, getenv), stderr)
}

// exitCode prints err, if any, on stderr and returns the exit code it means.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK
	}
	fmt.Fprintf(stderr, "duroxide: %s\n", escapeText(oneLine(err.Error())))
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	if errors.As(err, new(*replaycmd.DivergedError)) {
		return exitDiverged
	}
	return exitFailure
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		printUsage(stderr)
		return usageErrorf("no command given: run 'duroxide help' for the list of commands")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "--version", "-version", "-v":
		return versionCommand.run(ctx, newInvocation(versionCommand, stdout, stderr, getenv), rest)
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			printUsage(stdout)
			return nil
		}
		cmd := lookup(rest[0])
		if cmd == nil {
			return unknownCommand(rest[0])
		}
		return cmd.run(ctx, newInvocation(cmd, stdout, stderr, getenv), []string{"-h"})
	}
	cmd := lookup(name)
	if cmd == nil {
		return unknownCommand(name)
	}
	return cmd.run(ctx, newInvocation(cmd, stdout, stderr, getenv), rest)
}

func unknownCommand(name string) error {
	if strings.HasPrefix(name, "-") {
		return usageErrorf("flags go after the command name (%s); commands: %s", name, commandNames())
	}
	return usageErrorf("unknown command %q; commands: %s (run 'duroxide help' for details)", name, commandNames())
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `duroxide runs and manages durable orchestrations.

Usage:
  duroxide COMMAND [ARGS] [FLAGS]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\t%s\n", "show this help, or 'help COMMAND' for one command")
	_ = tw.Flush()
	fmt.Fprintf(w, `
Every command takes --db (after the command name) to choose the store, else
the %s environment variable, else %q:
  sqlite:PATH        an SQLite file, created if needed (also: a bare PATH ending in .db)
  sqlite::memory:    a private in-memory store, gone when the command exits
  postgres://USER:PASSWORD@HOST:PORT/DB?schema=NAME
                     PostgreSQL; ?schema= picks the schema holding the tables
                     (default: duroxide); passwords are never printed
Read commands (status, history, list, locks list, locks status, start) take --json.
Flags may come before or after the arguments.

Client mode: start, status, history, list, raise, cancel, pause, resume, rewind,
purge and locks take
--server URL (else $%s) to go through the HTTP API of a running
'duroxide serve' instead of opening the store, with --auth-token TOKEN (else
$%s) when the server requires one. Output and exit codes are the same.
Values from the store (IDs, names, errors) are printed with control
characters escaped, as Go string literals; --json prints them exactly.
`, storeurl.EnvDB, storeurl.DefaultDB, envServer, envAuthToken)
}

// errHelpShown means a command printed its help on request: exit 0.
var errHelpShown = errors.New("help shown")

// usageError is an error in how a command was invoked (exit code 2).
type usageError = storeurl.UsageError

func usageErrorf(format string, args ...any) error { return storeurl.Usagef(format, args...) }

// oneLine keeps an error message on one line of standard error.
func oneLine(s string) string { return termtext.OneLine(s) }
