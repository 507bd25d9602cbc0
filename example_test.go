package duroxide_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// A greeting orchestration: one activity, run by a runtime on an in-memory
// store, started and awaited with a client.
func Example() {
	ctx := context.Background()
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

	store, err := sqlite.Open(ctx, "", nil) // "" = in memory; pass a path to keep the data
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(ctx)

	client := duroxide.NewClient(store)
	if err := client.StartOrchestration(ctx, "order-42", "Greet", "Ada", nil); err != nil {
		log.Fatal(err)
	}
	st, err := client.WaitForOrchestration(ctx, "order-42")
	if err != nil {
		log.Fatal(err)
	}
	var out string
	if err := st.Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.State, out)
	// Output: Completed Hello, Ada!
}

// Fan out to parallel activities, then fan in; a timer bounds the wait for
// an external event.
func ExampleOrchestrationContext_Select() {
	ctx := context.Background()
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Square", func(_ context.Context, n int) (int, error) { return n * n, nil })
	duroxide.RegisterOrchestration(reg, "SumOfSquares", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		tasks := make([]*duroxide.Task, n)
		for i := range tasks {
			tasks[i] = ctx.ScheduleActivity("Square", i+1)
		}
		sum := 0
		for _, t := range tasks {
			var v int
			if err := t.Await(&v); err != nil {
				return "", err
			}
			sum += v
		}
		confirm := ctx.WaitForEvent("confirm")
		if ctx.Select(confirm, ctx.ScheduleTimer(time.Hour)) == 1 {
			return "unconfirmed", nil
		}
		return fmt.Sprintf("sum %d confirmed", sum), nil
	})
	store, _ := sqlite.Open(ctx, "", nil)
	defer store.Close()
	rt, _ := duroxide.StartRuntime(ctx, store, reg, nil)
	defer rt.Shutdown(ctx)
	client := duroxide.NewClient(store)
	_ = client.StartOrchestration(ctx, "sum-1", "SumOfSquares", 3, nil)
	_ = client.RaiseEvent(ctx, "sum-1", "confirm", true) // buffered until the orchestration waits
	st, _ := client.WaitForOrchestration(ctx, "sum-1")
	var out string
	_ = st.Decode(&out)
	fmt.Println(out)

	// A failing start is a typed error.
	err := client.StartOrchestration(ctx, "sum-1", "SumOfSquares", 3, nil)
	fmt.Println(errors.Is(err, duroxide.ErrInstanceExists))
	// Output:
	// sum 14 confirmed
	// true
}
