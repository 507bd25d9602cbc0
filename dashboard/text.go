package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Display of user text. html/template escapes markup; these helpers also
// keep text from misleading the eye: control characters and the Unicode
// bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE shows an ID
// reversed, "exe.txt" as "txt.exe") are shown as visible escapes, and the
// templates wrap IDs and names in <bdi> so that right-to-left text in one
// cannot reorder what follows it. This is display only: what the store
// accepts is decided where text is validated.

// invisible reports whether r is shown as an escape: C0 and C1 controls,
// DEL, the bidirectional formatting characters (marks, embeddings,
// overrides, isolates), line and paragraph separators, zero-width space
// and the byte order mark.
func invisible(r rune) bool {
	switch {
	case unicode.Is(unicode.Cc, r):
		return true
	case r == 0x061C, r == 0x200B, r == 0x200E, r == 0x200F, r >= 0x202A && r <= 0x202E,
		r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029, r == 0xFEFF:
		return true
	}
	return false
}

// escapeRune writes r as a visible escape: \n, \t, \r, or \uXXXX.
func escapeRune(b *strings.Builder, r rune) {
	switch r {
	case '\n':
		b.WriteString(`\n`)
	case '\t':
		b.WriteString(`\t`)
	case '\r':
		b.WriteString(`\r`)
	default:
		fmt.Fprintf(b, `\u%04X`, r)
	}
}

// visible returns s with every invisible character (and every byte of
// invalid UTF-8, as \xNN) written as a visible escape, on one line.
func visible(s string) string { return visibleText(s, false) }

// visibleMultiline is visible but keeps line feeds and tabs: for messages,
// stack traces and JSON shown in a <pre>.
func visibleMultiline(s string) string { return visibleText(s, true) }

func visibleText(s string, multiline bool) string {
	keep := func(r rune) bool { return multiline && (r == '\n' || r == '\t') }
	clean := true
	for _, r := range s {
		if (invisible(r) && !keep(r)) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case invisible(r) && !keep(r):
			escapeRune(&b, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// timeFormat is how absolute times are written: to the millisecond, in
// UTC, with the zone.
const timeFormat = "2006-01-02 15:04:05.000 MST"

// absTime writes t in UTC with its zone.
func absTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// when writes t as a <time> element: the relative time ("3m ago") as its
// text, the absolute time with its zone as its title (on hover) and
// datetime attribute, and, when beside is set, the absolute time after it
// too.
func when(now, t time.Time, beside bool) template.HTML {
	if t.IsZero() {
		return "never"
	}
	abs := template.HTMLEscapeString(absTime(t))
	s := `<time datetime="` + t.UTC().Format(time.RFC3339Nano) + `" title="` + abs + `">` + template.HTMLEscapeString(ago(now, t)) + `</time>`
	if beside {
		s += ` <span class="abs-time">(` + abs + `)</span>`
	}
	return template.HTML(s)
}

// genericErrorTypes are Go error types that say nothing about an error
// beyond its message (errors.New, fmt.Errorf, errors.Join): the page shows
// the error's kind instead.
var genericErrorTypes = map[string]bool{
	"*errors.errorString": true, "*fmt.wrapError": true, "*fmt.wrapErrors": true, "*errors.joinError": true,
}

// errorType returns the Go type of an error worth showing, or "" for a
// generic one.
func errorType(typ string) string {
	if genericErrorTypes[typ] {
		return ""
	}
	return typ
}

// errorKinds describe the kinds of error in words.
var errorKinds = map[string]string{
	"application":    "application error: the code returned an error or panicked",
	"canceled":       "canceled",
	"poison":         "poison: the work crashed its workers too many times",
	"nondeterminism": "nondeterminism: the code no longer replays its history",
	"configuration":  "configuration: a name that no runtime registers",
	"infrastructure": "infrastructure: the store or the runtime failed",
	"timeout":        "timeout",
}

// errorKind describes an error kind in words (the kind itself when it is
// not a known one).
func errorKind(kind string) string {
	if d, ok := errorKinds[kind]; ok {
		return d
	}
	return kind
}
