package turn

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// limitRegistry holds orchestrations that go over limits.
func limitRegistry(scheduled *int) registry {
	return registry{
		// Fan schedules as many activities as its input says, counting
		// those the engine let it record.
		"Fan@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			n, _ := strconv.Atoi(string(in))
			tasks := make([]*replay.Task, 0, 16)
			for i := 0; i < n; i++ {
				tasks = append(tasks, ctx.ScheduleActivity("A", json.RawMessage(strconv.Itoa(i)), ""))
				*scheduled++
			}
			for _, t := range tasks {
				ctx.Await(t)
			}
			return json.RawMessage(`"done"`), nil
		},
		// Big schedules one activity whose input has as many bytes as its
		// input says, then returns an output of that size too.
		"Big@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			n, _ := strconv.Atoi(string(in))
			payload := json.RawMessage(`"` + strings.Repeat("x", n) + `"`)
			a := ctx.ScheduleActivity("A", payload, "")
			ctx.Await(a)
			return payload, nil
		},
		// Status sets a custom status of the input's size.
		"Status@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			n, _ := strconv.Atoi(string(in))
			ctx.SetCustomStatus(json.RawMessage(`"` + strings.Repeat("x", n) + `"`))
			return nil, nil
		},
		// Again continues as new with an input of the input's size.
		"Again@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			n, _ := strconv.Atoi(string(in))
			return nil, ctx.ContinueAsNew(json.RawMessage(`"`+strings.Repeat("x", n)+`"`), "")
		},
		// Wait runs activity A and returns its result.
		"Wait@1.0.0": testRegistry()["Wait@1.0.0"],
	}
}

func limitPolicy(l replay.Limits) Policy {
	p := testPolicy()
	p.Limits = l
	return p
}

// wantLimit checks a decision that fails the execution for going over the
// limit named limit, committing only the stored history's ending.
func wantLimit(t *testing.T, d Decision, limit string, maxEvents int) *provider.TurnAck {
	t.Helper()
	ack := wantFailed(t, d, history.ErrorConfiguration, "over the limit "+limit)
	if ack.Metadata.Error.Code != history.CodeLimitExceeded {
		t.Fatalf("error code %q, want %q", ack.Metadata.Error.Code, history.CodeLimitExceeded)
	}
	if len(ack.History) > maxEvents || len(ack.WorkerItems) > 0 {
		t.Fatalf("the ack commits %d events (%s) and %d activities; want at most %d events and no activity",
			len(ack.History), kinds(ack.History), len(ack.WorkerItems), maxEvents)
	}
	return ack
}

func TestLimitActionsPerTurn(t *testing.T) {
	scheduled := 0
	reg := limitRegistry(&scheduled)
	// Ten million would take gigabytes if the engine let the code run.
	d := Decide(Input{Item: item(meta("Fan", "", provider.StatusPending, 0), nil, startMsg("Fan", "", "10000000")),
		Registry: reg, Policy: limitPolicy(replay.Limits{MaxActions: 100}), Now: now})
	ack := wantLimit(t, d, "MaxActionsPerTurn", 2)
	if kinds(ack.History) != "OrchestrationStarted,OrchestrationFailed" {
		t.Fatalf("history %s", kinds(ack.History))
	}
	if msg := ack.Metadata.Error.Message; !strings.Contains(msg, "101") || !strings.Contains(msg, "= 100") {
		t.Fatalf("message %q does not name the value and the limit", msg)
	}
	// The code was stopped at the first action over the limit.
	if scheduled > 100 {
		t.Fatalf("the code recorded %d actions after the limit of 100", scheduled)
	}

	// At the limit, the turn commits.
	scheduled = 0
	d = Decide(Input{Item: item(meta("Fan", "", provider.StatusPending, 0), nil, startMsg("Fan", "", "100")),
		Registry: reg, Policy: limitPolicy(replay.Limits{MaxActions: 100}), Now: now})
	if ack := wantAck(t, d); len(ack.WorkerItems) != 100 || d.Result != replay.Running {
		t.Fatalf("at the limit: %d activities, %s", len(ack.WorkerItems), d.Result)
	}
	d.Exec.Close()
}

func TestLimitPayload(t *testing.T) {
	scheduled := 0
	reg := limitRegistry(&scheduled)
	tests := []struct {
		name string
		item *provider.OrchestrationItem
		what string
	}{
		{"activity input", item(meta("Big", "", provider.StatusPending, 0), nil, startMsg("Big", "", "2000")), "input of activity A"},
		{"custom status", item(meta("Status", "", provider.StatusPending, 0), nil, startMsg("Status", "", "2000")), "custom status"},
		{"continue-as-new input", item(meta("Again", "", provider.StatusPending, 0), nil, startMsg("Again", "", "2000")), "input of the next execution"},
		{"orchestration input", item(meta("Wait", "", provider.StatusPending, 0), nil, startMsg("Wait", "", `"`+strings.Repeat("y", 2000)+`"`)), "input of the orchestration"},
		{"output", item(meta("Big", "1.0.0", provider.StatusRunning, 1), []history.Event{
			started("Big", "1.0.0", "2000", nil),
			{EventID: 2, Kind: history.ActivityScheduled, Name: "A", Input: json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)},
		}, history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage("1")}),
			"output of the orchestration"},
		{"event data", item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil), raised("go", `"`+strings.Repeat("z", 2000)+`"`)), "data of event go"},
		{"activity result", item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil),
			history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage(`"` + strings.Repeat("r", 2000) + `"`)}),
			"result of activity #2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Item: tc.item, Registry: reg, Policy: limitPolicy(replay.Limits{MaxPayload: 1500}), Now: now})
			ack := wantLimit(t, d, "MaxPayloadBytes", 3)
			if msg := ack.Metadata.Error.Message; !strings.Contains(msg, tc.what) {
				t.Fatalf("message %q does not name %q", msg, tc.what)
			}
		})
	}
}

func TestLimitHistory(t *testing.T) {
	scheduled := 0
	reg := limitRegistry(&scheduled)
	t.Run("events", func(t *testing.T) {
		// The stored history (2 events) plus the completion and the
		// activity the code schedules next is 4 > 3.
		d := Decide(Input{Item: item(meta("Fan", "1.0.0", provider.StatusRunning, 1), []history.Event{
			started("Fan", "1.0.0", "1", nil),
			{EventID: 2, Kind: history.ActivityScheduled, Name: "A", Input: json.RawMessage("0")},
		}, raised("x", "1"), raised("y", "2")), Registry: reg, Policy: limitPolicy(replay.Limits{MaxEvents: 3}), Now: now})
		ack := wantLimit(t, d, "MaxHistoryEvents", 3)
		// The in-flight activity is canceled with the failure.
		if kinds(ack.History) != "ActivityCancelRequested,OrchestrationFailed" {
			t.Fatalf("history %s", kinds(ack.History))
		}
	})
	t.Run("bytes", func(t *testing.T) {
		d := Decide(Input{Item: item(meta("Fan", "", provider.StatusPending, 0), nil, startMsg("Fan", "", "50")),
			Registry: reg, Policy: limitPolicy(replay.Limits{MaxBytes: 2000}), Now: now})
		wantLimit(t, d, "MaxHistoryBytes", 2)
	})
	t.Run("stored history over a lowered limit", func(t *testing.T) {
		// The code is not run: a history already over the limit fails at
		// its next turn instead of being retried forever.
		hist := waitHistory(nil)
		d := Decide(Input{Item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), hist, raised("x", "1")),
			Registry: reg, Policy: limitPolicy(replay.Limits{MaxEvents: 1}), Now: now})
		wantLimit(t, d, "MaxHistoryEvents", 2)
	})
	t.Run("cached execution", func(t *testing.T) {
		// The turn that starts Fan(3) commits (5 events); the next one,
		// from the cache, goes over 5 with the completion it applies.
		p := limitPolicy(replay.Limits{MaxEvents: 5})
		d := Decide(Input{Item: item(meta("Fan", "", provider.StatusPending, 0), nil, startMsg("Fan", "", "3")), Registry: reg, Policy: p, Now: now})
		ack := wantAck(t, d)
		if d.Exec == nil || len(ack.History) != 4 {
			t.Fatalf("first turn: %s, exec %v", kinds(ack.History), d.Exec)
		}
		d = Decide(Input{Item: item(meta("Fan", "1.0.0", provider.StatusRunning, 1), ack.History,
			history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage("0")},
			history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 3, Output: json.RawMessage("1")}),
			Cached: d.Exec, Registry: reg, Policy: p, Now: now})
		// The three activities in flight are canceled with the failure.
		wantLimit(t, d, "MaxHistoryEvents", 4)
	})
}

func TestLimitErrorMatches(t *testing.T) {
	err := error(&replay.LimitError{Limit: replay.LimitPayload, Max: 10, Value: 11, What: "input of activity A"})
	if !errors.Is(err, replay.ErrLimitExceeded) {
		t.Fatal("LimitError does not match ErrLimitExceeded")
	}
	if got, want := err.Error(), "input of activity A: 11 bytes, over the limit MaxPayloadBytes = 10"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

// A cancel request in the same turn as something over a limit cancels the
// execution: it ends either way, and the cancel is what was asked.
func TestLimitCancelWins(t *testing.T) {
	scheduled := 0
	d := Decide(Input{Item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil),
		raised("go", `"`+strings.Repeat("z", 2000)+`"`), history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Reason: "stop"}),
		Registry: limitRegistry(&scheduled), Policy: limitPolicy(replay.Limits{MaxPayload: 1500}), Now: now})
	ack := wantAck(t, d)
	if d.Result != replay.Canceled || ack.Metadata.Error == nil || ack.Metadata.Error.Kind != history.ErrorCanceled {
		t.Fatalf("result %s, error %+v; want Canceled", d.Result, ack.Metadata.Error)
	}
}
