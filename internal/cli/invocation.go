package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/duroxide/duroxide-go/internal/storeurl"
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
	inv.fs.StringVar(&inv.db, "db", "", "the store: sqlite:PATH, sqlite::memory:, PATH.db or postgres://... (default $"+storeurl.EnvDB+", else "+storeurl.DefaultDB+")")
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

// printJSON writes v as JSON on stdout, indented down to jsonIndentDepth
// and compact below (see indentJSON).
func (inv *invocation) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out := indentJSON(make([]byte, 0, len(b)+len(b)/4), b, jsonIndentDepth)
	_, err = inv.stdout.Write(append(out, '\n'))
	return err
}

// jsonIndentDepth is how deep --json output is indented: deep enough for
// the structure of statuses, events and lists; the payloads inside them
// (inputs, outputs, event data) are compact below it.
const jsonIndentDepth = 6

// indentJSON appends src, compact JSON, to dst with each value nested at
// most maxDepth deep on its own line, indented by two spaces per level;
// deeper values stay compact. Full indentation would write each value's
// depth in spaces, so that a 60 KB input nested 10,000 deep would print
// hundreds of megabytes; bounded, the output is at most about
// 2*maxDepth+3 times the input, whatever its nesting.
func indentJSON(dst, src []byte, maxDepth int) []byte {
	depth := 0
	newline := func(d int) {
		dst = append(dst, '\n')
		for range d {
			dst = append(dst, ' ', ' ')
		}
	}
	inString, escaped := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			dst = append(dst, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			dst = append(dst, c)
		case '{', '[':
			dst = append(dst, c)
			depth++
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1]) // empty: {} or []
				i++
				depth--
				continue
			}
			if depth <= maxDepth {
				newline(depth)
			}
		case '}', ']':
			if depth <= maxDepth {
				newline(depth - 1)
			}
			depth--
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			if depth <= maxDepth {
				newline(depth)
			}
		case ':':
			dst = append(dst, c)
			if depth <= maxDepth {
				dst = append(dst, ' ')
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst
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
