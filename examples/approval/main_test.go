package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// TestApproval drives the orchestration on a fake clock: a day-long
// deadline costs no real time.
func TestApproval(t *testing.T) {
	t.Parallel()
	req := Request{Item: "laptop", Amount: 1200, Timeout: 24 * time.Hour}
	cases := []struct {
		name string
		// decide acts on the instance "a" once it waits for the decision.
		decide func(t *testing.T, h *duroxidetest.Harness)
		want   string
	}{
		{"approve", func(t *testing.T, h *duroxidetest.Harness) {
			h.RaiseEvent("a", DecisionEvent, Decision{Approved: true, By: "alice"})
		}, "laptop: approved by alice"},
		{"reject an hour before the deadline", func(t *testing.T, h *duroxidetest.Harness) {
			h.Advance(23 * time.Hour)
			h.RaiseEvent("a", DecisionEvent, Decision{Approved: false, By: "bob"})
		}, "laptop: rejected by bob"},
		{"timeout", func(t *testing.T, h *duroxidetest.Harness) {
			h.Advance(24 * time.Hour)
			// Too late: the instance has finished and the event is refused.
			err := h.Client.RaiseEvent(context.Background(), "a", DecisionEvent, Decision{Approved: true, By: "alice"})
			if !errors.Is(err, duroxide.ErrInstanceTerminal) {
				t.Fatalf("a late event: %v, want ErrInstanceTerminal", err)
			}
		}, "laptop: no decision within 24h0m0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := duroxide.NewRegistry()
			register(reg)
			h := duroxidetest.New(t, reg, nil)
			h.Start("Approval", "a", req)
			h.WaitIdle() // waiting for the decision and the deadline
			c.decide(t, h)
			var got string
			if err := h.Wait("a").Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		decision string
		timeout  time.Duration
		want     string
	}{
		{"approve", time.Hour, "approved by alice"},
		{"reject", time.Hour, "rejected by alice"},
		{"none", 10 * time.Millisecond, "no decision within 10ms"},
	}
	for _, c := range cases {
		t.Run(c.decision, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, "", c.decision, c.timeout); err != nil {
				t.Fatal(err)
			}
			if want := "expense 42 (new laptop, 1200 EUR): " + c.want + "\n"; out.String() != want {
				t.Fatalf("printed %q, want %q", out.String(), want)
			}
		})
	}
}
