package jsonview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		opts     *Options
		want     string
		cutBytes bool
		cutDepth bool
		depth    int
	}{
		{name: "empty", in: "", want: ""},
		{name: "scalar", in: `42`, want: `42`},
		{name: "string", in: ` "a \"b\" \\ [c]" `, want: `"a \"b\" \\ [c]"`},
		{name: "object", in: `{"a":1,"b":[true,null],"c":{}}`, depth: 2,
			want: "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    null\n  ],\n  \"c\": {}\n}"},
		{name: "empty containers", in: `[ [ ] , { } ]`, depth: 2, want: "[\n  [],\n  {}\n]"},
		{name: "deep", in: `[[[[1]]],{"k":{"x":[2]}}]`, opts: &Options{MaxDepth: 2}, cutDepth: true, depth: 4,
			want: "[\n  [\n    […]\n  ],\n  {\n    \"k\": {…}\n  }\n]"},
		{name: "brackets in strings", in: `[["]]]{{{"]]`, opts: &Options{MaxDepth: 1}, cutDepth: true, depth: 2, want: "[\n  […]\n]"},
		{name: "cut", in: `["abcdefghij"]`, opts: &Options{MaxBytes: 8}, cutBytes: true, depth: 1, want: "[\n  \"abc" + CutMark},
		{name: "cut on a rune boundary", in: `"ééé"`, opts: &Options{MaxBytes: 4}, cutBytes: true, want: `"é` + CutMark},
		{name: "invalid", in: `{"a":`, want: `{"a":`},
		{name: "invalid cut", in: `{"abcdef`, opts: &Options{MaxBytes: 3}, cutBytes: true, want: `{"a` + CutMark},
		{name: "tab indent", in: `[1]`, opts: &Options{Indent: "\t"}, depth: 1, want: "[\n\t1\n]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := Render([]byte(tc.in), tc.opts)
			if v.Text != tc.want || v.CutBytes != tc.cutBytes || v.CutDepth != tc.cutDepth || v.Truncated != (tc.cutBytes || tc.cutDepth) {
				t.Fatalf("Render(%q) = %q (cut bytes %v, depth %v, truncated %v), want %q (%v, %v)", tc.in, v.Text, v.CutBytes, v.CutDepth, v.Truncated, tc.want, tc.cutBytes, tc.cutDepth)
			}
			if v.Size != len(tc.in) || v.Depth != tc.depth {
				t.Fatalf("Render(%q): size %d depth %d, want %d %d", tc.in, v.Size, v.Depth, len(tc.in), tc.depth)
			}
		})
	}
}

// TestRenderMatchesIndent checks that an untruncated rendering is what
// encoding/json's Indent writes.
func TestRenderMatchesIndent(t *testing.T) {
	t.Parallel()
	in := `{"order":{"id":"o-1","lines":[{"sku":"a","qty":2,"price":1.5e3},{"sku":"b","qty":1,"tags":["x","y"]}],"paid":false,"note":null}}`
	var want bytes.Buffer
	if err := json.Indent(&want, []byte(in), "", "  "); err != nil {
		t.Fatal(err)
	}
	if v := Render([]byte(in), nil); v.Text != want.String() || v.Truncated {
		t.Fatalf("got\n%s\nwant\n%s", v.Text, want.String())
	}
}

// TestHostile renders a 60 KB array nested 9,990 deep, which
// encoding/json's Indent turns into about 600 MB: the rendering stays
// under its byte bound and says how deep the input was.
func TestHostile(t *testing.T) {
	t.Parallel()
	const n = 9990
	deep := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	wide := []byte("[" + strings.Repeat(`"`+strings.Repeat("x", 1000)+`",`, 1000) + `""]`)
	for name, in := range map[string][]byte{"deep": deep, "wide": wide} {
		v := Render(in, nil)
		if max := DefaultMaxBytes + len(CutMark); len(v.Text) > max {
			t.Fatalf("%s: %d bytes rendered, bound %d", name, len(v.Text), max)
		}
		if !v.Valid || !v.Truncated {
			t.Fatalf("%s: valid %v truncated %v", name, v.Valid, v.Truncated)
		}
	}
	v := Render(deep, nil)
	if v.Depth != n || !v.CutDepth || v.CutBytes {
		t.Fatalf("deep: depth %d, cut depth %v, cut bytes %v", v.Depth, v.CutDepth, v.CutBytes)
	}
	if got := v.Describe(); got != "20 KB, nested 9,990 deep" {
		t.Fatalf("Describe() = %q", got)
	}
	// Deeper than encoding/json's scanner accepts: shown raw, cut.
	deeper := bytes.Repeat([]byte("["), 200_000)
	if v := Render(deeper, nil); v.Valid || len(v.Text) > DefaultMaxBytes+len(CutMark) || !v.CutBytes {
		t.Fatalf("deeper: valid %v, %d bytes, cut %v", v.Valid, len(v.Text), v.CutBytes)
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 bytes", 1: "1 byte", 999: "999 bytes", 1500: "1.5 KB", 61_440: "61 KB",
		999_499: "999 KB", 1_500_000: "1.5 MB", 742_000_000: "742 MB", 1_234_567_890: "1,235 MB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzRender checks, for any input, that the rendering stays within its
// bound and is valid UTF-8 when the input is, and that an untruncated
// rendering of valid JSON is the same JSON.
func FuzzRender(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `"x"`, `[[[[[[]]]]]]`, `{"a":"\"]}"}`, `[1,`, "\"\xff\"", `  7  `} {
		f.Add([]byte(s), 64, 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxBytes, maxDepth int) {
		maxBytes, maxDepth = 1+int(uint(maxBytes)%4096), 1+int(uint(maxDepth)%32)
		v := Render(in, &Options{MaxBytes: maxBytes, MaxDepth: maxDepth})
		if len(v.Text) > maxBytes+len(CutMark) {
			t.Fatalf("%d bytes rendered, bound %d", len(v.Text), maxBytes)
		}
		if utf8.Valid(in) && !utf8.ValidString(v.Text) {
			t.Fatalf("invalid UTF-8 rendered from valid UTF-8: %q", v.Text)
		}
		if v.Valid != json.Valid(in) || v.Size != len(in) {
			t.Fatalf("valid %v size %d", v.Valid, v.Size)
		}
		if v.Valid && !v.Truncated {
			var a, b bytes.Buffer
			if err := json.Compact(&a, in); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&b, []byte(v.Text)); err != nil {
				t.Fatalf("rendering is not JSON: %v\n%s", err, v.Text)
			}
			if a.String() != b.String() {
				t.Fatalf("rendering changed the JSON:\n%s\n%s", a.String(), b.String())
			}
		}
		// Empty containers are shown whole at any depth: elision implies
		// depth, not the other way round.
		if v.CutDepth && v.Depth <= maxDepth {
			t.Fatalf("depth %d, max %d, cut depth %v", v.Depth, maxDepth, v.CutDepth)
		}
	})
}
