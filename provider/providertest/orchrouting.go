package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// orchOpts are fetch options limited to the orchestration names given
// (provider.FetchOptions.Orchestrations).
func orchOpts(names ...string) provider.FetchOptions {
	o := fetchOpts()
	o.Orchestrations = append([]string{}, names...)
	return o
}

// fetchWith fetches one orchestration item with opts; nil when none.
func (e *env) fetchWith(opts provider.FetchOptions) *provider.OrchestrationItem {
	e.t.Helper()
	it, err := provider.FetchOrchestrationItem(e.ctx, e.p, opts)
	e.noErr(err, "FetchOrchestrationItem")
	return it
}

// fetchForWith fetches one item with opts and fails unless it is for
// instanceID, delivered attempt times.
func (e *env) fetchForWith(opts provider.FetchOptions, instanceID string, attempt int) *provider.OrchestrationItem {
	e.t.Helper()
	it := e.fetchWith(opts)
	if it == nil {
		e.t.Fatalf("fetch for %q returned nothing, want %s", opts.Orchestrations, instanceID)
	}
	mustEqual(e.t, "fetched for "+instanceID, []any{it.InstanceID, it.AttemptCount}, []any{instanceID, attempt})
	return it
}

// fetchNoneWith asserts that a fetch with opts returns nothing.
func (e *env) fetchNoneWith(opts provider.FetchOptions) {
	e.t.Helper()
	if it := e.fetchWith(opts); it != nil {
		e.t.Fatalf("fetch for %q returned %s, want nothing", opts.Orchestrations, it.InstanceID)
	}
}

// namedMeta is runningMeta for orchestration name.
func namedMeta(name string) provider.ExecutionMetadata {
	m := runningMeta()
	m.OrchestrationName = name
	return m
}

// orchRoutingCases cover the turn fetch's filter by orchestration name
// (provider.FetchOptions.Orchestrations): a runtime takes only the
// instances it can run, and the others are neither locked nor counted.
var orchRoutingCases = []testCase{
	{name: "fetch_takes_only_the_named_orchestrations", run: func(e *env) {
		e.enqueue(startNamedMsg("a", "A"), startNamedMsg("b", "B"))
		b := e.fetchForWith(orchOpts("B", "C"), "b", 1)
		e.fetchNoneWith(orchOpts("B", "C"))
		e.fetchNoneWith(orchOpts())   // an empty list serves no name
		e.fetchNoneWith(orchOpts("")) // nor does the empty name
		items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: 5, Orchestrations: []string{"C"}})
		e.noErr(err, "FetchOrchestrationItems for C")
		mustEqual(e.t, "items for C", len(items), 0)
		// nil: any name; a's start was never delivered before.
		a := e.fetchForWith(fetchOpts(), "a", 1)
		mustEqual(e.t, "a's message", kinds(a.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.ack(&provider.TurnAck{LockToken: b.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: namedMeta("B")})

		// A later message of a running instance is routed by its name.
		e.enqueue(eventMsg("b", "go", 1))
		e.fetchNoneWith(orchOpts("A"))
		e.fetchForWith(orchOpts("A", "B"), "b", 1)
	}},

	{name: "messages_for_unknown_instances_are_fetched_by_every_runtime", run: func(e *env) {
		e.enqueue(eventMsg("nobody", "late", 1), startMsgNoCreate("rowless"))
		got := map[string]bool{}
		for range 2 {
			it := e.fetchWith(orchOpts("Other"))
			if it == nil {
				e.t.Fatalf("fetched %v, want both instances without a row", got)
			}
			if it.Instance != nil || it.AttemptCount != 1 {
				e.t.Fatalf("%s: Instance %+v attempt %d, want no row, 1", it.InstanceID, it.Instance, it.AttemptCount)
			}
			got[it.InstanceID] = true
		}
		mustEqual(e.t, "instances", got, map[string]bool{"nobody": true, "rowless": true})
	}},

	{name: "messages_sent_before_the_start_are_routed_by_the_started_name", run: func(e *env) {
		e.enqueue(eventMsg("early", "go", 1)) // no instance yet: any runtime would take it
		e.enqueue(startNamedMsg("early", "E"))
		e.fetchNoneWith(orchOpts("Other"))
		it := e.fetchForWith(orchOpts("E"), "early", 1)
		mustEqual(e.t, "messages", len(it.Messages), 2)
	}},

	{name: "sub_orchestrations_and_continue_as_new_are_routed_by_name", run: func(e *env) {
		e.enqueue(startNamedMsg("p", "Parent"))
		it := e.fetchForWith(orchOpts("Parent"), "p", 1)
		child := childStartMsg("p", 1, 2, "c")
		child.Item.Name, child.Create.OrchestrationName = "Child", "Child"
		next := continueAsNewMsg("p", 2, "again")
		next.Item.Name = "Parent"
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{e.startedEvent("in"), e.subOrchScheduledEvent(2, "c"),
				{EventID: 3, Kind: history.OrchestrationContinuedAsNew, TimestampMs: ms(e.clock.Now()), Input: js("again")}},
			Metadata:          provider.ExecutionMetadata{OrchestrationName: "Parent", OrchestrationVersion: testVersion, Status: provider.StatusContinuedAsNew, Input: js("in")},
			OrchestratorItems: []*provider.OrchestratorMessage{child, next}})

		c := e.fetchForWith(orchOpts("Child"), "c", 1)
		mustEqual(e.t, "child's message", kinds(c.Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.fetchNoneWith(orchOpts("Child")) // p's ContinueAsNew is not Child's
		p := e.fetchForWith(orchOpts("Parent"), "p", 1)
		mustEqual(e.t, "parent's message", kinds(p.Messages), []history.WorkItemKind{history.WorkContinueAsNew})
	}},

	{name: "take_turn_leaves_other_orchestrations_to_a_fetch", run: func(e *env) {
		e.createInstance("a") // orchestration testOrch
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		res := e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout, Orchestrations: []string{"Other"}}})
		if res.Turn != nil {
			e.t.Fatalf("the ack took the turn of %s for a runtime that does not run %s", res.Turn.InstanceID, testOrch)
		}
		e.fetchNoneWith(orchOpts("Other"))
		it := e.fetchForWith(orchOpts(testOrch), "a", 1)
		mustEqual(e.t, "messages", kinds(it.Messages), []history.WorkItemKind{history.WorkActivityCompleted})
		e.ack(turnAck(it, 1, e.completedEvent(2, "ok")))

		// A runtime that runs it takes it.
		e.enqueueWork(activityMsg("a", 3, ""))
		l = e.fetchWork()
		res = e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 3, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout, Orchestrations: []string{testOrch}}})
		if res.Turn == nil || res.Turn.AttemptCount != 1 {
			e.t.Fatalf("taken turn %+v, want a's turn, delivered once", res.Turn)
		}
	}},
}

// versionOpts are fetch options for orchestration name in the versions
// given (provider.FetchOptions.OrchestrationVersions).
func versionOpts(name string, versions ...string) provider.FetchOptions {
	o := orchOpts(name)
	o.OrchestrationVersions = map[string][]string{name: versions}
	return o
}

// startVersionMsg starts instanceID as orchestration name pinned to
// version ("": not pinned; its first turn picks one).
func startVersionMsg(instanceID, name, version string) *provider.OrchestratorMessage {
	m := startNamedMsg(instanceID, name)
	m.Item.Version, m.Create.OrchestrationVersion = version, version
	return m
}

// orchVersionRoutingCases cover the turn fetch's filter by orchestration
// version (provider.FetchOptions.OrchestrationVersions): an instance
// pinned to a version goes only to a runtime that registers it, one not
// pinned yet to any runtime that registers its name.
var orchVersionRoutingCases = []testCase{
	{name: "fetch_takes_pinned_instances_only_in_the_registered_versions", run: func(e *env) {
		e.enqueue(startVersionMsg("v2", "V", "2.0.0"), startVersionMsg("v1", "V", "1.0.0"), startVersionMsg("any", "V", ""))
		v1only, v1v2 := versionOpts("V", "1.0.0"), versionOpts("V", "1.0.0", "2.0.0")
		got := []string{}
		var first *provider.OrchestrationItem
		for {
			it := e.fetchWith(v1only)
			if it == nil {
				break
			}
			if it.AttemptCount != 1 {
				e.t.Fatalf("%s delivered %d times", it.InstanceID, it.AttemptCount)
			}
			if it.InstanceID == "any" {
				first = it
			}
			got = append(got, it.InstanceID)
		}
		mustEqual(e.t, "fetched by a runtime of 1.0.0 only", got, []string{"v1", "any"})
		items, err := e.p.FetchOrchestrationItems(e.ctx, provider.FetchOptions{LockTimeout: lockTimeout, Max: 5,
			Orchestrations: []string{"V"}, OrchestrationVersions: map[string][]string{"V": {"1.0.0", "3.0.0"}, "W": {"2.0.0"}}})
		e.noErr(err, "FetchOrchestrationItems")
		mustEqual(e.t, "items for 1.0.0 and 3.0.0", len(items), 0)
		e.fetchForWith(v1v2, "v2", 1)
		e.fetchNoneWith(v1v2)

		// The first turn of the unpinned instance pins it (here to 2.0.0,
		// the version the runtime that ran it starts): from then on only a
		// runtime of 2.0.0 takes it, the message that arrived during the
		// turn included.
		e.enqueue(eventMsg("any", "early", 1))
		md := namedMeta("V")
		md.OrchestrationVersion = "2.0.0"
		e.ack(&provider.TurnAck{LockToken: first.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: md})
		e.fetchNoneWith(v1only)
		e.fetchNoneWith(versionOpts("V")) // the name with no version: only unpinned instances
		early := e.fetchForWith(versionOpts("V", "2.0.0"), "any", 1)
		e.ack(&provider.TurnAck{LockToken: early.LockToken, ExecutionID: 1, Metadata: md})
		e.enqueue(eventMsg("any", "go", 1))
		e.fetchNoneWith(v1only)
		e.fetchNoneWith(versionOpts("V")) // the name with no version: only unpinned instances
		e.fetchForWith(versionOpts("V", "2.0.0"), "any", 1)
	}},

	{name: "a_name_without_versions_is_fetched_in_every_version", run: func(e *env) {
		e.enqueue(startVersionMsg("w", "W", "7.0.0"), startVersionMsg("v", "V", "2.0.0"))
		opts := orchOpts("V", "W")
		opts.OrchestrationVersions = map[string][]string{"V": {"1.0.0"}} // W: any version
		e.fetchForWith(opts, "w", 1)
		e.fetchNoneWith(opts)
		e.fetchForWith(orchOpts("V"), "v", 1) // no versions at all: every version
	}},

	{name: "take_turn_leaves_other_versions_to_a_fetch", run: func(e *env) {
		e.createInstance("a") // orchestration testOrch, version testVersion
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		res := e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok"),
			TakeTurn: &provider.FetchOptions{LockTimeout: lockTimeout, Orchestrations: []string{testOrch},
				OrchestrationVersions: map[string][]string{testOrch: {"9.0.0"}}}})
		if res.Turn != nil {
			e.t.Fatalf("the ack took the turn of %s for a runtime that does not run %s %s", res.Turn.InstanceID, testOrch, testVersion)
		}
		e.fetchForWith(versionOpts(testOrch, testVersion), "a", 1)
	}},
}

// orchRouteCases cover the orchestration names in route announcements:
// an instance whose orchestration no live runtime registers is reported
// (InstanceQueueState.OrchestrationUnserved) and can be fetched, without
// counting a delivery, to be failed.
var orchRouteCases = []testCase{
	{name: "routes_mark_unserved_orchestrations_and_fetch_them_for_failing", run: func(e *env) {
		r := e.router()
		e.enqueue(startNamedMsg("ghost", "Ghost"), eventMsg("nobody", "late", 1))
		unserved := func() bool {
			e.t.Helper()
			q, err := e.admin().InstanceQueue(e.ctx, "ghost")
			e.noErr(err, "InstanceQueue")
			return q.OrchestrationUnserved
		}
		if unserved() {
			e.t.Fatal("an instance is unserved while no runtime announced anything")
		}
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w1", Activities: []string{"Act"}, Orchestrations: []string{"Other"}}, time.Hour), "AnnounceRoutes")
		if !unserved() {
			e.t.Fatal("Ghost is served although no live runtime registers it")
		}
		mustEqual(e.t, "unserved depth", e.depths().OrchestratorUnserved, int64(1))
		// A runtime that announces no orchestration list serves them all.
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w0", Activities: []string{"Act"}}, time.Hour), "AnnounceRoutes")
		if unserved() {
			e.t.Fatal("Ghost is unserved although w0 announced no orchestration list")
		}
		e.noErr(r.WithdrawRoutes(e.ctx, "w0"), "WithdrawRoutes")

		got, err := r.FetchUnservedOrchestrationItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedOrchestrationItems")
		mustEqual(e.t, "unserved instances ready for less than a minute", len(got), 0)
		e.clock.Advance(2 * time.Minute)
		got, err = r.FetchUnservedOrchestrationItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedOrchestrationItems")
		if len(got) != 1 || got[0].InstanceID != "ghost" || got[0].AttemptCount != 0 || got[0].Instance == nil ||
			got[0].Instance.OrchestrationName != "Ghost" {
			e.t.Fatalf("unserved instances %+v, want ghost (Ghost) with no delivery counted", got)
		}
		mustEqual(e.t, "its messages", kinds(got[0].Messages), []history.WorkItemKind{history.WorkStartOrchestration})
		e.fetchForWith(orchOpts("Ghost"), "nobody", 1) // no row: never unserved, fetched by any runtime
		e.fetchNoneWith(orchOpts("Ghost"))             // ghost is locked by the unserved fetch
		q, err := e.admin().InstanceQueue(e.ctx, "ghost")
		e.noErr(err, "InstanceQueue")
		mustEqual(e.t, "deliveries counted", q.Messages[0].Attempts, 0)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, got[0].LockToken, provider.AbandonOptions{}), "abandon")

		// Served once a runtime announces Ghost.
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "w2", Orchestrations: []string{"Ghost"}}, time.Hour), "AnnounceRoutes")
		if unserved() {
			e.t.Fatal("Ghost is unserved although w2 registers it")
		}
		got, err = r.FetchUnservedOrchestrationItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedOrchestrationItems")
		mustEqual(e.t, "unserved instances once w2 registers Ghost", len(got), 0)
		e.fetchForWith(orchOpts("Ghost"), "ghost", 1)
	}},

	{name: "routes_mark_instances_of_unregistered_versions_unserved", run: func(e *env) {
		r := e.router()
		e.enqueue(startVersionMsg("v2", "V", "2.0.0"), startVersionMsg("v1", "V", "1.0.0"), startVersionMsg("any", "V", ""))
		unserved := func(id string) bool {
			e.t.Helper()
			q, err := e.admin().InstanceQueue(e.ctx, id)
			e.noErr(err, "InstanceQueue")
			return q.OrchestrationUnserved
		}
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "old", Orchestrations: []string{"V"},
			OrchestrationVersions: map[string][]string{"V": {"1.0.0"}}}, time.Hour), "AnnounceRoutes")
		mustEqual(e.t, "unserved v2, v1, any", []bool{unserved("v2"), unserved("v1"), unserved("any")}, []bool{true, false, false})
		mustEqual(e.t, "unserved depth", e.depths().OrchestratorUnserved, int64(1))

		e.clock.Advance(2 * time.Minute)
		got, err := r.FetchUnservedOrchestrationItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedOrchestrationItems")
		if len(got) != 1 || got[0].InstanceID != "v2" || got[0].AttemptCount != 0 || got[0].Instance.OrchestrationVersion != "2.0.0" {
			e.t.Fatalf("unserved instances %+v, want v2 (V 2.0.0) with no delivery counted", got)
		}
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, got[0].LockToken, provider.AbandonOptions{}), "abandon")

		// A runtime that announces V with no versions serves every version.
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "any", Orchestrations: []string{"V"}}, time.Hour), "AnnounceRoutes")
		mustEqual(e.t, "unserved v2 with a runtime of every version", unserved("v2"), false)
		e.noErr(r.WithdrawRoutes(e.ctx, "any"), "WithdrawRoutes")
		mustEqual(e.t, "unserved v2 once it left", unserved("v2"), true)

		// Served once a runtime announces 2.0.0.
		e.noErr(r.AnnounceRoutes(e.ctx, provider.WorkerRoutes{WorkerID: "new", Orchestrations: []string{"V"},
			OrchestrationVersions: map[string][]string{"V": {"1.0.0", "2.0.0"}}}, time.Hour), "AnnounceRoutes")
		mustEqual(e.t, "unserved v2 with a runtime of 2.0.0", unserved("v2"), false)
		got, err = r.FetchUnservedOrchestrationItems(e.ctx, time.Minute, lockTimeout, 10)
		e.noErr(err, "FetchUnservedOrchestrationItems")
		mustEqual(e.t, "unserved instances once 2.0.0 is registered", len(got), 0)
	}},
}
