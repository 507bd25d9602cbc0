package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// openClient opens the store file at path for the rest of the test, with
// no runtime: started instances stay Pending and keep their locks.
func openClient(t *testing.T, path string) *duroxide.Client {
	t.Helper()
	store, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	return duroxide.NewClient(store)
}

// lockedStart starts instance id of demo.Hello holding lock key w.
func lockedStart(t *testing.T, client *duroxide.Client, id, w string, ttl time.Duration) {
	t.Helper()
	opts := &duroxide.StartOptions{LockKey: w, LockTTL: ttl}
	if err := client.StartOrchestration(t.Context(), id, "demo.Hello", "Ada", opts); err != nil {
		t.Fatalf("StartOrchestration(%s, LockKey %s): %v", id, w, err)
	}
}

// waitStale polls until the lock of w is stale (its TTL passed).
func waitStale(t *testing.T, client *duroxide.Client, w string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		l, err := client.GetLock(ctx, w)
		if err == nil && l.IsStale {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lock %s never became stale: last %+v, %v", w, l, err)
		case <-tick.C:
		}
	}
}

type locksJSON struct {
	Locks []duroxide.LockStatus `json:"locks"`
}

func TestLocks(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	runCLI(t, "locks", "--db", db).wantErr(t, 1, "no store at "+path, "duroxide migrate")
	runCLI(t, "migrate", "--db", db).wantCode(t, 0)

	// An empty store.
	if r := runCLI(t, "locks", "--db", db).wantCode(t, 0); r.stdout != "no locks\n" {
		t.Fatalf("locks of an empty store printed %q", r.stdout)
	}
	r := runCLI(t, "locks", "list", "--json", "--db", db).wantCode(t, 0)
	if strings.Join(strings.Fields(r.stdout), "") != `{"locks":[]}` {
		t.Fatalf("locks list --json of an empty store printed %q", r.stdout)
	}

	client := openClient(t, path)
	lockedStart(t, client, "i1", "wf-a", 0)
	lockedStart(t, client, "i2", "wf-b", 2*time.Hour)
	lockedStart(t, client, "i3", "wf-c", time.Nanosecond) // expires at once

	// List, as JSON and as a table.
	var list locksJSON
	runCLI(t, "locks", "--json", "--db", db).wantCode(t, 0).decode(t, &list)
	if len(list.Locks) != 3 {
		t.Fatalf("locks --json = %+v", list)
	}
	for i, want := range []struct {
		w, holder string
		ttl       time.Duration
	}{{"wf-a", "i1", duroxide.DefaultLockTTL}, {"wf-b", "i2", 2 * time.Hour}} {
		l := list.Locks[i]
		if l.WorkflowID != want.w || !l.IsLocked || l.InstanceID == nil || *l.InstanceID != want.holder ||
			l.HolderStatus != duroxide.StatePending || l.IsStale || l.LockedSince == nil || l.ExpiresAt == nil {
			t.Fatalf("lock %d = %+v", i, l)
		}
		if ttl := l.ExpiresAt.Sub(*l.LockedSince); ttl < want.ttl-time.Second || ttl > want.ttl+time.Second {
			t.Fatalf("lock %s lives %s, want %s", want.w, ttl, want.ttl)
		}
	}
	waitStale(t, client, "wf-c")
	r = runCLI(t, "locks", "list", "--db", db).wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "WORKFLOW  HOLDER  HOLDER STATUS  LOCKED SINCE") {
		t.Fatalf("locks list:\n%s", r.stdout)
	}
	for i, want := range [][]string{{"wf-a", "i1", "Pending", "no", "0"}, {"wf-b", "i2", "Pending", "no", "0"}, {"wf-c", "i3", "Pending", "yes", "0"}} {
		f := strings.Fields(lines[i+1])
		if len(f) != 7 || f[0] != want[0] || f[1] != want[1] || f[2] != want[2] || f[5] != want[3] || f[6] != want[4] {
			t.Fatalf("locks list row %d = %q, want %q:\n%s", i, lines[i+1], want, r.stdout)
		}
		if _, err := time.Parse(time.RFC3339, f[3]); err != nil {
			t.Fatalf("locked since %q: %v", f[3], err)
		}
	}

	// Status of one workflow.
	r = runCLI(t, "locks", "status", "wf-a", "--db", db).wantCode(t, 0)
	for _, want := range []string{"Workflow:       wf-a", "Locked:         yes", "Holder:         i1", "Holder status:  Pending", "Stale:          no", "Queued:         0", "Expires at:"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("locks status lacks %q:\n%s", want, r.stdout)
		}
	}
	var l duroxide.LockStatus
	runCLI(t, "locks", "status", "wf-a", "--json", "--db", db).wantCode(t, 0).decode(t, &l)
	if !l.IsLocked || l.InstanceID == nil || *l.InstanceID != "i1" {
		t.Fatalf("locks status --json = %+v", l)
	}
	if r := runCLI(t, "locks", "status", "nope", "--db", db).wantCode(t, 0); r.stdout != "workflow nope is not locked\n" {
		t.Fatalf("locks status of an unlocked workflow printed %q", r.stdout)
	}
	var raw map[string]any
	runCLI(t, "locks", "--json", "status", "nope", "--db", db).wantCode(t, 0).decode(t, &raw)
	if raw["workflowId"] != "nope" || raw["isLocked"] != false || raw["executionId"] != nil {
		t.Fatalf("locks status --json of an unlocked workflow = %v", raw)
	}
	r = runCLI(t, "locks", "status", "wf-c", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "Stale:          yes") {
		t.Fatalf("locks status of an expired lock:\n%s", r.stdout)
	}

	// Cleanup removes the expired lock only.
	if r := runCLI(t, "locks", "cleanup", "--db", db).wantCode(t, 0); r.stdout != "cleaned 1 expired or stale lock\n" {
		t.Fatalf("locks cleanup printed %q", r.stdout)
	}
	if r := runCLI(t, "locks", "cleanup", "--db", db).wantCode(t, 0); r.stdout != "cleaned 0 expired or stale locks\n" {
		t.Fatalf("second locks cleanup printed %q", r.stdout)
	}
	if r := runCLI(t, "locks", "status", "wf-c", "--db", db).wantCode(t, 0); !strings.Contains(r.stdout, "not locked") {
		t.Fatalf("the cleaned lock remains:\n%s", r.stdout)
	}

	// Release: exit 0 when there was a lock, 1 when there was none.
	r = runCLI(t, "locks", "release", "wf-b", "--db", db).wantCode(t, 0)
	if !strings.HasPrefix(r.stdout, "released the lock on wf-b (held by i2") {
		t.Fatalf("locks release printed %q", r.stdout)
	}
	runCLI(t, "locks", "release", "wf-b", "--db", db).wantErr(t, 1, "no lock on wf-b")
	list = locksJSON{}
	runCLI(t, "locks", "--json", "--db", db).wantCode(t, 0).decode(t, &list)
	if len(list.Locks) != 1 || list.Locks[0].WorkflowID != "wf-a" {
		t.Fatalf("locks after release and cleanup = %+v", list)
	}
}

func TestLocksUsage(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	tests := []struct {
		args  []string
		parts []string
	}{
		{[]string{"locks", "frob"}, []string{`unknown subcommand "frob"`, "release W"}},
		{[]string{"locks", "status"}, []string{"locks status: missing workflow ID"}},
		{[]string{"locks", "release"}, []string{"locks release: missing workflow ID"}},
		{[]string{"locks", "list", "x"}, []string{`unexpected argument "x"`}},
		{[]string{"locks", "cleanup", "--json"}, []string{"--json applies to"}},
		{[]string{"locks", "release", "w", "--json"}, []string{"--json applies to"}},
		{[]string{"locks", "status", "a", "b"}, []string{`unexpected argument "b"`}},
	}
	for _, tt := range tests {
		runCLI(t, append(tt.args, "--db", db)...).wantErr(t, 2, tt.parts...)
	}
	r := runCLI(t, "help", "locks").wantCode(t, 0)
	for _, want := range []string{"Usage: duroxide locks [list | status W | release W | cleanup]", "no lock on W", "-json", "-db"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("locks help lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStartLockKey(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	if r := runCLI(t, "start", "demo.Hello", "--id", "h1", "--lock-key", "wf", "--lock-ttl", "90m", "--db", db).wantCode(t, 0); r.stdout != "h1\n" {
		t.Fatalf("start --lock-key printed %q", r.stdout)
	}
	runCLI(t, "start", "demo.Hello", "--id", "h2", "--lock-key", "wf", "--db", db).
		wantErr(t, 1, "workflow wf is locked by instance h1", "--queue-if-locked", "duroxide locks status wf")
	runCLI(t, "status", "h2", "--db", db).wantErr(t, 1, "not found")

	var l duroxide.LockStatus
	runCLI(t, "locks", "status", "wf", "--json", "--db", db).wantCode(t, 0).decode(t, &l)
	if l.InstanceID == nil || *l.InstanceID != "h1" || l.ExpiresAt.Sub(*l.LockedSince).Round(time.Minute) != 90*time.Minute {
		t.Fatalf("lock after start --lock-ttl 90m = %+v", l)
	}

	// Queued: stored Pending, starts when h1 ends.
	r := runCLI(t, "start", "demo.Hello", "--id", "h3", "--lock-key", "wf", "--queue-if-locked", "--db", db).wantCode(t, 0)
	if r.stdout != "h3\n" || !strings.Contains(r.stderr, "queued: workflow wf is locked by instance h1") {
		t.Fatalf("start --queue-if-locked: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	runCLI(t, "locks", "status", "wf", "--json", "--db", db).wantCode(t, 0).decode(t, &l)
	if *l.InstanceID != "h1" || l.Queued != 1 {
		t.Fatalf("lock with a queued start = %+v", l)
	}

	// The lock is free once its holder ends.
	client := startRuntime(t, path)
	waitState(t, client, "h1", duroxide.StateCompleted)
	waitState(t, client, "h3", duroxide.StateCompleted)
	runCLI(t, "start", "demo.Hello", "--id", "h4", "--lock-key", "wf", "--wait", "--timeout", "20s", "--db", db).wantCode(t, 0)

	for _, tt := range []struct {
		args []string
		part string
	}{
		{[]string{"--lock-ttl", "1h"}, "only apply with --lock-key"},
		{[]string{"--queue-if-locked"}, "only apply with --lock-key"},
		{[]string{"--lock-key", "wf", "--lock-ttl", "-1s"}, "--lock-ttl must not be negative"},
	} {
		runCLI(t, append([]string{"start", "demo.Hello", "--db", db}, tt.args...)...).wantErr(t, 2, tt.part)
	}
}

// TestStartReplaceIfLocked: start --replace-if-locked cancels the holder
// in the start's transaction and names it, directly and through the HTTP
// API.
func TestStartReplaceIfLocked(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	srv, _ := apiServer(t, path)
	input := `{"timeoutSeconds": 3600}`
	runCLI(t, "start", "demo.Approval", "--id", "r1", "--input", input, "--lock-key", "wf", "--db", db).wantCode(t, 0)
	var out struct {
		InstanceID         string `json:"instanceId"`
		ReplacedInstanceID string `json:"replacedInstanceId"`
	}
	r := runCLI(t, "start", "demo.Approval", "--id", "r2", "--input", input, "--lock-key", "wf", "--replace-if-locked", "--json", "--db", db).wantCode(t, 0)
	r.decode(t, &out)
	if out.InstanceID != "r2" || out.ReplacedInstanceID != "r1" || !strings.Contains(r.stderr, "replaced: canceled instance r1, the holder of workflow wf; r2 starts when it ends") {
		t.Fatalf("start --replace-if-locked: %+v, stderr %q", out, r.stderr)
	}
	// Through the server: the holder is r1 (still ending) or r2.
	r = runCLI(t, "start", "demo.Approval", "--id", "r3", "--input", input, "--lock-key", "wf", "--replace-if-locked",
		"--server", srv.URL, "--auth-token", testToken).wantCode(t, 0)
	if r.stdout != "r3\n" || !regexp.MustCompile(`^replaced: canceled instance r[12], the holder of workflow wf; r3 starts when it ends\n$`).MatchString(r.stderr) {
		t.Fatalf("start --replace-if-locked --server: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	client := startRuntime(t, path)
	waitState(t, client, "r1", duroxide.StateCanceled)
	for _, args := range [][]string{{"--replace-if-locked"}, {"--lock-key", "wf", "--replace-if-locked", "--queue-if-locked"}} {
		runCLI(t, append([]string{"start", "demo.Hello", "--db", db}, args...)...).wantErr(t, 2, "--replace-if-locked")
	}
}

func TestStartIdempotencyKey(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	if r := runCLI(t, "start", "demo.Hello", "--id", "a", "--idempotency-key", "k1", "--db", db).wantCode(t, 0); r.stdout != "a\n" || r.stderr != "" {
		t.Fatalf("first start: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r := runCLI(t, "start", "demo.Hello", "--id", "b", "--idempotency-key", "k1", "--db", db).wantCode(t, 0)
	if r.stdout != "a\n" || !strings.Contains(r.stderr, `duplicate start: idempotency key "k1" already started instance a`) {
		t.Fatalf("repeated start: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	runCLI(t, "status", "b", "--db", db).wantErr(t, 1, "not found")

	var out struct {
		InstanceID string `json:"instanceId"`
		Duplicate  bool   `json:"duplicate"`
	}
	// A generated ID is reported back on the repeat.
	runCLI(t, "start", "demo.Hello", "--idempotency-key", "k2", "--json", "--db", db).wantCode(t, 0).decode(t, &out)
	first := out.InstanceID
	if first == "" || out.Duplicate {
		t.Fatalf("first start --json = %+v", out)
	}
	out.InstanceID, out.Duplicate = "", false
	runCLI(t, "start", "demo.Hello", "--idempotency-key", "k2", "--json", "--db", db).wantCode(t, 0).decode(t, &out)
	if out.InstanceID != first || !out.Duplicate {
		t.Fatalf("repeated start --json = %+v, want %s", out, first)
	}
	// The key is checked before the lock: a duplicate is not refused by
	// the lock its own instance holds.
	runCLI(t, "start", "demo.Hello", "--id", "c", "--idempotency-key", "k3", "--lock-key", "w", "--db", db).wantCode(t, 0)
	if r := runCLI(t, "start", "demo.Hello", "--id", "d", "--idempotency-key", "k3", "--lock-key", "w", "--db", db).wantCode(t, 0); r.stdout != "c\n" {
		t.Fatalf("repeated locked start printed %q", r.stdout)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeBadTriggers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string // "" = no file
		parts   []string
	}{
		{"missing file", "", []string{"--triggers", "loading triggers"}},
		{"malformed JSON", `{"triggers": [`, []string{"--triggers", "parsing triggers"}},
		{"unknown field", `{"triggers": [{"id": "a", "orchestration": "demo.Hello", "color": "red"}]}`, []string{"color"}},
		{"bad concurrency", `{"triggers": [{"id": "a", "orchestration": "demo.Hello", "concurrency": "sometimes"}]}`, []string{`trigger 0 ("a")`, "concurrency"}},
		{"no orchestration", `{"triggers": [{"id": "a"}]}`, []string{"orchestration", "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "absent.json")
			if tt.content != "" {
				file = writeFile(t, "triggers.json", tt.content)
			}
			db, path := tempDB(t)
			runCLI(t, "serve", "--addr", "127.0.0.1:0", "--triggers", file, "--db", db).wantErr(t, 1, tt.parts...)
			if _, err := os.Stat(path); err == nil {
				t.Fatalf("serve with a bad triggers file created the store")
			}
		})
	}
}

func TestServeTriggers(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "triggers.json", `{"triggers": [
		{"id": "hello", "workflowId": "wf-hello", "orchestration": "demo.Hello", "concurrency": "exclusive", "lockTtl": "1h"},
		{"id": "approve", "orchestration": "demo.Approval"},
		{"id": "fan", "orchestration": "demo.FanOut", "concurrency": "parallel"}
	]}`)
	db, _ := tempDB(t)
	s := serve(t, "--demo", "--triggers", file, "--db", db)
	out := s.stdout.String()
	for _, want := range []string{
		"webhook hello → POST " + s.url + "/api/webhooks/hello (demo.Hello, exclusive, workflow wf-hello)\n",
		"webhook approve → POST " + s.url + "/api/webhooks/approve (demo.Approval, exclusive, workflow approve)\n",
		"webhook fan → POST " + s.url + "/api/webhooks/fan (demo.FanOut, parallel)\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("serve output lacks %q:\n%s", want, out)
		}
	}

	type webhookResp struct {
		Success             bool   `json:"success"`
		ExecutionID         string `json:"executionId"`
		Duplicate           bool   `json:"duplicate"`
		ExistingExecutionID string `json:"existingExecutionId"`
	}
	post := func(id, body string, wantCode int) webhookResp {
		t.Helper()
		code, b := httpDo(t, "POST", s.url+"/api/webhooks/"+id, body)
		var resp webhookResp
		if err := json.Unmarshal(b, &resp); code != wantCode || err != nil {
			t.Fatalf("POST /api/webhooks/%s = %d %s, want %d", id, code, b, wantCode)
		}
		return resp
	}

	// The webhook starts demo.Hello, run by serve's runtime.
	hello := post("hello", `"Ada"`, http.StatusOK)
	if !hello.Success || hello.ExecutionID == "" || hello.Duplicate {
		t.Fatalf("webhook hello = %+v", hello)
	}
	code, body := httpDo(t, "GET", s.url+"/api/instances/"+hello.ExecutionID+"?wait=20s", "")
	var st duroxide.Status
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.State != duroxide.StateCompleted || string(st.Output) != `"Hello, Ada!"` {
		t.Fatalf("GET the webhook's instance = %d %s", code, body)
	}

	// Exclusive: a second call while the first instance waits is refused,
	// and the CLI shows the lock.
	first := post("approve", `{"timeoutSeconds": 600}`, http.StatusOK)
	second := post("approve", `{"timeoutSeconds": 600}`, http.StatusConflict)
	if second.Success || second.ExistingExecutionID != first.ExecutionID {
		t.Fatalf("second exclusive call = %+v, want the holder %s", second, first.ExecutionID)
	}
	var l duroxide.LockStatus
	runCLI(t, "locks", "status", "approve", "--json", "--db", db).wantCode(t, 0).decode(t, &l)
	if !l.IsLocked || l.InstanceID == nil || *l.InstanceID != first.ExecutionID {
		t.Fatalf("lock of the exclusive trigger = %+v", l)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
}

// TestServeTriggerChecks: serve refuses triggers it can tell would fail:
// an orchestration its runtime lacks (--demo), a secret that is not set.
func TestServeTriggerChecks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, content string
		args          []string
		parts         []string
	}{
		{"unknown orchestration with --demo", `{"triggers": [{"id": "a", "orchestration": "demo.Helo"}]}`, []string{"--demo"},
			[]string{`trigger "a"`, `"demo.Helo" is not registered`}},
		{"unknown version with --demo", `{"triggers": [{"id": "a", "orchestration": "demo.Hello", "version": "9.0.0"}]}`, []string{"--demo"},
			[]string{`trigger "a"`, `no version "9.0.0"`}},
		{"secret not set", `{"triggers": [{"id": "a", "orchestration": "demo.Hello", "auth": {"type": "github", "secretEnv": "GH_SECRET"}}]}`, nil,
			[]string{`trigger "a"`, "GH_SECRET", "not set"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := writeFile(t, "triggers.json", tt.content)
			db, path := tempDB(t)
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--triggers", file, "--db", db}, tt.args...)
			r := runCLI(t, args...)
			r.wantErr(t, 1, tt.parts...)
			// Checked before anything started: no store, no runtime.
			if r.stdout != "" {
				t.Fatalf("serve printed before refusing its settings:\n%s", r.stdout)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("serve opened the store before refusing its settings (stat: %v)", err)
			}
		})
	}
}

// TestServeSignedTrigger: serve reads a trigger's secret from the
// environment and answers 401 to unsigned calls; without --demo an
// orchestration it cannot check is a warning.
func TestServeSignedTrigger(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "triggers.json", `{"triggers": [
		{"id": "gh", "orchestration": "my.Orchestration", "concurrency": "parallel", "auth": {"type": "github", "secretEnv": "GH_SECRET"}}
	]}`)
	db, _ := tempDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	s := &serving{stdout: newLineWriter(), stderr: newLineWriter(), cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(s.exited)
		env := map[string]string{"GH_SECRET": "s3cret"}
		s.code = run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--triggers", file, "--db", db}, s.stdout, s.stderr,
			func(k string) string { return env[k] })
	}()
	t.Cleanup(func() { cancel(); <-s.exited })
	s.url = s.stdout.waitLine(t, "listening on ", s.exited)
	if want := "webhook gh → POST " + s.url + "/api/webhooks/gh (my.Orchestration, parallel, github auth, secret $GH_SECRET)\n"; !strings.Contains(s.stdout.String(), want) {
		t.Fatalf("serve output lacks %q:\n%s", want, s.stdout)
	}
	if code, body := httpDo(t, "POST", s.url+"/api/webhooks/gh", `{}`); code != http.StatusUnauthorized {
		t.Fatalf("unsigned call = %d %s, want 401", code, body)
	}
	if !strings.Contains(s.stderr.String(), "my.Orchestration") || !strings.Contains(s.stderr.String(), "WARN") {
		t.Fatalf("stderr lacks the warning about my.Orchestration:\n%s", s.stderr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
}

// start --instance-timeout records the instance deadline
// (StartOptions.Timeout) with the start.
func TestStartInstanceTimeout(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	runCLI(t, "start", "demo.Hello", "--instance-timeout", "-1s", "--db", db).wantErr(t, 2, "--instance-timeout must not be negative")
	runCLI(t, "start", "demo.Approval", "--id", "t1", "--instance-timeout", "90m", "--input", `{"timeoutSeconds": 600}`, "--db", db).wantCode(t, 0)
	client := startRuntime(t, path)
	// The start event is in the history once the first turn commits: wait
	// for t1 to leave Pending, then read it once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for etag := ""; ; {
		st, err := client.WaitForStatusChange(ctx, "t1", etag)
		if err != nil {
			t.Fatalf("t1 did not start: %v", err)
		}
		if st.State != duroxide.StatePending {
			break
		}
		etag = st.ETag
	}
	h, err := client.GetHistory(ctx, "t1", 0)
	if err != nil || len(h) == 0 {
		t.Fatalf("t1's history: %d events, %v", len(h), err)
	}
	if ev := h[0]; ev.Kind != history.OrchestrationStarted || ev.FireAtMs-ev.TimestampMs != (90*time.Minute).Milliseconds() {
		t.Fatalf("first event %+v, want a start with a deadline 90m after it", ev)
	}
}
