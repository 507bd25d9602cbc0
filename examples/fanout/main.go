// Command fanout shows fan-out/fan-in: an orchestration schedules one
// activity per item without waiting, so they all run in parallel on the
// runtime's workers, then awaits them in order and combines the results.
// A crash in the middle loses nothing: finished activities are recorded in
// history and only the unfinished ones run again.
//
//	go run ./examples/fanout -items 20
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
	items := flag.Int("items", 20, "how many items to process")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *db, *items); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// register adds the example's orchestration and activity to reg.
func register(reg *duroxide.Registry) {
	// Square stands in for real per-item work (an API call, a file to convert).
	duroxide.RegisterActivity(reg, "Square", func(_ context.Context, n int) (int, error) {
		return n * n, nil
	})
	// SumOfSquares processes items 1..n in parallel and sums the results.
	duroxide.RegisterOrchestration(reg, "SumOfSquares", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		tasks := make([]*duroxide.Task, n)
		for i := range tasks {
			tasks[i] = ctx.ScheduleActivity("Square", i+1) // fan out: nothing waits yet
		}
		sum := 0
		for _, t := range tasks { // fan in
			var sq int
			if err := t.Await(&sq); err != nil {
				return 0, err
			}
			sum += sq
		}
		return sum, nil
	})
}

func run(ctx context.Context, stdout io.Writer, dbPath string, items int) error {
	store, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer store.Close()

	reg := duroxide.NewRegistry()
	register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.Background())

	client := duroxide.NewClient(store)
	id := fmt.Sprintf("sum-of-squares-%d", items)
	err = client.StartOrchestration(ctx, id, "SumOfSquares", items, nil)
	if err != nil && !errors.Is(err, duroxide.ErrInstanceExists) {
		return err
	}
	st, err := client.WaitForOrchestration(ctx, id)
	if err != nil {
		return err
	}
	var sum int
	if err := st.Decode(&sum); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sum of squares of 1..%d = %d\n", items, sum)
	return nil
}
