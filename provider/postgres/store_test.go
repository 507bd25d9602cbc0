package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// quietLogger discards the store's diagnostics in tests.
var quietLogger = slog.New(slog.DiscardHandler)

// testDSN returns the DSN of the test server, or skips the test.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("DUROXIDE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("DUROXIDE_TEST_POSTGRES is not set: skipping PostgreSQL tests " +
			"(set it to a DSN, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// noSyncDSN is dsn with synchronous_commit off: a commit returns
// before its WAL is flushed to disk. Transactions stay atomic and
// isolated and commit in the same order; only their durability across a
// crash of the server (which no end-to-end scenario makes) is given up,
// and the end-to-end suite's thousands of commits (a week of schedule
// fires) do not each wait for a disk flush.
func noSyncDSN(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "synchronous_commit=off"
}

var schemaSeq atomic.Int64

// freshSchema returns the name of a schema no test uses, dropped (with
// everything in it) when the test ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	dsn := testDSN(t)
	name := fmt.Sprintf("dxt_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		// A backend whose client went away (a test that cut its
		// connections, a warm-up the pool was running when the store
		// closed) can still hold the schema's tables for a moment, and
		// DROP SCHEMA, which locks them one by one, can deadlock with
		// it; the server then aborts one of the two. Try again: the
		// other backend is gone by then.
		for attempt := 1; ; attempt++ {
			_, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
			var pe *pgconn.PgError
			if err != nil && attempt < 5 && errors.As(err, &pe) && pe.Code == "40P01" {
				continue
			}
			if err != nil {
				t.Errorf("dropping schema %s: %v", name, err)
			}
			return
		}
	})
	return name
}

// openSchema opens a store on schema, closed when the test ends.
func openSchema(t testing.TB, schema string, opts *Options) *Provider {
	t.Helper()
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	if o.MaxConns == 0 {
		o.MaxConns = 4
	}
	p, err := Open(context.Background(), testDSN(t), &o)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// openFresh opens a store on a fresh schema.
func openFresh(t testing.TB, opts *Options) *Provider {
	t.Helper()
	return openSchema(t, freshSchema(t), opts)
}

// mustExec runs raw SQL in the store's schema.
func mustExec(t testing.TB, pv provider.Provider, q string, args ...any) int64 {
	t.Helper()
	p, ok := pv.(*Provider)
	if !ok {
		t.Fatalf("provider is %T, want *postgres.Provider", pv)
	}
	ct, err := p.pool.Exec(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", q, err)
	}
	return ct.RowsAffected()
}

func harness() providertest.Harness {
	return providertest.Harness{
		New: func(t testing.TB, clock *providertest.Clock) provider.Provider {
			t.Helper()
			schema := freshSchema(t)
			p, err := Open(context.Background(), testDSN(t), &Options{Schema: schema, Clock: clock.Now, Logger: quietLogger, MaxConns: 4})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return p
		},
		NewSharing: func(t testing.TB, pv provider.Provider, clock *providertest.Clock) provider.Provider {
			t.Helper()
			p, err := Open(context.Background(), testDSN(t), &Options{Schema: pv.(*Provider).schema, Clock: clock.Now, Logger: quietLogger, MaxConns: 4})
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
			schema := freshSchema(t)
			return func() (provider.Provider, error) {
				p, err := Open(context.Background(), testDSN(t), &Options{Schema: schema, Clock: clock.Now, Logger: quietLogger, MaxConns: 4})
				if err != nil {
					return nil, err
				}
				return p, nil
			}
		},
		CorruptHistory: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE history SET event_data = '{"type":"NoSuchKind"'
WHERE instance_id = $1 AND execution_id = (SELECT current_execution_id FROM instances WHERE instance_id = $1)`, instanceID)
		},
		CorruptOrchestratorMessages: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE orchestrator_queue SET work_item = '{"type":"NoSuchKind","instanceId":' || to_json(instance_id)::text || '}' WHERE instance_id = $1`, instanceID)
		},
		CorruptWorkItems: func(t testing.TB, pv provider.Provider, instanceID string) {
			t.Helper()
			mustExec(t, pv, `UPDATE worker_queue SET work_item = 'not json' WHERE instance_id = $1`, instanceID)
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	testDSN(t)
	providertest.Run(t, harness())
}

// TestEndToEnd runs the end-to-end orchestration suite, with and without
// the runtime's instance cache.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	testDSN(t)
	providertest.RunEndToEnd(t, providertest.E2EHarness{
		New: func(t testing.TB, clock func() time.Time) provider.Provider {
			t.Helper()
			p, err := Open(context.Background(), noSyncDSN(testDSN(t)), &Options{Schema: freshSchema(t), Clock: clock, Logger: quietLogger, MaxConns: 4})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return p
		},
	})
}
