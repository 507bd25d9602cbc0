// Command eternal shows an eternal orchestration: a periodic job that runs
// an activity, sleeps on a durable timer, and continues as new, forever or
// for a set number of runs, until the event "stop" arrives. ContinueAsNew
// starts a fresh execution (ExecutionID 1, 2, 3...) with the state passed
// to it and an empty history, so a job that runs for years keeps a short
// history and replays in constant time.
//
//	go run ./examples/eternal -runs 5 -every 1s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	db := flag.String("db", "", "SQLite database file (default: in memory)")
	runs := flag.Int("runs", 5, "stop after this many runs (0 = run until stopped)")
	every := flag.Duration("every", time.Second, "pause between runs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *db, Job{Every: *every, Runs: *runs}); err != nil {
		fmt.Fprintln(os.Stderr, "eternal:", err)
		os.Exit(1)
	}
}

// Job is the input of the Janitor orchestration: its settings and the
// state carried from one execution to the next.
type Job struct {
	Every time.Duration `json:"every"`
	// Runs stops the job after that many runs (0 = until stopped).
	Runs int `json:"runs"`

	Done    int `json:"done"`
	Cleaned int `json:"cleaned"`
}

// Summary is the Janitor's result.
type Summary struct {
	Runs      int   `json:"runs"`
	Cleaned   int   `json:"cleaned"`
	Stopped   bool  `json:"stopped"`
	Execution int64 `json:"execution"`
}

// StopEvent ends the job after its current run.
const StopEvent = "stop"

// register adds the example's orchestration and activity to reg.
func register(reg *duroxide.Registry) {
	// Cleanup stands in for the periodic work; it reports how many items
	// it removed (here, the run's number).
	duroxide.RegisterActivity(reg, "Cleanup", func(_ context.Context, run int) (int, error) {
		return run, nil
	})
	duroxide.RegisterOrchestration(reg, "Janitor", func(ctx *duroxide.OrchestrationContext, job Job) (Summary, error) {
		var cleaned int
		if err := ctx.ScheduleActivity("Cleanup", job.Done+1).Await(&cleaned); err != nil {
			return Summary{}, err
		}
		job.Done++
		job.Cleaned += cleaned
		ctx.SetCustomStatus(job) // progress, visible to GetStatus and the dashboard

		summary := Summary{Runs: job.Done, Cleaned: job.Cleaned, Execution: ctx.ExecutionID()}
		if job.Runs > 0 && job.Done >= job.Runs {
			return summary, nil
		}
		if ctx.Select(ctx.WaitForEvent(StopEvent), ctx.ScheduleTimer(job.Every)) == 0 {
			summary.Stopped = true
			return summary, nil
		}
		return Summary{}, ctx.ContinueAsNew(job)
	})
}

func run(ctx context.Context, stdout io.Writer, dbPath string, job Job) error {
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
	const id = "janitor"
	err = client.StartOrchestration(ctx, id, "Janitor", job, nil)
	if err != nil && !errors.Is(err, duroxide.ErrInstanceExists) {
		return err
	}
	st, err := client.WaitForOrchestration(ctx, id)
	if err != nil {
		return err
	}
	var sum Summary
	if err := st.Decode(&sum); err != nil {
		return err
	}
	execs, err := client.ListExecutions(ctx, id)
	if err != nil {
		return err
	}
	for _, e := range execs {
		fmt.Fprintf(stdout, "execution %d: %s, %d events\n", e.ExecutionID, e.Status, e.EventCount)
	}
	fmt.Fprintf(stdout, "%d runs, %d items cleaned, stopped: %t\n", sum.Runs, sum.Cleaned, sum.Stopped)
	return nil
}
