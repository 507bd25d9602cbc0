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

// The typed form: registration returns typed references; orchestrations
// call them with CallActivity and CallSubOrchestration and get typed
// futures; the client starts and awaits with StartTyped and WaitTyped.
func ExampleCallActivity() {
	ctx := context.Background()
	reg := duroxide.NewRegistry()
	hello := duroxide.RegisterActivity(reg, "Hello", func(_ context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	greet := duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		return duroxide.CallActivity(ctx, hello, name, &duroxide.ActivityOptions{
			Retry:                  &duroxide.RetryPolicy{MaxAttempts: 3, Jitter: 0.2},
			StartToCloseTimeout:    time.Minute,
			ScheduleToCloseTimeout: 10 * time.Minute,
		}).Get()
	})

	store, err := sqlite.Open(ctx, "", nil)
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
	out, err := duroxide.RunTyped(ctx, client, greet, "order-42", "Ada", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	// Output: Hello, Ada!
}

// A typed future in a Select: the slower of an activity and a timer is
// canceled.
func ExampleFuture_Task() {
	reg := duroxide.NewRegistry()
	lookup := duroxide.NewActivityRef[string, int]("Lookup") // registered by another binary
	duroxide.RegisterOrchestration(reg, "LookupWithDeadline", func(ctx *duroxide.OrchestrationContext, key string) (int, error) {
		f := duroxide.CallActivity(ctx, lookup, key, nil)
		timer := ctx.ScheduleTimer(30 * time.Second)
		if ctx.Select(f.Task(), timer) == 1 {
			f.Cancel() // its context is canceled where it runs; a late result is ignored
			return 0, errors.New("lookup took too long")
		}
		timer.Cancel()
		return f.Get()
	})
	fmt.Println(reg.Orchestrations())
	// Output: [LookupWithDeadline]
}

// Patched lets a code change ship while instances started by the old code
// still run: they replay the old branch, new ones take the new branch.
func ExampleOrchestrationContext_Patched() {
	reg := duroxide.NewRegistry()
	charge := duroxide.NewActivityRef[string, string]("Charge")
	ship := duroxide.NewActivityRef[string, string]("Ship")
	duroxide.RegisterOrchestration(reg, "Order", func(ctx *duroxide.OrchestrationContext, id string) (string, error) {
		if ctx.Patched("charge-before-ship") {
			if _, err := duroxide.CallActivity(ctx, charge, id, nil).Get(); err != nil {
				return "", err
			}
			return duroxide.CallActivity(ctx, ship, id, nil).Get()
		}
		out, err := duroxide.CallActivity(ctx, ship, id, nil).Get()
		if err != nil {
			return "", err
		}
		_, err = duroxide.CallActivity(ctx, charge, id, nil).Get()
		return out, err
	})
	fmt.Println(reg.Err())
	// Output: <nil>
}
