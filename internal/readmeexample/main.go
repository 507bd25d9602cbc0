// Command readmeexample is the first program of the README ("Writing
// orchestrations"), kept here so that it compiles and runs: a test checks
// that the README shows this file's text exactly.
package main

import (
	"context"
	"fmt"
	"log"

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
	duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		var msg string
		if err := ctx.ScheduleActivity("Hello", name).Await(&msg); err != nil {
			return "", err
		}
		return msg, nil
	})
	duroxide.RegisterActivity(reg, "Hello", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
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
	if err := client.StartOrchestration(ctx, "order-42", "Greet", "Ada", nil); err != nil {
		return "", err
	}
	st, err := client.WaitForOrchestration(ctx, "order-42")
	if err != nil {
		return "", err
	}
	var out string
	err = st.Decode(&out) // "Hello, Ada!"
	return out, err
}
