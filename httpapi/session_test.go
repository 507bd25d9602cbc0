package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

// TestSessionCookie checks that the dashboard's session cookie stands in
// for the bearer token, for same-origin browser requests only.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{AuthToken: testToken})
	e.start(t, "cookie-1", demo.Hello, "Ada")
	good := httpapi.SessionCookieName + "=" + httpapi.SessionValue(testToken)
	origin := e.srv.URL
	start := `{"orchestration": "demo.Hello"}`
	for _, tc := range []struct {
		name          string
		method, path  string
		header        map[string]string
		body          string
		status        int
		wantInDetails string
	}{
		{name: "read with cookie", method: "GET", path: "/api/instances/cookie-1", header: withHeaders("Cookie", good), status: http.StatusOK},
		{name: "start with cookie and own origin", method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Cookie", good, "Origin", origin, "Content-Type", "application/json"), status: http.StatusCreated},
		{name: "start with cookie, no origin", method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Cookie", good, "Content-Type", "application/json"), status: http.StatusForbidden, wantInDetails: "Origin"},
		{name: "start with cookie, foreign origin", method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Cookie", good, "Origin", "https://evil.example", "Content-Type", "application/json"), status: http.StatusForbidden},
		{name: "start with cookie, form content type", method: "POST", path: "/api/instances", body: start,
			header: withHeaders("Cookie", good, "Origin", origin, "Content-Type", "text/plain"), status: http.StatusUnsupportedMediaType},
		{name: "purge with cookie, no origin", method: "DELETE", path: "/api/instances/cookie-1?force=true",
			header: withHeaders("Cookie", good), status: http.StatusForbidden},
		{name: "wrong cookie", method: "GET", path: "/api/instances", header: withHeaders("Cookie", httpapi.SessionCookieName+"=abc"), status: http.StatusUnauthorized},
		{name: "cookie of another token", method: "GET", path: "/api/instances",
			header: withHeaders("Cookie", httpapi.SessionCookieName+"="+httpapi.SessionValue(testToken+"x")), status: http.StatusUnauthorized},
		{name: "raw token as cookie", method: "GET", path: "/api/instances", header: withHeaders("Cookie", httpapi.SessionCookieName+"="+testToken), status: http.StatusUnauthorized},
		{name: "good cookie, wrong bearer", method: "GET", path: "/api/instances", header: withHeaders("Cookie", good, "Authorization", "Bearer nope"), status: http.StatusUnauthorized},
		{name: "control characters in cookie", method: "GET", path: "/api/instances", header: withHeaders("Cookie", httpapi.SessionCookieName+"=\t<script>%00"), status: http.StatusUnauthorized},
		{name: "huge cookie", method: "GET", path: "/api/instances", header: withHeaders("Cookie", httpapi.SessionCookieName+"="+strings.Repeat("a", 30000)), status: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.expectRaw(t, rawRequest{method: tc.method, path: tc.path, header: tc.header, body: tc.body}, tc.status)
			if tc.wantInDetails != "" && !strings.Contains(string(res.body), tc.wantInDetails) {
				t.Errorf("body %s lacks %q", res.body, tc.wantInDetails)
			}
		})
	}
}

// TestSessionCookieWithoutToken checks that without a token configured a
// cookie grants nothing more and changes nothing.
func TestSessionCookieWithoutToken(t *testing.T) {
	t.Parallel()
	a, err := httpapi.NewAccess("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.TokenRequired() || a.TokenMatches("") || a.SessionCookie(false) != nil {
		t.Fatal("an Access without a token requires, matches or issues something")
	}
	b, err := httpapi.NewAccess(testToken, []string{"dash.example"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.SessionCookie(true)
	if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Value != httpapi.SessionValue(testToken) || strings.Contains(c.Value, testToken) {
		t.Fatalf("session cookie %+v", c)
	}
	if !b.TokenMatches(testToken) || b.TokenMatches(testToken+" ") || b.TokenMatches("") {
		t.Fatal("TokenMatches")
	}
	if _, err := httpapi.NewAccess("a b", nil); err == nil {
		t.Fatal("NewAccess took a token with a space")
	}
}
