package cli

import (
	"os"
	"testing"
)

// TestServeBadHostBeforeStart: a malformed --allowed-host is refused before
// serve opens the store or starts the runtime.
func TestServeBadHostBeforeStart(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	r := runCLI(t, "serve", "--demo", "--addr", "127.0.0.1:0", "--allowed-host", "not a host!", "--db", db)
	r.wantErr(t, 1, "checking the settings", "not a host name or address")
	if r.stdout != "" {
		t.Fatalf("serve printed before refusing its settings:\n%s", r.stdout)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("serve opened the store before refusing its settings (stat: %v)", err)
	}
}
