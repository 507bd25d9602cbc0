package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/dashboard"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 30 * time.Second

var discard = slog.New(slog.DiscardHandler)

// env is a live server like duroxide serve --demo: a SQLite store, a
// runtime hosting the demo orchestrations, the API and the dashboard.
type env struct {
	client *duroxide.Client
	dash   *dashboard.Dashboard
	srv    *httptest.Server
	token  string
}

// testPatched is an orchestration that records a patch and waits for an
// event "go".
const testPatched = "test.Patched"

type envOptions struct {
	token    string
	triggers []httpapi.Trigger
	refresh  time.Duration
	stalled  time.Duration
	// secureCookies and trustProto set Options.SecureCookies and
	// Options.TrustForwardedProto.
	secureCookies, trustProto bool
	// register adds orchestrations beside the demo ones.
	register func(*duroxide.Registry)
	// noRuntime serves without a runtime: instances stay Pending and bulk
	// jobs wait for a runner.
	noRuntime bool
	// clock, when set, is the dashboard's clock (relative times, the
	// sampler); the store and the runtime keep the real one.
	clock clockwork.Clock
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	if o.register != nil {
		o.register(reg)
	}
	// testPatched records a patch (with markup in its ID) and waits.
	duroxide.RegisterOrchestration(reg, testPatched, func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		if !ctx.Patched("<b>fix-42</b>") {
			return "", nil
		}
		var s string
		return s, ctx.WaitForEvent("go").Await(&s)
	})
	var rt *duroxide.Runtime
	if !o.noRuntime {
		if rt, err = duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: discard}); err != nil {
			t.Fatal(err)
		}
	}
	client := duroxide.NewClient(store)
	api, err := httpapi.NewHandler(client, &httpapi.Options{Logger: discard, Registry: reg, Runtime: rt,
		AuthToken: o.token, Triggers: o.triggers})
	if err != nil {
		t.Fatal(err)
	}
	dash, err := dashboard.New(client, &dashboard.Options{Logger: discard, Registry: reg, AuthToken: o.token,
		Triggers: o.triggers, SampleEvery: 200 * time.Millisecond, Refresh: o.refresh, StalledAfter: o.stalled,
		SecureCookies: o.secureCookies, TrustForwardedProto: o.trustProto, Clock: o.clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(dashboard.Mount(api, dash))
	t.Cleanup(func() {
		srv.Close()
		dash.Close()
		sctx, cancel := context.WithTimeout(ctx, testTimeout)
		defer cancel()
		if rt != nil {
			if err := rt.Shutdown(sctx); err != nil {
				t.Errorf("runtime shutdown: %v", err)
			}
		}
		if err := store.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	return &env{client: client, dash: dash, srv: srv, token: o.token}
}

// start starts an instance and, if wait, waits for it to end.
func (e *env) start(t *testing.T, id, name string, input any, wait bool) *duroxide.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.client.StartOrchestration(ctx, id, name, input, nil); err != nil {
		t.Fatalf("starting %s: %v", id, err)
	}
	if !wait {
		return nil
	}
	st, err := e.client.WaitForOrchestration(ctx, id)
	if err != nil {
		t.Fatalf("waiting for %s: %v", id, err)
	}
	return st
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// page is a fetched page.
type page struct {
	status int
	header http.Header
	body   string
}

// noRedirect is a client that reports redirects instead of following them.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: testTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches path (raw: it is not escaped) with header pairs.
func (e *env) get(t *testing.T, path string, header ...string) page {
	t.Helper()
	return e.do(t, nil, "GET", path, "", header...)
}

func (e *env) do(t *testing.T, jar http.CookieJar, method, path, body string, header ...string) page {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := noRedirect(jar).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

// login posts the token and returns a cookie jar holding the session.
func (e *env) login(t *testing.T, token string) (http.CookieJar, page) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"token": {token}, "next": {"/"}}
	p := e.do(t, jar, "POST", "/login", form.Encode(), "Content-Type", "application/x-www-form-urlencoded", "Origin", e.srv.URL)
	return jar, p
}
