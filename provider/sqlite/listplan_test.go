package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
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
// ID prefix is the exception: it reads the range of the instance_id index
// and sorts its matches (a short prefix shared by most instances costs a
// sort of all of them).
func TestListInstancesPlans(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "plan.db"), nil)
	cursor := encodeCursor(1000)
	cases := []struct {
		name string
		opts provider.ListInstancesOptions
		// want must appear in the plan; sort says whether a temporary
		// B-tree may order the rows.
		want string
		sort bool
	}{
		{"all", provider.ListInstancesOptions{}, "SCAN instances", false},
		{"all, next page", provider.ListInstancesOptions{Cursor: cursor}, "SEARCH instances USING INTEGER PRIMARY KEY (rowid<?)", false},
		{"one state", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed}}, "USING INDEX instances_status (status=?)", false},
		{"one state, next page", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed}, Cursor: cursor}, "USING INDEX instances_status (status=? AND rowid<?)", false},
		{"two states", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusRunning, provider.StatusContinuedAsNew}}, "USING COVERING INDEX instances_status (status=?)", false},
		{"two states and a name, next page", provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusCompleted, provider.StatusFailed}, Orchestration: "demo.Fail", Cursor: cursor}, "USING INDEX", false},
		{"orchestration", provider.ListInstancesOptions{Orchestration: "demo.Fail"}, "USING INDEX instances_orchestration (orchestration_name=?", false},
		{"ID prefix", provider.ListInstancesOptions{IDPrefix: "order-"}, "USING INDEX sqlite_autoindex_instances_1 (instance_id>? AND instance_id<?)", true},
		{"parent", provider.ListInstancesOptions{ParentInstanceID: "root"}, "USING INDEX instances_parent (parent_instance_id=?", false},
	}
	for _, tc := range cases {
		q, args, _, err := listInstancesQuery(tc.opts)
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
