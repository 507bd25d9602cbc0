package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// result is what one in-process run of the CLI produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI in-process with an empty environment.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIEnv(t, map[string]string{}, args...)
}

func runCLIEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr, func(k string) string { return env[k] })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// wantErr fails the test unless r failed with exit code and a one-line
// error containing every part.
func (r result) wantErr(t *testing.T, code int, parts ...string) {
	t.Helper()
	r.wantCode(t, code)
	if !strings.HasPrefix(r.stderr, "duroxide: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("stderr is not one 'duroxide: ' line: %q", r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Fatalf("stderr %q does not mention %q", r.stderr, p)
		}
	}
}

// decode decodes r's stdout as JSON into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON (%v):\n%s", err, r.stdout)
	}
}

// tempDB returns a --db value naming a new SQLite file, and the file's path.
func tempDB(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	return "sqlite:" + path, path
}

// startRuntime runs the demo orchestrations on the store at path until the
// test ends.
func startRuntime(t *testing.T, path string) *duroxide.Client {
	t.Helper()
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	return startRuntimeWith(t, path, reg, nil)
}

// startRuntimeWith runs reg on the store at path, with opts (nil: a 10ms
// poll interval), until the test ends.
func startRuntimeWith(t *testing.T, path string, reg *duroxide.Registry, opts *duroxide.RuntimeOptions) *duroxide.Client {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	if opts == nil {
		opts = &duroxide.RuntimeOptions{PollInterval: 10 * time.Millisecond}
	}
	rt, err := duroxide.StartRuntime(ctx, store, reg, opts)
	if err != nil {
		t.Fatalf("StartRuntime: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(sctx); err != nil {
			t.Errorf("runtime Shutdown: %v", err)
		}
		if err := store.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	return duroxide.NewClient(store)
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCLI(t, args...).wantCode(t, 0)
		for _, c := range commands {
			if !strings.Contains(r.stdout, "  "+c.name+" ") {
				t.Fatalf("%v: help does not list %s:\n%s", args, c.name, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"help", "start"}, {"start", "-h"}, {"start", "demo.Hello", "--help"}} {
		r := runCLI(t, args...).wantCode(t, 0)
		for _, want := range []string{"Usage: duroxide start NAME", "-input", "-wait", "-db", "-json"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("%v: help lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
	r := runCLI(t, "help", "serve").wantCode(t, 0)
	if !strings.Contains(r.stdout, "runs no orchestrations") {
		t.Fatalf("serve help does not say that it runs no orchestrations without --demo:\n%s", r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	tests := []struct {
		name  string
		args  []string
		parts []string
	}{
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`, "serve, start, status", "migrate"}},
		{"help unknown command", []string{"help", "frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"flag before command", []string{"--db", db, "list"}, []string{"flags go after the command name"}},
		{"unknown flag", []string{"list", "--db", db, "--frob"}, []string{"-frob", "duroxide list -h"}},
		{"start without name", []string{"start", "--db", db}, []string{"missing orchestration NAME", "usage: duroxide start"}},
		{"status without id", []string{"status", "--db", db}, []string{"missing instance ID"}},
		{"raise without event", []string{"raise", "x", "--db", db}, []string{"missing EVENT name"}},
		{"extra argument", []string{"status", "a", "b", "--db", db}, []string{`unexpected argument "b"`}},
		{"empty argument", []string{"status", "", "--db", db}, []string{"instance ID must not be empty"}},
		{"bad input", []string{"start", "demo.Hello", "--input", "Ada", "--db", db}, []string{"--input is not valid JSON", `'"Ada"'`}},
		{"bad data", []string{"raise", "x", "approval", "--data", "{yes", "--db", db}, []string{"--data is not valid JSON"}},
		{"timeout without wait", []string{"start", "demo.Hello", "--timeout", "1s", "--db", db}, []string{"--timeout only applies with --wait"}},
		{"bad limit", []string{"list", "--limit", "0", "--db", db}, []string{"--limit must be between 1 and 1000"}},
		{"bad status", []string{"list", "--status", "Done", "--db", db}, []string{`unknown --status "Done"`, "Completed"}},
		{"bad execution", []string{"history", "x", "--execution", "-1", "--db", db}, []string{"--execution must be 1 or more"}},
		{"postgres without server", []string{"status", "x", "--db", "postgres:///db"}, []string{"names no server"}},
		{"postgresql bad schema", []string{"migrate", "--db", "postgresql://u@localhost/db?schema=a-b"}, []string{"?schema= must name one schema"}},
		{"unknown db", []string{"list", "--db", "mysql://x"}, []string{`cannot tell which store --db "mysql://x" is`, "sqlite:PATH"}},
		{"empty sqlite path", []string{"list", "--db", "sqlite:"}, []string{"names no file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runCLI(t, tt.args...).wantErr(t, 2, tt.parts...)
		})
	}
}

func TestNoCommand(t *testing.T) {
	t.Parallel()
	r := runCLI(t).wantCode(t, 2)
	if !strings.Contains(r.stderr, "Commands:") || !strings.HasSuffix(r.stderr, "\nduroxide: no command given: run 'duroxide help' for the list of commands\n") {
		t.Fatalf("stderr = %q", r.stderr)
	}
}

func TestDBFromEnvironment(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	runCLIEnv(t, map[string]string{storeurl.EnvDB: db}, "migrate").wantCode(t, 0)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("migrate with %s=%s did not create the store: %v", storeurl.EnvDB, db, err)
	}
	// --db wins over the environment.
	other, otherPath := tempDB(t)
	runCLIEnv(t, map[string]string{storeurl.EnvDB: db}, "migrate", "--db", other).wantCode(t, 0)
	if _, err := os.Stat(otherPath); err != nil {
		t.Fatalf("migrate --db did not create %s: %v", otherPath, err)
	}
	runCLIEnv(t, map[string]string{storeurl.EnvDB: "postgres:///x"}, "list").wantErr(t, 2, "names no server", "$"+storeurl.EnvDB)
}

func TestMissingStore(t *testing.T) {
	t.Parallel()
	_, path := tempDB(t)
	for _, args := range [][]string{{"status", "x"}, {"history", "x"}, {"list"}, {"raise", "x", "e"}, {"cancel", "x"}, {"purge", "x"}} {
		runCLI(t, append(args, "--db", path)...).wantErr(t, 1, "no store at "+path, "duroxide migrate")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("a read command created %s", path)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	// A new store: migrate says which migrations it applied.
	r := runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	if !regexp.MustCompile(`^store sqlite:\S+: applied [1-9][0-9]* migrations \(0001_\w+(, \d{4}_\w+)+\); it is up to date\n$`).MatchString(r.stdout) {
		t.Fatalf("migrate of a new store printed %q", r.stdout)
	}
	if r = runCLI(t, "migrate", "--db", db).wantCode(t, 0); !strings.HasSuffix(r.stdout, " is up to date: no migration to apply\n") {
		t.Fatalf("migrate of a migrated store printed %q", r.stdout)
	}
	r = runCLI(t, "list", "--db", path).wantCode(t, 0)
	if strings.TrimSpace(r.stdout) != "no instances" {
		t.Fatalf("list of a new store printed %q", r.stdout)
	}
	runCLI(t, "migrate", "extra", "--db", db).wantErr(t, 2, `unexpected argument "extra"`)
}

// TestInstancesWithoutRuntime drives the commands against a store no
// runtime serves: instances stay Pending.
func TestInstancesWithoutRuntime(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)

	// A generated ID, flags after the positional argument.
	r := runCLI(t, "start", "demo.Hello", "--input", `"Ada"`, "--db", db).wantCode(t, 0)
	id := strings.TrimSpace(r.stdout)
	if len(id) != 36 {
		t.Fatalf("start printed %q, want a UUID", r.stdout)
	}
	r = runCLI(t, "start", "--db", db, "--id", "order-1", "--json", "demo.Sequence", "--input", "1", "--version", "1.0.0").wantCode(t, 0)
	var started struct{ InstanceID string }
	r.decode(t, &started)
	if started.InstanceID != "order-1" {
		t.Fatalf("start --json printed %q", r.stdout)
	}
	runCLI(t, "start", "demo.Hello", "--id", "order-1", "--db", db).wantErr(t, 1, `instance "order-1" already exists`, "--id")

	r = runCLI(t, "status", "order-1", "--db", db).wantCode(t, 0)
	for _, want := range []string{"Instance:       order-1", "Orchestration:  demo.Sequence", "Version:        1.0.0", "Status:         Pending", "Input:          1"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	var st duroxide.Status
	runCLI(t, "status", "--json", "order-1", "--db", db).wantCode(t, 0).decode(t, &st)
	if st.InstanceID != "order-1" || st.State != duroxide.StatePending || string(st.Input) != "1" {
		t.Fatalf("status --json = %+v", st)
	}

	var page duroxide.InstancePage
	runCLI(t, "list", "--json", "--db", db).wantCode(t, 0).decode(t, &page)
	if len(page.Instances) != 2 || page.NextCursor != "" {
		t.Fatalf("list --json = %+v", page)
	}
	r = runCLI(t, "list", "--orchestration", "demo.Hello", "--status", "pending", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, id) || strings.Contains(r.stdout, "order-1") || !strings.HasPrefix(r.stdout, "INSTANCE") {
		t.Fatalf("filtered list:\n%s", r.stdout)
	}
	runCLI(t, "list", "--status", "Completed", "--db", db).wantCode(t, 0)

	var h struct{ Events []map[string]any }
	runCLI(t, "history", "order-1", "--json", "--db", db).wantCode(t, 0).decode(t, &h)
	if h.Events == nil || len(h.Events) != 0 {
		t.Fatalf("history of a pending instance = %s", r.stdout)
	}

	runCLI(t, "raise", "order-1", "approval", "--data", "true", "--db", db).wantCode(t, 0)
	runCLI(t, "purge", "order-1", "--db", db).wantErr(t, 1, "still running", "--force")
	r = runCLI(t, "cancel", "order-1", "--reason", "test", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "cancellation of order-1 requested") {
		t.Fatalf("cancel printed %q", r.stdout)
	}
	runCLI(t, "purge", "order-1", "--force", "--db", db).wantCode(t, 0)
	for _, args := range [][]string{{"status", "order-1"}, {"history", "order-1"}, {"raise", "order-1", "e"}, {"cancel", "order-1"}, {"purge", "order-1"}} {
		runCLI(t, append(args, "--db", db)...).wantErr(t, 1, `instance "order-1" not found`, "duroxide list")
	}
}

// TestInstancesWithRuntime runs demo orchestrations to their end through
// the CLI, with a runtime on the same store file.
func TestInstancesWithRuntime(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	client := startRuntime(t, path)

	r := runCLI(t, "start", "demo.Hello", "--input", `"Ada"`, "--wait", "--id", "hello-1", "--db", db).wantCode(t, 0)
	for _, want := range []string{"hello-1\n", "Status:         Completed", `Output:         "Hello, Ada!"`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("start --wait lacks %q:\n%s", want, r.stdout)
		}
	}
	var st duroxide.Status
	runCLI(t, "start", "demo.FanOut", "--id", "fan-1", "--input", "10", "--wait", "--timeout", "20s", "--json", "--db", db).
		wantCode(t, 0).decode(t, &st)
	var sum int
	if err := st.Decode(&sum); err != nil || sum != 45 {
		t.Fatalf("demo.FanOut(10) = %d, %v (status %+v)", sum, err, st)
	}

	runCLI(t, "start", "demo.Fail", "--input", `"boom"`, "--id", "fail-1", "--wait", "--db", db).wantErr(t, 1, "instance fail-1 failed: boom")
	st = duroxide.Status{}
	r = runCLI(t, "start", "demo.Fail", "--input", `"boom"`, "--id", "fail-2", "--wait", "--json", "--db", db)
	r.wantErr(t, 1, "fail-2 failed")
	r.decode(t, &st)
	if st.State != duroxide.StateFailed || st.Error == nil || st.Error.Message != "boom" {
		t.Fatalf("status of a failed instance = %+v", st)
	}

	// History, as JSON and as a table.
	var h struct {
		Events []struct {
			EventID     int64  `json:"eventId"`
			Type        string `json:"type"`
			Timestamp   string `json:"timestamp"`
			TimestampMs *int64 `json:"timestampMs"`
			Name        string `json:"name"`
			Output      json.RawMessage
		}
	}
	runCLI(t, "history", "hello-1", "--json", "--db", db).wantCode(t, 0).decode(t, &h)
	if len(h.Events) < 3 || h.Events[0].Type != "OrchestrationStarted" || h.Events[0].EventID != 1 ||
		h.Events[0].Name != "demo.Hello" || h.Events[len(h.Events)-1].Type != "OrchestrationCompleted" {
		t.Fatalf("history --json = %+v", h.Events)
	}
	for _, e := range h.Events {
		if _, err := time.Parse(time.RFC3339, e.Timestamp); err != nil || e.TimestampMs != nil {
			t.Fatalf("event %d: timestamp %q (%v), timestampMs %v", e.EventID, e.Timestamp, err, e.TimestampMs)
		}
	}
	r = runCLI(t, "history", "hello-1", "--execution", "1", "--db", db).wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != len(h.Events)+1 || !strings.HasPrefix(lines[0], "ID  TYPE") ||
		!strings.Contains(r.stdout, "ActivityScheduled") || !strings.Contains(r.stdout, `output="Hello, Ada!"`) {
		t.Fatalf("history table:\n%s", r.stdout)
	}
	runCLI(t, "history", "hello-1", "--execution", "7", "--db", db).wantErr(t, 1, `"hello-1" has no execution 7`, "1 to 1")

	// Raise: demo.Approval waits for the event "approval".
	runCLI(t, "start", "demo.Approval", "--id", "appr-1", "--input", `{"timeoutSeconds": 600}`, "--db", db).wantCode(t, 0)
	waitState(t, client, "appr-1", duroxide.StateRunning)
	r = runCLI(t, "raise", "appr-1", "approval", "--data", "true", "--db", db).wantCode(t, 0)
	if r.stdout != "raised approval on appr-1\n" {
		t.Fatalf("raise printed %q", r.stdout)
	}
	st = duroxide.Status{}
	runCLI(t, "status", "appr-1", "--json", "--db", db).wantCode(t, 0).decode(t, &st)
	if st.State != duroxide.StateCompleted {
		st = *waitState(t, client, "appr-1", duroxide.StateCompleted)
	}
	if string(st.Output) != `"approved"` {
		t.Fatalf("demo.Approval output = %s", st.Output)
	}
	runCLI(t, "raise", "appr-1", "approval", "--db", db).wantErr(t, 1, "already ended (Completed)")

	// Cancel a waiting instance.
	runCLI(t, "start", "demo.Approval", "--id", "appr-2", "--input", `{"timeoutSeconds": 600}`, "--db", db).wantCode(t, 0)
	waitState(t, client, "appr-2", duroxide.StateRunning)
	runCLI(t, "cancel", "appr-2", "--reason", "changed my mind", "--db", db).wantCode(t, 0)
	st = *waitState(t, client, "appr-2", duroxide.StateCanceled)
	r = runCLI(t, "status", "appr-2", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "Status:         Canceled") || !strings.Contains(r.stdout, "changed my mind") {
		t.Fatalf("status of a canceled instance:\n%s", r.stdout)
	}
	// The size of what it keeps in the store, as the history limits count it.
	if !regexp.MustCompile(`(?m)^History: +[1-9][0-9]* events, [1-9][0-9]* bytes$`).MatchString(r.stdout) {
		t.Fatalf("status prints no history size:\n%s", r.stdout)
	}
	// Like raise, cancel of an ended instance fails (the API answers 409).
	runCLI(t, "cancel", "appr-2", "--db", db).wantErr(t, 1, "instance appr-2 already ended (Canceled): nothing to cancel")

	// Pagination: 6 instances, pages of 4.
	var page duroxide.InstancePage
	runCLI(t, "list", "--limit", "4", "--json", "--db", db).wantCode(t, 0).decode(t, &page)
	if len(page.Instances) != 4 || page.NextCursor == "" {
		t.Fatalf("first page = %+v", page)
	}
	r = runCLI(t, "list", "--limit", "4", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stderr, "--cursor "+page.NextCursor) {
		t.Fatalf("list did not print the next cursor on stderr: %q", r.stderr)
	}
	var next duroxide.InstancePage
	runCLI(t, "list", "--limit", "4", "--cursor", page.NextCursor, "--json", "--db", db).wantCode(t, 0).decode(t, &next)
	if len(next.Instances) != 2 || next.NextCursor != "" {
		t.Fatalf("second page = %+v", next)
	}
	runCLI(t, "list", "--cursor", "garbage", "--db", db).wantErr(t, 2, `--cursor "garbage"`)
	r = runCLI(t, "list", "--status", "failed,canceled", "--db", db).wantCode(t, 0)
	if got := strings.Count(r.stdout, "\n"); got != 4 { // header + fail-1, fail-2, appr-2
		t.Fatalf("list --status failed,canceled:\n%s", r.stdout)
	}

	// Purge ended instances.
	runCLI(t, "purge", "hello-1", "--db", db).wantCode(t, 0)
	runCLI(t, "status", "hello-1", "--db", db).wantErr(t, 1, "not found")
}

func TestStartWaitTimeout(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	// No runtime: the instance stays Pending.
	r := runCLI(t, "start", "demo.Hello", "--id", "slow", "--wait", "--timeout", "50ms", "--db", db)
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "timed out after 50ms waiting for slow (Pending)") || !strings.Contains(r.stderr, "duroxide status slow") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	if r.stdout != "slow\n" {
		t.Fatalf("stdout = %q", r.stdout)
	}
}

func TestStartWaitInterrupted(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"start", "demo.Hello", "--id", "int", "--wait", "--db", db}, &stdout, &stderr, func(string) string { return "" })
	}()
	// Wait until the instance exists, then interrupt.
	waitStore(t, strings.TrimPrefix(db, "sqlite:"), "int")
	cancel()
	if code := <-done; code != 1 || !strings.Contains(stderr.String(), "interrupted while waiting for int") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// waitState polls until instance id reaches state.
func waitState(t *testing.T, client *duroxide.Client, id string, state duroxide.State) *duroxide.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := client.GetStatus(ctx, id)
		if err == nil && st.State == state {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not reach %s: last %+v, %v", id, state, st, err)
		case <-tick.C:
		}
	}
}

// waitStore polls the store file at path until instance id exists.
func waitStore(t *testing.T, path, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			store, err := sqlite.Open(ctx, path, nil)
			if err == nil {
				_, err = duroxide.NewClient(store).GetStatus(ctx, id)
				_ = store.Close()
				if err == nil {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("instance %s never appeared in %s", id, path)
		case <-tick.C:
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		pos    []string
		reason string
		force  bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, "", false},
		{[]string{"--force", "a", "--reason", "r", "b"}, []string{"a", "b"}, "r", true},
		{[]string{"a", "--reason=r", "b", "--force"}, []string{"a", "b"}, "r", true},
		{[]string{"a", "--", "--force", "-x"}, []string{"a", "--force", "-x"}, "", false},
		{[]string{"--reason", "--", "a"}, []string{"a"}, "--", false},
		{[]string{"--force", "--", "a"}, []string{"a"}, "", true},
		{[]string{"-", "a"}, []string{"-", "a"}, "", false},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		reason := fs.String("reason", "", "")
		force := fs.Bool("force", false, "")
		pos, err := parseInterleaved(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *reason != tt.reason || *force != tt.force {
			t.Errorf("parseInterleaved(%q) = %q reason %q force %v, %v; want %q %q %v",
				tt.args, pos, *reason, *force, err, tt.pos, tt.reason, tt.force)
		}
	}
}
