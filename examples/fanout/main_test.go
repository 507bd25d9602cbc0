package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, "", 20); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "sum of squares of 1..20 = 2870\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

func TestActivitiesRunInParallel(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	register(reg)
	h := duroxidetest.New(t, reg, nil)
	h.Start("SumOfSquares", "s", 20)
	var sum int
	if err := h.Wait("s").Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 2870 {
		t.Fatalf("sum %d, want 2870", sum)
	}
	// All 20 activities were scheduled in the first turn, before any
	// result came back.
	scheduled := 0
	for _, e := range h.History("s") {
		if e.Kind == history.ActivityCompleted {
			break
		}
		if e.Kind == history.ActivityScheduled {
			scheduled++
		}
	}
	if scheduled != 20 {
		t.Fatalf("%d activities scheduled before the first completion, want 20", scheduled)
	}
}
