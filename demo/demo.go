// Package demo holds the demo orchestrations that `duroxide serve --demo`
// hosts and that the documentation and tests use:
//
//   - demo.Hello: string s → "Hello, s!" via one activity.
//   - demo.Sequence: int n → n+5 via five chained +1 activities.
//   - demo.FanOut: int n → the sum of n parallel activities, activity i returning i.
//   - demo.Approval: {"timeoutSeconds": n} → "approved" if the event
//     "approval" carries true, "rejected" if it carries false, "timeout" if
//     none arrives within n seconds (a durable timer).
//   - demo.Countdown: int n → 0, continuing as new once per step.
//   - demo.Fail: string s → fails with the message s, returned by an activity.
//   - demo.Order: an order fed by events named "order" (signal-with-start,
//     a webhook trigger with "deliver": "event"), each {"type": t}: it
//     records every type in its values ("stage", the last one; "events",
//     how many) and ends "shipped" or "canceled" at the first such event,
//     or "too many events" after MaxOrderEvents.
//
// Inputs out of range fail the instance at its first turn, before it
// schedules anything, with an error naming the range: FanOut from 0 to
// MaxFanOut, Sequence from -MaxSequence to MaxSequence, Countdown from 0
// to MaxCountdown, Approval's timeoutSeconds from 0 to MaxApprovalSeconds.
// The bounds keep a demo server well within the runtime's limits (see
// duroxide.RuntimeOptions.MaxActionsPerTurn).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/duroxide/duroxide-go"
)

// Orchestration and activity names.
const (
	Hello     = "demo.Hello"
	Sequence  = "demo.Sequence"
	FanOut    = "demo.FanOut"
	Approval  = "demo.Approval"
	Countdown = "demo.Countdown"
	Fail      = "demo.Fail"
	Order     = "demo.Order"

	ActivitySayHello = "demo.SayHello"
	ActivityAddOne   = "demo.AddOne"
	ActivityIdentity = "demo.Identity"
	ActivityFail     = "demo.FailWith"

	// ApprovalEvent is the external event demo.Approval waits for.
	ApprovalEvent = "approval"
	// OrderEvent is the external event demo.Order takes.
	OrderEvent = "order"
)

// Bounds of the demo orchestrations' inputs.
const (
	// MaxFanOut is the widest demo.FanOut: its activities are scheduled in
	// one turn.
	MaxFanOut = 1000
	// MaxSequence bounds the magnitude of demo.Sequence's input, so that
	// n+5 never overflows.
	MaxSequence = 1_000_000_000
	// MaxCountdown is the longest demo.Countdown: one execution per step.
	MaxCountdown = 1000
	// MaxApprovalSeconds (30 days) is the longest timeout of demo.Approval.
	MaxApprovalSeconds = 30 * 24 * 60 * 60
	// MaxOrderEvents is the most events demo.Order takes.
	MaxOrderEvents = 100
)

// OrderUpdate is an event of demo.Order (and its input: a webhook body).
type OrderUpdate struct {
	Type string `json:"type"`
}

// InputError reports a demo orchestration's input out of its range.
type InputError struct {
	Orchestration string
	// Field names the input ("n", "timeoutSeconds").
	Field    string
	Value    string
	Min, Max string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%s: %s must be from %s to %s, got %s", e.Orchestration, e.Field, e.Min, e.Max, e.Value)
}

// checkInt returns an *InputError when n is outside [lo, hi].
func checkInt(name string, n, lo, hi int) error {
	if n < lo || n > hi {
		return &InputError{Orchestration: name, Field: "n", Value: strconv.Itoa(n), Min: strconv.Itoa(lo), Max: strconv.Itoa(hi)}
	}
	return nil
}

// ApprovalInput is the input of demo.Approval.
type ApprovalInput struct {
	TimeoutSeconds float64 `json:"timeoutSeconds"`
}

// Register adds the demo orchestrations and their activities to reg.
func Register(reg *duroxide.Registry) {
	duroxide.RegisterActivity(reg, ActivitySayHello, func(_ context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	duroxide.RegisterActivity(reg, ActivityAddOne, func(_ context.Context, n int) (int, error) {
		return n + 1, nil
	})
	duroxide.RegisterActivity(reg, ActivityIdentity, func(_ context.Context, n int) (int, error) {
		return n, nil
	})
	duroxide.RegisterActivity(reg, ActivityFail, func(_ context.Context, msg string) (struct{}, error) {
		return struct{}{}, errors.New(msg)
	})

	duroxide.RegisterOrchestration(reg, Hello, func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		var out string
		err := ctx.ScheduleActivity(ActivitySayHello, name).Await(&out)
		return out, err
	})
	duroxide.RegisterOrchestration(reg, Sequence, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := checkInt(Sequence, n, -MaxSequence, MaxSequence); err != nil {
			return 0, err
		}
		for i := 0; i < 5; i++ {
			if err := ctx.ScheduleActivity(ActivityAddOne, n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, FanOut, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := checkInt(FanOut, n, 0, MaxFanOut); err != nil {
			return 0, err
		}
		tasks := make([]*duroxide.Task, n)
		for i := range tasks {
			tasks[i] = ctx.ScheduleActivity(ActivityIdentity, i)
		}
		sum := 0
		for _, t := range tasks {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	duroxide.RegisterOrchestration(reg, Approval, func(ctx *duroxide.OrchestrationContext, in ApprovalInput) (string, error) {
		if s := in.TimeoutSeconds; !(s >= 0 && s <= MaxApprovalSeconds) { // NaN too
			return "", &InputError{Orchestration: Approval, Field: "timeoutSeconds", Value: strconv.FormatFloat(s, 'g', -1, 64),
				Min: "0", Max: strconv.Itoa(MaxApprovalSeconds)}
		}
		timeout := time.Duration(in.TimeoutSeconds * float64(time.Second))
		event := ctx.WaitForEvent(ApprovalEvent)
		timer := ctx.ScheduleTimer(timeout)
		if ctx.Select(event, timer) == 1 {
			return "timeout", nil
		}
		var approved bool
		if err := event.Await(&approved); err != nil {
			return "", fmt.Errorf("approval event must carry true or false: %w", err)
		}
		if approved {
			return "approved", nil
		}
		return "rejected", nil
	})
	duroxide.RegisterOrchestration(reg, Order, func(ctx *duroxide.OrchestrationContext, _ json.RawMessage) (string, error) {
		for n := 1; n <= MaxOrderEvents; n++ {
			var u OrderUpdate
			if err := ctx.WaitForEvent(OrderEvent).Await(&u); err != nil {
				return "", fmt.Errorf("order event must be an object with a type: %w", err)
			}
			if err := ctx.SetValue("stage", u.Type); err != nil {
				return "", err
			}
			if err := ctx.SetValue("events", n); err != nil {
				return "", err
			}
			if u.Type == "shipped" || u.Type == "canceled" {
				return u.Type, nil
			}
		}
		return "too many events", nil
	})
	duroxide.RegisterOrchestration(reg, Countdown, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := checkInt(Countdown, n, 0, MaxCountdown); err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, nil
		}
		ctx.SetCustomStatus(map[string]int{"remaining": n})
		return 0, ctx.ContinueAsNew(n - 1)
	})
	duroxide.RegisterOrchestration(reg, Fail, func(ctx *duroxide.OrchestrationContext, msg string) (struct{}, error) {
		err := ctx.ScheduleActivity(ActivityFail, msg).Await(nil)
		if err == nil {
			return struct{}{}, errors.New("demo.FailWith unexpectedly succeeded")
		}
		var ae *duroxide.ActivityError
		if errors.As(err, &ae) {
			return struct{}{}, errors.New(ae.Message)
		}
		return struct{}{}, err
	})
}
