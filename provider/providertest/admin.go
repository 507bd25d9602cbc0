package providertest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// adminCases cover the Admin capability: listing with filters and keyset
// pagination, instance and execution details, children, queue depths,
// totals and custom status.
var adminCases = []testCase{
	{name: "list_instances_newest_first", run: func(e *env) {
		e.admin()
		for _, id := range []string{"a", "b", "c"} {
			e.enqueue(startMsg(id))
			e.clock.Advance(time.Second)
		}
		mustEqual(e.t, "instances", e.listAll(provider.ListInstancesOptions{}), []string{"c", "b", "a"})
	}},

	{name: "list_instances_empty_store", run: func(e *env) {
		page, err := e.admin().ListInstances(e.ctx, provider.ListInstancesOptions{})
		e.noErr(err, "ListInstances")
		mustEqual(e.t, "page", []any{len(page.Instances), page.NextCursor}, []any{0, ""})
	}},

	{name: "list_instances_filters_by_statuses", run: func(e *env) {
		e.admin()
		e.createInstance("run")
		e.createFinished("done", provider.StatusCompleted)
		e.createFinished("fail", provider.StatusFailed)
		e.enqueue(startMsg("pend"))
		list := func(st ...provider.Status) []string {
			return sorted(e.listAll(provider.ListInstancesOptions{Statuses: st}))
		}
		mustEqual(e.t, "Completed|Failed", list(provider.StatusCompleted, provider.StatusFailed), []string{"done", "fail"})
		mustEqual(e.t, "Pending", list(provider.StatusPending), []string{"pend"})
		mustEqual(e.t, "Running", list(provider.StatusRunning), []string{"run"})
		mustEqual(e.t, "Canceled", list(provider.StatusCanceled), []string{})
	}},

	{name: "list_instances_filters_by_orchestration", run: func(e *env) {
		e.admin()
		e.enqueue(startNamedMsg("o1", "Other"), startMsg("t1"), startNamedMsg("o2", "Other"))
		mustEqual(e.t, "Other", sorted(e.listAll(provider.ListInstancesOptions{Orchestration: "Other"})), []string{"o1", "o2"})
		mustEqual(e.t, testOrch, e.listAll(provider.ListInstancesOptions{Orchestration: testOrch}), []string{"t1"})
	}},

	{name: "list_instances_filters_by_id_prefix", run: func(e *env) {
		e.admin()
		for _, id := range []string{"order-1", "order-2", "order", "orders-1", "ordeR-3", "x-order-4", "order-%", "order-_x", "order-\u00e9"} {
			e.enqueue(startMsg(id))
			e.clock.Advance(time.Millisecond)
		}
		list := func(o provider.ListInstancesOptions) []string { return append([]string{}, e.listAll(o)...) }
		mustEqual(e.t, "order-", list(provider.ListInstancesOptions{IDPrefix: "order-"}),
			[]string{"order-\u00e9", "order-_x", "order-%", "order-2", "order-1"})
		mustEqual(e.t, "order-% (no wildcards)", list(provider.ListInstancesOptions{IDPrefix: "order-%"}), []string{"order-%"})
		mustEqual(e.t, "order-_ (no wildcards)", list(provider.ListInstancesOptions{IDPrefix: "order-_"}), []string{"order-_x"})
		mustEqual(e.t, "whole ID", list(provider.ListInstancesOptions{IDPrefix: "orders-1"}), []string{"orders-1"})
		mustEqual(e.t, "no match", list(provider.ListInstancesOptions{IDPrefix: "zzz"}), []string{})
		mustEqual(e.t, "multi-byte prefix", list(provider.ListInstancesOptions{IDPrefix: "order-\u00e9"}), []string{"order-\u00e9"})
		mustEqual(e.t, "pages of 2", list(provider.ListInstancesOptions{IDPrefix: "order-", Limit: 2}),
			[]string{"order-\u00e9", "order-_x", "order-%", "order-2", "order-1"})
		mustEqual(e.t, "with orchestration", list(provider.ListInstancesOptions{IDPrefix: "order-", Orchestration: "Other"}), []string{})
	}},

	{name: "list_instances_several_states_page_newest_first", run: func(e *env) {
		e.admin()
		var want []string
		for i := range 7 {
			id := fmt.Sprintf("i%d", i)
			switch i % 3 {
			case 0:
				e.createFinished(id, provider.StatusCompleted)
				want = append(want, id)
			case 1:
				e.createFinished(id, provider.StatusFailed)
				want = append(want, id)
			default:
				e.createFinished(id, provider.StatusCanceled)
			}
			e.clock.Advance(time.Millisecond)
		}
		slices.Reverse(want)
		got := e.listAll(provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed, provider.StatusCompleted}, Limit: 2})
		mustEqual(e.t, "Completed|Failed in pages of 2", got, want)
		got = e.listAll(provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed, provider.StatusFailed}, Limit: 1})
		mustEqual(e.t, "Failed twice in pages of 1", got, []string{"i4", "i1"})
	}},

	{name: "list_instances_several_states_is_the_filtered_listing", run: func(e *env) {
		// Several states, with any other filter and page size, list
		// exactly the instances of the unfiltered listing (newest first)
		// that are in one of the states, each once: the same on every
		// store, however it reads them.
		a := e.admin()
		states := []provider.Status{provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled, provider.StatusRunning, provider.StatusPending}
		for i := range 15 {
			id, name := fmt.Sprintf("s%02d", i), testOrch
			if i%4 == 3 {
				id, name = fmt.Sprintf("o%02d", i), "Other"
			}
			m := startNamedMsg(id, name)
			st := states[(i*7)%len(states)]
			if st == provider.StatusPending {
				m.VisibleAt = e.clock.Now().Add(time.Hour) // stays pending
			}
			e.enqueue(m)
			switch st {
			case provider.StatusPending:
			case provider.StatusRunning:
				e.ackStart(e.fetchFor(id))
			default:
				e.ackStart(e.fetchFor(id))
				e.finish(id, st)
			}
			e.clock.Advance(time.Millisecond)
		}
		all, err := a.ListInstances(e.ctx, provider.ListInstancesOptions{Limit: 100})
		e.noErr(err, "ListInstances")
		filtered := func(o provider.ListInstancesOptions) []string {
			ids := []string{}
			for _, in := range all.Instances {
				if slices.Contains(o.Statuses, in.Status) && (o.Orchestration == "" || in.OrchestrationName == o.Orchestration) &&
					(o.IDPrefix == "" || in.InstanceID[:1] == o.IDPrefix) {
					ids = append(ids, in.InstanceID)
				}
			}
			return ids
		}
		for _, st := range [][]provider.Status{
			{provider.StatusFailed, provider.StatusCompleted},
			{provider.StatusRunning, provider.StatusPending, provider.StatusRunning},
			{provider.StatusCanceled, provider.StatusCompleted, provider.StatusFailed, provider.StatusContinuedAsNew},
			{provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled, provider.StatusRunning, provider.StatusPending},
		} {
			for _, o := range []provider.ListInstancesOptions{{}, {Orchestration: "Other"}, {IDPrefix: "s"}} {
				o.Statuses = st
				want := filtered(o)
				for _, limit := range []int{1, 2, 3, 100} {
					o.Limit = limit
					got := append([]string{}, e.listAll(o)...)
					mustEqual(e.t, fmt.Sprintf("states %v, orchestration %q, prefix %q, pages of %d", st, o.Orchestration, o.IDPrefix, limit), got, want)
				}
			}
		}
	}},

	{name: "list_instances_filters_by_parent_direct_children_only", run: func(e *env) {
		e.admin()
		e.enqueue(startMsg("root"), childStartMsg("root", 1, 2, "c1"), childStartMsg("root", 1, 2, "c2"), childStartMsg("c1", 1, 2, "g1"))
		mustEqual(e.t, "children of root", sorted(e.listAll(provider.ListInstancesOptions{ParentInstanceID: "root"})), []string{"c1", "c2"})
		mustEqual(e.t, "children of c1", e.listAll(provider.ListInstancesOptions{ParentInstanceID: "c1"}), []string{"g1"})
	}},

	{name: "list_instances_pages_walk_all_once_while_instances_are_added", run: func(e *env) {
		a := e.admin()
		want := map[string]bool{}
		for i := range 25 {
			id := string(rune('A'+i%26)) + "-orig"
			want[id] = true
			e.enqueue(startMsg(id))
			e.clock.Advance(time.Millisecond)
		}
		seen := map[string]int{}
		opts := provider.ListInstancesOptions{Limit: 10}
		var last time.Time
		for pages := 0; ; pages++ {
			if pages > 10 {
				e.t.Fatal("pagination does not end")
			}
			page, err := a.ListInstances(e.ctx, opts)
			e.noErr(err, "ListInstances")
			if len(page.Instances) > 10 {
				e.t.Fatalf("page has %d instances, limit 10", len(page.Instances))
			}
			for _, in := range page.Instances {
				seen[in.InstanceID]++
				if !last.IsZero() && in.CreatedAt.After(last) {
					e.t.Fatalf("%s created %v listed after an instance created %v: not newest first", in.InstanceID, in.CreatedAt, last)
				}
				last = in.CreatedAt
			}
			if page.NextCursor == "" {
				break
			}
			if pages == 0 { // new instances between pages must not disturb the walk
				for _, id := range []string{"new-1", "new-2", "new-3"} {
					e.enqueue(startMsg(id))
					e.clock.Advance(time.Millisecond)
				}
			}
			opts.Cursor = page.NextCursor
		}
		for id, n := range seen {
			if n != 1 {
				e.t.Fatalf("%s listed %d times", id, n)
			}
		}
		for id := range want {
			if seen[id] != 1 {
				e.t.Fatalf("%s never listed", id)
			}
		}
	}},

	{name: "list_instances_pages_with_equal_created_at_walk_all_once", run: func(e *env) {
		e.admin()
		var want []string
		for i := range 12 {
			id := "tie-" + string(rune('a'+i))
			want = append(want, id)
			e.enqueue(startMsg(id))
		}
		got := e.listAll(provider.ListInstancesOptions{Limit: 5})
		mustEqual(e.t, "instances", sorted(got), want)
	}},

	{name: "list_instances_malformed_cursor_invalid_argument", run: func(e *env) {
		e.enqueue(startMsg("x"))
		_, err := e.admin().ListInstances(e.ctx, provider.ListInstancesOptions{Cursor: "%%% not a cursor %%%"})
		e.wantErr(err, provider.ErrInvalidArgument, "ListInstances with malformed cursor")
	}},

	{name: "list_instances_negative_limit_invalid_argument", run: func(e *env) {
		_, err := e.admin().ListInstances(e.ctx, provider.ListInstancesOptions{Limit: -1})
		e.wantErr(err, provider.ErrInvalidArgument, "ListInstances with limit -1")
	}},

	{name: "get_instance_completed_fields", run: func(e *env) {
		e.admin()
		t0 := e.clock.Now()
		e.enqueue(startMsg("gi"))
		e.clock.Advance(time.Second)
		it := e.fetchFor("gi")
		meta := runningMeta()
		meta.Input = js("input-gi")
		meta.CustomStatus = &provider.CustomStatusUpdate{Value: js("half")}
		e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")}, Metadata: meta})
		e.clock.Advance(2 * time.Second)
		e.finish("gi", provider.StatusCompleted)
		info := e.instance("gi")
		mustEqual(e.t, "info", []any{
			info.InstanceID, info.OrchestrationName, info.OrchestrationVersion, info.Status, info.CurrentExecutionID,
			info.Input, info.Output, info.Error, info.CustomStatus, info.CustomStatusVersion, info.ParentInstanceID, info.ParentExecutionID,
		}, []any{
			"gi", testOrch, testVersion, provider.StatusCompleted, 1,
			js("input-gi"), js("out-gi"), nil, js("half"), 1, "", 0,
		})
		e.sameTime("CreatedAt", info.CreatedAt, t0)
		e.sameTime("UpdatedAt", info.UpdatedAt, t0.Add(3*time.Second))
	}},

	{name: "get_instance_failed_has_error", run: func(e *env) {
		e.admin()
		e.createFinished("gf", provider.StatusFailed)
		info := e.instance("gf")
		mustEqual(e.t, "status", info.Status, provider.StatusFailed)
		mustEqual(e.t, "error", info.Error, errDetails(history.ErrorApplication, "boom"))
		if len(info.Output) != 0 {
			e.t.Fatalf("Output = %s, want none", info.Output)
		}
	}},

	{name: "get_instance_pending_before_first_turn", run: func(e *env) {
		e.admin()
		e.enqueue(startMsg("gp"))
		info := e.instance("gp")
		mustEqual(e.t, "info", []any{info.Status, info.CurrentExecutionID, info.OrchestrationName, info.Input},
			[]any{provider.StatusPending, 0, testOrch, js("input-gp")})
		e.sameTime("CreatedAt", info.CreatedAt, e.clock.Now())
	}},

	{name: "get_instance_child_knows_parent", run: func(e *env) {
		e.admin()
		e.createInstance("par")
		e.createChild("par", "kid")
		info := e.instance("kid")
		mustEqual(e.t, "parent", []any{info.ParentInstanceID, info.ParentExecutionID}, []any{"par", 1})
		mustEqual(e.t, "root parent", e.instance("par").ParentInstanceID, "")
	}},

	{name: "get_instance_unknown_not_found", run: func(e *env) {
		_, err := e.admin().GetInstance(e.ctx, "nope")
		e.wantErr(err, provider.ErrNotFound, "GetInstance(unknown)")
	}},

	{name: "list_executions_after_continue_as_new", run: func(e *env) {
		a := e.admin()
		t0 := e.clock.Now()
		e.createInstance("ex")
		e.clock.Advance(2 * time.Second)
		e.continueAsNew("ex", "in-2", 0)
		e.clock.Advance(3 * time.Second)
		e.finish("ex", provider.StatusCompleted)
		execs, err := a.ListExecutions(e.ctx, "ex")
		e.noErr(err, "ListExecutions")
		e.wantCount("executions", len(execs), 2)
		x1, x2 := execs[0], execs[1]
		mustEqual(e.t, "execution 1", []any{x1.ExecutionID, x1.Status, x1.Input, x1.EventCount}, []any{1, provider.StatusContinuedAsNew, js("in"), 2})
		mustEqual(e.t, "execution 2", []any{x2.ExecutionID, x2.Status, x2.Input, x2.Output, x2.EventCount}, []any{2, provider.StatusCompleted, js("in-2"), js("out-ex"), 2})
		e.sameTime("execution 1 StartedAt", x1.StartedAt, t0)
		e.sameTime("execution 1 CompletedAt", x1.CompletedAt, t0.Add(2*time.Second))
		e.sameTime("execution 2 StartedAt", x2.StartedAt, t0.Add(2*time.Second))
		e.sameTime("execution 2 CompletedAt", x2.CompletedAt, t0.Add(5*time.Second))
		info := e.instance("ex")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusCompleted, 2})
	}},

	{name: "instance_running_while_current_execution_continued_as_new", run: func(e *env) {
		e.admin()
		e.createInstance("can")
		e.continueAsNew("can", "next", 0)
		info := e.instance("can")
		mustEqual(e.t, "instance", []any{info.Status, info.CurrentExecutionID}, []any{provider.StatusRunning, 2})
	}},

	{name: "get_execution_fields_and_running_has_no_completion_time", run: func(e *env) {
		a := e.admin()
		t0 := e.clock.Now()
		e.createInstance("ge")
		e.schedule("ge", 2)
		x, err := a.GetExecution(e.ctx, "ge", 1)
		e.noErr(err, "GetExecution")
		mustEqual(e.t, "execution", []any{x.ExecutionID, x.Status, x.EventCount}, []any{1, provider.StatusRunning, 3})
		e.sameTime("StartedAt", x.StartedAt, t0)
		if !x.CompletedAt.IsZero() {
			e.t.Fatalf("CompletedAt = %v, want zero while running", x.CompletedAt)
		}
		e.clock.Advance(time.Minute)
		e.finish("ge", provider.StatusFailed)
		x, err = a.GetExecution(e.ctx, "ge", 1)
		e.noErr(err, "GetExecution")
		mustEqual(e.t, "finished", []any{x.Status, x.Error, x.EventCount}, []any{provider.StatusFailed, errDetails(history.ErrorApplication, "boom"), 4})
		e.sameTime("CompletedAt", x.CompletedAt, t0.Add(time.Minute))
	}},

	{name: "executions_of_unknown_instance_or_execution_not_found", run: func(e *env) {
		a := e.admin()
		e.createInstance("one")
		_, err := a.GetExecution(e.ctx, "one", 2)
		e.wantErr(err, provider.ErrNotFound, "GetExecution(one, 2)")
		_, err = a.GetExecution(e.ctx, "nope", 1)
		e.wantErr(err, provider.ErrNotFound, "GetExecution(nope, 1)")
		_, err = a.ListExecutions(e.ctx, "nope")
		e.wantErr(err, provider.ErrNotFound, "ListExecutions(nope)")
	}},

	{name: "pending_instance_has_no_executions", run: func(e *env) {
		e.enqueue(startMsg("pe"))
		execs, err := e.admin().ListExecutions(e.ctx, "pe")
		e.noErr(err, "ListExecutions")
		e.wantCount("executions", len(execs), 0)
	}},

	{name: "list_children_direct_only", run: func(e *env) {
		a := e.admin()
		e.createInstance("root")
		e.createChild("root", "c1")
		e.createChild("root", "c2")
		e.createChild("c1", "g1")
		kids, err := a.ListChildren(e.ctx, "root")
		e.noErr(err, "ListChildren(root)")
		mustEqual(e.t, "children of root", sorted(kids), []string{"c1", "c2"})
		kids, err = a.ListChildren(e.ctx, "g1")
		e.noErr(err, "ListChildren(g1)")
		e.wantCount("children of leaf", len(kids), 0)
		_, err = a.ListChildren(e.ctx, "nope")
		e.wantErr(err, provider.ErrNotFound, "ListChildren(unknown)")
	}},

	{name: "queue_depths_count_ready_delayed_locked_per_queue", run: func(e *env) {
		e.admin()
		e.enqueue(eventMsg("locked", "a", 1), eventMsg("locked", "b", 2))
		e.fetchFor("locked")
		e.enqueue(eventMsg("ready", "c", 3))
		e.enqueue(timerMsg("delayed", 1, e.clock.Now().Add(time.Minute)))
		e.enqueueWork(activityMsg("w", 1, ""))
		e.fetchWork()
		e.enqueueWork(activityMsg("w", 2, ""))
		later := activityMsg("w", 3, "")
		later.VisibleAt = e.clock.Now().Add(time.Minute)
		e.enqueueWork(later)
		mustEqual(e.t, "depths", e.depths(), provider.QueueDepths{
			OrchestratorReady: 1, OrchestratorDelayed: 1, OrchestratorLocked: 2,
			WorkerReady: 1, WorkerDelayed: 1, WorkerLocked: 1,
		})
	}},

	{name: "queue_depths_count_late_arrival_for_locked_instance_as_ready", run: func(e *env) {
		e.admin()
		e.enqueue(eventMsg("busy", "a", 1))
		e.fetchFor("busy")
		e.enqueue(eventMsg("busy", "late", 2))
		mustEqual(e.t, "depths", e.depths(), provider.QueueDepths{OrchestratorReady: 1, OrchestratorLocked: 1})
	}},

	{name: "queue_depths_zero_on_empty_store", run: func(e *env) {
		e.admin()
		mustEqual(e.t, "depths", e.depths(), provider.QueueDepths{})
	}},

	{name: "counts_instances_executions_events_by_status", run: func(e *env) {
		e.admin()
		e.createInstance("c-run")
		e.createFinished("c-done", provider.StatusCompleted)
		e.createFinished("c-fail", provider.StatusFailed)
		e.enqueue(startMsg("c-pend"))
		c := e.counts()
		mustEqual(e.t, "totals", []int64{c.Instances, c.Executions, c.HistoryEvents}, []int64{4, 3, 5})
		for _, st := range []provider.Status{provider.StatusPending, provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled} {
			want := int64(1)
			if st == provider.StatusCanceled {
				want = 0
			}
			if c.ByStatus[st] != want {
				e.t.Fatalf("ByStatus[%s] = %d, want %d (all: %v)", st, c.ByStatus[st], want, c.ByStatus)
			}
		}
	}},

	{name: "custom_status_default_empty_version_zero", run: func(e *env) {
		e.admin()
		e.createInstance("cs0")
		info := e.instance("cs0")
		mustEqual(e.t, "custom status", []any{len(info.CustomStatus), info.CustomStatusVersion}, []any{0, 0})
	}},

	{name: "custom_status_set_and_versions_increment_per_update", run: func(e *env) {
		e.admin()
		e.createInstance("cs")
		for i, v := range []string{"one", "two", "three"} {
			e.runTurn("cs", func(*provider.OrchestrationItem, int64) *provider.TurnAck {
				return &provider.TurnAck{Metadata: provider.ExecutionMetadata{CustomStatus: &provider.CustomStatusUpdate{Value: js(v)}}}
			})
			info := e.instance("cs")
			mustEqual(e.t, "custom status", []any{info.CustomStatus, info.CustomStatusVersion}, []any{js(v), i + 1})
		}
	}},

	{name: "custom_status_clear_still_increments_version", run: func(e *env) {
		e.admin()
		e.createInstance("csc")
		for _, val := range []json.RawMessage{js("set"), nil} {
			e.runTurn("csc", func(*provider.OrchestrationItem, int64) *provider.TurnAck {
				return &provider.TurnAck{Metadata: provider.ExecutionMetadata{CustomStatus: &provider.CustomStatusUpdate{Value: val}}}
			})
		}
		info := e.instance("csc")
		if len(info.CustomStatus) != 0 {
			e.t.Fatalf("CustomStatus = %s, want cleared", info.CustomStatus)
		}
		mustEqual(e.t, "version", info.CustomStatusVersion, 2)
	}},

	{name: "custom_status_unchanged_by_ack_without_update", run: func(e *env) {
		e.admin()
		e.createInstance("csu")
		e.runTurn("csu", func(*provider.OrchestrationItem, int64) *provider.TurnAck {
			return &provider.TurnAck{Metadata: provider.ExecutionMetadata{CustomStatus: &provider.CustomStatusUpdate{Value: js("keep")}}}
		})
		e.schedule("csu", 1)
		e.finish("csu", provider.StatusCompleted)
		info := e.instance("csu")
		mustEqual(e.t, "custom status", []any{info.CustomStatus, info.CustomStatusVersion}, []any{js("keep"), 1})
	}},

	{name: "dead_letters_empty_on_fresh_store", run: func(e *env) {
		dl, err := e.admin().ListDeadLetters(e.ctx, 0)
		e.noErr(err, "ListDeadLetters")
		e.wantCount("dead letters", len(dl), 0)
	}},
}
