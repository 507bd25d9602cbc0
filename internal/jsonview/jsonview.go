// Package jsonview renders JSON payloads for people to read, within
// bounds: the text it returns is at most Options.MaxBytes long (plus a
// cut mark) and shows at most Options.MaxDepth levels of nesting, whatever
// the input. The dashboard renders inputs, outputs and custom statuses
// with it; any other human-facing output of payloads (the CLI's) can too.
//
// # Why
//
// encoding/json's Indent writes one line per value with an indentation as
// deep as the value is nested, so its output grows with size × depth: a
// 60 KB array nested 10,000 deep indents to about 600 MB. Render indents
// at most MaxDepth levels (deeper containers are shown as [ … ] or { … })
// and stops at MaxBytes, in time linear in the input. View says what was
// left out (Truncated, CutBytes, CutDepth) and how large and deep the input
// is, so a caller can say so and offer the raw bytes instead.
//
// Strings, numbers and literals are copied as they are in the input (no
// re-encoding): what is shown is what was stored, up to the cut.
package jsonview

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Defaults of Options.
const (
	// DefaultMaxBytes bounds the rendered text: 64 KiB.
	DefaultMaxBytes = 64 << 10
	// DefaultMaxDepth is the nesting shown.
	DefaultMaxDepth = 16
	// DefaultIndent is one level's indentation.
	DefaultIndent = "  "
)

// CutMark ends a text cut at MaxBytes; ElidedArray and ElidedObject stand
// for containers nested deeper than MaxDepth.
const (
	CutMark      = "…"
	ElidedArray  = "[…]"
	ElidedObject = "{…}"
)

// Options bounds Render. A nil pointer or a zero field means the default.
type Options struct {
	// MaxBytes bounds the text (default DefaultMaxBytes); a longer
	// rendering is cut on a UTF-8 boundary and ends with CutMark.
	MaxBytes int
	// MaxDepth is how many levels of nesting are shown (default
	// DefaultMaxDepth): a container deeper than that is shown as
	// ElidedArray or ElidedObject. The top-level value is level 1.
	MaxDepth int
	// Indent is one level's indentation (default DefaultIndent).
	Indent string
}

// View is a rendering and what it leaves out.
type View struct {
	// Text is the rendering.
	Text string
	// Truncated reports that Text does not show all of the input: it was
	// cut at MaxBytes (CutBytes) or containers deeper than MaxDepth were
	// elided (CutDepth).
	Truncated, CutBytes, CutDepth bool
	// Size is the input's length in bytes.
	Size int
	// Depth is the input's deepest nesting of arrays and objects (0 for a
	// scalar), counted on valid input only.
	Depth int
	// Valid reports whether the input is valid JSON. Invalid input is
	// shown as it is, cut at MaxBytes.
	Valid bool
}

// Render renders raw as indented JSON within the bounds of opts.
func Render(raw []byte, opts *Options) View {
	o := Options{MaxBytes: DefaultMaxBytes, MaxDepth: DefaultMaxDepth, Indent: DefaultIndent}
	if opts != nil {
		if opts.MaxBytes > 0 {
			o.MaxBytes = opts.MaxBytes
		}
		if opts.MaxDepth > 0 {
			o.MaxDepth = opts.MaxDepth
		}
		if opts.Indent != "" {
			o.Indent = opts.Indent
		}
	}
	v := View{Size: len(raw)}
	if len(raw) == 0 {
		return v
	}
	if !json.Valid(raw) {
		w := writer{max: o.MaxBytes}
		w.write(raw)
		v.Text, v.CutBytes, v.Truncated = w.text(), w.cut, w.cut
		return v
	}
	v.Valid = true
	v.Depth = depth(raw)
	r := renderer{w: writer{max: o.MaxBytes}, maxDepth: o.MaxDepth, indent: o.Indent}
	r.render(raw)
	v.Text = r.w.text()
	v.CutBytes, v.CutDepth = r.w.cut, r.elided
	v.Truncated = v.CutBytes || v.CutDepth
	return v
}

// Describe says how large and deep the input was, for a note beside a
// truncated rendering: "60 KB, nested 9,990 deep" (the depth only when
// containers were elided or it is above 1).
func (v View) Describe() string {
	s := Bytes(v.Size)
	if v.Depth > 1 || v.CutDepth {
		s += ", nested " + group(v.Depth) + " deep"
	}
	return s
}

// Bytes writes n bytes for people: "512 bytes", "60 KB", "1.5 MB" (powers
// of 1,000).
func Bytes(n int) string {
	switch {
	case n < 1000:
		if n == 1 {
			return "1 byte"
		}
		return strconv.Itoa(n) + " bytes"
	case n < 10_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + " KB"
	case n < 1_000_000:
		return strconv.Itoa((n+500)/1000) + " KB"
	case n < 10_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
	}
	return group((n+500_000)/1_000_000) + " MB"
}

// group writes n with thousands separators: 9990 → "9,990".
func group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// writer collects the text up to max bytes.
type writer struct {
	buf []byte
	max int
	cut bool
}

// write appends p, or as much of it as fits; it reports false once the
// text is full.
func (w *writer) write(p []byte) bool {
	if w.cut {
		return false
	}
	if room := w.max - len(w.buf); len(p) > room {
		n := room
		for n > 0 && !utf8.RuneStart(p[n]) {
			n--
		}
		w.buf = append(w.buf, p[:n]...)
		w.cut = true
		return false
	}
	w.buf = append(w.buf, p...)
	return true
}

func (w *writer) writeString(s string) bool {
	if w.cut {
		return false
	}
	if len(s) > w.max-len(w.buf) {
		return w.write([]byte(s))
	}
	w.buf = append(w.buf, s...)
	return true
}

func (w *writer) text() string {
	if w.cut {
		return string(w.buf) + CutMark
	}
	return string(w.buf)
}

// renderer indents valid JSON.
type renderer struct {
	w        writer
	maxDepth int
	indent   string
	elided   bool
}

func (r *renderer) newline(level int) bool {
	if !r.w.writeString("\n") {
		return false
	}
	for range level {
		if !r.w.writeString(r.indent) {
			return false
		}
	}
	return true
}

// render walks raw (valid JSON) once, skipping elided containers once
// more, so it is linear in len(raw).
func (r *renderer) render(raw []byte) {
	level := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		ok := true
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		case '"':
			j := stringEnd(raw, i)
			ok = r.w.write(raw[i:j])
			i = j
		case '[', '{':
			closer := byte(']')
			if c == '{' {
				closer = '}'
			}
			k := skipSpace(raw, i+1)
			switch {
			case k < len(raw) && raw[k] == closer: // empty
				ok = r.w.write([]byte{c, closer})
				i = k + 1
			case level+1 > r.maxDepth:
				r.elided = true
				if c == '[' {
					ok = r.w.writeString(ElidedArray)
				} else {
					ok = r.w.writeString(ElidedObject)
				}
				i = containerEnd(raw, i)
			default:
				level++
				ok = r.w.write([]byte{c}) && r.newline(level)
				i++
			}
		case ']', '}':
			level--
			ok = r.newline(level) && r.w.write([]byte{c})
			i++
		case ',':
			ok = r.w.writeString(",") && r.newline(level)
			i++
		case ':':
			ok = r.w.writeString(": ")
			i++
		default: // a number or a literal
			j := i
			for j < len(raw) && !delimiter(raw[j]) {
				j++
			}
			ok = r.w.write(raw[i:j])
			i = j
		}
		if !ok {
			return
		}
	}
}

func delimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', ']', '}', '[', '{', '"':
		return true
	}
	return false
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index after the string that starts at raw[i].
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

// containerEnd returns the index after the array or object that starts
// at raw[i].
func containerEnd(raw []byte, i int) int {
	n := 0
	for j := i; j < len(raw); j++ {
		switch raw[j] {
		case '"':
			j = stringEnd(raw, j) - 1
		case '[', '{':
			n++
		case ']', '}':
			n--
			if n == 0 {
				return j + 1
			}
		}
	}
	return len(raw)
}

// depth returns the deepest nesting of valid JSON raw.
func depth(raw []byte) int {
	n, deepest := 0, 0
	for j := 0; j < len(raw); j++ {
		switch raw[j] {
		case '"':
			j = stringEnd(raw, j) - 1
		case '[', '{':
			n++
			deepest = max(deepest, n)
		case ']', '}':
			n--
		}
	}
	return deepest
}
