package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// invocation is one run of a command: its flags, its arguments and where
// its output goes.
type invocation struct {
	cmd            *command
	fs             *flag.FlagSet
	stdout, stderr io.Writer
	getenv         func(string) string

	db      string
	jsonOut bool
	// server and authToken are --server and --auth-token (serverFlags).
	server, authToken string
	// serverBase is the resolved server URL once a command runs through
	// the HTTP API, for messages; "" when it opened the store.
	serverBase string
	// onMigration, when set, is told the name of each schema migration
	// the store applies (migrate prints them).
	onMigration func(name string)
	args        []string // positional arguments, after parse
	argNames    []string // for messages about missing arguments
}

func newInvocation(cmd *command, stdout, stderr io.Writer, getenv func(string) string) *invocation {
	inv := &invocation{cmd: cmd, stdout: stdout, stderr: stderr, getenv: getenv}
	inv.fs = flag.NewFlagSet("duroxide "+cmd.name, flag.ContinueOnError)
	inv.fs.SetOutput(io.Discard) // parse errors are reported by run, in one line
	inv.fs.StringVar(&inv.db, "db", "", "the store: sqlite:PATH, sqlite::memory:, PATH.db or postgres://... (default $"+envDB+", else "+defaultDB+")")
	return inv
}

// jsonFlag adds --json, for read commands.
func (inv *invocation) jsonFlag(what string) {
	inv.fs.BoolVar(&inv.jsonOut, "json", false, "print "+what+" as JSON")
}

// parse parses the command line: flags and positional arguments in any
// order ("--" ends the flags). names are the positional arguments the
// command needs, optional ones last; min of them are required.
func (inv *invocation) parse(args []string, minArgs int, names ...string) error {
	inv.argNames = names
	pos, err := parseInterleaved(inv.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		inv.printHelp()
		return errHelpShown
	}
	if err != nil {
		return usageErrorf("%s: %v (run 'duroxide %s -h' for usage)", inv.cmd.name, err, inv.cmd.name)
	}
	if len(pos) < minArgs {
		return usageErrorf("%s: missing %s (usage: duroxide %s %s)", inv.cmd.name, names[len(pos)], inv.cmd.name, inv.cmd.synopsis)
	}
	if len(pos) > len(names) {
		return usageErrorf("%s: unexpected argument %q (usage: duroxide %s %s)", inv.cmd.name, pos[len(names)], inv.cmd.name, inv.cmd.synopsis)
	}
	for i, p := range pos {
		if strings.TrimSpace(p) == "" {
			return usageErrorf("%s: %s must not be empty", inv.cmd.name, names[i])
		}
	}
	inv.args = pos
	return nil
}

// arg returns positional argument i, or "" when it was not given.
func (inv *invocation) arg(i int) string {
	if i < len(inv.args) {
		return inv.args[i]
	}
	return ""
}

// parseInterleaved parses flags anywhere in args and returns the positional
// arguments in order. The flag package stops at the first positional
// argument, so parsing resumes after each one; "--" ends flag parsing.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" && !isFlagValue(fs, args[:consumed-1]) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isFlagValue reports whether the argument following before would be the
// value of a flag (as in --reason --): before ends with a non-boolean flag
// given without "=value".
func isFlagValue(fs *flag.FlagSet, before []string) bool {
	if len(before) == 0 {
		return false
	}
	last := before[len(before)-1]
	if !strings.HasPrefix(last, "-") || strings.Contains(last, "=") || last == "--" {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(last, "-"))
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// printHelp prints the command's usage, description and flags on stdout.
func (inv *invocation) printHelp() {
	w := inv.stdout
	fmt.Fprintf(w, "Usage: duroxide %s %s\n\n%s\n", inv.cmd.name, inv.cmd.synopsis, inv.cmd.summary)
	if inv.cmd.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(inv.cmd.details))
	}
	fmt.Fprintf(w, "\nFlags:\n")
	inv.fs.SetOutput(w)
	inv.fs.PrintDefaults()
	inv.fs.SetOutput(io.Discard)
}

// printJSON writes v as indented JSON on stdout.
func (inv *invocation) printJSON(v any) error {
	enc := json.NewEncoder(inv.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonArg validates a JSON flag value (--input, --data).
func jsonArg(cmd, flagName, value string) (json.RawMessage, error) {
	if value == "" {
		return nil, nil
	}
	if !json.Valid([]byte(value)) {
		var v any
		err := json.Unmarshal([]byte(value), &v)
		return nil, usageErrorf("%s: --%s is not valid JSON (%v): quote strings in JSON and for the shell, e.g. --%s '\"Ada\"', numbers as 42, objects as '{\"k\":1}'", cmd, flagName, err, flagName)
	}
	return json.RawMessage(value), nil
}
