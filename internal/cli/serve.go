package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
)

var serveCommand = &command{
	name:     "serve",
	synopsis: "[--addr 127.0.0.1:8080] [--triggers FILE] [--demo] [--shutdown-timeout 30s]",
	summary:  "serve the HTTP API (and, with --demo, run the demo orchestrations)",
	details: `Serves the HTTP API on --addr; port 0 picks a free port, and the address is
printed as "listening on http://HOST:PORT".

Without --demo, serve runs no orchestrations: it serves the API only, and the
instances started through it wait until a runtime hosting their
orchestration (your own program using the Go API on the same store) runs
them. With --demo it also starts a runtime hosting the demo orchestrations:
demo.Hello, demo.Sequence, demo.FanOut, demo.Approval, demo.Countdown and
demo.Fail.

--triggers FILE loads webhook triggers, each served at
POST /api/webhooks/ID and printed at startup with its URL. The file is JSON:
  {"triggers": [{"id": "stripe-payment", "workflowId": "workflow_123",
    "orchestration": "demo.Hello", "concurrency": "exclusive",
    "lockTtl": "1h", "idempotencyKeyPath": "/id"}]}
concurrency is exclusive (409 while one runs; the default), parallel or
queue. A file that cannot be read or is invalid stops serve before it starts.

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
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	if *grace <= 0 {
		return usageErrorf("serve: --shutdown-timeout must be positive")
	}
	// Triggers are loaded first: a bad file fails before anything starts.
	var triggers []httpapi.Trigger
	if *triggersFile != "" {
		var err error
		if triggers, err = httpapi.LoadTriggers(*triggersFile); err != nil {
			return fmt.Errorf("--triggers: %w (see 'duroxide help serve' for the file's format)", err)
		}
	}
	out := inv.stdout
	logger := inv.logger()

	store, spec, err := inv.openStore(ctx, openCreate)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			fmt.Fprintf(inv.stderr, "duroxide: closing store: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "store %s\n", spec.raw)

	var (
		reg *duroxide.Registry
		rt  *duroxide.Runtime
	)
	if *withDemo {
		reg = duroxide.NewRegistry()
		demo.Register(reg)
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
	handler, err := httpapi.NewHandler(client, &httpapi.Options{Logger: logger, Registry: reg, Runtime: rt, Triggers: triggers})
	if err != nil {
		return abort(fmt.Errorf("creating the HTTP API: %w", err))
	}
	if wrap, ok := ctx.Value(handlerHookKey{}).(func(http.Handler) http.Handler); ok {
		handler = wrap(handler)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return abort(fmt.Errorf("cannot listen on %s: %w: choose another --addr (port 0 picks a free one)", *addr, err))
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests see ctx, so long polls end as soon as shutdown begins.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := listenURL(ln.Addr())
	for i := range triggers {
		fmt.Fprintln(out, webhookLine(base, &triggers[i]))
	}
	fmt.Fprintf(out, "listening on %s\n", base)

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
	return fmt.Sprintf("webhook %s → POST %s/api/webhooks/%s (%s)", t.ID, base, url.PathEscape(t.ID), strings.Join(details, ", "))
}

// listenURL is the URL of a listening address; an unspecified host (as in
// ":8080") is shown as localhost.
func listenURL(a net.Addr) string {
	host, port := a.String(), ""
	if tcp, ok := a.(*net.TCPAddr); ok {
		host, port = tcp.IP.String(), strconv.Itoa(tcp.Port)
		if tcp.IP.IsUnspecified() {
			host = "localhost"
		}
		return "http://" + net.JoinHostPort(host, port)
	}
	return "http://" + host
}
