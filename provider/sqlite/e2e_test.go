package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// TestEndToEnd runs the end-to-end orchestration suite on file-backed
// stores, with and without the runtime's instance cache.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	providertest.RunEndToEnd(t, providertest.E2EHarness{
		New: func(t testing.TB, clock func() time.Time) provider.Provider {
			t.Helper()
			path := filepath.Join(t.TempDir(), "e2e.db")
			return openTestStore(t, path, &Options{Clock: clock, Logger: quietLogger})
		},
	})
}
