package httpapi_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// rawRequest describes a request sent with exactly these headers.
type rawRequest struct {
	method, path, body string
	host               string            // "" = the server's own address
	header             map[string]string // set as given; no Content-Type unless listed
}

// send sends rr to the env's server through real HTTP.
func (e *env) send(t *testing.T, rr rawRequest) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var body io.Reader
	if rr.body != "" {
		body = strings.NewReader(rr.body)
	}
	req, err := http.NewRequestWithContext(ctx, rr.method, e.srv.URL+rr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if rr.host != "" {
		req.Host = rr.host
	}
	for k, v := range rr.header {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", rr.method, rr.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// expectRaw sends rr and checks the status; error answers must be JSON
// with an error message.
func (e *env) expectRaw(t *testing.T, rr rawRequest, status int) response {
	t.Helper()
	res := e.send(t, rr)
	if res.status != status {
		t.Fatalf("%s %s (Host %q, headers %v): got %s, want %d", rr.method, rr.path, rr.host, rr.header, res, status)
	}
	if status >= 400 {
		var eb errorBody
		if err := json.Unmarshal(res.body, &eb); err != nil || eb.Error == "" || res.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s: error answer is not a JSON error: %s", rr.method, rr.path, res)
		}
	}
	return res
}

var jsonCT = map[string]string{"Content-Type": "application/json"}

func withHeaders(pairs ...string) map[string]string {
	h := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h[pairs[i]] = pairs[i+1]
	}
	return h
}

const testToken = "s3cret-token-for-tests"

func TestBearerToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{AuthToken: testToken,
		Triggers: []httpapi.Trigger{{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel,
			Auth: &httpapi.TriggerAuth{Type: httpapi.AuthNone}}}})
	e.start(t, "auth-1", demo.Hello, "Ada")
	auth := "Bearer " + testToken

	for _, tc := range []struct {
		name          string
		method, path  string
		authorization string
	}{
		{"no header", "GET", "/api/instances", ""},
		{"wrong token", "GET", "/api/instances", "Bearer nope"},
		{"token prefix", "GET", "/api/instances", "Bearer " + testToken[:5]},
		{"token with suffix", "GET", "/api/instances", auth + "x"},
		{"basic scheme", "GET", "/api/instances", "Basic " + testToken},
		{"bare token", "GET", "/api/instances", testToken},
		{"status", "GET", "/api/instances/auth-1", ""},
		{"start", "POST", "/api/instances", ""},
		{"metrics", "GET", "/metrics", ""},
		{"openapi", "GET", "/api/openapi.json", ""},
		{"root", "GET", "/", ""},
		{"unknown path", "GET", "/dashboard/secret", ""},
		{"locks", "GET", "/api/locks", ""},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			h := withHeaders("Content-Type", "application/json")
			if tc.authorization != "" {
				h["Authorization"] = tc.authorization
			}
			res := e.expectRaw(t, rawRequest{method: tc.method, path: tc.path, header: h, body: `{"orchestration": "demo.Hello"}`}, http.StatusUnauthorized)
			if got := res.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate %q, want Bearer", got)
			}
		})
	}
	t.Run("accepted", func(t *testing.T) {
		e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/auth-1", header: withHeaders("Authorization", auth)}, http.StatusOK)
		e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances", header: withHeaders("Authorization", "bearer "+testToken)}, http.StatusOK)
		e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances", body: `{"orchestration": "demo.Hello"}`,
			header: withHeaders("Authorization", auth, "Content-Type", "application/json")}, http.StatusCreated)
	})
	t.Run("open routes", func(t *testing.T) {
		e.expectRaw(t, rawRequest{method: "GET", path: "/healthz"}, http.StatusOK)
		e.expectRaw(t, rawRequest{method: "GET", path: "/readyz"}, http.StatusOK)
		// Webhooks are not behind the token: their trigger authenticates them.
		e.expectRaw(t, rawRequest{method: "POST", path: "/api/webhooks/greet", body: `"Ada"`}, http.StatusOK)
		e.expectRaw(t, rawRequest{method: "POST", path: "/api/webhooks/nobody", body: `"Ada"`}, http.StatusNotFound)
	})
	t.Run("paths dressed as webhooks", func(t *testing.T) {
		// Exemptions follow the route that serves the request, not the
		// raw path.
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, path := range []string{"/api/webhooks/../instances", "/api/webhooks/x/../../instances", "/api/webhooks%2F..%2Finstances"} {
			req, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(`{"orchestration": "demo.Hello", "instanceId": "sneaky"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode < 300 {
				t.Fatalf("POST %s without the token: %d", path, res.StatusCode)
			}
		}
		if _, err := e.client.GetStatus(context.Background(), "sneaky"); !errors.Is(err, duroxide.ErrNotFound) {
			t.Fatalf("an unauthenticated start got through: %v", err)
		}
	})
	t.Run("invalid token option", func(t *testing.T) {
		if _, err := httpapi.NewHandler(e.client, &httpapi.Options{AuthToken: "has space"}); !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Fatalf("token with a space: %v, want ErrInvalidArgument", err)
		}
	})
}

func TestHostCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	listed := newEnv(t, &httpapi.Options{AllowedHosts: []string{"API.example.com", "10.1.2.3:8080", "[2001:db8::1]"}})
	wildcard := newEnv(t, &httpapi.Options{AllowedHosts: []string{httpapi.AnyHost}})

	for _, tc := range []struct {
		env  *env
		host string
		want int
	}{
		{e, "localhost", http.StatusOK},
		{e, "LOCALHOST:8080", http.StatusOK},
		{e, "localhost.:8080", http.StatusOK},
		{e, "127.0.0.1:8080", http.StatusOK},
		{e, "127.1.2.3", http.StatusOK},
		{e, "[::1]:8080", http.StatusOK},
		{e, "[::ffff:127.0.0.1]:80", http.StatusOK},
		// DNS rebinding: the attacker's name resolves to 127.0.0.1.
		{e, "evil.example", http.StatusForbidden},
		{e, "evil.example:8080", http.StatusForbidden},
		{e, "localhost.evil.example", http.StatusForbidden},
		{e, "127.0.0.1.nip.io", http.StatusForbidden},
		{e, "10.0.0.1", http.StatusForbidden},
		{e, "2130706433", http.StatusForbidden},
		{listed, "api.example.com", http.StatusOK},
		{listed, "api.example.com:443", http.StatusOK},
		{listed, "10.1.2.3:9999", http.StatusOK},
		{listed, "[2001:db8::1]:8080", http.StatusOK},
		{listed, "localhost", http.StatusOK},
		{listed, "other.example.com", http.StatusForbidden},
		{wildcard, "anything.example", http.StatusOK},
	} {
		t.Run(tc.host, func(t *testing.T) {
			tc.env.expectRaw(t, rawRequest{method: "GET", path: "/api/instances", host: tc.host}, tc.want)
		})
	}
	t.Run("probes answer any host", func(t *testing.T) {
		e.expectRaw(t, rawRequest{method: "GET", path: "/healthz", host: "10.0.0.7:8080"}, http.StatusOK)
		e.expectRaw(t, rawRequest{method: "GET", path: "/readyz", host: "10.0.0.7:8080"}, http.StatusOK)
	})
	t.Run("webhooks check the host", func(t *testing.T) {
		e.expectRaw(t, rawRequest{method: "POST", path: "/api/webhooks/x", host: "evil.example", body: "{}"}, http.StatusForbidden)
	})
	t.Run("invalid allowed host", func(t *testing.T) {
		for _, h := range []string{"", "a/b", "*.example.com"} {
			if _, err := httpapi.NewHandler(e.client, &httpapi.Options{AllowedHosts: []string{h}}); !errors.Is(err, duroxide.ErrInvalidArgument) {
				t.Errorf("AllowedHosts %q: %v, want ErrInvalidArgument", h, err)
			}
		}
	})
}

func TestBrowserRequestsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{
		Triggers: []httpapi.Trigger{{ID: "greet", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel,
			Auth: &httpapi.TriggerAuth{Type: httpapi.AuthNone}}}})
	e.start(t, "csrf-target", demo.Approval, approvalInput(3600))
	start := `{"orchestration": "demo.Hello", "input": "x"}`

	for _, tc := range []struct {
		name   string
		rr     rawRequest
		status int
	}{
		// What a web page can send cross-site without a CORS preflight.
		{"text/plain start", rawRequest{method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Content-Type", "text/plain")}, http.StatusUnsupportedMediaType},
		{"form start", rawRequest{method: "POST", path: "/api/instances", body: "orchestration=demo.Hello",
			header: withHeaders("Content-Type", "application/x-www-form-urlencoded")}, http.StatusUnsupportedMediaType},
		{"multipart start", rawRequest{method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Content-Type", "multipart/form-data; boundary=x")}, http.StatusUnsupportedMediaType},
		{"start without content type", rawRequest{method: "POST", path: "/api/instances", body: start}, http.StatusUnsupportedMediaType},
		// A bodyless POST needs no Content-Type; a page of another site
		// sending one is refused by its Origin, which browsers always send.
		{"bodyless cancel from another site", rawRequest{method: "POST", path: "/api/instances/csrf-target/cancel",
			header: withHeaders("Origin", "https://evil.example")}, http.StatusForbidden},
		{"bodyless event from another site", rawRequest{method: "POST", path: "/api/instances/csrf-target/events/approval",
			header: withHeaders("Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")}, http.StatusForbidden},
		{"text/plain event", rawRequest{method: "POST", path: "/api/instances/csrf-target/events/approval", body: "true",
			header: withHeaders("Content-Type", "text/plain;charset=UTF-8")}, http.StatusUnsupportedMediaType},
		{"DELETE with a text body", rawRequest{method: "DELETE", path: "/api/instances/csrf-target?force=true", body: "x",
			header: withHeaders("Content-Type", "text/plain")}, http.StatusUnsupportedMediaType},
		// A foreign Origin, even with the right content type.
		{"foreign origin", rawRequest{method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Content-Type", "application/json", "Origin", "https://evil.example")}, http.StatusForbidden},
		{"null origin", rawRequest{method: "POST", path: "/api/instances/csrf-target/cancel",
			header: withHeaders("Content-Type", "application/json", "Origin", "null")}, http.StatusForbidden},
		{"foreign origin purge", rawRequest{method: "DELETE", path: "/api/instances/csrf-target?force=true",
			header: withHeaders("Origin", "http://evil.example:8080")}, http.StatusForbidden},
		{"lookalike origin", rawRequest{method: "POST", path: "/api/locks/cleanup",
			header: withHeaders("Content-Type", "application/json", "Origin", "http://localhost.evil.example")}, http.StatusForbidden},
		// Allowed.
		{"json start", rawRequest{method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Content-Type", "application/json; charset=utf-8")}, http.StatusCreated},
		{"loopback origin", rawRequest{method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Content-Type", "application/json", "Origin", "http://localhost:3000")}, http.StatusCreated},
		{"foreign origin GET", rawRequest{method: "GET", path: "/api/instances/csrf-target",
			header: withHeaders("Origin", "https://evil.example")}, http.StatusOK},
		{"bodyless DELETE without content type", rawRequest{method: "DELETE", path: "/api/instances/nobody"}, http.StatusNotFound},
		{"bodyless cleanup without content type", rawRequest{method: "POST", path: "/api/locks/cleanup"}, http.StatusOK},
		{"bodyless start without content type", rawRequest{method: "POST", path: "/api/instances"}, http.StatusBadRequest},
		// Webhooks take any content type and origin.
		{"text/plain webhook", rawRequest{method: "POST", path: "/api/webhooks/greet", body: `"Ada"`,
			header: withHeaders("Content-Type", "text/plain", "Origin", "https://sender.example")}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.expectRaw(t, tc.rr, tc.status)
		})
	}
	// Nothing refused reached the instance.
	if st, err := e.client.GetStatus(context.Background(), "csrf-target"); err != nil || st.State.IsTerminal() {
		t.Fatalf("the target instance: %+v, %v", st, err)
	}
	t.Run("wildcard host does not allow foreign origins", func(t *testing.T) {
		w := newEnv(t, &httpapi.Options{AllowedHosts: []string{httpapi.AnyHost}})
		w.expectRaw(t, rawRequest{method: "POST", path: "/api/instances", body: start, host: "api.example.com",
			header: withHeaders("Content-Type", "application/json", "Origin", "https://api.example.com")}, http.StatusCreated)
		w.expectRaw(t, rawRequest{method: "POST", path: "/api/instances", body: start, host: "api.example.com",
			header: withHeaders("Content-Type", "application/json", "Origin", "https://evil.example")}, http.StatusForbidden)
	})
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t, "hostile", demo.Approval, approvalInput(3600))
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		status       int
	}{
		{"NUL in instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "a\u0000b"}`, http.StatusBadRequest},
		{"escape in instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "\u001b[31mred"}`, http.StatusBadRequest},
		{"newline in instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "a\nb"}`, http.StatusBadRequest},
		{"dot-dot instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": ".."}`, http.StatusBadRequest},
		{"slash in instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "../etc"}`, http.StatusBadRequest},
		{"long instance ID", "POST", "/api/instances", `{"orchestration": "demo.Hello", "instanceId": "` + strings.Repeat("x", duroxide.MaxInstanceIDLength+1) + `"}`, http.StatusBadRequest},
		{"control in orchestration", "POST", "/api/instances", `{"orchestration": "demo.Hello\u0007"}`, http.StatusBadRequest},
		{"control in lock key", "POST", "/api/instances", `{"orchestration": "demo.Hello", "lockKey": "k\u0000"}`, http.StatusBadRequest},
		{"control in idempotency key", "POST", "/api/instances", `{"orchestration": "demo.Hello", "idempotencyKey": "k\r\n"}`, http.StatusBadRequest},
		{"invalid UTF-8 in body", "POST", "/api/instances", "{\"orchestration\": \"demo.Hello\", \"input\": \"\xff\xfe\"}", http.StatusBadRequest},
		{"invalid UTF-8 in event data", "POST", "/api/instances/hostile/events/approval", "\"\xc3\"", http.StatusBadRequest},
		{"invalid UTF-8 in cancel reason", "POST", "/api/instances/hostile/cancel", "{\"reason\": \"\xff\"}", http.StatusBadRequest},
		{"invalid UTF-8 in path ID", "GET", "/api/instances/%FF%FE", "", http.StatusBadRequest},
		{"control in path ID", "GET", "/api/instances/a%00b", "", http.StatusBadRequest},
		{"control in event name", "POST", "/api/instances/hostile/events/a%1Bb", "true", http.StatusBadRequest},
		{"control in lock key path", "GET", "/api/workflows/w%0A/lock", "", http.StatusBadRequest},
		{"huge body", "POST", "/api/instances", `{"orchestration": "demo.Hello", "input": "` + strings.Repeat("x", 2<<20) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.expectRaw(t, rawRequest{method: tc.method, path: tc.path, body: tc.body, header: jsonCT}, tc.status)
		})
	}
	if st, err := e.client.GetStatus(context.Background(), "hostile"); err != nil || st.State.IsTerminal() {
		t.Fatalf("the target instance: %+v, %v", st, err)
	}
}

// TestTrickledBodyIsCutOff sends a body one byte and then nothing: the
// server answers 408 and closes the connection once the read timeout
// passes, instead of holding it.
func TestTrickledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{ReadTimeout: 100 * time.Millisecond,
		Triggers: []httpapi.Trigger{{ID: "x", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel}}})
	for _, path := range []string{"/api/instances", "/api/webhooks/x", "/api/instances/x"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(testTimeout)); err != nil {
				t.Fatal(err)
			}
			method := "POST"
			if path == "/api/instances/x" {
				method = "GET" // a body the route never reads is cut off too
			}
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", method, path)
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			switch {
			case err == nil:
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if method == "POST" && res.StatusCode != http.StatusRequestTimeout {
					t.Fatalf("got %d %s, want 408", res.StatusCode, body)
				}
			case !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("reading the answer: %v (the server held the connection?)", err)
			}
			// The connection is closed: reading ends, well before testTimeout.
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("the server did not close the connection: %v", err)
			}
		})
	}
}

// TestListsAreSummaries checks that list pages stay small with large
// inputs, outputs and custom statuses.
func TestListsAreSummaries(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, nil, nil, false) // no runtime: instances stay Pending
	big := `"` + strings.Repeat("x", 1<<20-64) + `"`
	const bigCount = 4
	for i := range bigCount {
		e.start(t, fmt.Sprintf("big-%02d", i), demo.Hello, json.RawMessage(big))
	}
	e.start(t, "small", demo.Hello, "Ada")

	type item struct {
		InstanceID string          `json:"instanceId"`
		Input      json.RawMessage `json:"input"`
		Truncated  []string        `json:"truncated"`
	}
	var page struct {
		Instances  []item `json:"instances"`
		NextCursor string `json:"nextCursor"`
	}
	res := e.expect(t, "GET", "/api/instances?limit=100", nil, http.StatusOK, &page)
	if len(page.Instances) != bigCount+1 || page.NextCursor != "" {
		t.Fatalf("%d instances, cursor %q", len(page.Instances), page.NextCursor)
	}
	if len(res.body) > 32<<10 {
		t.Fatalf("the list of %d 1 MB instances is %d bytes; summaries should be small", len(page.Instances), len(res.body))
	}
	for _, it := range page.Instances {
		if it.Input != nil || it.Truncated != nil {
			t.Fatalf("summary without include has input %q, truncated %v", it.Input, it.Truncated)
		}
	}

	res = e.expect(t, "GET", "/api/instances?limit=100&include=input,output,customStatus", nil, http.StatusOK, &page)
	if len(res.body) > 64<<10 {
		t.Fatalf("the list with include is %d bytes; each field should be capped", len(res.body))
	}
	for _, it := range page.Instances {
		switch {
		case it.InstanceID == "small":
			if string(it.Input) != `"Ada"` || it.Truncated != nil {
				t.Fatalf("small instance: input %s, truncated %v", it.Input, it.Truncated)
			}
		case it.Input != nil || len(it.Truncated) != 1 || it.Truncated[0] != "input":
			t.Fatalf("%s: input of %d bytes, truncated %v; want it left out and marked", it.InstanceID, len(it.Input), it.Truncated)
		}
	}
	// The full value is still one GET away.
	var st status
	e.expect(t, "GET", "/api/instances/big-00", nil, http.StatusOK, &st)
	if len(st.Input) != len(big) {
		t.Fatalf("GET of one instance: input of %d bytes, want %d", len(st.Input), len(big))
	}

	// Pages read in chunks keep their cursors exact.
	var seen []string
	cursor := ""
	for range 10 {
		page.Instances, page.NextCursor = nil, ""
		e.expect(t, "GET", "/api/instances?limit=3&cursor="+cursor, nil, http.StatusOK, &page)
		for _, it := range page.Instances {
			seen = append(seen, it.InstanceID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != bigCount+1 || seen[0] != "small" || seen[len(seen)-1] != "big-00" || len(seen) <= 3 {
		t.Fatalf("paging by 3 saw %d instances: %v", len(seen), seen)
	}

	for _, q := range []string{"limit=1001", "limit=101&include=input", "include=history", "limit=0"} {
		e.expectError(t, "GET", "/api/instances?"+q, nil, http.StatusBadRequest)
	}

	// Executions: input and output only when asked.
	var exs struct {
		Executions []struct {
			Input     json.RawMessage `json:"input"`
			Truncated []string        `json:"truncated"`
		} `json:"executions"`
	}
	h := newEnv(t, nil)
	h.start(t, "exec-big", demo.Hello, strings.Repeat("y", httpapi.MaxIncludedFieldBytes+1))
	h.wait(t, "exec-big")
	res = h.expect(t, "GET", "/api/instances/exec-big/executions", nil, http.StatusOK, &exs)
	if len(res.body) > 4<<10 || len(exs.Executions) != 1 || exs.Executions[0].Input != nil {
		t.Fatalf("executions without include: %d bytes", len(res.body))
	}
	h.expect(t, "GET", "/api/instances/exec-big/executions?include=input", nil, http.StatusOK, &exs)
	if exs.Executions[0].Input != nil || len(exs.Executions[0].Truncated) != 1 {
		t.Fatalf("executions with include: input %d bytes, truncated %v", len(exs.Executions[0].Input), exs.Executions[0].Truncated)
	}
}

// TestListSummaryCapsErrorMessages checks that a failed instance's huge
// error message is shortened in lists, its details left out.
func TestListSummaryCapsErrorMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	msg := strings.Repeat("é", 100<<10)
	e.start(t, "fail-big", demo.Fail, msg)
	e.wait(t, "fail-big")
	var page struct {
		Instances []struct {
			Error     *struct{ Message, Details string } `json:"error"`
			Truncated []string                           `json:"truncated"`
		} `json:"instances"`
	}
	res := e.expect(t, "GET", "/api/instances", nil, http.StatusOK, &page)
	if len(page.Instances) != 1 || page.Instances[0].Error == nil {
		t.Fatalf("page %s", res)
	}
	it := page.Instances[0]
	if len(it.Error.Message) > 1<<10 || it.Error.Message == "" || it.Error.Details != "" || len(it.Truncated) != 1 || it.Truncated[0] != "error" {
		t.Fatalf("error message of %d bytes, details %d bytes, truncated %v", len(it.Error.Message), len(it.Error.Details), it.Truncated)
	}
	if !strings.HasPrefix(msg, it.Error.Message) && !strings.Contains(it.Error.Message, "é") {
		t.Fatalf("the shortened message is not a prefix cut at a character boundary")
	}
}

// TestWaitIsCapped checks that ?wait longer than Options.MaxWait answers
// the live status once MaxWait has passed.
func TestWaitIsCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{MaxWait: 50 * time.Millisecond})
	e.start(t, "waits", demo.Approval, approvalInput(3600))
	var st status
	e.expect(t, "GET", "/api/instances/waits?wait=1h", nil, http.StatusOK, &st)
	if st.Status == "Completed" || st.InstanceID != "waits" {
		t.Fatalf("status %+v", st)
	}
	if _, err := httpapi.NewHandler(e.client, &httpapi.Options{MaxWait: -1}); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("negative MaxWait: %v", err)
	}
}

// failingStore fails starts with err and reports writability as checkErr.
type failingStore struct {
	*sqlite.Provider
	err, checkErr error
}

func (s *failingStore) Enqueue(ctx context.Context, ms ...*provider.OrchestratorMessage) ([]provider.EnqueueResult, error) {
	for _, m := range ms {
		if s.err != nil && m.Create != nil {
			return nil, s.err
		}
	}
	return s.Provider.Enqueue(ctx, ms...)
}

func (s *failingStore) CheckWritable(context.Context) error { return s.checkErr }

func TestStoreErrorsAndReadiness(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter bool
	}{
		{"transient", fmt.Errorf("sqlite: starting: %w", provider.ErrBusy), http.StatusServiceUnavailable, true},
		{"unavailable", fmt.Errorf("sqlite: starting: %w", provider.ErrUnavailable), http.StatusServiceUnavailable, true},
		{"corrupt", fmt.Errorf("sqlite: starting: %w", provider.ErrCorruptData), http.StatusInternalServerError, false},
		{"unknown", errors.New("disk on fire"), http.StatusInternalServerError, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			h, err := httpapi.NewHandler(duroxide.NewClient(&failingStore{Provider: db, err: tc.err, checkErr: tc.err}), &httpapi.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			e := &env{h: h, srv: newTestServer(t, h)}
			res := e.expectRaw(t, rawRequest{method: "POST", path: "/api/instances", body: `{"orchestration": "x"}`, header: jsonCT}, tc.status)
			if got := res.header.Get("Retry-After") != ""; got != tc.retryAfter {
				t.Errorf("Retry-After present: %v, want %v (%s)", got, tc.retryAfter, res)
			}
			if tc.status == http.StatusInternalServerError && strings.Contains(string(res.body), "retry") && !strings.Contains(string(res.body), "will not help") {
				t.Errorf("a permanent failure invites a retry: %s", res)
			}
			// Readiness reports the store's writability; liveness does not.
			ready := e.expectRaw(t, rawRequest{method: "GET", path: "/readyz"}, http.StatusServiceUnavailable)
			// The store's error text stays in the log: the answers name
			// the request instead.
			for _, r := range []response{res, ready} {
				var body struct {
					RequestID string `json:"requestId"`
				}
				if err := json.Unmarshal(r.body, &body); err != nil || body.RequestID == "" ||
					r.header.Get("X-Request-Id") != body.RequestID ||
					strings.Contains(string(r.body), "sqlite: starting") || strings.Contains(string(r.body), "disk on fire") {
					t.Errorf("5xx answer %s (X-Request-Id %q): want the request ID and not the store's error", r, r.header.Get("X-Request-Id"))
				}
			}
			e.expectRaw(t, rawRequest{method: "GET", path: "/healthz"}, http.StatusOK)
		})
	}
	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		h, err := httpapi.NewHandler(duroxide.NewClient(&failingStore{Provider: db}), &httpapi.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		e := &env{h: h, srv: newTestServer(t, h)}
		e.expectRaw(t, rawRequest{method: "GET", path: "/readyz"}, http.StatusOK)
	})
}

// newTestServer serves h until the end of the test.
func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestListPagesAcrossChunks checks that a page read from the store in
// several chunks has the requested size and an exact cursor.
func TestListPagesAcrossChunks(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, nil, nil, false)
	const n = 75
	for i := range n {
		e.start(t, fmt.Sprintf("i-%03d", i), demo.Hello, "x")
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var page struct {
			Instances []struct {
				InstanceID string `json:"instanceId"`
			} `json:"instances"`
			NextCursor string `json:"nextCursor"`
		}
		e.expect(t, "GET", "/api/instances?limit=70&cursor="+cursor, nil, http.StatusOK, &page)
		pages++
		if want := min(70, n-len(seen)); len(page.Instances) != want {
			t.Fatalf("page %d has %d instances, want %d", pages, len(page.Instances), want)
		}
		for _, it := range page.Instances {
			if seen[it.InstanceID] {
				t.Fatalf("%s listed twice", it.InstanceID)
			}
			seen[it.InstanceID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != n || pages != 2 {
		t.Fatalf("saw %d instances in %d pages, want %d in 2", len(seen), pages, n)
	}
}

// TestCorruptRowDoesNotFailListPage checks, through HTTP, that a stored row
// that cannot be decoded is listed with a marker, while reading that
// instance answers 500 (a permanent failure, no Retry-After).
func TestCorruptRowDoesNotFailListPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corrupt.db")
	store, err := sqlite.Open(ctx, path, &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	client := duroxide.NewClient(store)
	for _, id := range []string{"good-1", "bad", "good-2"} {
		if err := client.StartOrchestration(ctx, id, demo.Hello, "Ada", nil); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE instances SET input = '{"trunc', error = '{' WHERE instance_id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.NewHandler(client, &httpapi.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{h: h, srv: newTestServer(t, h)}
	var page struct {
		Instances []status `json:"instances"`
	}
	for _, q := range []string{"", "?include=input"} {
		res := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances" + q}, http.StatusOK)
		if err := json.Unmarshal(res.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Instances) != 3 {
			t.Fatalf("GET /api/instances%s: %d instances, want 3: %s", q, len(page.Instances), res)
		}
		if !strings.Contains(string(res.body), "corrupt stored row") {
			t.Fatalf("GET /api/instances%s: the corrupt row is not marked: %s", q, res)
		}
	}
	res := e.expectRaw(t, rawRequest{method: "GET", path: "/api/instances/bad"}, http.StatusInternalServerError)
	if res.header.Get("Retry-After") != "" || !strings.Contains(string(res.body), "corrupt") {
		t.Fatalf("GET of the corrupt instance: %s", res)
	}
}
