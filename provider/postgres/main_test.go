package postgres

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// envTestDSN names the PostgreSQL server the tests use.
const envTestDSN = "DUROXIDE_TEST_POSTGRES"

// TestMain says, when envTestDSN is unset, that the tests that need a
// server are skipped and how to run them (go test shows it with -v, or
// when run in this directory without package arguments); and it fails the
// package's tests if any goroutine outlives them: every runtime, server
// and store a test starts must be stopped by its end.
func TestMain(m *testing.M) {
	if os.Getenv(envTestDSN) == "" {
		fmt.Fprintf(os.Stderr, "PostgreSQL tests skipped: set %s=postgres://USER@HOST:5432/DB?sslmode=disable to run them (each test creates and drops its own schema)\n", envTestDSN)
	}
	goleak.VerifyTestMain(m)
}
