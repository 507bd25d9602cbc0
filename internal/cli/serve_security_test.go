package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const serveToken = "0123456789abcdef-token"

// request sends a request to the server at base with the given headers.
func request(t *testing.T, method, base, path, host string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

func TestServeRefusesExposureWithoutProtection(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"wildcard without token", []string{"--addr", ":0"}, nil, []string{"not a loopback address", "--auth-token", "--insecure"}},
		{"all IPv4 without token", []string{"--addr", "0.0.0.0:0"}, nil, []string{"not a loopback address", "--auth-token"}},
		{"host name without token", []string{"--addr", "myhost.example:0"}, nil, []string{"not a loopback address"}},
		{"insecure without allowed host", []string{"--addr", ":0", "--insecure"}, nil, []string{"--allowed-host"}},
		{"token without allowed host", []string{"--addr", ":0", "--auth-token", serveToken}, nil, []string{"--allowed-host"}},
		{"env token without allowed host", []string{"--addr", ":0"}, map[string]string{envAuthToken: serveToken}, []string{"--allowed-host"}},
		{"short token", []string{"--auth-token", "short"}, nil, []string{"at least 16 characters"}},
		{"empty allowed host", []string{"--allowed-host", ""}, nil, []string{"allowed-host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runCLIEnv(t, tc.env, append([]string{"serve", "--db", db}, tc.args...)...).wantErr(t, 2, tc.want...)
		})
	}
}

func TestServeToken(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"flag", "env"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			db, _ := tempDB(t)
			var s *serving
			if how == "flag" {
				s = serve(t, "--db", db, "--auth-token", serveToken)
			} else {
				s = serveEnv(t, context.Background(), map[string]string{envAuthToken: serveToken}, "--db", db)
			}
			if strings.Contains(s.stdout.String(), serveToken) {
				t.Fatalf("serve printed its token:\n%s", s.stdout)
			}
			if code, h, body := request(t, "GET", s.url, "/api/instances", "", nil, ""); code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("without the token: %d %s", code, body)
			}
			// The dashboard sends a browser without its session to the
			// login page.
			if code, _, body := request(t, "GET", s.url, "/", "", nil, ""); code != http.StatusOK || !strings.Contains(body, `name="token"`) || strings.Contains(body, `id="instances"`) {
				t.Fatalf("GET / without the token: %d %s", code, body)
			}
			auth := map[string]string{"Authorization": "Bearer " + serveToken}
			if code, _, body := request(t, "GET", s.url, "/api/instances", "", auth, ""); code != http.StatusOK {
				t.Fatalf("with the token: %d %s", code, body)
			}
			for _, p := range []string{"/healthz", "/readyz"} {
				if code, _, body := request(t, "GET", s.url, p, "", nil, ""); code != http.StatusOK {
					t.Fatalf("GET %s without the token: %d %s", p, code, body)
				}
			}
		})
	}
}

func TestServeLoopbackDefaults(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	s := serve(t, "--db", db)
	// Printed after the "listening on" line serve waits for.
	if warn := s.stdout.waitLine(t, "no --auth-token", s.exited); !strings.Contains(warn, "local program") {
		t.Fatalf("serve without a token on loopback warns %q", warn)
	}
	// DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
	if code, _, body := request(t, "GET", s.url, "/api/instances", "evil.example", nil, ""); code != http.StatusForbidden {
		t.Fatalf("foreign Host: %d %s", code, body)
	}
	// A cross-site form post.
	form := map[string]string{"Content-Type": "text/plain"}
	if code, _, body := request(t, "POST", s.url, "/api/instances", "", form, `{"orchestration":"demo.Hello"}`); code != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain POST: %d %s", code, body)
	}
	if code, _, body := request(t, "GET", s.url, "/readyz", "", nil, ""); code != http.StatusOK {
		t.Fatalf("readyz: %d %s", code, body)
	}
}

func TestServeAllInterfaces(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	s := serve(t, "--db", db, "--addr", ":0", "--auth-token", serveToken, "--allowed-host", "api.example.com")
	if strings.Contains(s.url, "localhost") || !strings.HasSuffix(s.url, "(all interfaces)") {
		t.Fatalf("listening line %q: want the wildcard address and 'all interfaces'", s.url)
	}
	raw, _, _ := strings.Cut(s.url, " ")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h := u.Hostname(); h != "::" && h != "0.0.0.0" {
		t.Fatalf("listening on %q, want the wildcard address", raw)
	}
	base := "http://" + net.JoinHostPort("127.0.0.1", u.Port())
	auth := map[string]string{"Authorization": "Bearer " + serveToken}
	if code, _, body := request(t, "GET", base, "/api/instances", "api.example.com", auth, ""); code != http.StatusOK {
		t.Fatalf("allowed host with the token: %d %s", code, body)
	}
	if code, _, body := request(t, "GET", base, "/api/instances", "other.example.com", auth, ""); code != http.StatusForbidden {
		t.Fatalf("other host: %d %s", code, body)
	}
}

func TestServeRefusesUnwritableStore(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	ctx := context.WithValue(t.Context(), writableHookKey{}, func(context.Context) error {
		return errors.New("sqlite: checking the store is writable: store unavailable: attempt to write a readonly database (8)")
	})
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, &stdout, &stderr, func(string) string { return "" })
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	r.wantErr(t, 1, "cannot be written", "readonly")
	if strings.Contains(r.stdout, "listening on") {
		t.Fatalf("serve listened on an unwritable store:\n%s", r.stdout)
	}
}
