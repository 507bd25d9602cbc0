package dashboard

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/internal/logkey"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Options.
const (
	// DefaultSampleEvery is how often the health sampler reads the store.
	DefaultSampleEvery = 5 * time.Second
	// DefaultSamples is how many samples the health chart keeps (10
	// minutes at DefaultSampleEvery).
	DefaultSamples = 120
	// DefaultRefresh is how often an open page refreshes its live parts.
	DefaultRefresh = 3 * time.Second
)

// Options configures New. A nil pointer or a zero field means the
// documented default.
type Options struct {
	// AuthToken is the API's token (httpapi.Options.AuthToken): when set,
	// pages need the session cookie that the login page sets (default: "",
	// no login, loopback only).
	AuthToken string
	// AllowedHosts are the Host names served besides localhost and the
	// loopback addresses, as httpapi.Options.AllowedHosts (default: none).
	AllowedHosts []string
	// Registry, when set, offers its orchestration names in the start form
	// (default: none; any name may be typed).
	Registry *duroxide.Registry
	// Triggers are listed, with their webhook URLs, on the locks page
	// (default: none). Pass the API's triggers.
	Triggers []httpapi.Trigger
	// Logger receives failures to read the store (default: warnings and
	// errors to standard error).
	Logger *slog.Logger
	// Clock is the time of the health sampler and of relative times on
	// pages (default: the real clock).
	Clock clockwork.Clock
	// SampleEvery is the health sampling interval (default
	// DefaultSampleEvery). Negative values are rejected.
	SampleEvery time.Duration
	// Samples is how many health samples are kept (default
	// DefaultSamples). Negative values are rejected.
	Samples int
	// Refresh is how often an open page refreshes its live parts (default
	// DefaultRefresh). Negative values are rejected.
	Refresh time.Duration
	// SecureCookies marks the session cookie Secure whatever the request
	// came over: set it when browsers reach the dashboard over HTTPS
	// through a TLS-terminating proxy that talks plain HTTP to this
	// server (default: false, Secure only when the request itself came
	// over TLS).
	SecureCookies bool
	// TrustForwardedProto takes a request whose X-Forwarded-Proto header
	// is "https" as one that came over TLS: its session cookie is Secure
	// and the webhook URLs shown use https. Set it only when every request
	// passes through a proxy that sets this header, since a client can
	// send it too (default: false, the header is ignored).
	TrustForwardedProto bool
	// StalledAfter is the stall threshold of waitingFor and of the
	// "stalled only" filter (default duroxide.DefaultStalledAfter); pass
	// the API's httpapi.Options.StalledAfter. Negative values are
	// rejected.
	StalledAfter time.Duration
}

// Dashboard is the dashboard's http.Handler. It runs a health sampler in
// the background from New until Close.
type Dashboard struct {
	client   *duroxide.Client
	access   *httpapi.Access
	log      *slog.Logger
	clock    clockwork.Clock
	reg      *duroxide.Registry
	triggers []httpapi.Trigger
	refresh  time.Duration
	stalled  time.Duration
	// secureCookies and trustProto are Options.SecureCookies and
	// Options.TrustForwardedProto.
	secureCookies, trustProto bool
	pages                     map[string]*template.Template
	mux                       *http.ServeMux
	sampler                   *sampler

	closeOnce sync.Once
}

// New returns the dashboard over client and starts its health sampler;
// call Close to stop it. Mount the dashboard at "/" next to the API
// (httpapi.NewHandler at "/api/", "/healthz", "/readyz" and "/metrics"),
// built with the same token and allowed hosts: the pages' actions call the
// API.
func New(client *duroxide.Client, opts *Options) (*Dashboard, error) {
	if client == nil || client.Store() == nil {
		return nil, fmt.Errorf("dashboard: %w: nil client or client without a store", duroxide.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SampleEvery < 0 || o.Samples < 0 || o.Refresh < 0 || o.StalledAfter < 0 {
		return nil, fmt.Errorf("dashboard: %w: SampleEvery, Samples, Refresh and StalledAfter must not be negative", duroxide.ErrInvalidArgument)
	}
	if o.StalledAfter == 0 {
		o.StalledAfter = duroxide.DefaultStalledAfter
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = DefaultSampleEvery
	}
	if o.Samples == 0 {
		o.Samples = DefaultSamples
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	access, err := httpapi.NewAccess(o.AuthToken, o.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	d := &Dashboard{
		client:   client,
		access:   access,
		log:      o.Logger,
		clock:    o.Clock,
		reg:      o.Registry,
		triggers: append([]httpapi.Trigger(nil), o.Triggers...),
		refresh:  o.Refresh,
		stalled:  o.StalledAfter,
		pages:    pages,

		secureCookies: o.SecureCookies,
		trustProto:    o.TrustForwardedProto,
		mux:           http.NewServeMux(),
	}
	d.routes()
	d.sampler = startSampler(client.Store(), o.Clock, o.SampleEvery, o.Samples, o.Logger)
	return d, nil
}

// Close stops the health sampler and waits for it. The handler keeps
// serving pages (without new health samples).
func (d *Dashboard) Close() {
	d.closeOnce.Do(d.sampler.stop)
}

// routes registers the pages. Every route but the static files and the
// login page passes the access check first.
func (d *Dashboard) routes() {
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix("/static/", http.FileServerFS(static))
	d.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	}))
	d.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		icon, err := staticFS.ReadFile("static/favicon.svg")
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "max-age=86400")
		_, _ = w.Write(icon)
	})
	d.mux.HandleFunc("GET /login", d.loginPage)
	d.mux.HandleFunc("POST /login", d.login)
	d.mux.HandleFunc("POST /logout", d.logout)
	d.mux.Handle("GET /{$}", d.authed(d.instancesPage))
	d.mux.Handle("GET /instances/{id}", d.authed(d.instancePage))
	d.mux.Handle("GET /instances/{id}/raw/{part}", d.authed(d.rawPayload))
	d.mux.Handle("GET /locks", d.authed(d.locksPage))
	d.mux.Handle("GET /schedules", d.authed(d.schedulesPage))
	d.mux.Handle("GET /health", d.authed(d.healthPage))
	d.mux.Handle("GET /bulk", d.authed(d.bulkPage))
	d.mux.Handle("GET /", d.authed(func(w http.ResponseWriter, r *http.Request) error {
		return &pageError{code: http.StatusNotFound, title: "Not found", details: "There is no page " + r.URL.Path + " here."}
	}))
}

// ServeHTTP checks the Host, then serves the page.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	if !d.access.HostAllowed(r) {
		d.render(w, r, http.StatusForbidden, "error", &errorView{Title: "Host not allowed",
			Details: "This server does not serve the host name this page was requested with. Use localhost, a loopback address, or a name given to duroxide serve with --allowed-host."})
		return
	}
	d.mux.ServeHTTP(w, r)
}

// overTLS reports whether the browser reached the page over TLS: the
// request came over TLS, or (with Options.TrustForwardedProto) a proxy
// says it did.
func (d *Dashboard) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return d.trustProto && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// secureCookie reports whether the session cookie set in answer to r is
// Secure.
func (d *Dashboard) secureCookie(r *http.Request) bool { return d.secureCookies || d.overTLS(r) }

// pageError is an error a page handler returns to show an error page with
// a status.
type pageError struct {
	code           int
	title, details string
}

func (e *pageError) Error() string { return e.title + ": " + e.details }

// authed wraps a page handler: without a valid session (when a token is
// configured) GET requests go to the login page; errors become error
// pages; panics are recovered.
func (d *Dashboard) authed(fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				d.log.Error("panic serving dashboard page", logkey.Path, r.URL.Path, logkey.Panic, v)
				d.render(w, r, http.StatusInternalServerError, "error", &errorView{Title: "Internal error", Details: fmt.Sprint(v)})
			}
		}()
		if !d.access.Authorized(r) {
			next := r.URL.Path
			if r.URL.RawQuery != "" && len(r.URL.RawQuery) < 2048 {
				next += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if err := fn(w, r); err != nil {
			var pe *pageError
			if !errors.As(err, &pe) {
				pe = d.storeError(r, err)
			}
			d.render(w, r, pe.code, "error", &errorView{Title: pe.title, Details: pe.details})
		}
	})
}

// storeError turns an error of the client into an error page.
func (d *Dashboard) storeError(r *http.Request, err error) *pageError {
	switch {
	case errors.Is(err, duroxide.ErrNotFound):
		return &pageError{code: http.StatusNotFound, title: "Not found", details: err.Error()}
	case errors.Is(err, duroxide.ErrInvalidArgument):
		return &pageError{code: http.StatusBadRequest, title: "Bad request", details: err.Error()}
	}
	d.log.Error("dashboard page failed", logkey.Path, r.URL.Path, logkey.Error, err)
	return &pageError{code: http.StatusInternalServerError, title: "The store could not be read", details: err.Error()}
}

// safeNext returns next if it is a local path of this site, else "/".
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\\' }) || len(next) > 4096 {
		return "/"
	}
	return next
}

// Mount returns a handler serving the API's paths (/api/, /healthz,
// /readyz, /metrics) with api (httpapi.NewHandler) and every other path
// with the dashboard, as duroxide serve does.
func Mount(api http.Handler, d *Dashboard) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/api/", "/healthz", "/readyz", "/metrics"} {
		mux.Handle(p, api)
	}
	mux.Handle("/", d)
	return mux
}
