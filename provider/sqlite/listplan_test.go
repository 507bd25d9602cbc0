package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// explain returns the EXPLAIN QUERY PLAN lines of q with args.
func explain(t *testing.T, p *Provider, q string, args []any) []string {
	t.Helper()
	rows, err := p.readers.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %q: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var a, b, c int
		var d string
		if err := rows.Scan(&a, &b, &c, &d); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestListInstancesPlans checks the plans of the instance lists a dashboard
// pages through on a large store: each reads an index (or the table in key
// order) and stops at the page's end, without sorting every match. The
// A rare ID prefix is the exception: it reads the range of the instance_id
// index and sorts its matches (fewer than commonPrefixMatches); a common
// one filters rows read newest first.
func TestListInstancesPlans(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "plan.db"), nil)
	cursor := sqlstore.EncodeCursor(1000)
	cases := []struct {
		name string
		opts provider.ListInstancesOptions
		// want must appear in the plan; sort says whether a temporary
		// B-tree may order the rows.
		want string
		sort bool
		// common: the ID prefix matches many instances.
		common bool
	}{
		{"all", provider.ListInstancesOptions{}, "SCAN instances", false, false},
		{"all, next page", provider.ListInstancesOptions{Cursor: cursor}, "SEARCH instances USING INTEGER PRIMARY KEY (rowid<?)", false, false},
		{"one state", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed}}, "USING INDEX instances_status (status=?)", false, false},
		{"one state, next page", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed}, Cursor: cursor}, "USING INDEX instances_status (status=? AND rowid<?)", false, false},
		{"two states", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusRunning, provider.StatusContinuedAsNew}}, "USING COVERING INDEX instances_status (status=?)", false, false},
		{"two states and a name, next page", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusCompleted, provider.StatusFailed}, Orchestration: "demo.Fail", Cursor: cursor}, "USING INDEX", false, false},
		{"orchestration", provider.ListInstancesOptions{Orchestration: "demo.Fail"}, "USING INDEX instances_orchestration (orchestration_name=?", false, false},
		{"ID prefix", provider.ListInstancesOptions{IDPrefix: "order-"}, "USING INDEX sqlite_autoindex_instances_1 (instance_id>? AND instance_id<?)", true, false},
		{"common ID prefix", provider.ListInstancesOptions{IDPrefix: "order-"}, "SCAN instances", false, true},
		{"common ID prefix, next page", provider.ListInstancesOptions{IDPrefix: "order-", Cursor: cursor}, "SEARCH instances USING INTEGER PRIMARY KEY (rowid<?)", false, true},
		{"common ID prefix and a state", provider.ListInstancesOptions{IDPrefix: "order-", Statuses: []provider.Status{provider.StatusFailed}}, "USING INDEX instances_status (status=?)", false, true},
		{"parent", provider.ListInstancesOptions{ParentInstanceID: "root"}, "USING INDEX instances_parent (parent_instance_id=?", false, false},
	}
	for _, tc := range cases {
		q, args, _, err := sqlstore.ListQuery(tc.opts, listSQL(tc.common))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		plan := explain(t, p, q, args)
		text := strings.Join(plan, "\n  ")
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s: plan lacks %q:\n  %s", tc.name, tc.want, text)
		}
		if !tc.sort && strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan sorts the matches:\n  %s", tc.name, text)
		}
		t.Logf("%s:\n  %s", tc.name, text)
	}
}

// TestCommonPrefixQueryLists checks that both forms of the ID prefix
// filter (an index range for a rare prefix, a filter of rows read newest
// first for a common one) list the same instances.
func TestCommonPrefixQueryLists(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := openFile(t, filepath.Join(t.TempDir(), "prefix.db"), nil)
	for _, id := range []string{"a-1", "b-1", "a-2", "ab", "a-3", "a"} {
		if _, err := p.Enqueue(ctx, &provider.OrchestratorMessage{InstanceID: id,
			Item:   history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "O"},
			Create: &provider.NewInstance{OrchestrationName: "O"}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(opts provider.ListInstancesOptions, common bool) []string {
		q, args, _, err := sqlstore.ListQuery(opts, listSQL(common))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := p.readers.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var seq int64
			in, err := sqlstore.ScanInstanceRow(rows, &seq)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, in.InstanceID)
		}
		return ids
	}
	for _, opts := range []provider.ListInstancesOptions{{IDPrefix: "a-"}, {IDPrefix: "a"}, {IDPrefix: "a-", Limit: 2}, {IDPrefix: "zz"}} {
		rare, common := list(opts, false), list(opts, true)
		if strings.Join(rare, ",") != strings.Join(common, ",") {
			t.Fatalf("prefix %q: index range lists %v, filter lists %v", opts.IDPrefix, rare, common)
		}
	}
	if got := strings.Join(list(provider.ListInstancesOptions{IDPrefix: "a-"}, true), ","); got != "a-3,a-2,a-1" {
		t.Fatalf("prefix a-: %s", got)
	}
}

// TestTurnCandidatesFilterOnTheIndex checks the plan of a fetch of turns
// limited to some orchestrations: it reads the ready order's covering
// index, which carries each instance's name and version (migration 0016),
// and skips the instances of other orchestrations without looking their
// instance rows up, and without sorting.
func TestTurnCandidatesFilterOnTheIndex(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "plan.db"), nil)
	plan := strings.Join(explain(t, p, writerSQL[sOrchCandidates], []any{int64(1000), "[]", `["A","B\u001f","B\u001f1.0.0"]`}), "\n  ")
	if !strings.Contains(plan, "USING COVERING INDEX orchestrator_ready_order") {
		t.Errorf("plan does not read the covering ready order:\n  %s", plan)
	}
	if strings.Contains(plan, "instances") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan looks instance rows up or sorts:\n  %s", plan)
	}
}
