// Package replaycmd is the replay-check command: the duroxide command's
// replay-check (against the demo orchestrations) and the one package
// replaycheck builds into users' binaries (against theirs) both run it.
//
// It imports only the root package, the stores and small helpers, never the
// HTTP API, the dashboard or the rest of the command line, so that a binary
// embedding it stays small (a test checks this).
package replaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/internal/termtext"
)

// Shown is how many divergences the text report details; the rest are
// counted.
const Shown = 20

// ProgressEvery is how many instances pass between two progress lines on
// standard error (a variable for tests).
var ProgressEvery = 1000

// Synopsis is the command's arguments, for usage lines.
const Synopsis = "[--db URL] [--orchestration NAME]... [--last N] [--live] [--json]"

// Details is the command's description, for its help.
const Details = `Replays the stored history of each selected instance (its current execution)
against the orchestration code registered in this binary, as the runtime
would after a deploy, and reports every instance the code no longer
reproduces, with the first differing event. Nothing runs and nothing is
written. Instances are checked newest first.

--orchestration (repeatable, or NAME,NAME) picks the orchestrations (default
all); --last N checks only the newest N instances of each; --live only the
Pending and Running ones (the ones a deploy would resume).

Exit codes: 0 every history replays; 3 at least one diverged (or its
orchestration or version is not registered); 1 the check could not run
(store error); 2 invalid flags.`

// Config is one run of the command.
type Config struct {
	// Name is how the command is invoked ("duroxide replay-check",
	// "myapp replay-check"), for its help and its messages.
	Name string
	// Summary is the one-line description its help starts with; More, if
	// set, a paragraph added after Details.
	Summary, More string
	// Registry holds the orchestrations whose code is checked.
	Registry *duroxide.Registry
	// Stdout receives the help and the report, Stderr progress lines and
	// the store's warnings.
	Stdout, Stderr io.Writer
	// Getenv reads $DUROXIDE_DB.
	Getenv func(string) string
}

// DivergedError reports that at least one history diverged (exit code 3).
type DivergedError struct{ N int }

func (e *DivergedError) Error() string {
	return fmt.Sprintf("replay-check: %d histories diverge from the code", e.N)
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return errors.New("empty name")
		}
		*l = append(*l, s)
	}
	return nil
}

// Run parses args (the flags after the command's name) and runs the
// check. It returns nil when every history checked replays (or the help
// was asked for and printed), a *storeurl.UsageError for invalid flags, a
// *DivergedError when a history diverged, and any other error when the
// check could not run.
func Run(ctx context.Context, cfg Config, args []string) error {
	fs := flag.NewFlagSet(cfg.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are returned, in one line
	db := fs.String("db", "", storeurl.FlagUsage)
	var names listFlag
	fs.Var(&names, "orchestration", "check instances of this orchestration (repeatable, or NAME,NAME; default all)")
	last := fs.Int("last", 0, "check only the newest N instances of each orchestration (0: all)")
	live := fs.Bool("live", false, "check only live instances (Pending, Running)")
	jsonOut := fs.Bool("json", false, `print the report ({"checked", "passed", "diverged", "skipped", "divergences": [...]}) as JSON`)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(cfg, fs)
		return nil
	case err != nil:
		return storeurl.Usagef("replay-check: %v (run '%s -h' for usage)", err, cfg.Name)
	case fs.NArg() > 0:
		return storeurl.Usagef("replay-check: unexpected argument %q (usage: %s %s)", fs.Arg(0), cfg.Name, Synopsis)
	case *last < 0:
		return storeurl.Usagef("replay-check: --last must be 0 (all) or more, got %d", *last)
	}
	spec, err := storeurl.Resolve(*db, cfg.Getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(cfg.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := storeurl.Open(ctx, spec, storeurl.Existing, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			fmt.Fprintf(cfg.Stderr, "replay-check: closing store: %s\n", termtext.Escape(termtext.OneLine(err.Error())))
		}
	}()
	progress := func(r duroxide.ReplayCheckReport) {
		if n := r.Checked + r.Skipped; n%ProgressEvery == 0 {
			fmt.Fprintf(cfg.Stderr, "replay-check: %d instances checked, %d diverged so far\n", n, r.Diverged)
		}
	}
	rep, err := duroxide.ReplayCheck(ctx, duroxide.NewClient(store), cfg.Registry, duroxide.ReplayCheckOptions{
		Orchestrations: names, Last: *last, LiveOnly: *live, Progress: progress})
	if err != nil {
		return err
	}
	if *jsonOut {
		// The report is flat (strings and numbers under two levels):
		// indenting it fully stays bounded.
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if _, err := cfg.Stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	} else {
		printReport(cfg.Stdout, rep)
	}
	if !rep.OK() {
		return &DivergedError{N: rep.Diverged}
	}
	return nil
}

// printHelp prints the command's usage, description and flags.
func printHelp(cfg Config, fs *flag.FlagSet) {
	w := cfg.Stdout
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n\n%s\n", cfg.Name, Synopsis, cfg.Summary, Details)
	if cfg.More != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cfg.More))
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// printReport prints a report: a summary line, then the first Shown
// divergences.
func printReport(w io.Writer, rep *duroxide.ReplayCheckReport) {
	esc := termtext.Escape
	fmt.Fprintf(w, "%d checked, %d passed, %d diverged, %d skipped (no history yet)\n",
		rep.Checked, rep.Passed, rep.Diverged, rep.Skipped)
	for i, d := range rep.Divergences {
		if i == Shown {
			break
		}
		fmt.Fprintf(w, "DIVERGED %s (%s", esc(d.InstanceID), esc(d.Orchestration))
		if d.Version != "" {
			fmt.Fprintf(w, " %s", esc(d.Version))
		}
		fmt.Fprintf(w, ", execution %d, %s)\n", d.ExecutionID, d.State)
		if d.Expected != "" || d.Got != "" {
			fmt.Fprintf(w, "  at event %d\n  expected: %s\n  got:      %s\n", d.EventID, clipLong(esc(d.Expected)), clipLong(esc(d.Got)))
		} else {
			fmt.Fprintf(w, "  %s\n", clipLong(esc(termtext.OneLine(d.Message))))
		}
	}
	if n := rep.Diverged - min(len(rep.Divergences), Shown); n > 0 {
		fmt.Fprintf(w, "... and %d more (--json lists up to %d)\n", n, duroxide.DefaultMaxDivergences)
	}
	if rep.OK() {
		fmt.Fprintln(w, "OK: the code reproduces every history checked")
	}
}

// clipLong shortens s to one line of at most 300 characters.
func clipLong(s string) string {
	s = termtext.OneLine(s)
	const max = 300
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
