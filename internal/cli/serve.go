package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/dashboard"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

var serveCommand = &command{
	name:     "serve",
	synopsis: "[--addr 127.0.0.1:8080] [--auth-token T] [--allowed-host NAME]... [--insecure] [--triggers FILE] [--demo] [--shutdown-timeout 30s]",
	summary:  "serve the HTTP API (and, with --demo, run the demo orchestrations)",
	details: `Serves the HTTP API and the dashboard (at /, printed as "dashboard: URL")
on --addr; port 0 picks a free port, and the address is
printed as "listening on http://HOST:PORT" (the listener's own address; a
wildcard address such as ":8080" is printed as http://[::]:8080 or
http://0.0.0.0:8080 with "all interfaces"). The dashboard line gives URLs
the Host check accepts: a loopback one on this machine and, off loopback,
one per --allowed-host for the network.

Security (docs/security.md): on a loopback address (the default) no token
is needed. --auth-token T (or $DUROXIDE_AUTH_TOKEN; at least 16 characters)
requires "Authorization: Bearer T" on every route but /healthz, /readyz and
the webhooks. Requests are only served for the Host names localhost and
loopback addresses, plus each --allowed-host NAME (repeatable; '*' allows
any Host, for use behind a proxy that checks it). Binding another address
needs a token (or --insecure, to serve without one at your own risk) and at
least one --allowed-host. serve refuses to start on a store it cannot write.
POST requests need Content-Type: application/json, bodyless ones included
(with curl: -H 'Content-Type: application/json'); webhooks take any.

Without --demo, serve runs no orchestrations: it serves the API only, and the
instances started through it wait until a runtime hosting their
orchestration (your own program using the Go API on the same store) runs
them. With --demo it also starts a runtime hosting the demo orchestrations:
demo.Hello, demo.Sequence, demo.FanOut, demo.Approval, demo.Countdown and
demo.Fail.

--triggers FILE loads webhook triggers, each served at
POST /api/webhooks/ID and printed at startup with its URL. The file is JSON:
  {"triggers": [{"id": "stripe-payment",
    "workflowId": "customer-{/data/object/customer}",
    "instanceId": "order-{/data/object/id}",
    "orchestration": "demo.Hello", "concurrency": "exclusive",
    "lockTtl": "1h", "idempotencyKey": "{/id}"}]}
concurrency is what a call does while an instance holding the same
workflowId lock runs: exclusive (409; the default), queue (the new
instance waits, Pending, and starts when the lock is free, in arrival
order), replace (the holder is canceled and the new instance starts when it
ends) or parallel (no lock: every call starts at once).
workflowId (default: the trigger's id), instanceId (default: id-UUID) and
idempotencyKey are key templates: text in which {/json/pointer} is the
string or number at that RFC 6901 pointer in the request body and
{header:Name} the value of a request header ({{ and }} are literal braces);
a placeholder without a value answers the call 400. A fixed text is a fixed
key; "idempotencyKeyPath": "/id" is the same as "idempotencyKey": "{/id}".
An Idempotency-Key header takes precedence over both.
A file that cannot be read or is invalid stops serve before it starts.

A trigger may require a signature or a shared token: "auth": {"type":
"github", "secretEnv": "GITHUB_WEBHOOK_SECRET"} (also "stripe", "hmac" with
"header", "encoding" and "prefix", "token" with "header", and "none"). The
secret is read from the named environment variable, which must be set. A
bad or missing signature is answered 401 and starts nothing. With --demo, a
trigger naming an orchestration or version the demo runtime does not
register stops serve; without it, serve warns.

Ctrl-C (SIGINT) or SIGTERM shuts down gracefully: the HTTP server stops
taking requests, then the runtime finishes the turns and activities in
flight, within --shutdown-timeout. Work not finished by then is not lost: it
runs again at the next start.`,
	run: runServe,
}

func runServe(ctx context.Context, inv *invocation, args []string) error {
	addr := inv.fs.String("addr", "127.0.0.1:8080", "the address to listen on (port 0: any free port)")
	withDemo := inv.fs.Bool("demo", false, "run a runtime hosting the demo orchestrations (default: API only, no runtime)")
	grace := inv.fs.Duration("shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	triggersFile := inv.fs.String("triggers", "", "serve the webhook triggers of this JSON file at POST /api/webhooks/ID (default: none)")
	token := inv.fs.String("auth-token", "", "require Authorization: Bearer TOKEN on every route but /healthz, /readyz and webhooks (default $"+envAuthToken+", else none)")
	var allowedHosts stringList
	inv.fs.Var(&allowedHosts, "allowed-host", "also serve requests whose Host is NAME (repeatable; '*' = any; default: localhost and loopback addresses only)")
	insecure := inv.fs.Bool("insecure", false, "allow a non-loopback --addr without --auth-token")
	secureCookies := inv.fs.Bool("secure-cookies", false, "mark the dashboard's login cookie Secure: for HTTPS through a TLS-terminating proxy")
	stalledAfter := inv.fs.Duration("stalled-after", duroxide.DefaultStalledAfter, "an instance without progress this long while it should progress is stalled (waitingFor, ?stalled=true, duroxide_instances_stalled)")
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	if *grace <= 0 {
		return usageErrorf("serve: --shutdown-timeout must be positive")
	}
	if *stalledAfter <= 0 {
		return usageErrorf("serve: --stalled-after must be positive, got %s", *stalledAfter)
	}
	if *token == "" {
		*token = inv.getenv(envAuthToken)
	}
	if err := checkExposure(*addr, *token, allowedHosts, *insecure); err != nil {
		return err
	}
	// Triggers are loaded first: a bad file fails before anything starts.
	var triggers []httpapi.Trigger
	if *triggersFile != "" {
		var err error
		if triggers, err = httpapi.LoadTriggers(*triggersFile); err != nil {
			return fmt.Errorf("--triggers: %w (see 'duroxide help serve' for the file's format)", err)
		}
	}
	var reg *duroxide.Registry
	if *withDemo {
		reg = duroxide.NewRegistry()
		demo.Register(reg)
	}
	lookupEnv := func(k string) (string, bool) { v := inv.getenv(k); return v, v != "" }
	// Everything the settings decide is checked before anything starts:
	// a mistake stops serve before it opens the store or starts a runtime.
	if err := checkServeSettings(triggers, reg, *token, allowedHosts, *stalledAfter, lookupEnv); err != nil {
		return err
	}
	out := inv.stdout
	logger := inv.logger()

	store, spec, err := inv.openStore(ctx, storeurl.Create)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			fmt.Fprintf(inv.stderr, "duroxide: closing store: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "store %s\n", spec.Display)
	checkWritable := store.CheckWritable
	if hook, ok := ctx.Value(writableHookKey{}).(func(context.Context) error); ok {
		checkWritable = hook
	}
	if err := checkWritable(ctx); err != nil {
		return spec.WrapErr(err, "the store %s cannot be written, refusing to serve", spec.Display)
	}

	var rt *duroxide.Runtime
	if *withDemo {
		rt, err = duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: logger})
		if err != nil {
			return fmt.Errorf("starting the runtime: %w", err)
		}
		fmt.Fprintf(out, "runtime started, hosting %s\n", strings.Join(reg.Orchestrations(), ", "))
	} else {
		fmt.Fprintln(out, "no runtime: serving the API only; started instances wait for a runtime (pass --demo to run the demo orchestrations)")
	}
	// stopRuntime drains the runtime within sctx.
	stopRuntime := func(sctx context.Context) error {
		if rt == nil {
			return nil
		}
		fmt.Fprintln(out, "stopping the runtime: finishing turns and activities in flight")
		if err := rt.Shutdown(sctx); err != nil {
			return fmt.Errorf("the runtime did not drain within --shutdown-timeout %s (unfinished work runs again at the next start): %w", *grace, err)
		}
		fmt.Fprintln(out, "runtime stopped")
		return nil
	}
	// abort stops the runtime when serve fails before serving.
	abort := func(err error) error {
		sctx, cancel := graceCtx(ctx, *grace)
		defer cancel()
		return errors.Join(err, stopRuntime(sctx))
	}

	client := duroxide.NewClient(store)
	// NewHandler checks the triggers: their secrets' environment variables
	// are set, and with --demo the runtime registers their orchestrations.
	handler, err := httpapi.NewHandler(client, &httpapi.Options{Logger: logger, Registry: reg, Runtime: rt, Triggers: triggers,
		AuthToken: *token, AllowedHosts: allowedHosts, StalledAfter: *stalledAfter,
		LookupEnv: lookupEnv})
	if err != nil {
		return abort(fmt.Errorf("creating the HTTP API: %w", err))
	}
	// The dashboard shares the API's token and hosts: its pages' actions
	// call the API with the session cookie its login page sets.
	dash, err := dashboard.New(client, &dashboard.Options{AuthToken: *token, AllowedHosts: allowedHosts,
		Registry: reg, Triggers: triggers, Logger: logger, StalledAfter: *stalledAfter, SecureCookies: *secureCookies})
	if err != nil {
		return abort(fmt.Errorf("creating the dashboard: %w", err))
	}
	defer dash.Close()
	handler = dashboard.Mount(handler, dash)
	if wrap, ok := ctx.Value(handlerHookKey{}).(func(http.Handler) http.Handler); ok {
		handler = wrap(handler)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return abort(fmt.Errorf("cannot listen on %s: %w: choose another --addr (port 0 picks a free one)", *addr, err))
	}
	srv := &http.Server{
		Handler: handler,
		// Bodies have their own deadline (httpapi.Options.ReadTimeout);
		// no WriteTimeout, for long polls.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests see ctx, so long polls end as soon as shutdown begins.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	urls := serveURLs(ln.Addr(), allowedHosts)
	base := urls.base
	for i := range triggers {
		fmt.Fprintln(out, webhookLine(base, &triggers[i]))
	}
	if urls.wildcard {
		fmt.Fprintf(out, "listening on %s (all interfaces)\n", urls.listen)
	} else {
		fmt.Fprintf(out, "listening on %s\n", urls.listen)
	}
	if *withDemo {
		// Something for the dashboard to show: a failed instance and one
		// waiting for an event.
		fmt.Fprintf(out, "try: duroxide start demo.Fail --server %s --input '\"card declined\"'   (a failed instance)\n", base)
		fmt.Fprintf(out, "     duroxide start demo.Approval --server %s --input '{\"timeoutSeconds\": 600}'   (one waiting for the event approval)\n", base)
	}
	fmt.Fprintln(out, urls.dashboardLine(*token != ""))
	if *token == "" {
		fmt.Fprintln(out, urls.openWarning())
	}

	var serveErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "shutting down: stopping the HTTP server")
	case serveErr = <-served:
		serveErr = fmt.Errorf("HTTP server: %w", serveErr)
		fmt.Fprintln(out, "shutting down after an HTTP server failure")
	}
	sctx, cancel := graceCtx(ctx, *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		serveErr = errors.Join(serveErr, fmt.Errorf("the HTTP server did not stop within --shutdown-timeout %s: %w", *grace, err))
	} else {
		fmt.Fprintln(out, "HTTP server stopped")
	}
	if err := stopRuntime(sctx); err != nil {
		serveErr = errors.Join(serveErr, err)
	}
	if serveErr == nil {
		fmt.Fprintln(out, "stopped")
	}
	return serveErr
}

// checkServeSettings checks the settings of the HTTP API and the dashboard
// before serve opens the store or starts a runtime: the triggers (their
// secrets are set; with the demo runtime, reg registers their
// orchestrations), the token and the allowed hosts. It builds the API once
// on a client of no store, which construction does not touch.
func checkServeSettings(triggers []httpapi.Trigger, reg *duroxide.Registry, token string, allowedHosts []string,
	stalledAfter time.Duration, lookupEnv func(string) (string, bool)) error {
	if reg != nil {
		for i := range triggers {
			t := &triggers[i]
			if reg.HasOrchestration(t.Orchestration, t.Version) {
				continue
			}
			what := fmt.Sprintf("orchestration %q is not registered", t.Orchestration)
			if known := reg.Versions(t.Orchestration); len(known) > 0 {
				what = fmt.Sprintf("orchestration %q has no version %q (registered: %s)", t.Orchestration, t.Version, strings.Join(known, ", "))
			}
			return fmt.Errorf("--triggers: trigger %q: %s by the --demo runtime; its webhooks could only fail", t.ID, what)
		}
	}
	quiet := slog.New(slog.DiscardHandler) // warnings come again from the real API
	if _, err := httpapi.NewHandler(duroxide.NewClient(nil), &httpapi.Options{Logger: quiet, Registry: reg, Triggers: triggers,
		AuthToken: token, AllowedHosts: allowedHosts, StalledAfter: stalledAfter, LookupEnv: lookupEnv}); err != nil {
		return fmt.Errorf("checking the settings of the HTTP API: %w", err)
	}
	if _, err := httpapi.NewAccess(token, allowedHosts); err != nil {
		return fmt.Errorf("checking the settings of the dashboard: %w", err)
	}
	return nil
}

// graceCtx is the context of a graceful shutdown: ctx's values but not its
// cancellation (ctx is usually what asked for the shutdown), and a limit.
func graceCtx(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), limit)
}

// handlerHookKey is the context key of a test hook, a
// func(http.Handler) http.Handler that wraps serve's handler, so tests can
// tell when a request is being served.
type handlerHookKey struct{}

// webhookLine describes a trigger at startup: its URL, the orchestration
// it starts and how concurrent deliveries behave.
func webhookLine(base string, t *httpapi.Trigger) string {
	mode := cmp.Or(t.Concurrency, httpapi.ConcurrencyExclusive)
	details := []string{t.Orchestration, string(mode)}
	if t.WorkflowID != "" && mode != httpapi.ConcurrencyParallel {
		details = append(details, "workflow "+t.WorkflowID)
	}
	switch {
	case t.Auth == nil:
	case t.Auth.Type == httpapi.AuthNone:
		details = append(details, "unauthenticated")
	default:
		details = append(details, fmt.Sprintf("%s auth, secret $%s", t.Auth.Type, t.Auth.SecretEnv))
	}
	return fmt.Sprintf("webhook %s → POST %s/api/webhooks/%s (%s)", t.ID, base, url.PathEscape(t.ID), strings.Join(details, ", "))
}

// servedURLs are the URLs serve prints: the listener's own, and the ones a
// client can use, which the Host check accepts.
type servedURLs struct {
	listen   string // the listener's address, wildcard included
	wildcard bool   // listening on every interface
	loopback bool   // only reachable from this machine
	// base is the URL for clients on this machine ("try:" lines, webhook
	// lines): the listener's address, or for a wildcard the loopback one;
	// the listener's address for a specific non-loopback one.
	base string
	// remote are the URLs for other machines: one per --allowed-host
	// name, or a placeholder when '*' allows any.
	remote []string
}

// serveURLs works out the URLs of a listener whose Host check allows the
// loopback names and allowedHosts.
func serveURLs(a net.Addr, allowedHosts []string) servedURLs {
	u := servedURLs{listen: listenURL(a), base: listenURL(a)}
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return u
	}
	port := strconv.Itoa(tcp.Port)
	switch {
	case tcp.IP.IsLoopback():
		u.loopback = true
		return u
	case tcp.IP.IsUnspecified():
		// A wildcard listener takes loopback connections too (Go's
		// wildcard listeners are dual-stack); the Host check refuses the
		// wildcard address itself as a host name.
		u.wildcard = true
		u.base = "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	for _, h := range allowedHosts {
		if h == "*" {
			u.remote = append(u.remote, "http://"+net.JoinHostPort("ADDRESS-OF-THIS-MACHINE", port))
			continue
		}
		u.remote = append(u.remote, "http://"+net.JoinHostPort(strings.Trim(h, "[]"), port))
	}
	return u
}

// dashboardLine says where the dashboard is.
func (u servedURLs) dashboardLine(withToken bool) string {
	login := ""
	if withToken {
		login = " (log in with the --auth-token)"
	}
	var remote []string
	for _, r := range u.remote {
		remote = append(remote, r+"/")
	}
	switch {
	case u.loopback || len(remote) == 0:
		return fmt.Sprintf("dashboard: %s/%s", u.base, login)
	case u.wildcard:
		return fmt.Sprintf("dashboard: %s/ on this machine, %s from the network%s", u.base, strings.Join(remote, " or "), login)
	}
	return fmt.Sprintf("dashboard: %s%s", strings.Join(remote, " or "), login)
}

// openWarning says who can use an API served without a token.
func (u servedURLs) openWarning() string {
	if u.loopback {
		return "no --auth-token: the API is open to every local program and user of this machine"
	}
	where := "on " + strings.TrimPrefix(u.listen, "http://")
	if u.wildcard {
		where = "on every interface of this machine"
	}
	return fmt.Sprintf("no --auth-token (--insecure): the API and the dashboard are open to anyone who can reach %s over the network: they can start, cancel and purge work", where)
}

// listenURL is the URL of a listening address, as the listener has it: a
// wildcard address stays "[::]" or "0.0.0.0".
func listenURL(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return "http://" + net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port))
	}
	return "http://" + a.String()
}

// minTokenLength is the shortest --auth-token serve accepts.
const minTokenLength = 16

// writableHookKey is the context key of a test hook, a
// func(context.Context) error that replaces the store's writability check.
type writableHookKey struct{}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, v)
	return nil
}

// checkExposure refuses settings that would expose the API unprotected:
// a non-loopback address without a token (unless insecure) or without
// allowed hosts (every request would be refused), and a short token.
func checkExposure(addr, token string, allowedHosts []string, insecure bool) error {
	if token != "" && len(token) < minTokenLength {
		return usageErrorf("serve: --auth-token (or $%s) must be at least %d characters; generate one with: openssl rand -hex 32", envAuthToken, minTokenLength)
	}
	loopback, err := isLoopbackAddr(addr)
	if err != nil {
		return usageErrorf("serve: --addr %q: %v", addr, err)
	}
	if loopback {
		return nil
	}
	if token == "" && !insecure {
		return usageErrorf("serve: refusing to serve on %s, which is not a loopback address, without --auth-token (or $%s): anyone who can reach it could start, cancel and purge work; set a token, or pass --insecure to serve without one", addr, envAuthToken)
	}
	if len(allowedHosts) == 0 {
		return usageErrorf("serve: serving on %s, which is not a loopback address, needs --allowed-host NAME for each host name clients use to reach it (or --allowed-host '*' behind a proxy that checks Host)", addr)
	}
	return nil
}

// isLoopbackAddr reports whether every address that addr (host:port)
// listens on is a loopback one; an empty host or a wildcard address is
// every interface.
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil // a name: it may resolve to any address
	}
	return ip.Unmap().IsLoopback(), nil
}
