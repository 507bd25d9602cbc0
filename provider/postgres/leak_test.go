package postgres

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// runtime, server and store a test starts must be stopped by its end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
