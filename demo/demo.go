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
package demo

import (
	"context"
	"errors"
	"fmt"
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

	ActivitySayHello = "demo.SayHello"
	ActivityAddOne   = "demo.AddOne"
	ActivityIdentity = "demo.Identity"
	ActivityFail     = "demo.FailWith"

	// ApprovalEvent is the external event demo.Approval waits for.
	ApprovalEvent = "approval"
)

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
		for i := 0; i < 5; i++ {
			if err := ctx.ScheduleActivity(ActivityAddOne, n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	duroxide.RegisterOrchestration(reg, FanOut, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if n < 0 {
			return 0, fmt.Errorf("fan-out width must not be negative, got %d", n)
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
	duroxide.RegisterOrchestration(reg, Countdown, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if n <= 0 {
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
