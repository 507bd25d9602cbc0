package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A second Shutdown (a deferred one after an explicit one) does not try
// to withdraw the routes again with the stopped runtime's context: the
// first withdrew them, and the retry only logged a spurious failure.
func TestSecondShutdownDoesNotWithdrawAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var logs lockedBuffer
	reg := activityRegistry{"A": func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}
	r, err := Start(store, reg, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := r.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown %d: %v", i+1, err)
		}
	}
	if out := logs.String(); strings.Contains(out, "withdrawing") {
		t.Fatalf("a second Shutdown logged a withdrawal failure:\n%s", out)
	}
}
