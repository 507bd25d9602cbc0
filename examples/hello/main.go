// Command hello is the smallest duroxide program: an orchestration that
// calls one activity. It shows the moving parts every program has: a
// registry of code, a store, a runtime that runs the code from the store,
// and a client that starts an instance and waits for its result.
//
//	go run ./examples/hello -name Ada
//	go run ./examples/hello -db hello.db   # a second run prints the stored result
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	db := flag.String("db", "", "SQLite database file (default: in memory)")
	name := flag.String("name", "World", "who to greet")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *db, *name); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

// register adds the example's orchestration and activity to reg and
// returns the orchestration's typed reference. Registration returns typed
// references, so the orchestration calls the activity with a checked name
// and checked input and output types.
func register(reg *duroxide.Registry) duroxide.Orchestration[string, string] {
	sayHello := duroxide.RegisterActivity(reg, "SayHello", func(_ context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	return duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		return duroxide.CallActivity(ctx, sayHello, name, nil).Get()
	})
}

func run(ctx context.Context, stdout io.Writer, dbPath, name string) error {
	store, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer store.Close()

	reg := duroxide.NewRegistry()
	greet := register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.Background())

	client := duroxide.NewClient(store)
	// An instance ID names one unit of work. If an earlier run (with -db)
	// already started this one, wait for it instead of starting another.
	id := "greet-" + name
	err = duroxide.StartTyped(ctx, client, greet, id, name, nil)
	if err != nil && !errors.Is(err, duroxide.ErrInstanceExists) {
		return err
	}
	greeting, err := duroxide.WaitTyped(ctx, client, greet, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, greeting)
	return nil
}
