package duroxide_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TestBulkAndPruneRefuseBadRequests checks that bad bulk requests, prune
// options and retention options are refused with ErrInvalidArgument
// before anything is stored or started.
func TestBulkAndPruneRefuseBadRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	c := duroxide.NewClient(store)
	for name, req := range map[string]*duroxide.BulkRequest{
		"nil":               nil,
		"unknown action":    {Action: "explode"},
		"cursor":            {Action: duroxide.BulkCancel, Filter: duroxide.ListOptions{Cursor: "x"}},
		"negative chunk":    {Action: duroxide.BulkCancel, ChunkSize: -1},
		"unknown state":     {Action: duroxide.BulkCancel, Filter: duroxide.ListOptions{States: []duroxide.State{"Sleeping"}}},
		"unknown wait kind": {Action: duroxide.BulkCancel, Filter: duroxide.ListOptions{WaitKind: "godot"}},
		"long reason":       {Action: duroxide.BulkPause, Reason: strings.Repeat("r", duroxide.MaxReasonLength+1)},
		"control in reason": {Action: duroxide.BulkCancel, Reason: "a\x00b"},
		"control in by":     {Action: duroxide.BulkPause, By: "\u202eadmin"},
		"raise no name":     {Action: duroxide.BulkRaiseEvent},
		"raise bad data":    {Action: duroxide.BulkRaiseEvent, EventName: "e", EventData: []byte("{")},
		"bad job ID":        {Action: duroxide.BulkCancel, JobID: "a/b\x00"},
	} {
		for _, dry := range []bool{true, false} {
			if req != nil {
				req.DryRun = dry
			}
			if _, err := c.BulkAction(ctx, req); !errors.Is(err, duroxide.ErrInvalidArgument) {
				t.Errorf("%s (dry run %v): %v, want ErrInvalidArgument", name, dry, err)
			}
		}
	}
	if jobs, err := c.ListBulkJobs(ctx, false); err != nil || len(jobs) != 0 {
		t.Fatalf("refused requests stored jobs: %v, %v", jobs, err)
	}
	if _, err := c.GetBulkJob(ctx, "nope"); !errors.Is(err, duroxide.ErrNotFound) {
		t.Fatalf("GetBulkJob of an unknown job: %v", err)
	}
	if _, err := c.RunBulkJob(ctx, "nope", nil); !errors.Is(err, duroxide.ErrNotFound) {
		t.Fatalf("RunBulkJob of an unknown job: %v", err)
	}

	for name, o := range map[string]*duroxide.PruneOptions{
		"nil":            nil,
		"nothing asked":  {},
		"negative age":   {OlderThan: -1, KeepExecutions: 1},
		"negative keep":  {OlderThan: 1, KeepExecutions: -1},
		"negative batch": {OlderThan: 1, BatchSize: -1},
	} {
		if _, err := c.Prune(ctx, o); !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Errorf("Prune %s: %v, want ErrInvalidArgument", name, err)
		}
	}
	reg := duroxide.NewRegistry()
	for name, r := range map[string]*duroxide.RetentionOptions{
		"nothing asked":     {},
		"negative interval": {FinishedOlderThan: 1, Interval: -1},
		"negative keep":     {KeepExecutions: -1, FinishedOlderThan: 1},
	} {
		rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Retention: r})
		if !errors.Is(err, duroxide.ErrInvalidArgument) {
			if rt != nil {
				_ = rt.Shutdown(ctx)
			}
			t.Errorf("Retention %s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestListFiltersOfTheClient checks the filters the Client applies to the
// store's pages: error kind, wait kind, and finish times on live ones.
func TestListFiltersOfTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Boom", func(ctx *duroxide.OrchestrationContext, _ any) (any, error) {
		return nil, errors.New("boom")
	})
	duroxide.RegisterOrchestration(reg, "Wait", func(ctx *duroxide.OrchestrationContext, _ any) (any, error) {
		return nil, ctx.WaitForEvent("go").Await(nil)
	})
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(ctx) })
	c := duroxide.NewClient(store)
	for _, s := range []struct{ id, name string }{{"b", "Boom"}, {"w", "Wait"}} {
		if err := c.StartOrchestration(ctx, s.id, s.name, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitForOrchestration(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	ids := func(o *duroxide.ListOptions) []string {
		t.Helper()
		var out []string
		for {
			page, err := c.ListInstances(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range page.Instances {
				out = append(out, st.InstanceID)
			}
			if page.NextCursor == "" {
				return out
			}
			o.Cursor = page.NextCursor
		}
	}
	for deadline := 0; ; deadline++ {
		if got := ids(&duroxide.ListOptions{WaitKind: duroxide.WaitEvent}); len(got) == 1 && got[0] == "w" {
			break
		}
		if deadline > 2000 {
			t.Fatal("w never listed as waiting for an event")
		}
		if _, err := c.Inspect(ctx, "w", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(&duroxide.ListOptions{ErrorKind: "application"}); len(got) != 1 || got[0] != "b" {
		t.Fatalf("ErrorKind application: %v", got)
	}
	if got := ids(&duroxide.ListOptions{ErrorKind: "nondeterminism"}); len(got) != 0 {
		t.Fatalf("ErrorKind nondeterminism: %v", got)
	}
	if got := ids(&duroxide.ListOptions{WaitKind: duroxide.WaitEvent, States: []duroxide.State{duroxide.StateFailed}}); len(got) != 0 {
		t.Fatalf("waits of Failed instances: %v", got)
	}
	if got := ids(&duroxide.ListOptions{Version: "9"}); len(got) != 0 {
		t.Fatalf("Version 9: %v", got)
	}
}
