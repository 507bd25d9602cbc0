package sqlite

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// runtime, server and store a test starts must be stopped by its end. It
// then removes the migrated template database (template_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeTemplate()
		os.Exit(code)
	}))
}
