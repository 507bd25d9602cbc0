package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// lineWriter collects written lines and lets a test wait for one.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{}
}

func newLineWriter() *lineWriter { return &lineWriter{changed: make(chan struct{}, 1)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n") + "\n" + string(w.partial)
}

// waitLine waits for a line starting with prefix and returns the rest. It
// fails the test if exited is closed first.
func (w *lineWriter) waitLine(t *testing.T, prefix string, exited <-chan struct{}) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		for _, l := range w.lines {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				w.mu.Unlock()
				return rest
			}
		}
		w.mu.Unlock()
		select {
		case <-w.changed:
		case <-exited:
			t.Fatalf("the command exited before printing %q; output:\n%s", prefix, w)
		case <-timeout:
			t.Fatalf("no line %q after 20s; output:\n%s", prefix, w)
		}
	}
}

// serving is an in-process `duroxide serve`.
type serving struct {
	url            string
	stdout, stderr *lineWriter
	cancel         context.CancelFunc
	exited         chan struct{} // closed when serve returns
	code           int           // its exit code, once exited
}

// serve runs `duroxide serve` with args until stop or the end of the test.
func serve(t *testing.T, args ...string) *serving {
	t.Helper()
	return serveCtx(t, context.Background(), args...)
}

func serveCtx(t *testing.T, ctx context.Context, args ...string) *serving {
	t.Helper()
	return serveEnv(t, ctx, nil, args...)
}

// serveEnv is serveCtx with environment variables.
func serveEnv(t *testing.T, ctx context.Context, env map[string]string, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	s := &serving{stdout: newLineWriter(), stderr: newLineWriter(), cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(s.exited)
		s.code = run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), s.stdout, s.stderr, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30s of cancellation")
		}
	})
	s.url = s.stdout.waitLine(t, "listening on ", s.exited)
	return s
}

// stop cancels serve's context and returns its exit code.
func (s *serving) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30s; output:\n%s", s.stdout)
		return -1
	}
}

func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, b
}

func TestServeDemo(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	s := serve(t, "--demo", "--db", db)
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || strings.HasSuffix(s.url, ":0") {
		t.Fatalf("listening URL %q", s.url)
	}
	if code, body := httpDo(t, "GET", s.url+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz = %d %s", code, body)
	}
	// serve --demo suggests how to make something to look at.
	if try := s.stdout.waitLine(t, "try: ", s.exited); !strings.Contains(try, "demo.Fail --server "+s.url) {
		t.Fatalf("try line %q", try)
	}
	// The dashboard is at /, and serve prints its URL.
	if dash := s.stdout.waitLine(t, "dashboard: ", s.exited); dash != s.url+"/" {
		t.Fatalf("dashboard URL %q, want %s/", dash, s.url)
	}
	if code, body := httpDo(t, "GET", s.url+"/", ""); code != http.StatusOK || !strings.Contains(string(body), "<h1>Instances</h1>") {
		t.Fatalf("GET / = %d %s", code, body)
	}

	// Started through the API, run by serve's runtime.
	code, body := httpDo(t, "POST", s.url+"/api/instances", `{"orchestration":"demo.Hello","instanceId":"h1","input":"Ada"}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /api/instances = %d %s", code, body)
	}
	code, body = httpDo(t, "GET", s.url+"/api/instances/h1?wait=20s", "")
	var st duroxide.Status
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.State != duroxide.StateCompleted || string(st.Output) != `"Hello, Ada!"` {
		t.Fatalf("GET /api/instances/h1 = %d %s", code, body)
	}

	// Started by the CLI in this process, on the same file.
	var seq duroxide.Status
	runCLI(t, "start", "demo.Sequence", "--input", "1", "--wait", "--timeout", "20s", "--json", "--db", db).wantCode(t, 0).decode(t, &seq)
	if string(seq.Output) != "6" {
		t.Fatalf("demo.Sequence(1) = %s", seq.Output)
	}

	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
	out := s.stdout.String()
	for _, want := range []string{"runtime started, hosting demo.Approval", "shutting down", "HTTP server stopped", "runtime stopped", "\nstopped\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("serve output lacks %q:\n%s", want, out)
		}
	}
}

// TestServeAPIOnly checks that serve without --demo runs nothing, and that
// a long poll in flight does not hold up the shutdown.
func TestServeAPIOnly(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	// The hook tells when the long poll below is being served.
	polling := make(chan struct{})
	var once sync.Once
	hook := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("wait") != "" {
				once.Do(func() { close(polling) })
			}
			h.ServeHTTP(w, r)
		})
	}
	s := serveCtx(t, context.WithValue(context.Background(), handlerHookKey{}, hook), "--db", db, "--shutdown-timeout", "20s")
	if out := s.stdout.String(); !strings.Contains(out, "no runtime: serving the API only") {
		t.Fatalf("serve without --demo does not say it runs nothing:\n%s", out)
	}
	code, body := httpDo(t, "POST", s.url+"/api/instances", `{"orchestration":"demo.Hello","instanceId":"p1","input":"Ada"}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /api/instances = %d %s", code, body)
	}
	polled := make(chan error, 1)
	go func() {
		resp, err := http.Get(s.url + "/api/instances/p1?wait=5m")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		polled <- err
	}()
	select {
	case <-polling:
	case err := <-polled:
		t.Fatalf("long poll ended before shutdown: %v", err)
	}
	// http.Server.Shutdown waits for the long poll: it must end promptly.
	start := time.Now()
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
	if err := <-polled; err != nil {
		t.Fatalf("long poll: %v", err)
	}
	st := runCLI(t, "status", "p1", "--db", db).wantCode(t, 0)
	if !strings.Contains(st.stdout, "Status:         Pending") {
		t.Fatalf("an API-only server ran the instance:\n%s", st.stdout)
	}
}

func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db, _ := tempDB(t)
	r := runCLI(t, "serve", "--demo", "--addr", ln.Addr().String(), "--db", db)
	r.wantCode(t, 1)
	if !strings.Contains(r.stderr, "duroxide: cannot listen on "+ln.Addr().String()) || !strings.Contains(r.stderr, "port 0") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	runCLI(t, "serve", "--shutdown-timeout", "0s", "--db", db).wantErr(t, 2, "--shutdown-timeout must be positive")
}
