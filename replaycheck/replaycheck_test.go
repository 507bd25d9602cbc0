package replaycheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
	"github.com/duroxide/duroxide-go/replaycheck"
)

// register registers orders.Checkout: activity Reserve, then second (the
// activity name at step 2: "Charge" in the deployed code), then, when its
// input asks, a wait for the event "ship" (a live instance).
func register(second string) *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "orders.Checkout", func(ctx *duroxide.OrchestrationContext, wait bool) (string, error) {
		if err := ctx.ScheduleActivity("Reserve", 1).Await(nil); err != nil {
			return "", err
		}
		if err := ctx.ScheduleActivity(second, 2).Await(nil); err != nil {
			return "", err
		}
		if wait {
			if err := ctx.WaitForEvent("ship").Await(nil); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	return reg
}

// record fills a new SQLite store with completed instances of
// orders.Checkout, n of them, one live instance (order-live, waiting after
// both activities were scheduled) and one Pending instance with no history
// yet (a start delayed a day). It returns the --db value.
func record(t *testing.T, completed int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := register("Charge")
	charged := make(chan string, completed+1)
	duroxide.RegisterActivity(reg, "Reserve", func(ctx context.Context, n int) (int, error) { return n, nil })
	duroxide.RegisterActivity(reg, "Charge", func(ctx context.Context, n int) (int, error) {
		charged <- duroxide.ActivityContextFrom(ctx).InstanceID
		return n, nil
	})
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	for i := range completed {
		if err := c.StartOrchestration(ctx, fmt.Sprintf("order-%04d", i), "orders.Checkout", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StartOrchestration(ctx, "order-live", "orders.Checkout", true, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.StartOrchestration(ctx, "order-later", "orders.Checkout", true, &duroxide.StartOptions{StartAt: time.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range completed {
		st, err := c.WaitForOrchestration(ctx, fmt.Sprintf("order-%04d", i))
		if err != nil || st.State != duroxide.StateCompleted {
			t.Fatalf("order-%04d: %v %v", i, st, err)
		}
	}
	// Charge of order-live ran, so its scheduling is in the history.
	for id := range charged {
		if id == "order-live" {
			break
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return "sqlite:" + path
}

func run(t *testing.T, reg *duroxide.Registry, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = replaycheck.Run(context.Background(), reg, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReplayCheck(t *testing.T) {
	t.Parallel()
	db := record(t, 2)

	t.Run("same code passes", func(t *testing.T) {
		code, out, errs := run(t, register("Charge"), "--db", db, "--orchestration", "orders.Checkout")
		if code != replaycheck.ExitOK {
			t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, out, errs)
		}
		if !strings.Contains(out, "3 checked, 3 passed, 0 diverged, 1 skipped") {
			t.Fatalf("report: %s", out)
		}
	})

	t.Run("changed activity at step 2 diverges", func(t *testing.T) {
		code, out, errs := run(t, register("ChargeCard"), "--db", db, "--orchestration", "orders.Checkout")
		if code != replaycheck.ExitDiverged {
			t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, replaycheck.ExitDiverged, out, errs)
		}
		for _, want := range []string{"3 checked, 0 passed, 3 diverged", "DIVERGED order-live (orders.Checkout", "execution 1, Running",
			"DIVERGED order-0000", "Completed",
			"at event 4\n  expected: activity \"Charge\" with input 2\n  got:      scheduled activity \"ChargeCard\" with input 2\n"} {
			if !strings.Contains(out, want) {
				t.Fatalf("report lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errs, "3 histories diverge") {
			t.Fatalf("stderr: %s", errs)
		}
	})

	t.Run("live only, json", func(t *testing.T) {
		code, out, _ := run(t, register("ChargeCard"), "--db", db, "--live", "--json")
		if code != replaycheck.ExitDiverged {
			t.Fatalf("exit %d", code)
		}
		var rep duroxide.ReplayCheckReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if rep.Checked != 1 || rep.Diverged != 1 || rep.Skipped != 1 || len(rep.Divergences) != 1 {
			t.Fatalf("report %+v", rep)
		}
		d := rep.Divergences[0]
		if d.InstanceID != "order-live" || d.ExecutionID != 1 || d.EventID == 0 ||
			!strings.Contains(d.Expected, "Charge") || !strings.Contains(d.Got, "ChargeCard") {
			t.Fatalf("divergence %+v", d)
		}
	})

	t.Run("last", func(t *testing.T) {
		code, out, _ := run(t, register("ChargeCard"), "--db", db, "--last", "1", "--json")
		var rep duroxide.ReplayCheckReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		// The newest instance is order-later, which has no history.
		if code != replaycheck.ExitOK || rep.Checked+rep.Skipped != 1 {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
	})

	t.Run("unregistered orchestration diverges", func(t *testing.T) {
		code, out, _ := run(t, duroxide.NewRegistry(), "--db", db, "--live")
		if code != replaycheck.ExitDiverged || !strings.Contains(out, "not registered") {
			t.Fatalf("exit %d: %s", code, out)
		}
	})
}

func TestReplayCheckBadFlags(t *testing.T) {
	t.Parallel()
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--last", "-1"}, replaycheck.ExitUsage, "--last must be 0 (all) or more"},
		{[]string{"--last", "x"}, replaycheck.ExitUsage, "invalid value"},
		{[]string{"--bogus"}, replaycheck.ExitUsage, "flag provided but not defined: -bogus"},
		{[]string{"--orchestration", ""}, replaycheck.ExitUsage, "empty name"},
		{[]string{"extra"}, replaycheck.ExitUsage, `unexpected argument "extra"`},
		{[]string{"--db", "nonsense"}, replaycheck.ExitUsage, "cannot tell which store"},
		{[]string{"--db", missing}, replaycheck.ExitFailure, "no store at"},
	} {
		code, _, errs := run(t, register("Charge"), tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// The help and the messages name the command as the caller invoked it.
func TestReplayCheckNamed(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := replaycheck.RunNamed(context.Background(), "shop replay-check", register("Charge"), []string{"-h"}, &out, &errb); code != replaycheck.ExitOK ||
		!strings.HasPrefix(out.String(), "Usage: shop replay-check ") || strings.Contains(out.String(), "duroxide replay-check") {
		t.Fatalf("help: exit %d:\n%s", code, out.String())
	}
	out.Reset()
	code := replaycheck.RunNamed(context.Background(), "shop replay-check", register("Charge"), []string{"--bogus"}, &out, &errb)
	if code != replaycheck.ExitUsage || !strings.HasPrefix(errb.String(), "shop: replay-check: ") ||
		!strings.Contains(errb.String(), "run 'shop replay-check -h' for usage") || strings.Contains(errb.String(), "duroxide") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}

	// Run names it after the test binary.
	errb.Reset()
	prog := filepath.Base(os.Args[0])
	if code := replaycheck.Run(context.Background(), register("Charge"), []string{"extra"}, &out, &errb); code != replaycheck.ExitUsage ||
		!strings.HasPrefix(errb.String(), prog+": ") || !strings.Contains(errb.String(), "usage: "+prog+" replay-check ") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
