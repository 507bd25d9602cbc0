package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
)

// keyFromBody renders the idempotency key of a trigger with
// idempotencyKeyPath pointer for a call with body.
func keyFromBody(body []byte, pointer string) (string, error) {
	k, err := compileKeys(&Trigger{ID: "t", IdempotencyKeyPath: pointer})
	if err != nil {
		return "", err
	}
	return k.idempotencyKey.render(&callRequest{body: body}, "t", fieldIdempotencyKeyPath)
}

func TestKeyFromBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id": "evt_1", "n": 42, "f": 1.50, "a/b": "slash", "m~n": "tilde", "": "empty name",
		"list": [{"id": "first"}, {"id": "second"}], "obj": {"x": 1}, "nul": null, "yes": true, "blank": ""}`)
	for _, tc := range []struct {
		pointer, want string
		status        int // 0: found
	}{
		{"/id", "evt_1", 0},
		{"/n", "42", 0},
		{"/f", "1.50", 0}, // as written
		{"/a~1b", "slash", 0},
		{"/m~0n", "tilde", 0},
		{"/", "empty name", 0},
		{"/list/1/id", "second", 0},
		{"/list/0/id", "first", 0},
		{"/list/01/id", "", http.StatusBadRequest},
		{"/list/2/id", "", http.StatusBadRequest},
		{"/list/-/id", "", http.StatusBadRequest},
		{"/missing", "", http.StatusBadRequest},
		{"/id/deeper", "", http.StatusBadRequest},
		{"/obj", "", http.StatusBadRequest},
		{"/nul", "", http.StatusBadRequest},
		{"/yes", "", http.StatusBadRequest},
		{"/blank", "", http.StatusBadRequest},
	} {
		got, err := keyFromBody(body, tc.pointer)
		if tc.status == 0 {
			if err != nil || got != tc.want {
				t.Errorf("%s: got %q, %v; want %q", tc.pointer, got, err, tc.want)
			}
			continue
		}
		if code, _ := classify(err); err == nil || code != tc.status {
			t.Errorf("%s: got %q, %v; want status %d", tc.pointer, got, err, tc.status)
		}
	}
	for _, b := range []string{``, `null`, `"text"`, `[1]`} {
		if _, err := keyFromBody([]byte(b), "/id"); err == nil {
			t.Errorf("body %q: no error", b)
		}
	}
}

// TestKeyTemplateRender renders templates of constants, body values and
// headers, with literal braces and numbers kept as written.
func TestKeyTemplateRender(t *testing.T) {
	t.Parallel()
	call := &callRequest{
		header: http.Header{"X-Github-Delivery": {"d-1"}, "X-Twice": {"a", "b"}},
		body:   []byte(`{"id": 12345678901234567890, "f": 1.10, "e": -2E+3, "s": "ord", "a~b": {"c/d": "deep"}}`),
	}
	for _, tc := range []struct{ tmpl, want string }{
		{"plain", "plain"},
		{"order-{/id}", "order-12345678901234567890"},
		{"{/f}|{/e}", "1.10|-2E+3"},
		{"{/s}-{header:x-github-delivery}", "ord-d-1"},
		{"{{{/s}}}", "{ord}"},
		{"{/a~0b/c~1d}", "deep"},
	} {
		kt, err := parseTemplate(tc.tmpl)
		if err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		got, err := kt.render(call, "t", fieldInstanceID)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
	kt, err := parseTemplate("{header:X-Twice}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kt.render(call, "t", fieldLockKey); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("repeated header: %v", err)
	}
}

// TestLockConflictResponses checks the 409 bodies of lock conflicts, with
// and without the webhook's success field, and their counting. (SQLite
// serializes writers, so the concurrent kind is hard to provoke over HTTP.)
func TestLockConflictResponses(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	locked := &duroxide.WorkflowLockedError{WorkflowID: "w", ExistingInstanceID: "exec_abc"}
	contended := &duroxide.LockAcquisitionFailedError{WorkflowID: "w", InstanceID: "i", Reason: "race"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&webhookError{locked}, `{"success":false,"error":"Workflow currently executing","details":"Only one execution can run at a time. Currently executing: exec_abc","existingExecutionId":"exec_abc"}`},
		{&webhookError{contended}, `{"success":false,"error":"Concurrent execution attempted","details":"Another concurrent request acquired the execution lock"}`},
		{fmt.Errorf("starting: %w", locked), `{"error":"Workflow currently executing","details":"Only one execution can run at a time. Currently executing: exec_abc","existingExecutionId":"exec_abc"}`},
		{contended, `{"error":"Concurrent execution attempted","details":"Another concurrent request acquired the execution lock"}`},
		{&webhookError{badRequest("malformed JSON", "x")}, `{"success":false,"error":"malformed JSON","details":"malformed JSON: x"}`},
	} {
		rec := httptest.NewRecorder()
		s.fail(rec, httptest.NewRequest("POST", "/api/webhooks/t", nil), tc.err)
		if got := strings.TrimSpace(rec.Body.String()); got != tc.want || (rec.Code != http.StatusConflict && rec.Code != http.StatusBadRequest) {
			t.Errorf("%v:\n got %d %s\nwant %s", tc.err, rec.Code, got, tc.want)
		}
	}
	if l, c := s.lockConflicts.locked.Load(), s.lockConflicts.concurrent.Load(); l != 2 || c != 2 {
		t.Fatalf("counted %d locked, %d concurrent; want 2, 2", l, c)
	}
}

// FuzzParseTemplate: any template either parses or is refused with an
// error, and a parsed one renders, or refuses, any call without panicking,
// its constants kept as written.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"order-{/data/object/id}", "gh-{header:X-GitHub-Delivery}", "{{x}}", "{", "}", "{}", "{/a~", "{header:}", "a{/b}c{/d}"} {
		f.Add(s, `{"data": {"object": {"id": 7}}, "b": "x", "d": 1.5}`)
	}
	f.Fuzz(func(t *testing.T, src, body string) {
		kt, err := parseTemplate(src)
		if err != nil {
			return
		}
		if len(kt.parts) > maxTemplateParts {
			t.Fatalf("%q: %d parts", src, len(kt.parts))
		}
		call := &callRequest{header: http.Header{"X-Github-Delivery": {"d"}}, body: []byte(body)}
		got, err := kt.render(call, "t", fieldLockKey)
		if c, ok := kt.constant(); ok && (err != nil || got != c) {
			t.Fatalf("%q: constant rendered %q, %v; want %q", src, got, err, c)
		}
	})
}
