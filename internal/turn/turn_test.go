package turn

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// Every execution Decide does not return must be closed: a leaked one
// leaves its coroutine's goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	now   = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	nowMs = now.UnixMilli()
)

// registry knows Echo at 1.0.0 and 2.0.0 (default 2.0.0) and single-version
// Wait, Loop and Spawn.
type registry map[string]replay.Func

func (r registry) Orchestration(name, version string) (replay.Func, string, bool) {
	if name == "Echo" && version == "" {
		version = "2.0.0"
	}
	if name != "Echo" && version == "" {
		version = "1.0.0"
	}
	fn, ok := r[name+"@"+version]
	return fn, version, ok
}

func testRegistry() registry {
	return registry{
		"Echo@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"v1 ` + strings.Trim(string(in), `"`) + `"`), nil
		},
		"Echo@2.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"v2 ` + strings.Trim(string(in), `"`) + `"`), nil
		},
		// Wait runs activity A and returns its result, or fails with it.
		"Wait@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			a := ctx.ScheduleActivity("A", in, "")
			ctx.Await(a)
			out, fail := a.Result()
			if fail != nil {
				return nil, fail
			}
			return out, nil
		},
		// Loop waits for "go" and continues as new with its data; the
		// data "upgrade" moves to Loop 2.0.0.
		"Loop@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			e := ctx.WaitForEvent("go")
			ctx.Await(e)
			data, _ := e.Result()
			version := ""
			if string(data) == `"upgrade"` {
				version = "2.0.0"
			}
			return nil, ctx.ContinueAsNew(data, version)
		},
		// Spawn starts child "kid" by its explicit ID and waits for it.
		"Spawn@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			c := ctx.ScheduleSubOrchestration("Echo", "", "kid", in)
			ctx.Await(c)
			out, _ := c.Result()
			return out, nil
		},
		// Detach starts "free" detached and waits for the start.
		"Detach@1.0.0": func(ctx *replay.Context, in json.RawMessage) (json.RawMessage, error) {
			ctx.Await(ctx.StartOrchestration("Echo", "", "free", in))
			return nil, nil
		},
	}
}

func started(name, version, input string, parent *history.ParentRef) history.Event {
	ev := history.Event{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: nowMs - 1000, Name: name, Version: version, Parent: parent}
	if input != "" {
		ev.Input = json.RawMessage(input)
	}
	return ev
}

func startMsg(name, version, input string) history.WorkItem {
	return history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "i", ExecutionID: 1, Name: name, Version: version, Input: json.RawMessage(input)}
}

func raised(name, data string) history.WorkItem {
	return history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: name, Data: json.RawMessage(data)}
}

func meta(name, version string, status provider.Status, execID int64) *provider.InstanceMeta {
	return &provider.InstanceMeta{OrchestrationName: name, OrchestrationVersion: version, Status: status, CurrentExecutionID: execID}
}

func item(inst *provider.InstanceMeta, hist []history.Event, msgs ...history.WorkItem) *provider.OrchestrationItem {
	return &provider.OrchestrationItem{InstanceID: "i", LockToken: "tok", AttemptCount: 1, Instance: inst, History: hist, Messages: msgs}
}

func kinds(evs []history.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Kind))
	}
	return strings.Join(s, ",")
}

// sent is the orchestrator messages of an ack, one "Kind>instance" each.
func sent(ack *provider.TurnAck) string {
	var s []string
	for _, m := range ack.OrchestratorItems {
		s = append(s, string(m.Item.Kind)+">"+m.InstanceID)
	}
	return strings.Join(s, ",")
}

func testPolicy() Policy {
	return Policy{MaxAttempts: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Second }}
}

// waitHistory is Wait, running, with activity A (event 2) in flight.
func waitHistory(parent *history.ParentRef) []history.Event {
	return []history.Event{
		started("Wait", "1.0.0", `"in"`, parent),
		{EventID: 2, Kind: history.ActivityScheduled, TimestampMs: nowMs - 1000, Name: "A", Input: json.RawMessage(`"in"`)},
	}
}

func wantAck(t *testing.T, d Decision) *provider.TurnAck {
	t.Helper()
	if d.Ack == nil || d.Abandon != nil {
		t.Fatalf("want an ack only, got ack %+v abandon %+v", d.Ack, d.Abandon)
	}
	if d.Ack.LockToken != "tok" {
		t.Fatalf("ack lock token %q", d.Ack.LockToken)
	}
	return d.Ack
}

func wantAbandon(t *testing.T, d Decision, want provider.AbandonOptions) {
	t.Helper()
	if d.Ack != nil || d.Abandon == nil {
		t.Fatalf("want an abandon only, got ack %+v abandon %+v", d.Ack, d.Abandon)
	}
	if !reflect.DeepEqual(*d.Abandon, want) {
		t.Fatalf("abandon\n got: %+v %+v\nwant: %+v %+v", *d.Abandon, d.Abandon.Error, want, want.Error)
	}
	if d.Exec != nil || d.Result != replay.Running {
		t.Fatalf("an abandon keeps no execution: %v %s", d.Exec, d.Result)
	}
}

// wantConsume checks an ack that consumes the messages and changes nothing.
func wantConsume(t *testing.T, d Decision, execID int64) {
	t.Helper()
	ack := wantAck(t, d)
	if want := (&provider.TurnAck{LockToken: "tok", ExecutionID: execID}); !reflect.DeepEqual(ack, want) {
		t.Fatalf("consume ack %+v, want %+v", ack, want)
	}
	if d.Exec != nil || len(d.CancelLocal) > 0 {
		t.Fatalf("consume keeps %v, cancels %v", d.Exec, d.CancelLocal)
	}
}

func wantFailed(t *testing.T, d Decision, kind history.ErrorKind, msg string) *provider.TurnAck {
	t.Helper()
	ack := wantAck(t, d)
	md := ack.Metadata
	if d.Result != replay.Failed || md.Status != provider.StatusFailed || md.Error == nil || md.Error.Kind != kind || !strings.Contains(md.Error.Message, msg) {
		t.Fatalf("result %s, metadata %+v %+v; want Failed, kind %s, message containing %q", d.Result, md, md.Error, kind, msg)
	}
	last := ack.History[len(ack.History)-1]
	if last.Kind != history.OrchestrationFailed || last.Error != md.Error || last.TimestampMs != nowMs {
		t.Fatalf("last event %+v, want OrchestrationFailed with the metadata's error", last)
	}
	if d.Exec != nil {
		t.Fatalf("a failed execution is kept")
	}
	if d.Log == nil || d.Log.Msg != "orchestration failed" {
		t.Fatalf("log %+v", d.Log)
	}
	return ack
}

func TestDecide(t *testing.T) {
	parent := &history.ParentRef{InstanceID: "p", ExecutionID: 3, EventID: 5}
	tests := []struct {
		name   string
		item   *provider.OrchestrationItem
		policy func(*Policy)
		check  func(t *testing.T, d Decision)
	}{
		{
			name: "first start resolves the default version",
			item: item(meta("Echo", "", provider.StatusPending, 0), nil, startMsg("Echo", "", `"ada"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if ack.ExecutionID != 1 || kinds(ack.History) != "OrchestrationStarted,OrchestrationCompleted" {
					t.Fatalf("ack execution %d, history %s", ack.ExecutionID, kinds(ack.History))
				}
				want := history.Event{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: nowMs, Name: "Echo", Version: "2.0.0", Input: json.RawMessage(`"ada"`)}
				if !reflect.DeepEqual(ack.History[0], want) {
					t.Fatalf("started %+v, want %+v", ack.History[0], want)
				}
				md := ack.Metadata
				if md.OrchestrationName != "Echo" || md.OrchestrationVersion != "2.0.0" || string(md.Input) != `"ada"` ||
					md.Status != provider.StatusCompleted || string(md.Output) != `"v2 ada"` {
					t.Fatalf("metadata %+v", md)
				}
				if d.Result != replay.Completed || d.Exec != nil || d.Log != nil {
					t.Fatalf("result %s, exec %v, log %+v", d.Result, d.Exec, d.Log)
				}
			},
		},
		{
			name: "first start of a pinned version",
			item: item(meta("Echo", "1.0.0", provider.StatusPending, 0), nil, startMsg("Echo", "1.0.0", `"ada"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if ack.History[0].Version != "1.0.0" || ack.Metadata.OrchestrationVersion != "1.0.0" || string(ack.Metadata.Output) != `"v1 ada"` {
					t.Fatalf("history %+v, metadata %+v", ack.History, ack.Metadata)
				}
			},
		},
		{
			name: "first turn schedules an activity and keeps the live execution",
			item: item(meta("Wait", "", provider.StatusPending, 0), nil, startMsg("Wait", "", `"in"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if kinds(ack.History) != "OrchestrationStarted,ActivityScheduled" || ack.Metadata.Status != provider.StatusRunning {
					t.Fatalf("history %s, status %s", kinds(ack.History), ack.Metadata.Status)
				}
				want := []*provider.WorkerMessage{{InstanceID: "i", ExecutionID: 1, ActivityID: 2,
					Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: "i", ExecutionID: 1, ID: 2, Name: "A", Input: json.RawMessage(`"in"`)}}}
				if !reflect.DeepEqual(ack.WorkerItems, want) {
					t.Fatalf("worker items %+v", ack.WorkerItems)
				}
				if d.Result != replay.Running || d.Exec == nil || d.Exec.ExecutionID() != 1 {
					t.Fatalf("result %s, exec %v", d.Result, d.Exec)
				}
				d.Exec.Close()
			},
		},
		{
			name: "running turn completes",
			item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(nil),
				history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage(`"out"`)}),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if ack.ExecutionID != 1 || kinds(ack.History) != "ActivityCompleted,OrchestrationCompleted" || ack.History[0].EventID != 3 {
					t.Fatalf("ack execution %d, history %+v", ack.ExecutionID, ack.History)
				}
				md := ack.Metadata
				if md.Status != provider.StatusCompleted || string(md.Output) != `"out"` || md.OrchestrationName != "" || md.Input != nil {
					t.Fatalf("metadata %+v (a running execution's name and input are not rewritten)", md)
				}
				if sent(ack) != "" || d.Exec != nil {
					t.Fatalf("sent %s, exec %v", sent(ack), d.Exec)
				}
			},
		},
		{
			name: "ContinueAsNew sends the next execution, keeps the version and carries unconsumed events",
			item: item(meta("Loop", "1.0.0", provider.StatusRunning, 1),
				[]history.Event{started("Loop", "1.0.0", `"a"`, parent), {EventID: 2, Kind: history.ExternalSubscribed, Name: "go"}},
				raised("later", `1`), raised("go", `"b"`), raised("after", `2`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if d.Result != replay.ContinuedAsNew || ack.Metadata.Status != provider.StatusContinuedAsNew {
					t.Fatalf("result %s, status %s", d.Result, ack.Metadata.Status)
				}
				want := []*provider.OrchestratorMessage{
					{InstanceID: "i", Item: history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: "i", ExecutionID: 2,
						Name: "Loop", Version: "1.0.0", Input: json.RawMessage(`"b"`), Parent: parent}},
					{InstanceID: "i", Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: "later", Data: json.RawMessage(`1`)}},
					{InstanceID: "i", Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "i", Name: "after", Data: json.RawMessage(`2`)}},
				}
				if !reflect.DeepEqual(ack.OrchestratorItems, want) {
					t.Fatalf("sent %s\n%+v", sent(ack), ack.OrchestratorItems)
				}
			},
		},
		{
			name: "ContinueAsNew to a given version",
			item: item(meta("Loop", "1.0.0", provider.StatusRunning, 1),
				[]history.Event{started("Loop", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.ExternalSubscribed, Name: "go"}},
				raised("go", `"upgrade"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if len(ack.OrchestratorItems) != 1 || ack.OrchestratorItems[0].Item.Version != "2.0.0" || ack.OrchestratorItems[0].Item.ExecutionID != 2 {
					t.Fatalf("sent %+v", ack.OrchestratorItems)
				}
			},
		},
		{
			name: "the next execution starts at the instance's version",
			item: item(meta("Echo", "1.0.0", provider.StatusContinuedAsNew, 1),
				[]history.Event{started("Echo", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.OrchestrationContinuedAsNew, Input: json.RawMessage(`"b"`)}},
				history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: "i", ExecutionID: 2, Name: "Echo", Input: json.RawMessage(`"b"`)}),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if ack.ExecutionID != 2 || kinds(ack.History) != "OrchestrationStarted,OrchestrationCompleted" || ack.History[0].EventID != 1 {
					t.Fatalf("ack execution %d, history %+v", ack.ExecutionID, ack.History)
				}
				md := ack.Metadata
				if md.OrchestrationVersion != "1.0.0" || string(md.Input) != `"b"` || string(md.Output) != `"v1 b"` {
					t.Fatalf("metadata %+v", md)
				}
			},
		},
		{
			name: "the next execution starts at the version ContinueAsNew gave",
			item: item(meta("Echo", "1.0.0", provider.StatusContinuedAsNew, 1),
				[]history.Event{started("Echo", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.OrchestrationContinuedAsNew, Input: json.RawMessage(`"b"`)}},
				raised("early", `1`),
				history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: "i", ExecutionID: 2, Name: "Echo", Version: "2.0.0", Input: json.RawMessage(`"b"`)}),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if ack.ExecutionID != 2 || ack.Metadata.OrchestrationVersion != "2.0.0" || string(ack.Metadata.Output) != `"v2 b"` {
					t.Fatalf("ack %+v", ack)
				}
				// A carried event is part of the new execution.
				if kinds(ack.History) != "OrchestrationStarted,ExternalEvent,OrchestrationCompleted" {
					t.Fatalf("history %s", kinds(ack.History))
				}
			},
		},
		{
			name: "late messages for a ContinuedAsNew execution are consumed",
			item: item(meta("Echo", "1.0.0", provider.StatusContinuedAsNew, 1),
				[]history.Event{started("Echo", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.OrchestrationContinuedAsNew}},
				history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 9}),
			check: func(t *testing.T, d Decision) { wantConsume(t, d, 1) },
		},
		{
			name: "late messages for a finished instance are consumed",
			item: item(meta("Echo", "1.0.0", provider.StatusCompleted, 4),
				[]history.Event{started("Echo", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.OrchestrationCompleted}},
				raised("late", `1`)),
			check: func(t *testing.T, d Decision) { wantConsume(t, d, 4) },
		},
		{
			name:  "the start of an instance canceled before it is consumed",
			item:  item(meta("Echo", "", provider.StatusCanceled, 1), nil, startMsg("Echo", "", `"a"`)),
			check: func(t *testing.T, d Decision) { wantConsume(t, d, 1) },
		},
		{
			name: "unknown instance: consume only",
			item: item(nil, nil, raised("x", `1`), raised("y", `2`)),
			check: func(t *testing.T, d Decision) {
				wantConsume(t, d, 1)
				if d.Log == nil || d.Log.Msg != "dropping messages for an unknown instance" {
					t.Fatalf("log %+v", d.Log)
				}
			},
		},
		{
			name: "events ahead of a delayed start wait until it, without counting attempts",
			item: func() *provider.OrchestrationItem {
				it := item(&provider.InstanceMeta{OrchestrationName: "Echo", Status: provider.StatusPending, StartAt: now.Add(time.Hour)}, nil, raised("early", `1`))
				it.AttemptCount = 2
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: time.Hour, IgnoreAttempt: true, UntilStart: true})
			},
		},
		{
			name: "events ahead of a start whose time is unknown back off",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Echo", "", provider.StatusPending, 0), nil, raised("early", `1`))
				it.AttemptCount = 2
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: 2 * time.Second, IgnoreAttempt: true, UntilStart: true})
			},
		},
		{
			name: "events ahead of a start already due back off",
			item: item(&provider.InstanceMeta{OrchestrationName: "Echo", Status: provider.StatusPending, StartAt: now.Add(-time.Second)}, nil, raised("early", `1`)),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: time.Second, IgnoreAttempt: true, UntilStart: true})
			},
		},
		{
			name: "cancel before the delayed start",
			item: item(&provider.InstanceMeta{OrchestrationName: "Echo", OrchestrationVersion: "1.0.0", Status: provider.StatusPending, StartAt: now.Add(time.Hour)}, nil,
				raised("early", `1`), history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: "i", Reason: "not needed"}),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				evs, details := replay.CancelUnstarted("Echo", "1.0.0", "not needed", now)
				want := &provider.TurnAck{LockToken: "tok", ExecutionID: 1, History: evs, Metadata: provider.ExecutionMetadata{
					OrchestrationName: "Echo", OrchestrationVersion: "1.0.0", Status: provider.StatusCanceled, Error: details}}
				if !reflect.DeepEqual(ack, want) {
					t.Fatalf("ack\n got: %+v\nwant: %+v", ack, want)
				}
				if d.Result != replay.Canceled {
					t.Fatalf("result %s", d.Result)
				}
			},
		},
		{
			name: "unregistered orchestration waits with backoff",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Ghost", "", provider.StatusPending, 0), nil, startMsg("Ghost", "", `1`))
				it.AttemptCount = 2
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: 2 * time.Second, Error: &history.ErrorDetails{
					Kind: history.ErrorConfiguration, Message: "orchestration Ghost is not registered on this runtime"}})
				if d.Log == nil || d.Log.Msg != "orchestration not registered; will retry" {
					t.Fatalf("log %+v", d.Log)
				}
			},
		},
		{
			name: "unregistered version waits with backoff",
			item: item(meta("Echo", "3.0.0", provider.StatusPending, 0), nil, startMsg("Echo", "3.0.0", `1`)),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: time.Second, Error: &history.ErrorDetails{
					Kind: history.ErrorConfiguration, Message: "orchestration Echo version 3.0.0 is not registered on this runtime"}})
			},
		},
		{
			name: "unserved orchestration fails at once, with the unserved message",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Ghost", "", provider.StatusPending, 0), nil, startMsg("Ghost", "", `1`))
				it.AttemptCount = 0 // fetched for failing: never delivered
				return it
			}(),
			policy: func(p *Policy) { p.Unserved = "no runtime registers orchestration Ghost for 1h0m0s (UnservedTimeout)" },
			check: func(t *testing.T, d Decision) {
				ack := wantFailed(t, d, history.ErrorConfiguration, "no runtime registers orchestration Ghost for 1h0m0s (UnservedTimeout)")
				if kinds(ack.History) != "OrchestrationStarted,OrchestrationFailed" || ack.ExecutionID != 1 || ack.Metadata.OrchestrationName != "Ghost" {
					t.Fatalf("ack %+v, want execution 1 of Ghost started and failed", ack)
				}
			},
		},
		{
			name:   "unserved policy runs a registered orchestration as usual",
			item:   item(meta("Echo", "", provider.StatusPending, 0), nil, startMsg("Echo", "", `1`)),
			policy: func(p *Policy) { p.Unserved = "no runtime registers orchestration Echo" },
			check: func(t *testing.T, d Decision) {
				if ack := wantAck(t, d); ack.Metadata.Status == provider.StatusFailed {
					t.Fatalf("a registered orchestration failed as unserved: %+v", ack.Metadata.Error)
				}
			},
		},
		{
			name: "unregistered orchestration fails at MaxAttempts",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Ghost", "", provider.StatusPending, 0), nil, startMsg("Ghost", "", `1`))
				it.Messages[0].Parent = parent
				it.AttemptCount = 3
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				ack := wantFailed(t, d, history.ErrorConfiguration, "orchestration Ghost is not registered on this runtime (looked up on 3 deliveries)")
				if kinds(ack.History) != "OrchestrationStarted,OrchestrationFailed" || ack.History[0].Name != "Ghost" || string(ack.History[0].Input) != `1` {
					t.Fatalf("history %+v", ack.History)
				}
				md := ack.Metadata
				if md.OrchestrationName != "Ghost" || string(md.Input) != `1` || md.ParentInstanceID != "p" || md.ParentExecutionID != 3 {
					t.Fatalf("metadata %+v", md)
				}
				if sent(ack) != "SubOrchFailed>p" {
					t.Fatalf("sent %s, want the failure to the parent", sent(ack))
				}
			},
		},
		{
			name: "poison: attempts over MaxAttempts fail the execution and cancel its work",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(parent),
					history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage(`"out"`)})
				it.AttemptCount = 4
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				ack := wantFailed(t, d, history.ErrorPoison, "turn failed 3 times (max attempts 3)")
				if kinds(ack.History) != "ActivityCancelRequested,OrchestrationFailed" || ack.History[0].EventID != 3 || ack.History[0].SourceEventID != 2 {
					t.Fatalf("history %+v", ack.History)
				}
				ref := provider.ActivityRef{InstanceID: "i", ExecutionID: 1, ActivityID: 2}
				if !reflect.DeepEqual(ack.CanceledActivities, []provider.ActivityRef{ref}) || !reflect.DeepEqual(d.CancelLocal, []provider.ActivityRef{ref}) {
					t.Fatalf("canceled %+v, local %+v", ack.CanceledActivities, d.CancelLocal)
				}
				if ack.Metadata.OrchestrationName != "" || ack.Metadata.ParentInstanceID != "" {
					t.Fatalf("metadata of a running execution rewritten: %+v", ack.Metadata)
				}
				want := &provider.OrchestratorMessage{InstanceID: "p", Item: history.WorkItem{Kind: history.WorkSubOrchFailed,
					InstanceID: "p", ExecutionID: 3, ID: 5, ChildInstanceID: "i", Error: ack.Metadata.Error}}
				if len(ack.OrchestratorItems) != 1 || !reflect.DeepEqual(ack.OrchestratorItems[0], want) {
					t.Fatalf("sent %+v", ack.OrchestratorItems)
				}
			},
		},
		{
			name: "poison of a first start records the start",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Echo", "", provider.StatusPending, 0), nil, startMsg("Echo", "", `"a"`))
				it.AttemptCount = 4
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				ack := wantFailed(t, d, history.ErrorPoison, "max attempts 3")
				if kinds(ack.History) != "OrchestrationStarted,OrchestrationFailed" || ack.History[0].Version != "2.0.0" || ack.Metadata.OrchestrationVersion != "2.0.0" {
					t.Fatalf("history %+v, metadata %+v", ack.History, ack.Metadata)
				}
			},
		},
		{
			name:   "nondeterminism parks with backoff by park count",
			item:   item(meta("Echo", "1.0.0", provider.StatusRunning, 1), append([]history.Event{started("Echo", "1.0.0", `"a"`, nil)}, waitHistory(nil)[1]), raised("x", `1`)),
			policy: func(p *Policy) { p.Parks = 2 },
			check: func(t *testing.T, d Decision) {
				if d.Abandon == nil || d.Abandon.Error == nil || d.Abandon.Error.Kind != history.ErrorNondeterminism {
					t.Fatalf("abandon %+v", d.Abandon)
				}
				if dv := d.Abandon.Error.Divergence; dv == nil || dv.EventID != 2 || dv.Expected == "" || dv.Got == "" {
					t.Fatalf("divergence %+v, want event 2 with what history has and what the code did", dv)
				}
				wantAbandon(t, d, provider.AbandonOptions{Delay: 3 * time.Second, IgnoreAttempt: true, Error: d.Abandon.Error})
				if !d.Parked || d.Log == nil || !strings.Contains(d.Log.Msg, "parked") {
					t.Fatalf("parked %v, log %+v", d.Parked, d.Log)
				}
			},
		},
		{
			name:   "nondeterminism fails under the fail policy",
			item:   item(meta("Echo", "1.0.0", provider.StatusRunning, 1), append([]history.Event{started("Echo", "1.0.0", `"a"`, nil)}, waitHistory(nil)[1]), raised("x", `1`)),
			policy: func(p *Policy) { p.FailOnNondeterminism = true },
			check: func(t *testing.T, d Decision) {
				ack := wantFailed(t, d, history.ErrorNondeterminism, "nondeterministic")
				if kinds(ack.History) != "ActivityCancelRequested,OrchestrationFailed" || d.Parked {
					t.Fatalf("history %s, parked %v", kinds(ack.History), d.Parked)
				}
			},
		},
		{
			name: "corrupt history is retried",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Echo", "1.0.0", provider.StatusRunning, 2), nil, raised("x", `1`))
				it.HistoryError = provider.ErrCorruptData
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				wantAbandon(t, d, provider.AbandonOptions{Delay: time.Second, Error: &history.ErrorDetails{
					Kind: history.ErrorInfrastructure, Message: "stored history cannot be decoded: " + provider.ErrCorruptData.Error()}})
			},
		},
		{
			name: "corrupt history fails the instance after MaxAttempts",
			item: func() *provider.OrchestrationItem {
				it := item(meta("Echo", "1.0.0", provider.StatusRunning, 2), nil, raised("x", `1`))
				it.HistoryError = provider.ErrCorruptData
				it.AttemptCount = 4
				return it
			}(),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				want := &provider.TurnAck{LockToken: "tok", ExecutionID: 2, Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed,
					Error: &history.ErrorDetails{Kind: history.ErrorPoison, Message: "stored history cannot be decoded: " + provider.ErrCorruptData.Error()}}}
				if !reflect.DeepEqual(ack, want) || d.Result != replay.Failed || d.Log == nil {
					t.Fatalf("ack %+v, result %s, log %+v", ack, d.Result, d.Log)
				}
			},
		},
		{
			name: "a history that does not begin with OrchestrationStarted is retried",
			item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1),
				[]history.Event{{EventID: 1, Kind: history.TimerCreated, Name: "Wait", Version: "1.0.0", FireAtMs: nowMs}}, raised("x", `1`)),
			check: func(t *testing.T, d Decision) {
				if d.Abandon == nil || d.Abandon.Error == nil || d.Abandon.Error.Kind != history.ErrorInfrastructure {
					t.Fatalf("abandon %+v", d.Abandon)
				}
				wantAbandon(t, d, provider.AbandonOptions{Delay: time.Second, Error: d.Abandon.Error})
			},
		},
		{
			name: "a sub-orchestration's completion is sent to its parent",
			item: func() *provider.OrchestrationItem {
				m := startMsg("Echo", "", `"kid"`)
				m.Parent = parent
				return item(meta("Echo", "", provider.StatusPending, 0), nil, m)
			}(),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				want := []*provider.OrchestratorMessage{{InstanceID: "p", Item: history.WorkItem{Kind: history.WorkSubOrchCompleted,
					InstanceID: "p", ExecutionID: 3, ID: 5, ChildInstanceID: "i", Output: json.RawMessage(`"v2 kid"`)}}}
				if !reflect.DeepEqual(ack.OrchestratorItems, want) {
					t.Fatalf("sent %+v", ack.OrchestratorItems)
				}
				if ack.Metadata.ParentInstanceID != "p" || ack.Metadata.ParentExecutionID != 3 || ack.History[0].Parent != parent {
					t.Fatalf("parent not recorded: %+v %+v", ack.Metadata, ack.History[0])
				}
			},
		},
		{
			name: "a sub-orchestration's failure is sent to its parent",
			item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), waitHistory(parent),
				history.WorkItem{Kind: history.WorkActivityFailed, InstanceID: "i", ExecutionID: 1, ID: 2,
					Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "no"}}),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				if d.Result != replay.Failed || sent(ack) != "SubOrchFailed>p" || !strings.Contains(ack.OrchestratorItems[0].Item.Error.Message, "no") {
					t.Fatalf("result %s, sent %+v", d.Result, ack.OrchestratorItems)
				}
			},
		},
		{
			name: "an explicit child ID carries its collision failure",
			item: item(meta("Spawn", "", provider.StatusPending, 0), nil, startMsg("Spawn", "", `"x"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				want := []*provider.OrchestratorMessage{{InstanceID: "kid",
					Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "kid", ExecutionID: 1, Name: "Echo", Input: json.RawMessage(`"x"`),
						Parent: &history.ParentRef{InstanceID: "i", ExecutionID: 1, EventID: 2}},
					Create: &provider.NewInstance{OrchestrationName: "Echo", Input: json.RawMessage(`"x"`), ParentInstanceID: "i", ParentExecutionID: 1,
						OnExists: &provider.OrchestratorMessage{InstanceID: "i", Item: history.WorkItem{
							Kind: history.WorkSubOrchFailed, InstanceID: "i", ExecutionID: 1, ID: 2, ChildInstanceID: "kid",
							Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: ChildExistsMessage, Code: history.CodeInstanceExists},
						}},
					},
				}}
				if !reflect.DeepEqual(ack.OrchestratorItems, want) {
					t.Fatalf("sent %+v\nwant %+v", ack.OrchestratorItems, want)
				}
				d.Exec.Close()
			},
		},
		{
			name: "a detached start creates its instance without a parent and confirms to the starter",
			item: item(meta("Detach", "", provider.StatusPending, 0), nil, startMsg("Detach", "", `"x"`)),
			check: func(t *testing.T, d Decision) {
				ack := wantAck(t, d)
				want := []*provider.OrchestratorMessage{{InstanceID: "free",
					Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: "free", ExecutionID: 1, Name: "Echo", Input: json.RawMessage(`"x"`)},
					Create: &provider.NewInstance{OrchestrationName: "Echo", Input: json.RawMessage(`"x"`),
						OnExists: &provider.OrchestratorMessage{InstanceID: "i", Item: history.WorkItem{
							Kind: history.WorkSubOrchFailed, InstanceID: "i", ExecutionID: 1, ID: 2, ChildInstanceID: "free",
							Error: &history.ErrorDetails{Kind: history.ErrorConfiguration, Message: ChildExistsMessage, Code: history.CodeInstanceExists},
						}},
					},
				}, {InstanceID: "i",
					Item: history.WorkItem{Kind: history.WorkSubOrchCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, ChildInstanceID: "free"}}}
				if !reflect.DeepEqual(ack.OrchestratorItems, want) {
					t.Fatalf("sent %+v\nwant %+v", ack.OrchestratorItems, want)
				}
				if kinds(ack.History) != "OrchestrationStarted,DetachedOrchestrationScheduled" {
					t.Fatalf("history %s", kinds(ack.History))
				}
				d.Exec.Close()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := testPolicy()
			if tt.policy != nil {
				tt.policy(&pol)
			}
			d := Decide(Input{Item: tt.item, Registry: testRegistry(), Policy: pol, Now: now})
			tt.check(t, d)
			if d.Exec != nil && d.Result != replay.Running {
				t.Fatalf("execution kept although %s", d.Result)
			}
		})
	}
}

// The live execution of the previous turn runs the next one; Decide closes
// a cached execution it does not return.
func TestDecideUsesTheCachedExecution(t *testing.T) {
	reg := testRegistry()
	first := Decide(Input{Item: item(meta("Wait", "", provider.StatusPending, 0), nil, startMsg("Wait", "", `"in"`)),
		Registry: reg, Policy: testPolicy(), Now: now})
	if first.Exec == nil {
		t.Fatalf("no live execution after the first turn")
	}
	hist := first.Ack.History
	done := history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: "i", ExecutionID: 1, ID: 2, Output: json.RawMessage(`"out"`)}

	// A registry whose code would fail proves the cached code ran.
	broken := registry{"Wait@1.0.0": func(*replay.Context, json.RawMessage) (json.RawMessage, error) {
		t.Fatalf("the code was replayed instead of resumed")
		return nil, nil
	}}
	second := Decide(Input{Item: item(meta("Wait", "1.0.0", provider.StatusRunning, 1), hist, done),
		Cached: first.Exec, Registry: broken, Policy: testPolicy(), Now: now})
	if second.Ack == nil || second.Result != replay.Completed || string(second.Ack.Metadata.Output) != `"out"` {
		t.Fatalf("second turn %+v %s", second.Ack, second.Result)
	}

	// A cached execution of another execution ID is closed and replaced.
	other := Decide(Input{Item: item(meta("Wait", "", provider.StatusPending, 0), nil, startMsg("Wait", "", `"in"`)),
		Registry: reg, Policy: testPolicy(), Now: now}).Exec
	stale := item(meta("Wait", "1.0.0", provider.StatusContinuedAsNew, 1),
		[]history.Event{started("Wait", "1.0.0", `"a"`, nil), {EventID: 2, Kind: history.OrchestrationContinuedAsNew, Input: json.RawMessage(`"b"`)}},
		history.WorkItem{Kind: history.WorkContinueAsNew, InstanceID: "i", ExecutionID: 2, Name: "Wait", Input: json.RawMessage(`"b"`)})
	third := Decide(Input{Item: stale, Cached: other, Registry: reg, Policy: testPolicy(), Now: now})
	if third.Exec == nil || third.Exec == other || third.Exec.ExecutionID() != 2 {
		t.Fatalf("third turn kept %v", third.Exec)
	}
	third.Exec.Close()

	// An unknown instance closes what it was handed.
	leftover := Decide(Input{Item: item(meta("Wait", "", provider.StatusPending, 0), nil, startMsg("Wait", "", `"in"`)),
		Registry: reg, Policy: testPolicy(), Now: now}).Exec
	if d := Decide(Input{Item: item(nil, nil), Cached: leftover, Registry: reg, Policy: testPolicy(), Now: now}); d.Exec != nil {
		t.Fatalf("consume kept %v", d.Exec)
	}
}

func TestUnregistered(t *testing.T) {
	for _, tt := range []struct {
		attempt, max int
		want         bool
	}{
		{1, 3, false}, {2, 3, false}, {3, 3, true}, {4, 3, true}, {1, 1, true},
	} {
		if got := Unregistered(tt.attempt, tt.max); got != tt.want {
			t.Errorf("Unregistered(%d, %d) = %v, want %v", tt.attempt, tt.max, got, tt.want)
		}
	}
}
