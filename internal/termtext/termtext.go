// Package termtext makes text from a store or a request safe to print on a
// terminal: the duroxide command and the replay-check command of package
// replaycheck print error lines and reports with it.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable reports whether s is valid UTF-8 made only of printable
// characters and spaces.
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// Escape escapes, in place, the characters of a free-text message that
// are not printable (as strconv.Quote would write them), for error lines.
func Escape(s string) string {
	if Printable(s) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// OneLine keeps a message on one line: line breaks become spaces, and
// leading and trailing space is trimmed.
func OneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(strings.TrimSpace(s))
}
