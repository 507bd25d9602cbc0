package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// creationCases check where instance rows come from: a message with Create
// (Pending at once), or the first ack's metadata; and what happens when an
// ID is taken.
var creationCases = []testCase{
	{name: "EnqueueCreateMakesPendingInstanceVisible", run: func(e *env) {
		a := e.admin()
		e.enqueue(startMsg("a"))
		info, err := a.GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance(a)")
		mustEqual(e.t, "instance", []any{info.InstanceID, info.OrchestrationName, info.OrchestrationVersion, info.Status, info.CurrentExecutionID},
			[]any{"a", testOrch, testVersion, provider.StatusPending, 0})
		mustEqual(e.t, "input", info.Input, js("input-a"))
		if !info.CreatedAt.Equal(e.clock.Now()) {
			e.t.Fatalf("CreatedAt = %v, want the store clock's %v", info.CreatedAt, e.clock.Now())
		}
		execs, err := a.ListExecutions(e.ctx, "a")
		e.noErr(err, "ListExecutions(a)")
		mustEqual(e.t, "executions of a pending instance", len(execs), 0)
	}},
	{name: "PendingInstanceHasEmptyHistory", run: func(e *env) {
		e.enqueue(startMsg("a"))
		mustEqual(e.t, "history", len(e.readHistory("a", 0)), 0)
	}},
	{name: "FetchOfPendingInstanceCarriesItsRow", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		mustEqual(e.t, "instance row", it.Instance, &provider.InstanceMeta{
			OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusPending,
		})
		mustEqual(e.t, "history", len(it.History), 0)
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		mustEqual(e.t, "start message", it.Messages[0], startMsg("a").Item)
	}},
	{name: "EnqueueWithoutCreateMakesNoInstance", run: func(e *env) {
		e.enqueue(startMsgNoCreate("a"))
		_, err := e.p.ReadHistory(e.ctx, "a", 0)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(a) before any ack")
		{
			a := e.admin()
			_, err := a.GetInstance(e.ctx, "a")
			e.wantErr(err, provider.ErrNotFound, "GetInstance(a)")
		}
		it := e.fetchFor("a")
		if it.Instance != nil {
			e.t.Fatalf("Instance = %+v, want nil for a message without an instance row", it.Instance)
		}
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
	}},
	{name: "AckCreatesMissingInstanceFromMetadata", run: func(e *env) {
		e.enqueue(startMsgNoCreate("a"))
		it := e.fetchFor("a")
		meta := runningMeta()
		meta.OrchestrationVersion = "2.0.0"
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: meta})
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "instance row", next.Instance, &provider.InstanceMeta{
			OrchestrationName: testOrch, OrchestrationVersion: "2.0.0", Status: provider.StatusRunning, CurrentExecutionID: 1,
		})
		mustEqual(e.t, "history", eventIDs(next.History), []int64{1})
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "a")
			e.noErr(err, "GetInstance(a)")
			mustEqual(e.t, "instance", []any{info.OrchestrationName, info.OrchestrationVersion, info.Status, info.CurrentExecutionID},
				[]any{testOrch, "2.0.0", provider.StatusRunning, 1})
		}
	}},
	{name: "AckCreatesSubOrchestrationWithParentLink", run: func(e *env) {
		e.createInstance("p")
		child := "p::sub::2"
		e.enqueue(startMsgNoCreate(child))
		it := e.fetchFor(child)
		meta := runningMeta()
		meta.ParentInstanceID, meta.ParentExecutionID = "p", 1
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: meta})
		e.enqueue(eventMsg(child, "next", 1))
		next := e.fetchFor(child)
		if next.Instance == nil || next.Instance.ParentInstanceID != "p" || next.Instance.ParentExecutionID != 1 {
			e.t.Fatalf("child instance row = %+v, want parent p execution 1", next.Instance)
		}
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, child)
			e.noErr(err, "GetInstance(child)")
			mustEqual(e.t, "parent link", []any{info.ParentInstanceID, info.ParentExecutionID}, []any{"p", 1})
			kids, err := a.ListChildren(e.ctx, "p")
			e.noErr(err, "ListChildren(p)")
			mustEqual(e.t, "children of p", kids, []string{child})
		}
	}},
	{name: "EnqueueCreateRecordsParentLink", run: func(e *env) {
		e.createInstance("p")
		e.enqueue(childStartMsg("p", 1, 2, "p::c"))
		it := e.fetchFor("p::c")
		mustEqual(e.t, "child row", it.Instance, &provider.InstanceMeta{
			OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusPending,
			ParentInstanceID: "p", ParentExecutionID: 1,
		})
		mustEqual(e.t, "parent ref of the start", it.Messages[0].Parent, &history.ParentRef{InstanceID: "p", ExecutionID: 1, EventID: 2})
	}},
	{name: "EmptyVersionStartWorks", run: func(e *env) {
		m := startMsg("a")
		m.Item.Version, m.Create.OrchestrationVersion = "", ""
		e.enqueue(m)
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "a")
			e.noErr(err, "GetInstance(a)")
			mustEqual(e.t, "version before the first turn", info.OrchestrationVersion, "")
		}
		it := e.fetchFor("a")
		mustEqual(e.t, "fetched version", []string{it.Instance.OrchestrationVersion, it.Messages[0].Version}, []string{"", ""})
		e.ackStart(it) // metadata names version testVersion
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "version after the first turn", next.Instance.OrchestrationVersion, testVersion)
	}},
	{name: "AckUpdatesNameAndVersionFromMetadata", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "upgrade", 1))
		it := e.fetchFor("a")
		meta := runningMeta()
		meta.OrchestrationName, meta.OrchestrationVersion = "Renamed", "3.1.0"
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.externalEvent(2, "upgrade")}, Metadata: meta})
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "name and version", []string{next.Instance.OrchestrationName, next.Instance.OrchestrationVersion}, []string{"Renamed", "3.1.0"})
	}},
	{name: "AckWithEmptyMetadataLeavesInstanceUnchanged", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.externalEvent(2, "go")}})
		e.enqueue(eventMsg("a", "next", 1))
		next := e.fetchFor("a")
		mustEqual(e.t, "instance row", next.Instance, &provider.InstanceMeta{
			OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusRunning, CurrentExecutionID: 1,
		})
	}},
	{name: "DelayedStartIsPendingButNotFetchable", run: func(e *env) {
		m := startMsg("a")
		m.VisibleAt = e.clock.Now().Add(time.Hour)
		e.enqueue(m)
		mustEqual(e.t, "history", len(e.readHistory("a", 0)), 0) // the row exists at once
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "a")
			e.noErr(err, "GetInstance(a)")
			mustEqual(e.t, "status", info.Status, provider.StatusPending)
		}
		e.clock.Advance(time.Hour - time.Millisecond)
		e.fetchNone()
		e.clock.Advance(time.Millisecond)
		e.fetchFor("a")
	}},
	{name: "CreateOnTakenIDFailsAndWritesNothing", run: func(e *env) {
		e.createInstance("a")
		before := e.snapshot("a", "b")
		_, err := e.p.Enqueue(e.ctx, eventMsg("b", "ok", 1), startMsg("a"))
		e.wantErr(err, provider.ErrInstanceExists, "Enqueue creating a taken ID")
		e.wantPermanent(err, "ErrInstanceExists")
		e.unchanged(before)
		e.fetchNone() // neither message was enqueued
	}},
	{name: "CreateOnPendingIDFails", run: func(e *env) {
		e.enqueue(startMsg("a"))
		second := startMsg("a")
		second.Create.Input = js("second")
		e.wantErr(errOf(e.p.Enqueue(e.ctx, second)), provider.ErrInstanceExists, "second create of a pending instance")
		it := e.fetchFor("a")
		mustEqual(e.t, "messages", len(it.Messages), 1)
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "a")
			e.noErr(err, "GetInstance(a)")
			mustEqual(e.t, "input of the first create", info.Input, js("input-a"))
		}
	}},
	{name: "CreateSameIDTwiceInOneCallFails", run: func(e *env) {
		e.wantErr(errOf(e.p.Enqueue(e.ctx, startMsg("a"), startMsg("a"))), provider.ErrInstanceExists, "one Enqueue creating a twice")
		e.fetchNone()
		_, err := e.p.ReadHistory(e.ctx, "a", 0)
		e.wantErr(err, provider.ErrNotFound, "ReadHistory(a)")
	}},
	{name: "CreateWithOnExistsEnqueuesOnExistsInstead", run: func(e *env) {
		e.createInstance("p")
		e.createInstance("c")
		before := e.snapshot("c")
		m := childStartMsg("p", 1, 2, "c")
		m.Create.OnExists = subOrchFailedMsg("p", 1, 2, "c")
		e.noErr(errOf(e.p.Enqueue(e.ctx, m)), "Enqueue with OnExists on a taken ID")
		mustEqual(e.t, "state of c", e.snapshot("c").Instances["c"], before.Instances["c"])
		it := e.fetchFor("p")
		mustEqual(e.t, "parent messages", kinds(it.Messages), []history.WorkItemKind{history.WorkSubOrchFailed})
		mustEqual(e.t, "failed child", it.Messages[0].ChildInstanceID, "c")
		e.fetchNone() // nothing was queued for c
	}},
	{name: "CreateWithOnExistsCreatesWhenIDIsFree", run: func(e *env) {
		e.createInstance("p")
		m := childStartMsg("p", 1, 2, "c")
		m.Create.OnExists = subOrchFailedMsg("p", 1, 2, "c")
		e.enqueue(m)
		it := e.fetchFor("c")
		mustEqual(e.t, "child messages", kinds(it.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		if it.Instance == nil || it.Instance.Status != provider.StatusPending {
			e.t.Fatalf("child row = %+v, want Pending", it.Instance)
		}
		e.fetchNone() // the OnExists message was not sent to p
	}},
	{name: "AckCreatesChildPendingBeforeItsFirstFetch", run: func(e *env) {
		e.createInstance("p")
		e.enqueue(eventMsg("p", "spawn", 1))
		it := e.fetchFor("p")
		ack := turnAck(it, 1, e.subOrchScheduledEvent(2, "p::c"))
		ack.OrchestratorItems = []*provider.OrchestratorMessage{childStartMsg("p", 1, 2, "p::c")}
		e.ack(ack)
		mustEqual(e.t, "child history", len(e.readHistory("p::c", 0)), 0)
		{
			a := e.admin()
			info, err := a.GetInstance(e.ctx, "p::c")
			e.noErr(err, "GetInstance(p::c)")
			mustEqual(e.t, "child", []any{info.Status, info.ParentInstanceID, info.ParentExecutionID, info.OrchestrationName},
				[]any{provider.StatusPending, "p", 1, testOrch})
		}
	}},
	{name: "AckChildCollisionBecomesMessageToParent", run: func(e *env) {
		e.createInstance("p")
		e.createInstance("c")
		before := e.snapshot("c")
		e.enqueue(eventMsg("p", "spawn", 1))
		it := e.fetchFor("p")
		start := childStartMsg("p", 1, 2, "c")
		start.Create.OnExists = subOrchFailedMsg("p", 1, 2, "c")
		ack := turnAck(it, 1, e.subOrchScheduledEvent(2, "c"))
		ack.OrchestratorItems = []*provider.OrchestratorMessage{start}
		e.ack(ack)
		mustEqual(e.t, "parent history", eventIDs(e.readHistory("p", 0)), []int64{1, 2})
		mustEqual(e.t, "state of c", e.snapshot("c").Instances["c"], before.Instances["c"])
		next := e.fetchFor("p")
		mustEqual(e.t, "parent messages", kinds(next.Messages), []history.WorkItemKind{history.WorkSubOrchFailed})
		e.fetchNone() // nothing reached c
	}},
	{name: "AckCreateCollisionWithoutOnExistsFailsAck", run: func(e *env) {
		e.createInstance("p")
		e.createInstance("c")
		e.enqueue(eventMsg("p", "spawn", 1))
		it := e.fetchFor("p")
		before := e.snapshot("p", "c", "d")
		ack := turnAck(it, 1, e.subOrchScheduledEvent(2, "d"), e.subOrchScheduledEvent(3, "c"))
		ack.WorkerItems = []*provider.WorkerMessage{activityMsg("p", 4, "")}
		ack.OrchestratorItems = []*provider.OrchestratorMessage{childStartMsg("p", 1, 2, "d"), childStartMsg("p", 1, 3, "c")}
		err := e.ackErr(ack)
		e.wantErr(err, provider.ErrInstanceExists, "ack creating a taken child ID")
		e.unchanged(before)
		e.fetchWorkNone(workOpts())
		e.fetchNone() // p still locked, d not created, nothing for c
		e.ack(turnAck(it, 1, e.subOrchScheduledEvent(2, "d")))
		mustEqual(e.t, "parent history", eventIDs(e.readHistory("p", 0)), []int64{1, 2})
	}},
}
