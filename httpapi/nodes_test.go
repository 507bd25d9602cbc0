package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/postgres"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// nodeStore opens one node's handle on the shared store.
type nodeStore func(t *testing.T) provider.Provider

// sqliteNodes returns the opener of a SQLite file shared by the nodes.
func sqliteNodes(t *testing.T) nodeStore {
	path := filepath.Join(t.TempDir(), "shared.db")
	return func(t *testing.T) provider.Provider {
		db, err := sqlite.Open(context.Background(), path, &sqlite.Options{Logger: discard})
		if err != nil {
			t.Fatalf("opening the SQLite store: %v", err)
		}
		return db
	}
}

// postgresNodes returns the opener of a fresh PostgreSQL schema shared by
// the nodes (dropped when the test ends), in the database
// $DUROXIDE_TEST_POSTGRES names, or skips the test.
func postgresNodes(t *testing.T) nodeStore {
	dsn := os.Getenv("DUROXIDE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("DUROXIDE_TEST_POSTGRES is not set: set it to a PostgreSQL URL " +
			"(postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the two nodes on PostgreSQL")
	}
	schema := fmt.Sprintf("httpapi_nodes_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := storeurl.DropPostgresSchema(ctx, dsn, schema); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return func(t *testing.T) provider.Provider {
		db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema, Logger: discard})
		if err != nil {
			t.Fatalf("opening the PostgreSQL store: %v", err)
		}
		return db
	}
}

// newNodes returns two nodes serving opts on one store, each with its
// own store handle (open), runtime and server, as two processes would.
func newNodes(t *testing.T, open nodeStore, opts *httpapi.Options) [2]*env {
	t.Helper()
	var nodes [2]*env
	for i := range nodes {
		ctx := context.Background()
		store := open(t)
		reg := duroxide.NewRegistry()
		demo.Register(reg)
		rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{Logger: discard})
		if err != nil {
			t.Fatalf("starting runtime %d: %v", i, err)
		}
		nodes[i] = serve(t, store, reg, rt, opts)
	}
	return nodes
}

// TestWebhookKeyedTwoNodes fires bursts at per-customer keyed triggers
// through two nodes sharing one store (a SQLite file; a PostgreSQL schema
// when DUROXIDE_TEST_POSTGRES is set): the exclusive trigger starts one
// instance per customer and refuses every other call with a 409 naming
// it; the queue trigger accepts every call, one instance per customer
// holds the lock and the others wait in line behind it.
func TestWebhookKeyedTwoNodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		store func(*testing.T) nodeStore
	}{{"sqlite", sqliteNodes}, {"postgres", postgresNodes}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testWebhookKeyedTwoNodes(t, c.store(t))
		})
	}
}

func testWebhookKeyedTwoNodes(t *testing.T, open nodeStore) {
	const calls, customers = 40, 4
	nodes := newNodes(t, open, &httpapi.Options{Triggers: []httpapi.Trigger{
		{ID: "stripe-invoice", WorkflowID: "customer-{/data/object/customer}", Orchestration: demo.Approval},
		{ID: "stripe-queue", WorkflowID: "queue-{/data/object/customer}", Orchestration: demo.Approval,
			Concurrency: httpapi.ConcurrencyQueue},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	burst := func(trigger string) []webhookAnswer {
		answers := make([]webhookAnswer, calls)
		errs := make([]error, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				answers[i], errs[i] = nodes[i%2].callWebhook(ctx, trigger,
					stripeEvent(fmt.Sprintf("evt_%s_%d", trigger, i), fmt.Sprintf("cus_%d", i%customers)), "")
			})
		}
		wg.Wait()
		for i, a := range answers {
			if errs[i] != nil {
				t.Fatalf("%s call %d: %v", trigger, i, errs[i])
			}
			checkWebhookShape(t, a)
		}
		return answers
	}

	started := exclusivePerCustomer(t, burst("stripe-invoice"), customers, func(webhookAnswer) bool { return true })
	for customer, id := range started {
		nodes[0].heldBy(t, "customer-"+customer, id)
	}

	holders := map[string]string{}         // customer → instance holding the lock
	positions := map[string]map[int]bool{} // customer → queue positions given
	for i, a := range burst("stripe-queue") {
		customer := fmt.Sprintf("cus_%d", i%customers)
		if a.status != http.StatusOK {
			t.Fatalf("queue call %d: %s", i, a)
		}
		if !a.Queued {
			if prev, dup := holders[customer]; dup {
				t.Fatalf("%s got two lock holders: %s and %s", customer, prev, a.ExecutionID)
			}
			holders[customer] = a.ExecutionID
			continue
		}
		if positions[customer] == nil {
			positions[customer] = map[int]bool{}
		}
		if positions[customer][a.QueuePosition] {
			t.Fatalf("queue call %d: position %d given twice for %s", i, a.QueuePosition, customer)
		}
		positions[customer][a.QueuePosition] = true
	}
	for c := range customers {
		customer := fmt.Sprintf("cus_%d", c)
		if holders[customer] == "" || len(positions[customer]) != calls/customers-1 {
			t.Fatalf("queue, %s: holder %q and %d queued, want one holder and %d queued", customer, holders[customer],
				len(positions[customer]), calls/customers-1)
		}
		nodes[1].heldBy(t, "queue-"+customer, holders[customer])
	}
	if got := nodes[1].instances(t); len(got) != customers+calls {
		t.Fatalf("%d instances, want %d", len(got), customers+calls)
	}
}
