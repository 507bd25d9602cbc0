package httpapi

import (
	"crypto/subtle"
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
		if strings.ContainsFunc(o.AuthToken, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return nil, errors.New("AuthToken must not contain spaces or control characters")
		}
		g.token = []byte(o.AuthToken)
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
		if g.token != nil && !g.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="duroxide"`)
			writeError(w, http.StatusUnauthorized, "unauthorized",
				"send the server's token as the header Authorization: Bearer <token>")
			return false
		}
		if stateChanging(r.Method) {
			if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o, r.Host) {
				writeError(w, http.StatusForbidden, "cross-origin request refused",
					fmt.Sprintf("the Origin %q is not an allowed host of this server; state-changing requests from web pages of other sites are refused", o))
				return false
			}
			// POST, PUT and PATCH need application/json even without a
			// body: a cross-site form or fetch without a body sends none.
			// DELETE needs it only with a body: browsers never send a
			// cross-site DELETE without a CORS preflight, which this
			// server does not grant.
			if r.Method != http.MethodDelete || hasBody(r) {
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

// authorized reports whether r carries the bearer token, compared in
// constant time.
func (g *guard) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), g.token) == 1
}

// isReadTimeout reports whether err is a body read cut off by the read
// deadline.
func isReadTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
