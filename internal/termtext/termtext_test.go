package termtext

import "testing"

func TestEscapeAndOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcode": "plain text, ünïcode",
		"\x1b[31mred":         `\x1b[31mred`,
		"bad \xff byte":       `bad \xff byte`,
		"tab\there":           `tab\there`,
		"\u202eright-to-left": `\u202eright-to-left`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := OneLine("  a\r\nb\nc\rd  "); got != "a b c d" {
		t.Errorf("OneLine = %q", got)
	}
	if Printable("a\nb") || !Printable("a b") {
		t.Error("Printable")
	}
}
