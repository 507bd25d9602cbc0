package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// switchableStore is a store whose readiness check returns the error the
// test sets.
type switchableStore struct {
	*sqlite.Provider
	mu  sync.Mutex
	err error
}

func (s *switchableStore) CheckWritable(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *switchableStore) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// recordingHandler keeps the messages of the records at or above its level.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// TestReadyzSaysWhatFailed: GET /readyz names the kind of failure with a
// request ID, never the store's own message (it may name hosts and users;
// the route is open without a token), and the log gets one line when the
// store stops being ready and one when it is back, not one per probe.
func TestReadyzSaysWhatFailed(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := &switchableStore{Provider: db}
	logs := &recordingHandler{}
	h, err := httpapi.NewHandler(duroxide.NewClient(store), &httpapi.Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	probe := func(t *testing.T) (int, string, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var out struct{ Error, Details, RequestID string }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusOK && (out.RequestID == "" || out.RequestID != rec.Header().Get("X-Request-Id")) {
			t.Errorf("readyz answered %d with request ID %q, header %q", rec.Code, out.RequestID, rec.Header().Get("X-Request-Id"))
		}
		return rec.Code, out.Error, out.Details
	}
	refused := fmt.Errorf("the server refused the connection: postgres: checking: %w", provider.ErrUnavailable)
	for _, c := range []struct {
		err         error
		what        string
		notMigrated bool
	}{
		{refused, "store unreachable", false},
		{fmt.Errorf("postgres: checking: %w", provider.ErrBusy), "store busy", false},
		{fmt.Errorf("postgres: checking: %w", context.DeadlineExceeded), "store did not answer", false},
		{fmt.Errorf("postgres: checking: %w", provider.ErrClosed), "store closed", false},
		{fmt.Errorf(`the schema "x" is not migrated: run duroxide migrate`), "store not ready", true},
	} {
		store.set(c.err)
		code, what, details := probe(t)
		if code != http.StatusServiceUnavailable || !strings.Contains(what, c.what) || details != "" || strings.Contains(what, "postgres:") {
			t.Errorf("readyz on %v: %d %q %q, want 503 saying %q without the store's message", c.err, code, what, details, c.what)
		}
		if !c.notMigrated && strings.Contains(what, "migrat") {
			t.Errorf("readyz on %v blames migrations: %q %q", c.err, what, details)
		}
	}
	store.set(nil)
	if code, _, _ := probe(t); code != http.StatusOK {
		t.Fatalf("readyz on a ready store: %d", code)
	}
	probe(t)
	store.set(refused)
	probe(t)
	probe(t)
	want := []string{"ERROR store not ready: store unreachable", "WARN store ready again", "ERROR store not ready: store unreachable"}
	if got := logs.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
