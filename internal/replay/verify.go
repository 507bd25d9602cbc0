package replay

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Verify replays a recorded history of one execution against the code in
// cfg and reports whether the code reproduces it: every schedule, in order,
// and the same ending (the same output for Completed, a failure for Failed,
// the same input for ContinuedAsNew, still waiting for a live history). It
// returns nil or a *NondeterminismError. Histories ended by cancellation or
// by the runtime (poison, nondeterminism) are only checked up to their end.
func Verify(cfg Config, hist []history.Event) error {
	if len(hist) == 0 || hist[0].Kind != history.OrchestrationStarted {
		return fmt.Errorf("replay: history does not begin with OrchestrationStarted")
	}
	x := New(cfg)
	defer x.Close()
	body, last := hist, (*history.Event)(nil)
	if terminal(hist) {
		body, last = hist[:len(hist)-1], &hist[len(hist)-1]
	}
	for _, ev := range body {
		x.record(ev)
	}
	x.persisted, x.deltaFrom = len(x.hist), len(x.hist)
	x.now = time.UnixMilli(hist[len(hist)-1].TimestampMs)
	canceled := x.cancelReq != nil
	x.run()
	if x.nondet != nil {
		return x.nondet
	}
	mismatch := func(expected, got string) error {
		id := body[len(body)-1].EventID
		if last != nil {
			id = last.EventID
		}
		return &NondeterminismError{InstanceID: cfg.InstanceID, ExecutionID: cfg.ExecutionID, EventID: id, Expected: expected, Got: got}
	}
	if len(x.hist) > x.persisted && !canceled {
		return mismatch("no further schedule (history ends there)", "scheduled "+describe(&x.hist[x.persisted]))
	}
	var can *ContinueAsNewError
	isCAN := x.finished && x.err != nil && errors.As(x.err, &can)
	switch {
	case last == nil:
		if x.finished && !canceled {
			return mismatch("an orchestration still running", "returned")
		}
	case canceled:
	case last.Kind == history.OrchestrationCompleted:
		if !x.finished || x.err != nil || x.panicked != nil {
			return mismatch("completion with output "+orNone(last.Output), "did not complete")
		}
		if !jsonEqual(last.Output, x.output) && !(len(last.Output) == 0 && len(x.output) == 0) {
			return mismatch("completion with output "+orNone(last.Output), "returned "+orNone(x.output))
		}
	case last.Kind == history.OrchestrationContinuedAsNew:
		if !isCAN {
			return mismatch("continue-as-new", "did not continue as new")
		}
		if !jsonEqual(last.Input, can.Input) && !(len(last.Input) == 0 && len(can.Input) == 0) {
			return mismatch("continue-as-new with input "+orNone(last.Input), "continued with "+orNone(can.Input))
		}
	case last.Kind == history.OrchestrationFailed:
		if last.Error != nil && last.Error.Kind != history.ErrorApplication {
			return nil // ended by the runtime (poison, nondeterminism): nothing more to compare
		}
		if !x.finished || (x.err == nil && x.panicked == nil) || isCAN {
			return mismatch("a failure ("+last.Error.Message+")", "did not fail")
		}
	}
	return nil
}
