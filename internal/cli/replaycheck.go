package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// exitDiverged is the exit code of replay-check when a history diverged.
const exitDiverged = 3

// replayCheckShown is how many divergences the text report details; the
// rest are counted.
const replayCheckShown = 20

// replayCheckProgressEvery is how many instances pass between two progress
// lines of replay-check on standard error.
var replayCheckProgressEvery = 1000

// replayCheckCommand checks the stored histories against the demo
// orchestrations; RunReplayCheck checks them against any registry.
var replayCheckCommand = &command{
	name:     "replay-check",
	synopsis: replayCheckSynopsis,
	summary:  "replay stored histories against the demo orchestrations' code; exit 3 if one diverges",
	details:  replayCheckDetails + "\n\nThis binary's registry holds the demo orchestrations (demo.Hello, demo.Sequence, ...):\nto check your own, build replay-check into your binary (package replaycheck).",
	run: func(ctx context.Context, inv *invocation, args []string) error {
		reg := duroxide.NewRegistry()
		demo.Register(reg)
		return runReplayCheck(ctx, inv, reg, args)
	},
}

const replayCheckSynopsis = "[--orchestration NAME]... [--last N] [--live] [--json]"

const replayCheckDetails = `Replays the stored history of each selected instance (its current execution)
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

// divergedError reports that replay-check found divergences (exit 3).
type divergedError struct{ n int }

func (e *divergedError) Error() string {
	return fmt.Sprintf("replay-check: %d histories diverge from the code", e.n)
}

// RunReplayCheck runs the replay-check command with args (the flags after
// the command name) against the orchestrations of reg, and returns the
// process exit code. It is the body of the replaycheck package.
func RunReplayCheck(ctx context.Context, reg *duroxide.Registry, args []string, stdout, stderr io.Writer) int {
	return runReplayCheckWith(ctx, reg, args, stdout, stderr, os.Getenv)
}

// runReplayCheckWith is RunReplayCheck with the environment lookup
// injected, for tests.
func runReplayCheckWith(ctx context.Context, reg *duroxide.Registry, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cmd := &command{name: replayCheckCommand.name, synopsis: replayCheckSynopsis,
		summary: "replay stored histories against this binary's orchestrations; exit 3 if one diverges",
		details: replayCheckDetails}
	return exitCode(runReplayCheck(ctx, newInvocation(cmd, stdout, stderr, getenv), reg, args), stderr)
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

func runReplayCheck(ctx context.Context, inv *invocation, reg *duroxide.Registry, args []string) error {
	var names listFlag
	inv.fs.Var(&names, "orchestration", "check instances of this orchestration (repeatable, or NAME,NAME; default all)")
	last := inv.fs.Int("last", 0, "check only the newest N instances of each orchestration (0: all)")
	live := inv.fs.Bool("live", false, "check only live instances (Pending, Running)")
	inv.jsonFlag(`the report ({"checked", "passed", "diverged", "skipped", "divergences": [...]})`)
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	if *last < 0 {
		return usageErrorf("replay-check: --last must be 0 (all) or more, got %d", *last)
	}
	client, closeStore, err := inv.openClient(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer closeStore()
	progress := func(r duroxide.ReplayCheckReport) {
		if n := r.Checked + r.Skipped; n%replayCheckProgressEvery == 0 {
			fmt.Fprintf(inv.stderr, "replay-check: %d instances checked, %d diverged so far\n", n, r.Diverged)
		}
	}
	rep, err := duroxide.ReplayCheck(ctx, client, reg, duroxide.ReplayCheckOptions{
		Orchestrations: names, Last: *last, LiveOnly: *live, Progress: progress})
	if err != nil {
		return err
	}
	if inv.jsonOut {
		if err := inv.printJSON(rep); err != nil {
			return err
		}
	} else {
		printReplayCheck(inv.stdout, rep)
	}
	if !rep.OK() {
		return &divergedError{n: rep.Diverged}
	}
	return nil
}

// printReplayCheck prints a report: a summary line, then the first
// replayCheckShown divergences.
func printReplayCheck(w io.Writer, rep *duroxide.ReplayCheckReport) {
	fmt.Fprintf(w, "%d checked, %d passed, %d diverged, %d skipped (no history yet)\n",
		rep.Checked, rep.Passed, rep.Diverged, rep.Skipped)
	for i, d := range rep.Divergences {
		if i == replayCheckShown {
			break
		}
		fmt.Fprintf(w, "DIVERGED %s (%s", escapeText(d.InstanceID), escapeText(d.Orchestration))
		if d.Version != "" {
			fmt.Fprintf(w, " %s", escapeText(d.Version))
		}
		fmt.Fprintf(w, ", execution %d, %s)\n", d.ExecutionID, d.State)
		if d.Expected != "" || d.Got != "" {
			fmt.Fprintf(w, "  at event %d\n  expected: %s\n  got:      %s\n", d.EventID, clipLong(escapeText(d.Expected)), clipLong(escapeText(d.Got)))
		} else {
			fmt.Fprintf(w, "  %s\n", clipLong(escapeText(oneLine(d.Message))))
		}
	}
	if n := rep.Diverged - min(len(rep.Divergences), replayCheckShown); n > 0 {
		fmt.Fprintf(w, "... and %d more (--json lists up to %d)\n", n, duroxide.DefaultMaxDivergences)
	}
	if rep.OK() {
		fmt.Fprintln(w, "OK: the code reproduces every history checked")
	}
}

// clipLong shortens s to one line of at most 300 characters.
func clipLong(s string) string {
	s = oneLine(s)
	const max = 300
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
