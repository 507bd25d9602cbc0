package cli

import (
	"strings"
	"testing"
)

// TestRedactCommandOutput runs a command on that URL against a server that
// does not answer: the error shows the URL with only its password hidden.
func TestRedactCommandOutput(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "status", "x", "--db", "postgres://postgres:postgres@127.0.0.1:1/postgres?connect_timeout=2")
	r.wantErr(t, 1, "postgres://postgres:xxxxx@127.0.0.1:1/postgres")
	if strings.Contains(r.stderr, "xxxxx://") || strings.Contains(r.stderr, "/xxxxx") || strings.Contains(r.stderr, ":postgres@") {
		t.Fatalf("stderr redacts the wrong text, or keeps the password: %s", r.stderr)
	}
}
