package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
)

// DefaultReadTimeout is the request body read deadline when
// Options.ReadTimeout is 0.
const DefaultReadTimeout = 30 * time.Second

// AnyHost, as an entry of Options.AllowedHosts, turns the Host check off.
const AnyHost = "*"

// webhookPrefix starts the path patterns of the webhook routes, which third
// parties call: they are exempt from the bearer token, the Origin check and
// the Content-Type requirement (their trigger authenticates them).
const webhookPrefix = "/api/webhooks/"

// openPaths are the path patterns of the routes that answer without a
// token and whatever the Host: liveness and readiness probes, which
// orchestrators send to a pod's address.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true}

// guard holds the request checks that run before any route: Host, bearer
// token, Origin and Content-Type, and the body read deadline.
type guard struct {
	token       []byte // nil: no authentication
	session     []byte // the session cookie's value, SessionValue(token)
	anyHost     bool
	hosts       map[string]bool // normalized extra allowed hosts
	readTimeout time.Duration
}

// newGuard validates the security options.
func newGuard(o *Options) (*guard, error) {
	g := &guard{hosts: map[string]bool{}, readTimeout: o.ReadTimeout}
	switch {
	case g.readTimeout < 0:
		return nil, fmt.Errorf("ReadTimeout must not be negative, got %s", g.readTimeout)
	case g.readTimeout == 0:
		g.readTimeout = DefaultReadTimeout
	}
	if o.AuthToken != "" {
		if err := duroxide.ValidateText("AuthToken", o.AuthToken, 0); err != nil || strings.Contains(o.AuthToken, " ") {
			return nil, errors.New("AuthToken must be valid UTF-8 without spaces, control characters or bidirectional controls")
		}
		g.token = []byte(o.AuthToken)
		g.session = []byte(SessionValue(o.AuthToken))
	}
	for _, h := range o.AllowedHosts {
		if h == AnyHost {
			g.anyHost = true
			continue
		}
		n := normalizeHost(h)
		if n == "" || strings.ContainsAny(n, "/ *") {
			return nil, fmt.Errorf("AllowedHosts: %q is not a host name or address", h)
		}
		g.hosts[n] = true
	}
	return g, nil
}

// normalizeHost returns the host of a Host header value or an
// AllowedHosts entry: without port and brackets, lower-cased, without a
// trailing dot.
func normalizeHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "]"), "[")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// isLoopback reports whether host (normalized) is localhost or a loopback
// address (127.0.0.0/8, ::1).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostAllowed reports whether a Host header value names this server.
func (g *guard) hostAllowed(hostport string) bool {
	host := normalizeHost(hostport)
	return host != "" && (g.anyHost || isLoopback(host) || g.hosts[host])
}

// originAllowed reports whether a state-changing request may come from
// origin (an Origin header): the request's own host, a loopback name or
// address, or a listed host. AnyHost does not allow every origin.
func (g *guard) originAllowed(origin, reqHost string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (sandboxed frames, some redirects) and garbage
	}
	host := normalizeHost(u.Host)
	return host == normalizeHost(reqHost) || isLoopback(host) || g.hosts[host]
}

// stateChanging reports whether method may change state.
func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// hasBody reports whether the request carries a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// check runs the checks on r in order: Host (403), bearer token (401),
// Origin (403) and Content-Type (415); it writes the refusal and reports
// false, or arms the body read deadline and reports true. pattern is the
// route r matches ("METHOD /path"), "" for none: exemptions follow the
// route that will serve the request, not the raw path.
func (g *guard) check(w http.ResponseWriter, r *http.Request, pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	open, webhook := openPaths[path], strings.HasPrefix(path, webhookPrefix)
	if !open && !g.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "host not allowed",
			fmt.Sprintf("the Host %q is not a name of this server; allowed: localhost, loopback addresses and the configured allowed hosts (httpapi.Options.AllowedHosts, duroxide serve --allowed-host)", r.Host))
		return false
	}
	if !open && !webhook {
		byCookie := false
		if g.token != nil {
			var ok bool
			if ok, byCookie = g.authorized(r); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="duroxide"`)
				writeError(w, http.StatusUnauthorized, "unauthorized",
					"send the server's token as the header Authorization: Bearer <token>")
				return false
			}
		}
		if stateChanging(r.Method) {
			o := r.Header.Get("Origin")
			if o != "" && !g.originAllowed(o, r.Host) {
				writeError(w, http.StatusForbidden, "cross-origin request refused",
					fmt.Sprintf("the Origin %q is not an allowed host of this server; state-changing requests from web pages of other sites are refused", o))
				return false
			}
			// A browser's cookie comes with requests a page did not mean
			// to send; browsers send Origin with every POST, PUT, PATCH
			// and DELETE of fetch(), so a cookie without one is refused.
			if byCookie && o == "" {
				writeError(w, http.StatusForbidden, "cross-origin request refused",
					"a state-changing request authenticated by the dashboard's session cookie needs an Origin header; programs send Authorization: Bearer <token> instead")
				return false
			}
			// A body must be application/json: a web page of another
			// site can send a form or a text/plain fetch() without a CORS
			// preflight, never a JSON one. A request without a body needs
			// no Content-Type (generated clients send none on POSTs whose
			// body is optional): browsers send Origin with every
			// cross-site POST, PUT, PATCH and DELETE, which the check
			// above refuses, and never send a cross-site DELETE, PUT or
			// PATCH without a CORS preflight, which this server does not
			// grant.
			if hasBody(r) {
				if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != contentTypeJSON {
					writeError(w, http.StatusUnsupportedMediaType, "unsupported media type",
						fmt.Sprintf("%s requests need the header Content-Type: application/json (got %q); with curl: -H 'Content-Type: application/json'", r.Method, r.Header.Get("Content-Type")))
					return false
				}
			}
		}
	}
	if hasBody(r) {
		// The deadline covers the body, whether the route reads it or
		// the server discards it; the server resets it for the next
		// request on the connection. Writers without deadlines
		// (httptest.ResponseRecorder) go without.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.readTimeout))
	}
	return true
}

// authorized reports whether r carries the bearer token or the session
// cookie, compared in constant time, and whether the cookie was what
// authorized it. A wrong bearer token is refused even with a good cookie.
func (g *guard) authorized(r *http.Request) (ok, byCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return false, false
		}
		return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), g.token) == 1, false
	}
	return g.sessionValid(r), true
}

// sessionValid reports whether r carries the session cookie of the token.
func (g *guard) sessionValid(r *http.Request) bool {
	if g.session == nil {
		return false
	}
	for _, c := range r.CookiesNamed(SessionCookieName) {
		if subtle.ConstantTimeCompare([]byte(c.Value), g.session) == 1 {
			return true
		}
	}
	return false
}

// SessionCookieName is the cookie that the dashboard's login sets and that
// the API accepts in place of the bearer token: HttpOnly, SameSite=Strict,
// Secure over TLS. State-changing requests authenticated by it need an
// Origin header naming an allowed host, so only same-origin pages can use
// it.
const SessionCookieName = "duroxide_session"

// sessionLabel is the message SessionValue authenticates.
const sessionLabel = "duroxide dashboard session v1"

// SessionValue is the session cookie's value for token: an HMAC-SHA256 of
// a fixed label keyed by the token, in hex. The cookie proves knowledge of
// the token without holding it, and changing the token ends every session.
func SessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(sessionLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// Access holds the checks NewHandler applies to every request, for
// handlers served next to the API on the same server (the dashboard): the
// Host allow-list, the token (bearer or session cookie) and the Origin
// check. Build it from the same token and hosts as the API's Options.
type Access struct {
	g *guard
}

// NewAccess returns the checks of an API with Options.AuthToken token and
// Options.AllowedHosts hosts; it fails as NewHandler does on bad values.
func NewAccess(token string, allowedHosts []string) (*Access, error) {
	g, err := newGuard(&Options{AuthToken: token, AllowedHosts: allowedHosts})
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w: %v", duroxide.ErrInvalidArgument, err)
	}
	return &Access{g: g}, nil
}

// TokenRequired reports whether a token is configured.
func (a *Access) TokenRequired() bool { return a.g.token != nil }

// HostAllowed reports whether r's Host names this server (see
// Options.AllowedHosts).
func (a *Access) HostAllowed(r *http.Request) bool { return a.g.hostAllowed(r.Host) }

// OriginAllowed reports whether r's Origin header is present and names r's
// own host, a loopback one or an allowed one.
func (a *Access) OriginAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o != "" && a.g.originAllowed(o, r.Host)
}

// Authorized reports whether r carries the token, as a bearer token or a
// session cookie; always true without a token.
func (a *Access) Authorized(r *http.Request) bool {
	if a.g.token == nil {
		return true
	}
	ok, _ := a.g.authorized(r)
	return ok
}

// TokenMatches reports whether s is the token, in constant time; false
// without a token.
func (a *Access) TokenMatches(s string) bool {
	return a.g.token != nil && subtle.ConstantTimeCompare([]byte(s), a.g.token) == 1
}

// SessionCookie returns the session cookie to set after a login, Secure
// when secure (the request came over TLS), or nil without a token.
func (a *Access) SessionCookie(secure bool) *http.Cookie {
	if a.g.token == nil {
		return nil
	}
	return &http.Cookie{Name: SessionCookieName, Value: string(a.g.session), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure}
}

// ClearSessionCookie returns a cookie that deletes the session cookie.
func (a *Access) ClearSessionCookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure}
}

// isReadTimeout reports whether err is a body read cut off by the read
// deadline.
func isReadTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
