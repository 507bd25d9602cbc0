package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/provider"
)

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, "", Job{Every: 5 * time.Millisecond, Runs: 3}); err != nil {
		t.Fatal(err)
	}
	want := `execution 1: ContinuedAsNew, N events
execution 2: ContinuedAsNew, N events
execution 3: Completed, N events
3 runs, 6 items cleaned, stopped: false
`
	// How many events an execution records is the engine's business.
	got := regexp.MustCompile(`\d+ events`).ReplaceAllString(out.String(), "N events")
	if got != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", got, want)
	}
}

func newHarness(t *testing.T) *duroxidetest.Harness {
	reg := duroxide.NewRegistry()
	register(reg)
	return duroxidetest.New(t, reg, nil)
}

func TestRunsThenCompletes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Start("Janitor", "j", Job{Every: time.Hour, Runs: 5})
	var sum Summary
	if err := h.AdvanceUntilDone("j").Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Runs: 5, Cleaned: 15, Execution: 5}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != 4*time.Hour {
		t.Fatalf("the job took %v, want 4h (four pauses)", got)
	}
	execs, err := h.Client.ListExecutions(context.Background(), "j")
	if err != nil {
		t.Fatal(err)
	}
	if len(execs) != 5 {
		t.Fatalf("%d executions, want 5", len(execs))
	}
	for i, e := range execs {
		want := provider.StatusContinuedAsNew
		if i == len(execs)-1 {
			want = provider.StatusCompleted
		}
		if e.ExecutionID != int64(i+1) || e.Status != want {
			t.Fatalf("execution #%d is %d %s, want %d %s", i, e.ExecutionID, e.Status, i+1, want)
		}
	}
}

func TestStopEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Start("Janitor", "j", Job{Every: time.Hour}) // runs until stopped

	h.Advance(2 * time.Hour) // runs at 0h, 1h and 2h
	st := h.Status("j")
	if st.ExecutionID != 3 {
		t.Fatalf("after 2h the job is in execution %d, want 3", st.ExecutionID)
	}
	// Each execution starts from an empty history: it does not grow.
	if n := len(h.History("j")); n > 10 {
		t.Fatalf("execution 3 has %d events", n)
	}

	h.RaiseEvent("j", StopEvent, nil)
	var sum Summary
	if err := h.Wait("j").Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Runs: 3, Cleaned: 6, Stopped: true, Execution: 3}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
}
