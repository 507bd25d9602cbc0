package replay

import (
	"encoding/json"
	"testing"

	"github.com/duroxide/duroxide-go/history"
)

// TestDetachedStartOutcome: a detached start records its event with a
// derived ID; its confirmation completes the task, and a taken ID's
// failure overrules the confirmation in whichever order the batch holds
// them. The final history replays.
func TestDetachedStartOutcome(t *testing.T) {
	fn := func(ctx *Context, in json.RawMessage) (json.RawMessage, error) {
		task := ctx.StartOrchestration("Job", "", "", in)
		ctx.Await(task)
		if _, fail := task.Result(); fail != nil {
			return json.RawMessage(`"failed"`), nil
		}
		return json.RawMessage(`"started"`), nil
	}
	confirm := history.WorkItem{Kind: history.WorkSubOrchCompleted, InstanceID: "i", ExecutionID: 1, ID: 2}
	taken := done(history.WorkSubOrchFailed, 2, "instance already exists")
	for _, c := range []struct {
		name string
		msgs []history.WorkItem
		want string
	}{
		{"confirmed", []history.WorkItem{confirm}, `"started"`},
		{"taken, failure first", []history.WorkItem{taken, confirm}, `"failed"`},
		{"taken, confirmation first", []history.WorkItem{confirm, taken}, `"failed"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			both(t, func(t *testing.T, cached bool) {
				h := newHarness(t, cached, fn)
				out := h.run()
				if got := kinds(out.Delta); got != "OrchestrationStarted,DetachedOrchestrationScheduled" {
					t.Fatalf("turn 1: %s", got)
				}
				if id := out.Delta[1].ChildInstanceID; id != "i::sub::2" {
					t.Fatalf("derived ID %q", id)
				}
				out = h.run(c.msgs...)
				if out.Result != Completed || string(out.Output) != c.want {
					t.Fatalf("turn 2: %v %s (%s)", out.Result, out.Output, kinds(out.Delta))
				}
				wantKind := "SubOrchestrationCompleted"
				if c.want == `"failed"` {
					wantKind = "SubOrchestrationFailed"
				}
				if got := kinds(out.Delta); got != wantKind+",OrchestrationCompleted" {
					t.Fatalf("turn 2 recorded %s", got)
				}
				// The final history replays.
				x := New(Config{InstanceID: "i", ExecutionID: 1, Func: fn})
				defer x.Close()
				rep, err := x.Turn(TurnInput{Now: t0, History: h.stored})
				if err != nil || rep.Nondeterminism != nil || rep.Result != Completed {
					t.Fatalf("replay: %v %v %+v", err, rep.Result, rep.Nondeterminism)
				}
			})
		})
	}
}
