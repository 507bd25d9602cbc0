package turn

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// TestInstanceTimeoutIsArmedWithTheFirstTurn: a start with a timeout
// records the deadline in OrchestrationStarted and queues, in the same ack,
// a cancel request carrying a "timeout" failure, visible at the deadline.
func TestInstanceTimeoutIsArmedWithTheFirstTurn(t *testing.T) {
	start := startMsg("Wait", "", `"in"`)
	start.TimeoutMs = time.Hour.Milliseconds()
	d := Decide(Input{Item: item(meta("Wait", "", provider.StatusPending, 0), nil, start), Registry: testRegistry(), Policy: testPolicy(), Now: now})
	defer d.Exec.Close()
	ack := wantAck(t, d)
	deadline := now.Add(time.Hour)
	if ack.History[0].FireAtMs != deadline.UnixMilli() {
		t.Fatalf("started records deadline %d, want %d", ack.History[0].FireAtMs, deadline.UnixMilli())
	}
	if sent(ack) != "CancelInstance>i" {
		t.Fatalf("sent %s, want the timeout's cancel request", sent(ack))
	}
	m := ack.OrchestratorItems[0]
	if !m.VisibleAt.Equal(deadline) || m.Item.Error == nil || m.Item.Error.Kind != history.ErrorTimeout || m.Item.ExecutionID != 0 {
		t.Fatalf("timeout message %+v visible at %v", m.Item, m.VisibleAt)
	}
}

// TestContinueAsNewKeepsTheInstanceDeadline: the next execution's start
// shows the same deadline and arms nothing new (the queued request is
// addressed to the instance).
func TestContinueAsNewKeepsTheInstanceDeadline(t *testing.T) {
	deadline := nowMs + 3_600_000
	first := started("Loop", "1.0.0", `"a"`, nil)
	first.FireAtMs = deadline
	hist := []history.Event{first,
		{EventID: 2, Kind: history.ExternalSubscribed, TimestampMs: nowMs - 500, Name: "go"},
		{EventID: 3, Kind: history.ExternalEvent, TimestampMs: nowMs - 400, Name: "go", Data: json.RawMessage(`"b"`)},
		{EventID: 4, Kind: history.OrchestrationContinuedAsNew, TimestampMs: nowMs - 400, Input: json.RawMessage(`"b"`)},
	}
	next := history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: "i", ExecutionID: 2, Name: "Loop", Input: json.RawMessage(`"b"`)}
	d := Decide(Input{Item: item(meta("Loop", "1.0.0", provider.StatusContinuedAsNew, 1), hist, next), Registry: testRegistry(), Policy: testPolicy(), Now: now})
	defer d.Exec.Close()
	ack := wantAck(t, d)
	if ack.ExecutionID != 2 || ack.History[0].FireAtMs != deadline || strings.Contains(sent(ack), "CancelInstance") {
		t.Fatalf("execution %d started %+v, sent %s", ack.ExecutionID, ack.History[0], sent(ack))
	}
}

// TestGracefulCancelQueuesItsDeadline: a cancel request with a grace
// period leaves the execution running, cancels the activity it waited on
// and queues the grace timer, named by the request's event.
func TestGracefulCancelQueuesItsDeadline(t *testing.T) {
	pol := testPolicy()
	pol.CancelGrace = time.Minute
	cancel := history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Reason: "stop"}
	d := Decide(Input{Item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil), cancel), Registry: testRegistry(), Policy: pol, Now: now})
	defer func() {
		if d.Exec != nil {
			d.Exec.Close()
		}
	}()
	ack := wantAck(t, d)
	// Wait returns the canceled activity's failure: the execution ends
	// Canceled in the same turn, and no grace timer is needed.
	if d.Result != replay.Canceled || kinds(ack.History) != "OrchestrationCancelRequested,ActivityCancelRequested,OrchestrationFailed" {
		t.Fatalf("result %s, history %s", d.Result, kinds(ack.History))
	}
	if strings.Contains(sent(ack), "TimerFired") || len(d.CancelLocal) != 1 {
		t.Fatalf("sent %s, cancel local %v", sent(ack), d.CancelLocal)
	}

	// Code that keeps running gets the grace timer.
	reg := testRegistry()
	reg["Wait@1.0.0"] = func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
		ctx.Await(ctx.ScheduleActivity("A", in, ""))
		ctx.Await(ctx.WaitForEvent("never"))
		return nil, nil
	}
	d = Decide(Input{Item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil), cancel), Registry: reg, Policy: pol, Now: now})
	ack = wantAck(t, d)
	if d.Result != replay.Running || sent(ack) != "TimerFired>i" {
		t.Fatalf("result %s, sent %s", d.Result, sent(ack))
	}
	m := ack.OrchestratorItems[0]
	if req := ack.History[0]; m.Item.ID != req.EventID || !m.VisibleAt.Equal(now.Add(time.Minute)) || m.Item.FireAtMs != req.FireAtMs {
		t.Fatalf("grace timer %+v at %v for request %+v", m.Item, m.VisibleAt, req)
	}
}
