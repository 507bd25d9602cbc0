package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/logkey"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes int64 = 1 << 20

// MaxWait caps the ?wait long-poll of GET /api/instances/{id} when
// Options.MaxWait is 0: longer waits are shortened to it.
const MaxWait = 5 * time.Minute

// Options configures NewHandler. A nil pointer or a zero field means the
// documented default.
type Options struct {
	// Logger receives server-side failures (5xx responses, at error level)
	// and recovered panics (default: warnings and errors to standard error).
	Logger *slog.Logger
	// Clock is the time of the Stripe signature tolerance (default: the
	// real clock).
	Clock clockwork.Clock
	// LookupEnv reads the environment variables naming the triggers'
	// secrets, TriggerAuth.SecretEnv (default os.LookupEnv).
	LookupEnv func(key string) (string, bool)
	// MaxBodyBytes bounds request bodies; a larger body is answered 413
	// (default DefaultMaxBodyBytes, 1 MiB). Negative values are rejected.
	MaxBodyBytes int64
	// Registry, when set, lets GET /api/orchestrations list the registered
	// orchestrations, their versions and the activities (default: nil, the
	// lists are empty), and checks the triggers: one naming an
	// orchestration or version it does not register fails NewHandler when
	// Runtime is set too (this process runs them), and is logged as a
	// warning otherwise. It is only read.
	Registry *duroxide.Registry
	// Runtime, when set, adds its metrics to GET /metrics: orchestration
	// turn and activity durations and counts (default: nil, the store's
	// metrics only). It is only read.
	Runtime *duroxide.Runtime
	// Triggers are served as webhooks, POST /api/webhooks/{id} (default:
	// none). NewHandler validates them as ParseTriggers does and fills in
	// their defaults; the slice is not kept.
	Triggers []Trigger
	// AuthToken, when set, must be sent as "Authorization: Bearer <token>"
	// with every request (401 otherwise, with WWW-Authenticate: Bearer),
	// except GET /healthz, GET /readyz and the webhook routes
	// (/api/webhooks/...), which third parties call without it (default:
	// "", no authentication: serve loopback only). Compared in constant
	// time; it must not contain spaces or control characters. With a token,
	// every trigger must have a Trigger.Auth: a signature, a shared token,
	// or {"type": "none"} to accept unsigned calls on purpose.
	AuthToken string
	// AllowedHosts are the names and addresses (with or without port) that
	// the Host header may carry besides localhost and the loopback
	// addresses, which are always allowed; requests for other hosts are
	// answered 403, which defeats DNS rebinding. AnyHost ("*") allows every
	// Host (behind a proxy that checks it). State-changing requests whose
	// Origin header names a host that is not the request's own, a loopback
	// one or one listed here are answered 403 too (AnyHost does not
	// extend to origins). Default: loopback only.
	AllowedHosts []string
	// ReadTimeout bounds the time to receive a request body; a body still
	// incomplete then is answered 408 and its connection closed (default
	// DefaultReadTimeout, 30 s). It does not limit long polls. Negative
	// values are rejected.
	ReadTimeout time.Duration
	// MaxWait caps the ?wait long-poll of GET /api/instances/{id}; a longer
	// wait is shortened to it, and a poll that reaches it answers 200 with
	// the live status (default MaxWait, 5 min). Negative values are
	// rejected.
	MaxWait time.Duration
	// StalledAfter is the stall threshold of waitingFor, ?stalled=true and
	// the duroxide_instances_stalled gauge: an instance is stalled when it
	// has made no progress for this long while waiting on something that
	// should progress (default duroxide.DefaultStalledAfter, 5 min).
	// Negative values are rejected.
	StalledAfter time.Duration
}

// Log attribute keys (internal/logkey documents them).
const (
	logKeyMethod   = logkey.Method
	logKeyPath     = logkey.Path
	logKeyStatus   = logkey.Status
	logKeyError    = logkey.Error
	logKeyPanic    = logkey.Panic
	logKeyPattern  = logkey.Pattern
	logKeyRequest  = logkey.Request
	logKeyInstance = logkey.Instance
)

// route is one endpoint: a net/http ServeMux pattern ("GET /api/instances/{id}")
// and the function serving it. A handler writes its success response itself
// and returns an error for anything else; handle turns the error into the
// JSON error response.
type route struct {
	pattern string
	handle  func(w http.ResponseWriter, r *http.Request) error
}

// server is the http.Handler returned by NewHandler.
type server struct {
	client  *duroxide.Client
	log     *slog.Logger
	maxBody int64
	reg     *duroxide.Registry
	runtime *duroxide.Runtime
	mux     *http.ServeMux
	routes  []route
	// triggers are the validated Options.Triggers, in their order, and
	// triggerByID indexes them.
	triggers    []Trigger
	triggerByID map[string]*Trigger
	// lockConflicts counts 409 answers to starts refused by a held or
	// contended execution lock.
	lockConflicts lockConflictCounters
	// guard checks Host, token, Origin and Content-Type before any route.
	guard *guard
	// maxWait caps ?wait (Options.MaxWait).
	maxWait time.Duration
	// stalledAfter is Options.StalledAfter.
	stalledAfter time.Duration
	// verifiers check the calls of the triggers with a signature or a
	// token, by trigger ID.
	verifiers map[string]*verifier
	// notReady: the last readiness check failed (GET /readyz logs the
	// changes only).
	notReady atomic.Bool
}

// NewHandler returns the HTTP API over client. The handler serves the
// routes listed in the package documentation and answers anything else with
// a JSON 404 or 405. Mount it at the root of a server, or at "/api/",
// "/healthz" and "/metrics" next to other handlers (a dashboard at "/").
// Long polls (?wait) hold a request up to Options.MaxWait: give the
// http.Server a WriteTimeout above that, or none. Request bodies have their
// own read deadline (Options.ReadTimeout); give the server a
// ReadHeaderTimeout, an IdleTimeout and MaxHeaderBytes too.
func NewHandler(client *duroxide.Client, opts *Options) (http.Handler, error) {
	if client == nil {
		return nil, fmt.Errorf("httpapi: %w: nil client", duroxide.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxBodyBytes < 0:
		return nil, fmt.Errorf("httpapi: %w: MaxBodyBytes must not be negative, got %d", duroxide.ErrInvalidArgument, o.MaxBodyBytes)
	case o.MaxBodyBytes == 0:
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case o.MaxWait < 0:
		return nil, fmt.Errorf("httpapi: %w: MaxWait must not be negative, got %s", duroxide.ErrInvalidArgument, o.MaxWait)
	case o.MaxWait == 0:
		o.MaxWait = MaxWait
	}
	switch {
	case o.StalledAfter < 0:
		return nil, fmt.Errorf("httpapi: %w: StalledAfter must not be negative, got %s", duroxide.ErrInvalidArgument, o.StalledAfter)
	case o.StalledAfter == 0:
		o.StalledAfter = duroxide.DefaultStalledAfter
	}
	triggers, err := normalizeTriggers(o.Triggers)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w: %v", duroxide.ErrInvalidArgument, err)
	}
	g, err := newGuard(&o)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w: %v", duroxide.ErrInvalidArgument, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	verifiers, err := newVerifiers(triggers, o.AuthToken != "", o.LookupEnv, o.Clock)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w: %v", duroxide.ErrInvalidArgument, err)
	}
	if err := checkRegistered(triggers, o.Registry, o.Runtime != nil, o.Logger); err != nil {
		return nil, fmt.Errorf("httpapi: %w: %v", duroxide.ErrInvalidArgument, err)
	}
	s := &server{
		client:       client,
		log:          o.Logger,
		maxBody:      o.MaxBodyBytes,
		reg:          o.Registry,
		runtime:      o.Runtime,
		mux:          http.NewServeMux(),
		triggers:     triggers,
		triggerByID:  make(map[string]*Trigger, len(triggers)),
		guard:        g,
		maxWait:      o.MaxWait,
		stalledAfter: o.StalledAfter,
		verifiers:    verifiers,
	}
	for i := range s.triggers {
		s.triggerByID[s.triggers[i].ID] = &s.triggers[i]
	}
	// Each group of routes lives in its own file.
	s.routes = append(s.routes, s.instanceRoutes()...)
	s.routes = append(s.routes, s.pauseRoutes()...)
	s.routes = append(s.routes, s.bulkRoutes()...)
	s.routes = append(s.routes, s.webhookRoutes()...)
	s.routes = append(s.routes, s.lockRoutes()...)
	s.routes = append(s.routes, s.scheduleRoutes()...)
	s.routes = append(s.routes, s.systemRoutes()...)
	for _, rt := range s.routes {
		s.mux.Handle(rt.pattern, s.adapt(rt.handle))
	}
	return s, nil
}

// ServeHTTP checks the request (Host, token, Origin, Content-Type: see
// Options), then dispatches to the routes. Requests that match no route get
// the mux's 404 or 405 status (with its Allow header) and a JSON body
// instead of the mux's plain-text one.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(headerRequestID, newRequestID())
	h, pattern := s.mux.Handler(r)
	if !s.guard.check(w, r, pattern) {
		return
	}
	if pattern == "" {
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		code, details := rec.code, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)
		switch code {
		case http.StatusMethodNotAllowed:
			details = fmt.Sprintf("%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, rec.header.Get("Allow"))
		case 0:
			code = http.StatusNotFound
		}
		writeError(w, code, strings.ToLower(http.StatusText(code)), details)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// adapt turns a route function into an http.Handler that writes returned
// errors as JSON and recovers panics.
func (s *server) adapt(fn func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				id := requestID(w)
				s.log.Error("panic serving request", logKeyMethod, r.Method, logKeyPath, r.URL.Path,
					logKeyPanic, v, logKeyRequest, id)
				writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error", RequestID: id})
			}
		}()
		if err := fn(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// fail writes err as a JSON error response with the status it maps to.
// Errors of the webhook route (wrapped in *webhookError) carry
// "success": false, as that route's contract wants. A 5xx answer names
// the request's ID instead of the error, which is logged under that ID:
// its text may name store internals (SQL, file paths, addresses).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var we *webhookError
	webhook := errors.As(err, &we)
	code, body := errorResponse(err)
	if ctxErr := r.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		// The client went away, or the server is shutting down (its base
		// context ended): answer, in case someone still listens.
		code, body = http.StatusServiceUnavailable, errorBody{Error: "request canceled"}
	}
	if webhook {
		body.Success = new(false)
	}
	s.countLockConflict(err)
	body.capDetails()
	if code >= 500 {
		body.Details, body.ExistingExecutionID = "", ""
		body.RequestID = requestID(w)
		s.log.Error("request failed", logKeyMethod, r.Method, logKeyPath, r.URL.Path,
			logKeyPattern, r.Pattern, logKeyStatus, code, logKeyError, err, logKeyRequest, body.RequestID)
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, body)
}

// requestID returns the ID ServeHTTP gave the request, from the response
// header; a handler called without ServeHTTP (a test, Access users) gets
// a fresh one, set in the header too.
func requestID(w http.ResponseWriter) string {
	id := w.Header().Get(headerRequestID)
	if id == "" {
		id = newRequestID()
		w.Header().Set(headerRequestID, id)
	}
	return id
}

// statusRecorder captures the status and headers of the mux's own 404 and
// 405 handlers and discards their plain-text bodies.
type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header { return r.header }

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return len(b), nil
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
