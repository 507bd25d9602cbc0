package cli

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TestValuesCommand prints the values an instance set: all, one, as JSON.
func TestValuesCommand(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "test.Values", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
		if err := ctx.SetValue("stage", map[string]string{"at": in}); err != nil {
			return "", err
		}
		return in, ctx.SetValue("count", 2)
	})
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(sctx)
	})
	client := duroxide.NewClient(store)
	if err := client.StartOrchestration(ctx, "v1", "test.Values", "packing", nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := client.WaitForOrchestration(wctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "values", "v1", "--db", db).wantCode(t, 0); r.stdout != "count = 2\nstage = {\"at\":\"packing\"}\n" {
		t.Fatalf("values printed %q", r.stdout)
	}
	if r := runCLI(t, "values", "v1", "stage", "--db", db).wantCode(t, 0); r.stdout != "{\"at\":\"packing\"}\n" {
		t.Fatalf("values v1 stage printed %q", r.stdout)
	}
	var one duroxide.Value
	runCLI(t, "values", "v1", "count", "--json", "--db", db).wantCode(t, 0).decode(t, &one)
	if one.Key != "count" || string(one.Value) != "2" || one.UpdatedAt.IsZero() {
		t.Fatalf("values --json: %+v", one)
	}
	runCLI(t, "values", "--db", db).wantErr(t, 2, "missing instance ID")
}
