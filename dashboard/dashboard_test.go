package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/dashboard"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

func mustContain(t *testing.T, p page, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(p.body, w) {
			t.Fatalf("page (status %d) lacks %q:\n%s", p.status, w, p.body)
		}
	}
}

func mustNotContain(t *testing.T, p page, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(p.body, b) {
			t.Fatalf("page holds %q:\n%s", b, p.body)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := dashboard.New(nil, nil); err == nil {
		t.Fatal("New(nil client) succeeded")
	}
	if d, err := dashboard.New(duroxide.NewClient(nil), nil); err == nil {
		d.Close()
		t.Fatal("New(client without a store) succeeded")
	}
	for _, o := range []*dashboard.Options{{SampleEvery: -1}, {Samples: -1}, {Refresh: -1}, {AuthToken: "has space"}, {AllowedHosts: []string{"a/b"}}} {
		if d, err := dashboard.New(duroxide.NewClient(nil), o); err == nil {
			d.Close()
			t.Fatalf("New(%+v) succeeded", o)
		}
	}
}

// TestPages renders every page over a store with a completed, a failed
// and a waiting instance.
func TestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{triggers: []httpapi.Trigger{{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel}}})
	e.start(t, "hello-1", demo.Hello, "Ada", true)
	e.start(t, "fail-1", demo.Fail, "card declined", true)
	e.start(t, "wait-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300}, false)
	waitFor(t, "wait-1 to subscribe", func() bool {
		h, err := e.client.GetHistory(context.Background(), "wait-1", 0)
		return err == nil && len(h) >= 3
	})

	list := e.get(t, "/")
	if list.status != http.StatusOK {
		t.Fatalf("GET /: %d", list.status)
	}
	mustContain(t, list, "hello-1", "fail-1", "wait-1", "card declined", `href="/instances/fail-1"`)
	if ct := list.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if csp := list.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}

	failed := e.get(t, "/instances/fail-1")
	mustContain(t, failed, "Why it failed", `id="error-message">card declined</p>`, "ActivityFailed", `class="bar failed"`,
		`<p id="failed-in">It failed in activity demo.FailWith, history event #3.</p>`)
	waiting := e.get(t, "/instances/wait-1")
	mustContain(t, waiting, "Waiting for", "event approval", `class="bar timer pending"`, `id="raise-submit"`)
	done := e.get(t, "/instances/hello-1")
	mustContain(t, done, `id="output">&#34;Hello, Ada!&#34;</pre>`)
	mustNotContain(t, done, `id="waiting"`, `id="cancel-submit"`)

	// Filters.
	mustContain(t, e.get(t, "/?state=Failed"), "fail-1")
	mustNotContain(t, e.get(t, "/?state=Failed"), "hello-1")
	mustContain(t, e.get(t, "/?orchestration=demo.Hello"), "hello-1")
	mustNotContain(t, e.get(t, "/?orchestration=demo.Hello"), "fail-1")
	mustContain(t, e.get(t, "/?prefix=wait-"), "wait-1")
	mustNotContain(t, e.get(t, "/?prefix=wait-"), "hello-1")
	mustContain(t, e.get(t, "/?prefix=nomatch"), "No instances match.")

	locks := e.get(t, "/locks")
	mustContain(t, locks, "No execution locks are held.", "POST "+e.srv.URL+"/api/webhooks/greet")
	health := e.get(t, "/health")
	if health.status != http.StatusOK {
		t.Fatalf("GET /health: %d", health.status)
	}
	for _, path := range []string{"/static/app.js", "/static/style.css"} {
		if p := e.get(t, path); p.status != http.StatusOK || len(p.body) < 100 {
			t.Fatalf("GET %s: %d, %d bytes", path, p.status, len(p.body))
		}
	}
	// The API is still served next to the dashboard.
	if p := e.get(t, "/api/instances/hello-1"); p.status != http.StatusOK || !strings.Contains(p.body, `"status":"Completed"`) {
		t.Fatalf("GET /api/instances/hello-1: %d %s", p.status, p.body)
	}
	if p := e.get(t, "/healthz"); p.status != http.StatusOK {
		t.Fatalf("GET /healthz: %d", p.status)
	}
}

// TestCountsComeFromSamples checks that the counts per state follow the
// store through the sampler.
func TestCountsComeFromSamples(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.start(t, "f1", demo.Fail, "x", true)
	e.start(t, "f2", demo.Fail, "y", true)
	waitFor(t, "the counts to show 2 failed", func() bool {
		return strings.Contains(e.get(t, "/").body, `id="count-failed">Failed <b>2</b>`)
	})
}

// TestPagination walks the list a page at a time through its next links.
func TestPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for i := range 5 {
		e.start(t, fmt.Sprintf("p-%d", i), demo.Hello, "x", true)
	}
	seen := map[string]bool{}
	path := "/?limit=2&prefix=p-"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		p := e.get(t, path)
		for i := range 5 {
			id := fmt.Sprintf(`href="/instances/p-%d"`, i)
			if strings.Contains(p.body, id) {
				if seen[id] {
					t.Fatalf("p-%d listed twice", i)
				}
				seen[id] = true
			}
		}
		path = ""
		if _, rest, ok := strings.Cut(p.body, `<a href="`); ok {
			_ = rest
		}
		if i := strings.Index(p.body, `id="next-page"`); i >= 0 {
			start := strings.LastIndex(p.body[:i], `href="`) + len(`href="`)
			end := strings.Index(p.body[start:], `"`)
			path = strings.ReplaceAll(p.body[start:start+end], "&amp;", "&")
		}
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d instances over the pages, want 5", len(seen))
	}
}

// TestUserDataIsEscaped starts instances whose IDs, names, inputs,
// outputs, errors and event data hold markup: every page renders it as
// text.
func TestUserDataIsEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	const xss = `<script>alert(1)</script>`
	ctx := context.Background()
	id := `x"><svg onload=alert(1)>`
	e.start(t, id, demo.Hello, xss, true) // output: "Hello, <script>...!"
	e.start(t, "fail-xss", demo.Fail, xss, true)
	if err := e.client.StartOrchestration(ctx, "name-xss", `<img src=x onerror=alert(1)>`, xss, nil); err != nil {
		t.Fatal(err)
	}
	e.start(t, "event-xss", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300}, false)
	if err := e.client.RaiseEvent(ctx, "event-xss", "approval", xss); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.WaitForOrchestration(ctx, "event-xss"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.StartOrchestration(ctx, "lock-xss", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300},
		&duroxide.StartOptions{LockKey: xss}); err != nil {
		t.Fatal(err)
	}
	pages := []string{"/locks", "/instances/lock-xss", "/", "/instances/" + url.PathEscape(id), "/instances/fail-xss", "/instances/name-xss", "/instances/event-xss",
		"/?orchestration=" + url.QueryEscape(xss), "/?prefix=" + url.QueryEscape(xss), "/instances/" + url.PathEscape(xss)}
	for _, path := range pages {
		p := e.get(t, path)
		mustNotContain(t, p, "<script>alert", "<img src=x", "<svg onload")
		if strings.Count(p.body, "<script") != 1 { // the page's own script tag
			t.Fatalf("GET %s: %d script tags", path, strings.Count(p.body, "<script"))
		}
	}
	mustContain(t, e.get(t, "/instances/"+url.PathEscape(id)), "&lt;script&gt;alert(1)&lt;/script&gt;", `x&#34;&gt;&lt;svg onload=alert(1)&gt;`)
	mustContain(t, e.get(t, "/instances/fail-xss"), `id="error-message">&lt;script&gt;alert(1)&lt;/script&gt;</p>`)
	mustContain(t, e.get(t, "/"), "&lt;img src=x onerror=alert(1)&gt;")
	mustContain(t, e.get(t, "/locks"), `<td class="lock-key"><bdi>&lt;script&gt;alert(1)&lt;/script&gt;</bdi></td>`, `data-lock="&lt;script&gt;alert(1)&lt;/script&gt;"`)
}

// TestHostileRequests sends malformed, huge and hostile requests to every
// page: each gets a clear 4xx page, never a 500 or unescaped input.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.start(t, "h-1", demo.Hello, "x", true)
	huge := strings.Repeat("a", 100<<10)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/?cursor=bad", http.StatusBadRequest},
		{"/?cursor=" + url.QueryEscape("djE6LTE"), http.StatusBadRequest},
		{"/?cursor=" + huge, http.StatusBadRequest},
		{"/?prefix=" + huge, http.StatusBadRequest},
		{"/?orchestration=" + huge, http.StatusBadRequest},
		{"/?prefix=%01%02", http.StatusBadRequest},
		{"/?prefix=%ff%fe", http.StatusBadRequest},
		{"/?orchestration=%00", http.StatusBadRequest},
		{"/?state=Bogus", http.StatusBadRequest},
		{"/?state=%3Cscript%3E", http.StatusBadRequest},
		{"/?limit=0", http.StatusBadRequest},
		{"/?limit=-1", http.StatusBadRequest},
		{"/?limit=100000", http.StatusBadRequest},
		{"/?limit=abc", http.StatusBadRequest},
		{"/?limit=99999999999999999999999", http.StatusBadRequest},
		{"/instances/nobody", http.StatusNotFound},
		{"/instances/%00", http.StatusBadRequest},
		{"/instances/a%0Ab", http.StatusBadRequest},
		{"/instances/" + strings.Repeat("i", 2000), http.StatusNotFound},
		{"/instances/" + strings.Repeat("i", 5000), http.StatusBadRequest},
		{"/instances/h-1?execution=-1", http.StatusBadRequest},
		{"/instances/h-1?execution=abc", http.StatusBadRequest},
		{"/instances/h-1?execution=99999999999999999999999", http.StatusBadRequest},
		{"/instances/h-1?execution=7", http.StatusNotFound},
		{"/instances/%3Cscript%3Ealert(1)%3C%2Fscript%3E", http.StatusNotFound},
		{"/%3Cscript%3Ealert(1)%3C%2Fscript%3E", http.StatusNotFound},
		{"/static/nope.js", http.StatusNotFound},
		{"/static/", http.StatusNotFound},
		{"/locks?x=" + huge, http.StatusOK},
		{"/health?%00=%01", http.StatusOK},
		{"/login?next=" + huge, http.StatusOK},
		{"/login?next=%3Cscript%3Ealert(1)%3C%2Fscript%3E", http.StatusOK},
		{"/static/../dashboard.go", http.StatusTemporaryRedirect},
	} {
		t.Run(tc.path[:min(len(tc.path), 60)], func(t *testing.T) {
			p := e.get(t, tc.path)
			if p.status != tc.status {
				t.Fatalf("GET %s: %d, want %d\n%s", tc.path[:min(len(tc.path), 200)], p.status, tc.status, p.body[:min(len(p.body), 2000)])
			}
			mustNotContain(t, p, "<script>alert")
		})
	}
	// Methods a page does not take.
	for _, path := range []string{"/", "/instances/h-1", "/locks", "/health"} {
		if p := e.do(t, nil, "POST", path, "x", "Content-Type", "text/plain"); p.status != http.StatusMethodNotAllowed {
			t.Fatalf("POST %s: %d, want 405", path, p.status)
		}
	}
	// Other hosts (DNS rebinding) are refused.
	if p := e.get(t, "/", "Host", "evil.example"); p.status != http.StatusForbidden {
		t.Fatalf("GET / for Host evil.example: %d", p.status)
	}
}

// TestLogin covers the token login: redirects, wrong tokens, the cookie,
// the API through the cookie, logout, cross-origin and hostile forms.
func TestLogin(t *testing.T) {
	t.Parallel()
	const token = "dashboard-test-token-1234"
	e := newEnv(t, envOptions{token: token})
	e.start(t, "l-1", demo.Hello, "x", true)

	p := e.get(t, "/instances/l-1?execution=1")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login?next="+url.QueryEscape("/instances/l-1?execution=1") {
		t.Fatalf("GET without a session: %d, Location %q", p.status, p.header.Get("Location"))
	}
	mustContain(t, e.get(t, "/login"), `name="token"`)
	if p := e.get(t, "/static/style.css"); p.status != http.StatusOK {
		t.Fatalf("static files need no session: %d", p.status)
	}

	for _, bad := range []string{"", "wrong", token + "x", token[:10], " " + token, strings.Repeat("t", 5000), "<script>alert(1)</script>", "\x00\x01"} {
		_, p := e.login(t, bad)
		if p.status != http.StatusUnauthorized || len(p.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("login with %q: %d, cookies %v", bad[:min(len(bad), 20)], p.status, p.header.Values("Set-Cookie"))
		}
		mustContain(t, p, "Wrong token.")
		mustNotContain(t, p, token, "<script>alert")
	}
	form := url.Values{"token": {token}}.Encode()
	for name, hdr := range map[string][]string{
		"no origin":      {"Content-Type", "application/x-www-form-urlencoded"},
		"foreign origin": {"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example"},
		"null origin":    {"Content-Type", "application/x-www-form-urlencoded", "Origin", "null"},
	} {
		if p := e.do(t, nil, "POST", "/login", form, hdr...); p.status != http.StatusForbidden || len(p.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("login, %s: %d", name, p.status)
		}
	}
	if p := e.do(t, nil, "POST", "/login", "token="+strings.Repeat("a", 20000), "Content-Type", "application/x-www-form-urlencoded", "Origin", e.srv.URL); p.status != http.StatusBadRequest {
		t.Fatalf("login with a huge form: %d", p.status)
	}

	jar, p := e.login(t, token)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/" {
		t.Fatalf("login: %d, Location %q", p.status, p.header.Get("Location"))
	}
	c := p.header.Get("Set-Cookie")
	for _, want := range []string{httpapi.SessionCookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(c, want) {
			t.Fatalf("Set-Cookie %q lacks %q", c, want)
		}
	}
	if strings.Contains(c, token) || strings.Contains(c, "Secure") {
		t.Fatalf("Set-Cookie %q holds the token or Secure over plain HTTP", c)
	}
	if p := e.do(t, jar, "GET", "/instances/l-1", ""); p.status != http.StatusOK || !strings.Contains(p.body, `id="logout"`) {
		t.Fatalf("GET with the session: %d", p.status)
	}
	if p := e.do(t, jar, "GET", "/api/instances/l-1", ""); p.status != http.StatusOK {
		t.Fatalf("API with the session cookie: %d", p.status)
	}
	// The cookie alone does not change state without an Origin.
	if p := e.do(t, jar, "POST", "/api/instances", `{"orchestration":"demo.Hello"}`, "Content-Type", "application/json"); p.status != http.StatusForbidden {
		t.Fatalf("API POST with the cookie and no Origin: %d", p.status)
	}
	if p := e.do(t, jar, "POST", "/api/instances", `{"orchestration":"demo.Hello"}`, "Content-Type", "application/json", "Origin", e.srv.URL); p.status != http.StatusCreated {
		t.Fatalf("API POST with the cookie and the own Origin: %d %s", p.status, p.body)
	}

	// Open redirects through next are refused.
	for _, next := range []string{"//evil.example", "https://evil.example", "/\\evil.example", "javascript:alert(1)", "/x\r\nSet-Cookie: a=b"} {
		j, _ := e.login(t, "")
		_ = j
		f := url.Values{"token": {token}, "next": {next}}
		p := e.do(t, nil, "POST", "/login", f.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", e.srv.URL)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/" {
			t.Fatalf("login with next %q: %d, Location %q", next, p.status, p.header.Get("Location"))
		}
	}

	if p := e.do(t, jar, "POST", "/logout", "", "Origin", "https://evil.example"); p.status != http.StatusForbidden {
		t.Fatalf("cross-origin logout: %d", p.status)
	}
	if p := e.do(t, jar, "POST", "/logout", "", "Origin", e.srv.URL); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	if p := e.do(t, jar, "GET", "/", ""); p.status != http.StatusSeeOther {
		t.Fatalf("GET after logout: %d, want a redirect to the login", p.status)
	}
}

// TestStalledFilter lists an instance whose orchestration no runtime
// registers under "stalled only", with the reason on its page.
func TestStalledFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{stalled: time.Millisecond})
	e.start(t, "ok-1", demo.Hello, "x", true)
	e.start(t, "stuck-1", "nobody.Registers.This", nil, false)
	// Wait for what the assertions below depend on: a runtime fetched
	// stuck-1 and recorded that it does not register its orchestration,
	// and that wait is stalled. Any stall is not enough: with a 1 ms
	// threshold the start message alone stalls ("messages due and no
	// runtime took them") before a runtime takes it, and on a busy
	// machine the page would be read in between.
	waitFor(t, "stuck-1 to stall on its unregistered orchestration", func() bool {
		ws, err := e.client.WaitingFor(context.Background(), "stuck-1", &duroxide.WaitOptions{StalledAfter: time.Millisecond})
		return err == nil && slices.ContainsFunc(ws, func(w duroxide.Wait) bool {
			return w.Kind == duroxide.WaitUnregisteredOrchestration && w.Stalled
		})
	})
	waitFor(t, "stuck-1 to be listed as stalled", func() bool {
		return strings.Contains(e.get(t, "/?stalled=1").body, `href="/instances/stuck-1"`)
	})
	p := e.get(t, "/?stalled=1")
	mustNotContain(t, p, `href="/instances/ok-1"`)
	mustContain(t, p, `class="state stalled"`)
	mustContain(t, e.get(t, "/?stalled=1&prefix=stuck-"), `href="/instances/stuck-1"`)
	mustNotContain(t, e.get(t, "/?stalled=1&prefix=other-"), `href="/instances/stuck-1"`)
	mustContain(t, e.get(t, "/instances/stuck-1"), `id="stalled"`, "unregisteredOrchestration", "stalled: ")
}

// TestSecureCookies checks when the session cookie is Secure behind a
// TLS-terminating proxy: never from X-Forwarded-Proto unless trusted,
// always with SecureCookies.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	const token = "secure-cookie-token-0123"
	form := url.Values{"token": {token}, "next": {"/"}}.Encode()
	cookie := func(e *env, path string, header ...string) string {
		t.Helper()
		h := append([]string{"Content-Type", "application/x-www-form-urlencoded", "Origin", e.srv.URL}, header...)
		p := e.do(t, nil, "POST", path, form, h...)
		if p.status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d", path, p.status)
		}
		return p.header.Get("Set-Cookie")
	}
	secure := func(c string) bool { return strings.Contains(c, "; Secure") }
	triggers := []httpapi.Trigger{{ID: "hook", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, Auth: &httpapi.TriggerAuth{Type: httpapi.AuthNone}}}
	https := []string{"X-Forwarded-Proto", "https"}

	plain := newEnv(t, envOptions{token: token, triggers: triggers})
	if c := cookie(plain, "/login", https...); secure(c) {
		t.Fatalf("untrusted X-Forwarded-Proto made the cookie Secure: %q", c)
	}
	jar, _ := plain.login(t, token)
	mustContain(t, plain.do(t, jar, "GET", "/locks", "", https...), "POST http://")

	trusting := newEnv(t, envOptions{token: token, triggers: triggers, trustProto: true})
	if c := cookie(trusting, "/login"); secure(c) {
		t.Fatalf("Secure without TLS or X-Forwarded-Proto: %q", c)
	}
	if c := cookie(trusting, "/login", "X-Forwarded-Proto", "http"); secure(c) {
		t.Fatalf("Secure with X-Forwarded-Proto http: %q", c)
	}
	if c := cookie(trusting, "/login", https...); !secure(c) {
		t.Fatalf("trusted X-Forwarded-Proto https: cookie %q is not Secure", c)
	}
	if c := cookie(trusting, "/logout", https...); !secure(c) {
		t.Fatalf("logout cookie %q is not Secure", c)
	}
	jar, _ = trusting.login(t, token)
	mustContain(t, trusting.do(t, jar, "GET", "/locks", "", https...), "POST https://")

	always := newEnv(t, envOptions{token: token, secureCookies: true})
	if c := cookie(always, "/login"); !secure(c) {
		t.Fatalf("SecureCookies: cookie %q is not Secure", c)
	}
	if c := cookie(always, "/logout"); !secure(c) {
		t.Fatalf("SecureCookies: logout cookie %q is not Secure", c)
	}
}

// TestHostileInputPageIsBounded starts an instance with a 60 KB input
// nested 9,990 deep (accepted: under the nesting limit), which indented in
// full renders as a page of about 600 MB: the page stays under a fixed
// size, says the input was truncated and links to the raw bytes, which
// download whole.
func TestHostileInputPageIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	const depth = 9990
	input := strings.Repeat("[", depth) + `"` + strings.Repeat("x", 40_000) + `"` + strings.Repeat("]", depth)
	// demo.Hello takes a string: the instance fails, and its history
	// records the input too.
	e.start(t, "deep-1", demo.Hello, json.RawMessage(input), true)
	p := e.get(t, "/instances/deep-1")
	if p.status != http.StatusOK {
		t.Fatalf("GET /instances/deep-1: %d", p.status)
	}
	const bound = 200_000
	if len(p.body) > bound {
		t.Fatalf("the page is %d bytes, bound %d", len(p.body), bound)
	}
	mustContain(t, p, "input is 60 KB, nested 9,990 deep: shown truncated", `<a href="/instances/deep-1/raw/input" download>download raw</a>`)
	raw := e.get(t, "/instances/deep-1/raw/input")
	if raw.status != http.StatusOK || raw.body != input || raw.header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(raw.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("raw input: %d, %d bytes, %q, %q", raw.status, len(raw.body), raw.header.Get("Content-Type"), raw.header.Get("Content-Disposition"))
	}
	for path, status := range map[string]int{
		"/instances/deep-1/raw/output": http.StatusNotFound, "/instances/deep-1/raw/bogus": http.StatusNotFound,
		"/instances/nobody/raw/input": http.StatusNotFound, "/instances/%00/raw/input": http.StatusBadRequest,
	} {
		if p := e.get(t, path); p.status != status {
			t.Fatalf("GET %s: %d, want %d", path, p.status, status)
		}
	}
	// A payload that fits is shown whole, with no note.
	e.start(t, "small-1", demo.Hello, "Ada", true)
	mustNotContain(t, e.get(t, "/instances/small-1"), "shown truncated")
}

// TestBidiAndControlsShownEscaped checks that a right-to-left override
// and control characters in what an instance carries (its error message
// here) are shown as visible escapes, never as the characters that
// reorder or hide text.
func TestBidiAndControlsShownEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.start(t, "bidi-1", demo.Fail, "rtl-\u202Eexe.txt\x1b[31m", true)
	for _, path := range []string{"/", "/instances/bidi-1"} {
		p := e.get(t, path)
		mustNotContain(t, p, "\u202E", "\x1b")
		mustContain(t, p, `rtl-\u202Eexe.txt\u001B[31m`)
	}
	// A page about an ID that holds them (here one not found).
	p := e.get(t, "/instances/"+url.PathEscape("rtl-\u202Egpj.exe"))
	if p.status != http.StatusNotFound {
		t.Fatalf("GET unknown bidi ID: %d", p.status)
	}
	mustNotContain(t, p, "\u202E")
	if !strings.Contains(strings.ToLower(p.body), `rtl-\u202egpj.exe`) {
		t.Fatalf("the escaped ID is not shown:\n%s", p.body)
	}
}

// TestAccessibleMarkup checks what the accessibility fixes put in the
// pages: absolute times with their zone, a raise form whose event name is
// a value (not a placeholder), no Raise or Cancel on an ended instance, a
// meaningful error kind instead of a Go type, a favicon, named charts and
// honest counts.
func TestAccessibleMarkup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.start(t, "fail-1", demo.Fail, "card declined", true)
	e.start(t, "wait-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300}, false)
	waitFor(t, "wait-1 to subscribe", func() bool {
		ws, err := e.client.WaitingFor(context.Background(), "wait-1", nil)
		return err == nil && len(ws) >= 2
	})
	waiting := e.get(t, "/instances/wait-1")
	mustContain(t, waiting, `<time datetime="`, ` UTC">`, ` UTC)</span>`, `id="raise-name" required list="event-names" value="approval"`)
	mustNotContain(t, waiting, `placeholder="approval"`)
	if !regexp.MustCompile(`fires at</span> <time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC">in [^<]+</time> <span class="abs-time">\(\d{4}-\d\d-\d\d [^)]+ UTC\)</span>`).MatchString(waiting.body) {
		t.Fatalf("fires at lacks its date and zone:\n%s", waiting.body)
	}
	failed := e.get(t, "/instances/fail-1")
	mustNotContain(t, failed, "errors.errorString", `id="raise-submit"`, `id="cancel-submit"`, `id="purge-force"`)
	mustContain(t, failed, `<dd id="error-kind">application error: the code returned an error or panicked</dd>`, `rel="icon" href="/static/favicon.svg"`)
	for _, path := range []string{"/favicon.ico", "/static/favicon.svg"} {
		if p := e.get(t, path); p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "image/svg+xml") || !strings.Contains(p.body, "<svg") {
			t.Fatalf("GET %s: %d %q", path, p.status, p.header.Get("Content-Type"))
		}
	}
	waitFor(t, "a health sample", func() bool { return strings.Contains(e.get(t, "/health").body, `id="depths"`) })
	health := e.get(t, "/health")
	if n := strings.Count(health.body, `role="img" aria-label="`); n != 2 {
		t.Fatalf("%d named charts on the health page, want 2:\n%s", n, health.body)
	}
	mustContain(t, health, `aria-label="Queue depth over the last`, `aria-label="Throughput over the last`)
	waitFor(t, "the counts", func() bool { return strings.Contains(e.get(t, "/").body, `id="counts-label"`) })
	mustContain(t, e.get(t, "/"), "Instances in the store, by state")
	// The counts of a filtered list count what matches the filters: one
	// failed demo.Fail instance, while the store also holds a running
	// demo.Approval.
	filtered := e.get(t, "/?orchestration=demo.Fail")
	mustContain(t, filtered, "Instances that match the filters, by state",
		`<a href="/?orchestration=demo.Fail" class="active" id="count-all">All <b>1</b></a>`,
		`id="count-failed">Failed <b>1</b></a>`, `id="count-running">Running <b>0</b></a>`)
	mustContain(t, e.get(t, "/?prefix=wait-"), `id="count-running">Running <b>1</b></a>`, `id="count-failed">Failed <b>0</b></a>`)
}

// TestLongInstancesAreBounded checks that an instance page lists a bounded
// number of history events and executions, and says how many it left
// out.
func TestLongInstancesAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.start(t, "fan-1", demo.FanOut, 600, true)      // 1,200+ events
	e.start(t, "count-1", demo.Countdown, 250, true) // 251 executions
	fan := e.get(t, "/instances/fan-1")
	if got := strings.Count(fan.body, "<tr><td>") + strings.Count(fan.body, `<tr class="failed"><td>`); got != 1000 {
		t.Fatalf("%d history rows, want 1000", got)
	}
	mustContain(t, fan, `more events are not listed: <a href="/api/instances/fan-1/history?execution=1">`)
	count := e.get(t, "/instances/count-1")
	mustContain(t, count, `<p class="muted" id="more-executions">51 older executions are not listed`)
	if got := strings.Count(count.body, `<a href="?execution=`); got != 200 {
		t.Fatalf("%d executions listed, want 200", got)
	}
	for _, p := range []page{fan, count} {
		if len(p.body) > 1_000_000 {
			t.Fatalf("a page of %d bytes", len(p.body))
		}
	}
}

// The instance page lists the patches the execution recorded, escaped.
func TestInstancePageShowsPatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if err := e.client.StartOrchestration(ctx, "patched-1", testPatched, struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "patched-1 to record its patch", func() bool {
		st, err := e.client.Inspect(ctx, "patched-1", nil)
		return err == nil && len(st.Patches) == 1
	})
	mustContain(t, e.get(t, "/instances/patched-1"), `<dt>Patches</dt><dd id="patches"><bdi>&lt;b&gt;fix-42&lt;/b&gt;</bdi></dd>`)
}

// The instance page shows the deadline of an instance started with a
// timeout (StartOptions.Timeout), and none for an instance without one;
// once the deadline passed (by the dashboard's clock), that the instance
// is timing out.
func TestInstancePageShowsTheDeadline(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.Now())
	e := newEnv(t, envOptions{clock: clock})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for id, opts := range map[string]*duroxide.StartOptions{"timed-1": {Timeout: time.Hour}, "untimed-1": nil} {
		if err := e.client.StartOrchestration(ctx, id, testPatched, struct{}{}, opts); err != nil {
			t.Fatal(err)
		}
		// The first turn arms the timeout (and makes the instance Running).
		if _, err := e.client.WaitForStatusChange(ctx, id, "0.Pending.0.0"); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	st, err := e.client.Inspect(ctx, "timed-1", nil)
	if err != nil || st.Deadline == nil {
		t.Fatalf("Inspect: %+v, %v; want a deadline", st, err)
	}
	mustContain(t, e.get(t, "/instances/timed-1"),
		`<dt>Deadline</dt><dd id="deadline"><time datetime="`+st.Deadline.Format(time.RFC3339Nano)+`"`,
		`the instance times out then unless it has finished`)
	mustNotContain(t, e.get(t, "/instances/untimed-1"), `id="deadline"`)
	clock.Advance(2 * time.Hour)
	mustContain(t, e.get(t, "/instances/timed-1"), `passed: the instance is timing out`)
}

// The instance page shows a waiting activity's timeouts, and an instance
// whose orchestration no runtime registers as unserved.
func TestInstancePageShowsActivityTimeoutsAndUnserved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{register: func(reg *duroxide.Registry) {
		duroxide.RegisterOrchestration(reg, "test.Timeouts", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			var out string
			return out, ctx.ScheduleActivityWithOptions("test.Nowhere", nil, &duroxide.ActivityOptions{
				StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: time.Hour}).Await(&out)
		})
	}})
	ctx := context.Background()
	for id, name := range map[string]string{"timeouts-1": "test.Timeouts", "ghost-1": "test.Ghost"} {
		if err := e.client.StartOrchestration(ctx, id, name, struct{}{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "timeouts-1 to wait for its activity", func() bool {
		ws, err := e.client.WaitingFor(ctx, "timeouts-1", nil)
		return err == nil && slices.ContainsFunc(ws, func(w duroxide.Wait) bool { return w.Kind == duroxide.WaitActivity })
	})
	mustContain(t, e.get(t, "/instances/timeouts-1"),
		`<span class="muted">start to close timeout ms</span> <bdi>30000</bdi>`,
		`<span class="muted">schedule to close timeout ms</span> <bdi>3600000</bdi>`)
	waitFor(t, "ghost-1 to be reported unserved", func() bool {
		ws, err := e.client.WaitingFor(ctx, "ghost-1", nil)
		return err == nil && len(ws) == 1 && ws[0].Unserved
	})
	mustContain(t, e.get(t, "/instances/ghost-1"), `<b class="wait-kind">unregisteredOrchestration</b>`,
		`<span class="muted">message</span> <bdi>no runtime registers orchestration test.Ghost</bdi>`)
	// The health page counts both as unserved: ghost-1's start and the
	// activity no runtime registers.
	waitFor(t, "the health page to count them unserved", func() bool {
		b := e.get(t, "/health").body
		return strings.Contains(b, `id="unserved-orchestrator">1<`) && strings.Contains(b, `id="unserved-worker">1<`)
	})
}

// The instance page shows a running activity's heartbeat timeout, its
// latest heartbeat and details, as the store recorded them.
func TestInstancePageShowsActivityHeartbeat(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, envOptions{register: func(reg *duroxide.Registry) {
		beat := duroxide.RegisterActivity(reg, "test.Beat", func(ctx context.Context, frame int) (string, error) {
			if err := duroxide.ActivityContextFrom(ctx).Heartbeat(ctx, map[string]int{"frame": frame}); err != nil {
				return "", err
			}
			select {
			case <-release:
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		duroxide.RegisterOrchestration(reg, "test.Beating", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
			return duroxide.CallActivity(ctx, beat, 12, &duroxide.ActivityOptions{HeartbeatTimeout: time.Hour}).Get()
		})
	}})
	t.Cleanup(func() { close(release) }) // before the runtime's Shutdown
	ctx := context.Background()
	if err := e.client.StartOrchestration(ctx, "beating-1", "test.Beating", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "beating-1's activity to heartbeat", func() bool {
		ws, err := e.client.WaitingFor(ctx, "beating-1", nil)
		return err == nil && slices.ContainsFunc(ws, func(w duroxide.Wait) bool { return !w.HeartbeatAt.IsZero() })
	})
	mustContain(t, e.get(t, "/instances/beating-1"),
		`<span class="muted">heartbeat timeout ms</span> <bdi>3600000</bdi>`,
		`<span class="muted">heartbeat at</span>`,
		`<span class="muted">heartbeat details</span> <bdi>{&#34;frame&#34;:12}</bdi>`)
}
