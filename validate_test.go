package duroxide_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func newValidationClient(t *testing.T) *duroxide.Client {
	t.Helper()
	db, err := sqlite.Open(context.Background(), "", nil)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return duroxide.NewClient(db)
}

// TestClientRejectsMalformedIdentifiers checks the identifier rules every
// entry point (Go API, HTTP, CLI) shares: nothing malformed reaches the store.
func TestClientRejectsMalformedIdentifiers(t *testing.T) {
	ctx := context.Background()
	c := newValidationClient(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	starts := []struct {
		name     string
		id, orch string
		opts     *duroxide.StartOptions
	}{
		{"empty ID", "", "O", nil},
		{"dot ID", ".", "O", nil},
		{"dot-dot ID", "..", "O", nil},
		{"slash in ID", "a/b", "O", nil},
		{"newline in ID", "a\nb", "O", nil},
		{"NUL in ID", "a\x00b", "O", nil},
		{"DEL in ID", "a\x7fb", "O", nil},
		{"C1 control in ID", "a\u0085b", "O", nil},
		{"invalid UTF-8 ID", "a\xffb", "O", nil},
		{"ID too long", long(duroxide.MaxInstanceIDLength + 1), "O", nil},
		{"empty orchestration", "id", "", nil},
		{"orchestration with escape", "id", "O\x1b[31m", nil},
		{"orchestration too long", "id", long(duroxide.MaxNameLength + 1), nil},
		{"version with tab", "id", "O", &duroxide.StartOptions{Version: "1\t2"}},
		{"lock key too long", "id", "O", &duroxide.StartOptions{LockKey: long(duroxide.MaxKeyLength + 1)}},
		{"lock key invalid UTF-8", "id", "O", &duroxide.StartOptions{LockKey: "\xc3"}},
		{"idempotency key with CR", "id", "O", &duroxide.StartOptions{IdempotencyKey: "k\r"}},
	}
	for _, tc := range starts {
		t.Run("start/"+tc.name, func(t *testing.T) {
			err := c.StartOrchestration(ctx, tc.id, tc.orch, nil, tc.opts)
			if !errors.Is(err, duroxide.ErrInvalidArgument) {
				t.Fatalf("StartOrchestration(%q, %q): %v, want ErrInvalidArgument", tc.id, tc.orch, err)
			}
		})
	}
	// The longest accepted values are accepted.
	if err := c.StartOrchestration(ctx, long(duroxide.MaxInstanceIDLength), long(duroxide.MaxNameLength), nil,
		&duroxide.StartOptions{LockKey: long(duroxide.MaxKeyLength), IdempotencyKey: long(duroxide.MaxKeyLength)}); err != nil {
		t.Fatalf("start at the limits: %v", err)
	}
	if err := c.StartOrchestration(ctx, "ünïcødé id:1.x", "O", nil, nil); err != nil {
		t.Fatalf("start with a Unicode ID: %v", err)
	}

	others := []struct {
		name string
		call func() error
	}{
		{"raise with control character in event", func() error { return c.RaiseEvent(ctx, "ünïcødé id:1.x", "ev\x07", nil) }},
		{"raise with long event", func() error { return c.RaiseEvent(ctx, "ünïcødé id:1.x", long(duroxide.MaxNameLength+1), nil) }},
		{"raise to invalid UTF-8 ID", func() error { return c.RaiseEvent(ctx, "\xff", "ev", nil) }},
		{"cancel control ID", func() error { return c.CancelInstance(ctx, "a\x00", "") }},
		{"status control ID", func() error { _, err := c.GetStatus(ctx, "a\x1b"); return err }},
		{"history invalid ID", func() error { _, err := c.GetHistory(ctx, "\xfe", 0); return err }},
		{"executions invalid ID", func() error { _, err := c.ListExecutions(ctx, "a\x00"); return err }},
		{"purge invalid ID", func() error { return c.PurgeInstance(ctx, "a\n", true) }},
		{"lock with control character", func() error { _, err := c.GetLock(ctx, "w\x00"); return err }},
		{"release invalid lock", func() error { _, err := c.ReleaseLock(ctx, "\xff"); return err }},
	}
	for _, tc := range others {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, duroxide.ErrInvalidArgument) {
				t.Fatalf("%v, want ErrInvalidArgument", err)
			}
		})
	}
}

// TestTerminalInstanceRefusesEventsAndCancel checks that RaiseEvent and
// CancelInstance on an ended instance return *InstanceTerminalError and
// change nothing.
func TestTerminalInstanceRefusesEventsAndCancel(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := duroxide.NewClient(db)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Gate", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		err := ctx.WaitForEvent("go").Await(&s)
		return s, err
	})
	rt, err := duroxide.StartRuntime(ctx, db, reg, nil)
	if err != nil {
		t.Fatalf("StartRuntime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })

	if err := c.StartOrchestration(ctx, "done", "Gate", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.RaiseEvent(ctx, "done", "go", "x"); err != nil {
		t.Fatalf("RaiseEvent on a running instance: %v", err)
	}
	before, err := c.WaitForOrchestration(ctx, "done")
	if err != nil || before.State != duroxide.StateCompleted {
		t.Fatalf("wait: %v %+v", err, before)
	}
	var te *duroxide.InstanceTerminalError
	if err := c.RaiseEvent(ctx, "done", "go", "y"); !errors.As(err, &te) || te.State != duroxide.StateCompleted || te.InstanceID != "done" {
		t.Fatalf("RaiseEvent on a completed instance: %v, want *InstanceTerminalError{done, Completed}", err)
	}
	if err := c.CancelInstance(ctx, "done", "late"); !errors.Is(err, duroxide.ErrInstanceTerminal) {
		t.Fatalf("CancelInstance on a completed instance: %v, want ErrInstanceTerminal", err)
	}
	after, err := c.GetStatus(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != duroxide.StateCompleted {
		t.Fatalf("the refused calls changed the instance: before %+v, after %+v", before, after)
	}
}

// The text rules, one by one, through the exported checks and through the
// Client calls that apply them.
func TestTextRules(t *testing.T) {
	ctx := context.Background()
	c := newValidationClient(t)
	bad := []struct {
		name, text, want string
	}{
		{"invalid UTF-8", "a\xffb", "not valid UTF-8"},
		{"NUL", "a\x00b", "control character U+0000"},
		{"escape", "a\x1b[31m", "control character U+001B"},
		{"C1 control", "a\u0085b", "control character U+0085"},
		{"right-to-left override", "invoice\u202efdp.exe", "bidirectional control U+202E"},
		{"left-to-right embedding", "a\u202ab", "bidirectional control U+202A"},
		{"pop directional formatting", "a\u202cb", "bidirectional control U+202C"},
		{"right-to-left isolate", "a\u2067b", "bidirectional control U+2067"},
		{"pop directional isolate", "a\u2069b", "bidirectional control U+2069"},
		{"right-to-left mark", "a\u200fb", "bidirectional control U+200F"},
		{"arabic letter mark", "a\u061cb", "bidirectional control U+061C"},
		{"replacement character", "a\ufffdb", "U+FFFD"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			checks := map[string]error{
				"ValidateInstanceID": duroxide.ValidateInstanceID(tc.text),
				"ValidateName":       duroxide.ValidateName(tc.text),
				"ValidateKey":        duroxide.ValidateKey(tc.text),
				"ValidateText":       duroxide.ValidateText("filter", tc.text, 100),
				"start ID":           c.StartOrchestration(ctx, tc.text, "O", nil, nil),
				"start name":         c.StartOrchestration(ctx, "id", tc.text, nil, nil),
				"start version":      c.StartOrchestration(ctx, "id", "O", nil, &duroxide.StartOptions{Version: tc.text}),
				"start lock key":     c.StartOrchestration(ctx, "id", "O", nil, &duroxide.StartOptions{LockKey: tc.text}),
				"start idempotency":  c.StartOrchestration(ctx, "id", "O", nil, &duroxide.StartOptions{IdempotencyKey: tc.text}),
				"raise event name":   c.RaiseEvent(ctx, "id", tc.text, nil),
			}
			for call, err := range checks {
				if !errors.Is(err, duroxide.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s(%q): %v; want ErrInvalidArgument saying %q", call, tc.text, err, tc.want)
				}
			}
		})
	}
	if _, err := c.GetStatus(ctx, "id"); !errors.Is(err, duroxide.ErrNotFound) {
		t.Fatalf("a refused start was stored: %v", err)
	}

	// Other scripts, emoji and joiners are fine.
	for _, ok := range []string{"ünïcødé", "עברית-123", "عربي", "日本語", "🙂‍↔️", "a b"} {
		if err := duroxide.ValidateInstanceID(ok); err != nil {
			t.Errorf("ValidateInstanceID(%q): %v", ok, err)
		}
		if err := duroxide.ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	// Lengths and the ID-only rules.
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"empty ID", duroxide.ValidateInstanceID("")},
		{"dot-dot ID", duroxide.ValidateInstanceID("..")},
		{"slash in ID", duroxide.ValidateInstanceID("a/b")},
		{"long ID", duroxide.ValidateInstanceID(strings.Repeat("i", duroxide.MaxInstanceIDLength+1))},
		{"empty name", duroxide.ValidateName("")},
		{"long name", duroxide.ValidateName(strings.Repeat("n", duroxide.MaxNameLength+1))},
		{"long key", duroxide.ValidateKey(strings.Repeat("k", duroxide.MaxKeyLength+1))},
		{"long text", duroxide.ValidateText("filter", "abc", 2)},
		{"lookup with control", duroxide.ValidateLookupID("a\x07")},
		{"long lookup", duroxide.ValidateLookupID(strings.Repeat("l", duroxide.MaxLookupIDLength+1))},
	} {
		if !errors.Is(tc.err, duroxide.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, tc.err)
		}
	}
	if err := duroxide.ValidateText("filter", "", 10); err != nil {
		t.Errorf("empty text: %v", err)
	}
	// Lookups let bidirectional controls, U+FFFD and "/" through, so
	// instances created before the rules stay reachable.
	for _, id := range []string{"a\u202eb", "a\ufffdb", "parent/child", strings.Repeat("l", duroxide.MaxLookupIDLength)} {
		if err := duroxide.ValidateLookupID(id); err != nil {
			t.Errorf("ValidateLookupID(%q): %v", id, err)
		}
		if _, err := c.GetStatus(ctx, id); !errors.Is(err, duroxide.ErrNotFound) {
			t.Errorf("GetStatus(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// Through HTTP, the JSON escape of an unpaired surrogate, which
// encoding/json decodes to U+FFFD, and a right-to-left override are
// refused with 400 and nothing is stored.
func TestTextRulesThroughHTTP(t *testing.T) {
	c := newValidationClient(t)
	h, err := httpapi.NewHandler(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"orchestration":"demo.Hello","instanceId":"bad\ud800id"}`,
		`{"orchestration":"demo.Hello","instanceId":"bad\u202eid"}`,
		`{"orchestration":"demo.\ud800Hello","instanceId":"badid"}`,
	} {
		req := httptest.NewRequest(http.MethodPost, "http://localhost/api/instances", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("POST %s: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
	page, err := c.ListInstances(context.Background(), nil)
	if err != nil || len(page.Instances) != 0 {
		t.Fatalf("instances stored: %v %+v", err, page)
	}
}
