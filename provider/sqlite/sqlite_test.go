package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// quietLogger discards the store's diagnostics in tests.
var quietLogger = slog.New(slog.DiscardHandler)

// harness builds file stores in t.TempDir (memory: in-memory stores).
func harness(memory bool) providertest.Harness {
	return providertest.Harness{
		New: func(t testing.TB, clock *providertest.Clock) provider.Provider {
			t.Helper()
			path := ":memory:"
			if !memory {
				path = filepath.Join(t.TempDir(), "store.db")
			}
			return openTestStore(t, path, &Options{Clock: clock.Now, Logger: quietLogger})
		},
		NewSharing: func(t testing.TB, pv provider.Provider, clock *providertest.Clock) provider.Provider {
			t.Helper()
			if memory {
				return nil
			}
			p, err := Open(context.Background(), pv.(*Provider).path, &Options{Clock: clock.Now, Logger: quietLogger})
			if err != nil {
				t.Fatalf("opening a second store: %v", err)
			}
			return p
		},
		EnqueueWork: func(ctx context.Context, p provider.Provider, msgs ...*provider.WorkerMessage) error {
			return p.(*Provider).enqueueWork(ctx, msgs...)
		},
		FreshDatabase: func(t testing.TB, clock *providertest.Clock) func() (provider.Provider, error) {
			t.Helper()
			if memory {
				return nil
			}
			path := filepath.Join(t.TempDir(), "fresh.db")
			return func() (provider.Provider, error) {
				p, err := Open(context.Background(), path, &Options{Clock: clock.Now, Logger: quietLogger})
				if err != nil {
					return nil, err
				}
				return p, nil
			}
		},
		CorruptHistory: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE history SET event_data = '{"type":"NoSuchKind"'
WHERE instance_id = ?1 AND execution_id = (SELECT current_execution_id FROM instances WHERE instance_id = ?1)`, instanceID)
		},
		CorruptOrchestratorMessages: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE orchestrator_queue SET work_item = '{"type":"NoSuchKind","instanceId":' || quote(instance_id) || '}' WHERE instance_id = ?1`, instanceID)
		},
		CorruptWorkItems: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE worker_queue SET work_item = 'not json' WHERE instance_id = ?1`, instanceID)
		},
	}
}

// mustExec runs raw SQL on the store's writer connection.
func mustExec(t testing.TB, pv provider.Provider, q string, args ...any) int64 {
	t.Helper()
	p, ok := pv.(*Provider)
	if !ok {
		t.Fatalf("provider is %T, want *sqlite.Provider", pv)
	}
	res, err := p.writer.ExecContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
	n, _ := res.RowsAffected()
	return n
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness(false))
}

func TestConformanceInMemory(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness(true))
}
