package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// executionCases check instances with several executions (continue-as-new):
// separate histories, the current-execution pointer, and execution rows
// with their statuses.
var executionCases = []testCase{
	{name: "ExecutionHistoriesAreIsolated", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "second", time.Second)
		h1, h2 := e.readHistory("a", 1), e.readHistory("a", 2)
		mustEqual(e.t, "execution 1", eventKinds(h1), []history.EventKind{history.OrchestrationStarted, history.OrchestrationContinuedAsNew})
		mustEqual(e.t, "execution 2", eventKinds(h2), []history.EventKind{history.OrchestrationStarted})
		mustEqual(e.t, "input of execution 2", h2[0].Input, js("second"))
		mustEqual(e.t, "input of execution 1", h1[0].Input, js("in"))
	}},
	{name: "ReadHistoryZeroIsTheCurrentExecution", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "second", time.Second)
		mustEqual(e.t, "current history", e.readHistory("a", 0), e.readHistory("a", 2))
		e.continueAsNew("a", "third", time.Second)
		mustEqual(e.t, "current history", e.readHistory("a", 0), e.readHistory("a", 3))
	}},
	{name: "CurrentExecutionFollowsAckedIDs", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "x", 1))
		it := e.fetchFor("a")
		mustEqual(e.t, "current execution", it.Instance.CurrentExecutionID, int64(1))
		// Execution 1 hands over: until execution 2 is acked, 1 stays current.
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{{
				EventID: 2, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js("next"),
			}},
			Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
			OrchestratorItems: []*provider.OrchestratorMessage{continueAsNewMsg("a", 2, "next")},
		})
		it = e.fetchFor("a")
		mustEqual(e.t, "current execution before the new one is acked", it.Instance.CurrentExecutionID, int64(1))
		mustEqual(e.t, "status of an instance that continued as new", it.Instance.Status, provider.StatusRunning)
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 2, History: []history.Event{e.startedEvent("next")}, Metadata: runningMeta()})
		e.enqueue(eventMsg("a", "y", 1))
		it = e.fetchFor("a")
		mustEqual(e.t, "current execution", it.Instance.CurrentExecutionID, int64(2))
		mustEqual(e.t, "history of the current execution", eventIDs(it.History), []int64{1})
		mustEqual(e.t, "its input", it.History[0].Input, js("next"))
	}},
	{name: "EveryExecutionStaysReadable", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "two", time.Second)
		e.continueAsNew("a", "three", time.Second)
		e.continueAsNew("a", "four", time.Second)
		for x, input := range map[int64]string{2: "two", 3: "three", 4: "four"} {
			h := e.readHistory("a", x)
			mustEqual(e.t, "input of the execution", h[0].Input, js(input))
		}
		mustEqual(e.t, "execution 1", eventIDs(e.readHistory("a", 1)), []int64{1, 2})
		mustEqual(e.t, "execution 4", eventIDs(e.readHistory("a", 4)), []int64{1})
		_, err := e.p.ReadHistory(e.ctx, "a", 5)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(a, 5)")
	}},
	{name: "AckOfOlderExecutionKeepsCurrentExecution", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "second", time.Second)
		e.enqueue(eventMsg("a", "late", 1))
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.externalEvent(3, "late")}})
		mustEqual(e.t, "execution 1", eventIDs(e.readHistory("a", 1)), []int64{1, 2, 3})
		mustEqual(e.t, "current history", e.readHistory("a", 0), e.readHistory("a", 2))
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "current execution", next.Instance.CurrentExecutionID, int64(2))
	}},
	{name: "SameEventIDsInDifferentExecutions", run: func(e *env) {
		e.createInstance("a")
		e.continueAsNew("a", "second", time.Second)
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.ack(turnAck(it, 2, e.externalEvent(2, "go"))) // event 2 exists in execution 1 only
		mustEqual(e.t, "execution 2", eventIDs(e.readHistory("a", 2)), []int64{1, 2})
		e.enqueue(eventMsg("a", "dup", 1))
		it = e.fetchFor("a")
		e.wantErr(e.ackErr(turnAck(it, 2, e.externalEvent(2, "dup"))), provider.ErrDuplicateEvent, "event 2 again in execution 2")
	}},
	{name: "ListExecutionsReflectsStatuses", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		started1 := e.clock.Now()
		e.continueAsNew("a", "second", time.Second)
		// continueAsNew acks execution 1's last turn at +1s, execution 2's first at +2s.
		execs, err := a.ListExecutions(e.ctx, "a")
		e.noErr(err, "ListExecutions(a)")
		if len(execs) != 2 {
			e.t.Fatalf("ListExecutions returned %d executions, want 2", len(execs))
		}
		mustEqual(e.t, "executions", []any{execs[0].ExecutionID, execs[0].Status, execs[1].ExecutionID, execs[1].Status},
			[]any{1, provider.StatusContinuedAsNew, 2, provider.StatusRunning})
		mustEqual(e.t, "event counts", []int64{execs[0].EventCount, execs[1].EventCount}, []int64{2, 1})
		if !execs[0].StartedAt.Equal(started1) || !execs[0].CompletedAt.Equal(started1.Add(time.Second)) {
			e.t.Fatalf("execution 1 ran %v to %v, want %v to %v", execs[0].StartedAt, execs[0].CompletedAt, started1, started1.Add(time.Second))
		}
		if !execs[1].StartedAt.Equal(started1.Add(2*time.Second)) || !execs[1].CompletedAt.IsZero() {
			e.t.Fatalf("execution 2 started %v, completed %v; want %v and not completed", execs[1].StartedAt, execs[1].CompletedAt, started1.Add(2*time.Second))
		}
		mustEqual(e.t, "input of execution 2", execs[1].Input, js("second"))
		one, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		mustEqual(e.t, "GetExecution(a, 1)", *one, execs[0])
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, 2})
	}},
	{name: "InstanceStaysRunningAfterContinuedAsNewTurn", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "x", 1))
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{{
				EventID: 2, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js("next"),
			}},
			Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
			OrchestratorItems: []*provider.OrchestratorMessage{continueAsNewMsg("a", 2, "next")},
		})
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, 1})
		ex, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		mustEqual(e.t, "execution 1 status", ex.Status, provider.StatusContinuedAsNew)
	}},
	{name: "CompletedStatusSetsCompletedAtAndOutput", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "finish", 1))
		e.clock.Advance(3 * time.Second)
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{e.completedEvent(2, "out")},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("out")},
		})
		ex, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		mustEqual(e.t, "execution", []any{ex.Status, ex.Output, ex.EventCount}, []any{provider.StatusCompleted, js("out"), 2})
		if !ex.CompletedAt.Equal(e.clock.Now()) {
			e.t.Fatalf("CompletedAt = %v, want %v", ex.CompletedAt, e.clock.Now())
		}
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.Output, info.CurrentExecutionID}, []any{provider.StatusCompleted, js("out"), 1})
	}},
	{name: "FailedStatusRecordsError", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "boom", 1))
		it := e.fetchFor("a")
		fail := &history.ErrorDetails{Kind: history.ErrorApplication, Message: "boom", Type: "*errors.errorString"}
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: fail}},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Error: fail},
		})
		ex, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		mustEqual(e.t, "execution", []any{ex.Status, ex.Error}, []any{provider.StatusFailed, fail})
		if ex.CompletedAt.IsZero() {
			e.t.Fatal("a failed execution has no CompletedAt")
		}
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.Error}, []any{provider.StatusFailed, fail})
	}},
	{name: "CanceledStatusIsTerminal", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "cancel", 1))
		it := e.fetchFor("a")
		why := &history.ErrorDetails{Kind: history.ErrorCanceled, Message: "user asked"}
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:  []history.Event{{EventID: 2, Kind: history.OrchestrationFailed, TimestampMs: ms(e.clock.Now()), Error: why}},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCanceled, Error: why},
		})
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.Error}, []any{provider.StatusCanceled, why})
		ex, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		if ex.Status != provider.StatusCanceled || ex.CompletedAt.IsZero() {
			e.t.Fatalf("execution = %+v, want Canceled with CompletedAt", ex)
		}
	}},
	{name: "RunningExecutionHasNoCompletedAt", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		ex, err := a.GetExecution(e.ctx, "a", 1)
		e.noErr(err, "GetExecution(a, 1)")
		if ex.Status != provider.StatusRunning || !ex.CompletedAt.IsZero() || !ex.StartedAt.Equal(e.clock.Now()) {
			e.t.Fatalf("execution = %+v, want Running, started now, not completed", ex)
		}
		mustEqual(e.t, "event count", ex.EventCount, int64(1))
	}},
	{name: "NewExecutionStartsRunningWithoutStatus", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		e.enqueue(eventMsg("a", "x", 1))
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History:           []history.Event{{EventID: 2, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now())}},
			Metadata:          provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew},
			OrchestratorItems: []*provider.OrchestratorMessage{continueAsNewMsg("a", 2, nil)},
		})
		it = e.fetchFor("a")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 2, History: []history.Event{e.startedEvent("in")}})
		ex, err := a.GetExecution(e.ctx, "a", 2)
		e.noErr(err, "GetExecution(a, 2)")
		mustEqual(e.t, "status of a new execution acked without status", ex.Status, provider.StatusRunning)
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, 2})
	}},
	{name: "UnknownExecutionOrInstanceNotFoundInAdmin", run: func(e *env) {
		a := e.admin()
		e.createInstance("a")
		_, err := a.GetExecution(e.ctx, "a", 2)
		e.wantErr(err, provider.ErrNotFound, "GetExecution(a, 2)")
		_, err = a.GetExecution(e.ctx, "nobody", 1)
		e.wantErr(err, provider.ErrNotFound, "GetExecution(nobody, 1)")
		_, err = a.ListExecutions(e.ctx, "nobody")
		e.wantErr(err, provider.ErrNotFound, "ListExecutions(nobody)")
	}},
}
