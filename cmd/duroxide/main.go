// Command duroxide serves the duroxide HTTP API and dashboard and manages
// orchestrations from the command line: serve, start, status, history,
// list, raise, cancel, purge, locks, migrate, bench (measure a store),
// copy (copy a store to another, e.g. SQLite to PostgreSQL) and version.
// Run 'duroxide help' for usage; the commands live in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/duroxide/duroxide-go/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a
		// second Ctrl-C ends a shutdown that takes too long.
		<-ctx.Done()
		stop()
	}()
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
