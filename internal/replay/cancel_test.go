package replay

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

func cancelMsg(reason string) history.WorkItem {
	return history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Reason: reason}
}

// TestGracefulCancel: the request cancels what the code waits on, the code
// runs its cleanup, and the execution ends Canceled when the code returns.
func TestGracefulCancel(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("Work", nil, "")
			notice := ctx.CancelRequested()
			if ctx.Select(a, notice) != 1 || !ctx.Canceled() || !a.Done() {
				return json.RawMessage(`"not canceled"`), nil
			}
			undo := ctx.ScheduleActivity("Undo", nil, "")
			ctx.Await(undo)
			return json.RawMessage(`"cleaned"`), nil
		})
		h.cfg.CancelGrace = time.Minute
		h.run()
		out := h.run(cancelMsg("stop"))
		if out.Result != Running || kinds(out.Delta) != "OrchestrationCancelRequested,ActivityCancelRequested,ActivityScheduled" {
			t.Fatalf("turn 2: %v %s", out.Result, kinds(out.Delta))
		}
		if req := out.Delta[0]; req.FireAtMs != req.TimestampMs+time.Minute.Milliseconds() {
			t.Fatalf("grace deadline %d recorded at %d", req.FireAtMs, req.TimestampMs)
		}
		if len(out.CanceledActivities) != 1 || out.CanceledActivities[0] != 2 {
			t.Fatalf("canceled %v, want the running activity 2", out.CanceledActivities)
		}
		out = h.run(done(history.WorkActivityCompleted, 5, `"ok"`))
		if out.Result != Canceled || out.Error.Message != "stop" || kinds(out.Delta) != "ActivityCompleted,OrchestrationFailed" {
			t.Fatalf("turn 3: %v %+v %s", out.Result, out.Error, kinds(out.Delta))
		}
		if err := Verify(h.cfg, h.stored); err != nil {
			t.Fatal(err)
		}
		// Other cleanup code does not replay this history.
		other := h.cfg
		other.Func = func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			ctx.Await(ctx.ScheduleActivity("Work", nil, ""))
			ctx.Await(ctx.ScheduleActivity("Other", nil, ""))
			return nil, nil
		}
		var nd *NondeterminismError
		if err := Verify(other, h.stored); !errors.As(err, &nd) {
			t.Fatalf("Verify with other cleanup: %v, want nondeterminism", err)
		}
	})
}

// TestGraceDeadlineEndsWithoutRunningTheCode: the grace timer ends the
// execution; what is still running is canceled. A request carrying an
// error (an instance timeout) ends it Failed with that error.
func TestGraceDeadlineEndsWithoutRunningTheCode(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			for {
				ctx.Await(ctx.ScheduleActivity("Loop", nil, "")) // ignores cancellation
			}
		})
		h.cfg.CancelGrace = time.Hour
		h.run()
		timeout := &history.ErrorDetails{Kind: history.ErrorTimeout, Message: "instance timed out"}
		msg := cancelMsg("late")
		msg.Error = timeout
		out := h.run(msg)
		if out.Result != Running {
			t.Fatalf("turn 2: %v", out.Result)
		}
		reqID := out.Delta[0].EventID
		fire := history.WorkItem{Kind: history.WorkTimerFired, InstanceID: "i", ExecutionID: 1, ID: reqID, FireAtMs: out.Delta[0].FireAtMs}
		out = h.run(fire)
		if out.Result != Failed || out.Error.Kind != history.ErrorTimeout || kinds(out.Delta) != "TimerFired,ActivityCancelRequested,OrchestrationFailed" {
			t.Fatalf("turn 3: %v %+v %s", out.Result, out.Error, kinds(out.Delta))
		}
		if len(out.CanceledActivities) != 1 {
			t.Fatalf("canceled %v, want the cleanup-time activity", out.CanceledActivities)
		}
		if err := Verify(h.cfg, h.stored); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelWithoutGraceIsUnchanged: with no grace configured, a request
// records no deadline and ends the execution without running the code.
func TestCancelWithoutGraceIsUnchanged(t *testing.T) {
	both(t, func(t *testing.T, cached bool) {
		ran := 0
		h := newHarness(t, cached, func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
			ctx.Await(ctx.WaitForEvent("x"))
			ran++
			return nil, nil
		})
		h.run()
		out := h.run(cancelMsg(""))
		if out.Result != Canceled || out.Delta[0].FireAtMs != 0 || ran != 0 || out.Error.Message != "canceled" {
			t.Fatalf("%v %s ran %d", out.Result, kinds(out.Delta), ran)
		}
	})
}
