// Command readmeexample is the first program of the README ("Writing
// orchestrations"), kept here so that it compiles and runs: a test checks
// that the README shows this file's text exactly.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	out, err := run(context.Background(), "app.db") // "" = in memory
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out) // Hello, Ada!
}

func run(ctx context.Context, path string) (string, error) {
	reg := duroxide.NewRegistry()
	// Registration returns typed references: a misspelled name or a wrong
	// input type is a compile error, not a failed instance.
	hello := duroxide.RegisterActivity(reg, "Hello", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	greet := duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		return duroxide.CallActivity(ctx, hello, name, &duroxide.ActivityOptions{
			Retry:               &duroxide.RetryPolicy{MaxAttempts: 3},
			StartToCloseTimeout: time.Minute, // one attempt; durable, survives restarts
		}).Get()
	})

	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return "", err
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil) // *duroxide.RuntimeOptions; nil = defaults
	if err != nil {
		return "", err
	}
	defer rt.Shutdown(ctx) // drains running turns and activities

	client := duroxide.NewClient(store)
	// RunTyped starts the instance and waits for its typed result;
	// StartTyped and WaitTyped do the two halves.
	return duroxide.RunTyped(ctx, client, greet, "order-42", "Ada", nil)
}
