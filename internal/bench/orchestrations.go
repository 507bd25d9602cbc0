package bench

import (
	"context"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go"
)

// Orchestration and activity names.
const (
	orchSequence    = "bench.Sequence"
	orchFanOut      = "bench.FanOut"
	orchTimer       = "bench.Timer"
	orchLatency     = "bench.Latency"
	orchLongHistory = "bench.LongHistory"

	actAddOne = "bench.AddOne"
	actStep   = "bench.Step"
)

// register adds the workloads' orchestrations and activities to reg. The
// activities return n+1 (or, in tests, the fault's answer).
func (r *run) register(reg *duroxide.Registry) {
	addOne := func(n int) int {
		r.activities.Add(1)
		if r.opts.Fault != nil {
			return r.opts.Fault(n)
		}
		return n + 1
	}
	duroxide.RegisterActivity(reg, actAddOne, func(_ context.Context, n int) (int, error) {
		return addOne(n), nil
	})
	// Step i is called with input i.
	duroxide.RegisterActivity(reg, actStep, func(_ context.Context, n int) (int, error) {
		if r.steps != nil {
			r.steps.record(n, time.Now())
		}
		return addOne(n), nil
	})

	duroxide.RegisterOrchestration(reg, orchSequence, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for range SequenceLength {
			if err := ctx.ScheduleActivity(actAddOne, n).Await(&n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	width := r.sizes.FanOutWidth
	duroxide.RegisterOrchestration(reg, orchFanOut, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		tasks := make([]*duroxide.Task, width)
		for j := range tasks {
			tasks[j] = ctx.ScheduleActivity(actAddOne, n+j)
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
	delay := r.sizes.TimerDelay
	duroxide.RegisterOrchestration(reg, orchTimer, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		if err := ctx.ScheduleTimer(delay).Await(nil); err != nil {
			return 0, err
		}
		err := ctx.ScheduleActivity(actAddOne, n).Await(&n)
		return n, err
	})
	duroxide.RegisterOrchestration(reg, orchLatency, func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		err := ctx.ScheduleActivity(actAddOne, n).Await(&n)
		return n, err
	})
	duroxide.RegisterOrchestration(reg, orchLongHistory, func(ctx *duroxide.OrchestrationContext, steps int) (int, error) {
		v := 0
		for range steps {
			if err := ctx.ScheduleActivity(actStep, v).Await(&v); err != nil {
				return 0, err
			}
		}
		return v, nil
	})
}

// stepClock records when each step of longhistory first ran.
type stepClock struct {
	mu sync.Mutex
	at []time.Time
}

func newStepClock(steps int) *stepClock { return &stepClock{at: make([]time.Time, steps)} }

func (c *stepClock) record(step int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if step >= 0 && step < len(c.at) && c.at[step].IsZero() {
		c.at[step] = t
	}
}

// windows returns the mean milliseconds per step over the first and the
// last w steps, w = min(maxWindow, (steps-1)/2) but at least 1: a step is
// the interval between the starts of two consecutive activities. ok is
// false if a step never ran.
func (c *stepClock) windows(maxWindow int) (first, last float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.at)
	for _, t := range c.at {
		if t.IsZero() {
			return 0, 0, false
		}
	}
	w := max(min(maxWindow, (n-1)/2), 1)
	per := func(from, to int) float64 {
		return float64(c.at[to].Sub(c.at[from])) / float64(time.Millisecond) / float64(w)
	}
	return round(per(0, w)), round(per(n-1-w, n-1)), true
}
