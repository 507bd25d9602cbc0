package cli

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// statusLine is a line of 'duroxide status': a field name and a colon.
// statusLine matches the lines of 'duroxide status': "Field: value", and
// the "Waiting for:" heading with its "  - ..." entries.
var statusLine = regexp.MustCompile(`^([A-Z][a-z ]+: +\S|Waiting for( \(STALLED\))?:$|  - \S)`)

const testToken = "t0k-3n"

// requireBearer answers 401 to requests without the bearer token, as a
// server started with --auth-token does.
func requireBearer(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": "unauthorized", "details": "missing or wrong bearer token"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// apiServer serves the HTTP API, with a token, over the store at path,
// where the demo runtime runs.
func apiServer(t *testing.T, path string) (*httptest.Server, *duroxide.Client) {
	t.Helper()
	client := startRuntime(t, path)
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	h, err := httpapi.NewHandler(client, &httpapi.Options{Registry: reg, AuthToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(requireBearer(h, testToken))
	t.Cleanup(srv.Close)
	return srv, client
}

// TestClientModeSameAsDirect runs each command through the server
// (--server, or $DUROXIDE_SERVER, with the token) and against the store
// (--db): same output, same exit codes.
func TestClientModeSameAsDirect(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	srv, client := apiServer(t, path)
	env := map[string]string{envServer: srv.URL, envAuthToken: testToken}
	remote := func(args ...string) result {
		t.Helper()
		return runCLIEnv(t, env, args...)
	}
	direct := func(args ...string) result {
		t.Helper()
		return runCLI(t, append(args, "--db", db)...)
	}
	same := func(args ...string) result {
		t.Helper()
		r, d := remote(args...), direct(args...)
		if r != d {
			t.Fatalf("%v:\nthrough the server: %d\n%s%s\ndirect: %d\n%s%s", args, r.code, r.stdout, r.stderr, d.code, d.stdout, d.stderr)
		}
		return r
	}

	// start --wait through the server; flags instead of the environment.
	r := runCLI(t, "start", "demo.Hello", "--id", "h1", "--input", `"Ada"`, "--wait", "--server", srv.URL+"/", "--auth-token", testToken).wantCode(t, 0)
	if !strings.Contains(r.stdout, "h1\n") || !strings.Contains(r.stdout, "Completed") || !strings.Contains(r.stdout, `"Hello, Ada!"`) {
		t.Fatalf("start --wait through the server:\n%s", r.stdout)
	}
	same("status", "h1").wantCode(t, 0)
	same("status", "h1", "--json").wantCode(t, 0)
	same("history", "h1").wantCode(t, 0)
	same("history", "h1", "--json").wantCode(t, 0)
	same("history", "h1", "--execution", "7").wantErr(t, 1, "no execution 7")
	same("list").wantCode(t, 0)
	same("list", "--json", "--status", "Completed", "--orchestration", "demo.Hello", "--limit", "5").wantCode(t, 0)
	// The filters shared with bulk go through the API's query.
	if r := same("list", "--prefix", "h", "--finished-after", "1h", "--created-before", "2100-01-01T00:00:00Z").wantCode(t, 0); !strings.Contains(r.stdout, "h1") {
		t.Fatalf("list by prefix and times:\n%s", r.stdout)
	}
	if r := same("list", "--error-kind", "application", "--version", "9").wantCode(t, 0); strings.Contains(r.stdout, "h1") {
		t.Fatalf("list by error kind lists h1:\n%s", r.stdout)
	}
	same("list", "--wait-kind", "event").wantCode(t, 0)
	same("list", "--wait-kind", "godot").wantErr(t, 2, "godot")
	// Not found: each mode says where it looked and what to check.
	remote("status", "nope").wantErr(t, 1, `instance "nope" not found on the server at `+srv.URL, "--server", "duroxide list --server "+srv.URL)
	if r := direct("status", "nope"); !strings.Contains(r.stderr, "--server") {
		r.wantErr(t, 1, `instance "nope" not found in this store`, "--db")
	} else {
		t.Fatalf("direct mode's not found mentions --server: %s", r.stderr)
	}
	// An instance that ended: raise and cancel fail alike, in both modes.
	same("cancel", "h1").wantErr(t, 1, "instance h1 already ended (Completed): nothing to cancel")
	same("raise", "h1", demo.ApprovalEvent).wantErr(t, 1, "instance h1 already ended (Completed): an event would be ignored")
	same("list", "--cursor", "bogus").wantErr(t, 2, "--cursor")

	// Idempotency: the repeat names the first instance.
	first := remote("start", "demo.Hello", "--idempotency-key", "k1", "--input", `"x"`).wantCode(t, 0)
	again := remote("start", "demo.Hello", "--idempotency-key", "k1", "--input", `"x"`, "--json").wantCode(t, 0)
	var dup struct {
		InstanceID string `json:"instanceId"`
		Duplicate  bool   `json:"duplicate"`
	}
	again.decode(t, &dup)
	if !dup.Duplicate || dup.InstanceID+"\n" != first.stdout || !strings.Contains(again.stderr, "duplicate start") {
		t.Fatalf("repeated key: %+v %q, first %q", dup, again.stderr, first.stdout)
	}

	// Events, locks, cancel and purge.
	remote("start", "demo.Approval", "--id", "a1", "--input", `{"timeoutSeconds": 600}`, "--lock-key", "w1").wantCode(t, 0)
	// a1's first turn extends its lock (and so the expiry both modes
	// print): wait for it, boundedly, before comparing.
	for giveUp := time.Now().Add(time.Minute); ; {
		var st duroxide.Status
		direct("status", "a1", "--json").wantCode(t, 0).decode(t, &st)
		if st.State == duroxide.StateRunning {
			break
		}
		if time.Now().After(giveUp) {
			t.Fatalf("a1 is still %s", st.State)
		}
		runtime.Gosched()
	}
	same("start", "demo.Approval", "--id", "a2", "--lock-key", "w1").wantErr(t, 1, "workflow w1 is locked by instance a1")
	same("start", "demo.Approval", "--id", "a1").wantErr(t, 1, `instance "a1" already exists`)
	if r := remote("locks", "status", "w1"); r.code != 0 || !strings.Contains(r.stdout, "a1") {
		t.Fatalf("locks status w1: %+v", r)
	}
	same("locks", "status", "w1", "--json").wantCode(t, 0)
	same("locks", "list", "--json").wantCode(t, 0)
	same("purge", "a1").wantErr(t, 1, "instance a1 is still running")
	remote("raise", "a1", demo.ApprovalEvent, "--data", "true").wantCode(t, 0)
	// Signal-with-start: the first raise of each mode starts its instance
	// with the event queued, the second delivers to it, a repeated
	// delivery key is a duplicate.
	for _, m := range []struct {
		id  string
		run func(...string) result
	}{{"s-remote", remote}, {"s-direct", direct}} {
		sws := func(extra ...string) result {
			t.Helper()
			return m.run(append([]string{"raise", m.id, "note", "--data", "1", "--start", demo.Approval,
				"--input", `{"timeoutSeconds": 600}`}, extra...)...)
		}
		if r := sws("--idempotency-key", "k-"+m.id).wantCode(t, 0); r.stdout != "started demo.Approval as "+m.id+" with note\n" {
			t.Fatalf("%s: first raise --start printed %q", m.id, r.stdout)
		}
		if r := sws().wantCode(t, 0); r.stdout != "raised note on "+m.id+"\n" {
			t.Fatalf("%s: second raise --start printed %q", m.id, r.stdout)
		}
		if r := sws("--idempotency-key", "k-"+m.id).wantCode(t, 0); r.stdout != "" || !strings.Contains(r.stderr, "duplicate") {
			t.Fatalf("%s: repeated key: %+v", m.id, r)
		}
	}
	same("raise", "h1", "note", "--start", demo.Approval).wantErr(t, 1, "instance h1 already ended (Completed)")
	// A plain raise with an idempotency key: the repeat delivers nothing
	// and says so, exiting 0; the instance receives one note.
	for _, m := range []struct {
		id  string
		run func(...string) result
	}{{"n-remote", remote}, {"n-direct", direct}} {
		direct("start", "demo.Approval", "--id", m.id, "--input", `{"timeoutSeconds": 600}`).wantCode(t, 0)
		if r := m.run("raise", m.id, "note", "--data", "1", "--idempotency-key", "n1").wantCode(t, 0); r.stdout != "raised note on "+m.id+"\n" {
			t.Fatalf("%s: keyed raise printed %q", m.id, r.stdout)
		}
		r := m.run("raise", m.id, "note", "--data", "2", "--idempotency-key", "n1").wantCode(t, 0)
		if r.stdout != "" || r.stderr != "duplicate: idempotency key n1 was raised on "+m.id+" before; nothing delivered\n" {
			t.Fatalf("%s: repeated key: %+v", m.id, r)
		}
		m.run("raise", m.id, demo.ApprovalEvent, "--data", "true").wantCode(t, 0)
		waitState(t, client, m.id, duroxide.StateCompleted)
		hist, err := client.GetHistory(t.Context(), m.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, ev := range hist {
			if ev.Kind == history.ExternalEvent && ev.Name == "note" {
				notes = append(notes, string(ev.Data))
			}
		}
		if !slices.Equal(notes, []string{"1"}) {
			t.Fatalf("%s received the notes %v, want [1]", m.id, notes)
		}
	}
	same("raise", "h1", "note", "--idempotency-key", strings.Repeat("k", duroxide.MaxEventKeyLength+1)).
		wantErr(t, 2, fmt.Sprintf("the limit is %d", duroxide.MaxEventKeyLength))
	// Values: demo.Hello sets none; the output is the same in both modes.
	if r := same("values", "h1").wantCode(t, 0); r.stdout != "" {
		t.Fatalf("values of h1: %q", r.stdout)
	}
	if r := same("values", "h1", "--json").wantCode(t, 0); r.stdout != "{\n  \"values\": []\n}\n" {
		t.Fatalf("values --json of h1: %q", r.stdout)
	}
	same("values", "h1", "stage").wantErr(t, 1, "instance h1 holds no value stage")
	remote("values", "nope").wantErr(t, 1, `instance "nope" not found on the server`)
	direct("values", "nope").wantErr(t, 1, `instance "nope" not found in this store`)
	same("raise", "h1", "note", "--input", "1").wantErr(t, 2, "only apply with --start")
	if r := remote("status", "a1").wantCode(t, 0); !strings.Contains(r.stdout, "a1") {
		t.Fatalf("status a1: %s", r.stdout)
	}
	remote("start", "demo.Approval", "--id", "c1", "--input", `{"timeoutSeconds": 600}`).wantCode(t, 0)
	if r := remote("cancel", "c1", "--reason", "test").wantCode(t, 0); !strings.Contains(r.stdout, "cancellation of c1 requested") {
		t.Fatalf("cancel: %s", r.stdout)
	}
	if r := remote("start", "demo.Approval", "--id", "q1", "--lock-key", "w2", "--input", `{"timeoutSeconds": 600}`).wantCode(t, 0); r.stdout != "q1\n" {
		t.Fatalf("start q1: %q", r.stdout)
	}
	if r := remote("locks", "release", "w2").wantCode(t, 0); !strings.Contains(r.stdout, "released the lock on w2 (held by q1") {
		t.Fatalf("locks release: %s", r.stdout)
	}
	same("locks", "release", "w2").wantErr(t, 1, "no lock on w2")
	if r := remote("locks", "cleanup").wantCode(t, 0); !strings.HasPrefix(r.stdout, "cleaned ") {
		t.Fatalf("locks cleanup: %s", r.stdout)
	}
	if r := remote("purge", "q1", "--force").wantCode(t, 0); r.stdout != "purged q1\n" {
		t.Fatalf("purge --force: %q", r.stdout)
	}
	remote("status", "q1").wantErr(t, 1, `instance "q1" not found on the server`)
	direct("status", "q1").wantErr(t, 1, `instance "q1" not found in this store`)
}

// TestClientModeAuth: without the token, or with a wrong one, every
// command fails with one line saying to pass it.
func TestClientModeAuth(t *testing.T) {
	t.Parallel()
	_, path := tempDB(t)
	srv, _ := apiServer(t, path)
	for _, args := range [][]string{
		{"status", "x"}, {"list"}, {"start", "demo.Hello"}, {"history", "x"}, {"raise", "x", "e"},
		{"cancel", "x"}, {"purge", "x"}, {"locks"}, {"locks", "status", "w"}, {"locks", "cleanup"},
	} {
		runCLI(t, append(args, "--server", srv.URL)...).wantErr(t, 1, "requires an auth token (401)", "--auth-token", envAuthToken)
		runCLIEnv(t, map[string]string{envServer: srv.URL, envAuthToken: "wrong"}, args...).wantErr(t, 1, "refused the auth token (401)")
	}
	// Only the commands with an HTTP route take --server.
	runCLI(t, "migrate", "--server", srv.URL).wantErr(t, 2, "-server")
	// --db and --server exclude each other; --db wins over $DUROXIDE_SERVER.
	db, _ := tempDB(t)
	runCLI(t, "list", "--server", srv.URL, "--db", db).wantErr(t, 2, "--db and --server")
	runCLIEnv(t, map[string]string{envServer: "http://127.0.0.1:1"}, "list", "--db", "sqlite::memory:").wantCode(t, 0)
	for _, bad := range []string{"127.0.0.1:8080", "ftp://host", "http://", "http://h/?q=1"} {
		runCLI(t, "list", "--server", bad).wantErr(t, 2, "not a server URL")
	}
	runCLI(t, "list", "--server", "http://127.0.0.1:1").wantErr(t, 1, "cannot reach the server at http://127.0.0.1:1")
}

// TestOutputEscapesControlCharacters: IDs, names, errors and statuses with
// ESC sequences, newlines and tabs are printed escaped, so they can neither
// drive the terminal nor forge table rows; --json stays exact JSON.
func TestOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	const (
		clear  = "x\x1b[2J\x1b[H"
		forged = "a\nb1\tdemo.Hello\tCompleted"
		tabbed = "t\tab"
		bidi   = "evil\u202etxt.exe"
	)
	db, path := tempDB(t)
	store := openTestStore(t, path)
	for _, id := range []string{clear, forged, tabbed, bidi} {
		enqueueStart(t, store, id, "demo.\x1b]0;pwned\x07Orch", `"in\u0007put"`)
	}
	checkClean := func(t *testing.T, what, out string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\a", "\u202e", "\r"} {
			if strings.Contains(out, bad) {
				t.Fatalf("%s prints %q raw:\n%s", what, bad, out)
			}
		}
	}

	list := runCLI(t, "list", "--db", db).wantCode(t, 0)
	checkClean(t, "list", list.stdout)
	lines := strings.Split(strings.TrimSuffix(list.stdout, "\n"), "\n")
	if len(lines) != 5 { // header + 4 instances
		t.Fatalf("list prints %d lines, want 5 (a forged row?):\n%s", len(lines), list.stdout)
	}
	for _, want := range []string{`"x\x1b[2J\x1b[H"`, `"a\nb1\tdemo.Hello\tCompleted"`, `"t\tab"`, `"evil\u202etxt.exe"`, `"demo.\x1b]0;pwned\aOrch@1.0.0"`} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("list lacks %s:\n%s", want, list.stdout)
		}
	}
	// An ID with control characters cannot be looked up (the Client refuses
	// it), and the refusal is one escaped line; the others print escaped.
	for _, id := range []string{clear, forged, tabbed} {
		r := runCLI(t, "status", id, "--db", db)
		if r.code == 0 || strings.Count(r.stdout+r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "control character") {
			t.Errorf("status of %q: code %d, want one line refusing the control character: %q %q", id, r.code, r.stdout, r.stderr)
		}
		checkClean(t, "status refusal", r.stdout+r.stderr)
	}
	for _, id := range []string{bidi} {
		st := runCLI(t, "status", id, "--db", db).wantCode(t, 0)
		checkClean(t, "status", st.stdout)
		for _, line := range strings.Split(strings.TrimSuffix(st.stdout, "\n"), "\n") {
			if !statusLine.MatchString(line) {
				t.Errorf("status of %q has a line that is not a field (forged?): %q\n%s", id, line, st.stdout)
			}
		}
		h := runCLI(t, "history", id, "--db", db).wantCode(t, 0)
		checkClean(t, "history", h.stdout)
		// --json is exact JSON: the ID comes back byte for byte.
		var got duroxide.Status
		runCLI(t, "status", id, "--json", "--db", db).wantCode(t, 0).decode(t, &got)
		if got.InstanceID != id {
			t.Errorf("status --json: instanceId %q, want %q", got.InstanceID, id)
		}
	}
	// Errors naming such an ID are escaped too.
	r := runCLI(t, "purge", clear, "--db", db)
	r.wantErr(t, 1, `x\x1b[2J\x1b[H`)
	checkClean(t, "purge error", r.stderr)
	r = runCLI(t, "raise", forged, "e", "--data", "1", "--db", db)
	if strings.Count(r.stdout+r.stderr, "\n") != 1 {
		t.Errorf("raise on %q printed more than one line: %q %q", forged, r.stdout, r.stderr)
	}
	checkClean(t, "raise", r.stdout+r.stderr)
}

func TestSafe(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain-id_1.2":    "plain-id_1.2",
		"with space":      "with space",
		"héllo→":          "héllo→",
		"esc\x1b[31m":     `"esc\x1b[31m"`,
		"new\nline":       `"new\nline"`,
		"tab\t":           `"tab\t"`,
		"cr\r":            `"cr\r"`,
		"del\x7f":         `"del\x7f"`,
		"c1\u009b2J":      `"c1\u009b2J"`,
		"bidi\u202e":      `"bidi\u202e"`,
		"bad\xffutf8":     `"bad\xffutf8"`,
		"":                "",
		`back\slash"q"`:   `back\slash"q"`,
		"zero\u200bwidth": `"zero\u200bwidth"`,
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %s, want %s", in, got, want)
		}
	}
	if got, want := escapeText("a \x1b[2J b\xff \u202e"), `a \x1b[2J b\xff \u202e`; got != want {
		t.Errorf("escapeText = %s, want %s", got, want)
	}
}

// openTestStore opens the SQLite store at path until the test ends.
func openTestStore(t *testing.T, path string) *sqlite.Provider {
	t.Helper()
	p, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// enqueueStart stores the start of an instance through the provider,
// whatever its ID and name hold (the client may refuse such IDs).
func enqueueStart(t *testing.T, p provider.Provider, id, name, input string) {
	t.Helper()
	in := json.RawMessage(input)
	_, err := p.Enqueue(context.Background(), &provider.OrchestratorMessage{
		InstanceID: id,
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1,
			Name: name, Version: "1.0.0", Input: in},
		Create: &provider.NewInstance{OrchestrationName: name, OrchestrationVersion: "1.0.0", Input: in},
	})
	if err != nil {
		t.Fatalf("enqueueing %q: %v", id, err)
	}
}

// TestClientModeServerErrorNamesRequestID: a 5xx answer carries no cause,
// only the request ID the server logged it under; the CLI prints that ID
// so the operator can find the cause in the server's log.
func TestClientModeServerErrorNamesRequestID(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-7f3a")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"internal error","requestId":"req-7f3a"}`))
	}))
	t.Cleanup(srv.Close)
	runCLI(t, "status", "x", "--server", srv.URL).wantErr(t, 1, "answered 500", "internal error", "request ID req-7f3a")
}
