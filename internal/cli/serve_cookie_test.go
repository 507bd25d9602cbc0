package cli

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestServeSecureCookies checks that --secure-cookies makes the dashboard's
// login cookie Secure on a plain-HTTP listener (behind a TLS-terminating
// proxy), and that it is not Secure without the flag.
func TestServeSecureCookies(t *testing.T) {
	t.Parallel()
	for _, flag := range []bool{false, true} {
		db, _ := tempDB(t)
		args := []string{"--db", db, "--auth-token", serveToken}
		if flag {
			args = append(args, "--secure-cookies")
		}
		s := serve(t, args...)
		form := url.Values{"token": {serveToken}, "next": {"/"}}.Encode()
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/login", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.url)
		// Do not follow the redirect: the cookie comes with it.
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		code, h := res.StatusCode, res.Header
		c := h.Get("Set-Cookie")
		if code != http.StatusSeeOther || c == "" {
			t.Fatalf("login: %d, Set-Cookie %q", code, c)
		}
		if got := strings.Contains(c, "; Secure"); got != flag {
			t.Fatalf("--secure-cookies %v: Set-Cookie %q", flag, c)
		}
	}
}
