package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go"
)

// connectCounter counts the connections a store establishes (pgx calls
// a tracer's TraceConnectStart for each, the listener's included).
type connectCounter struct {
	countingTracer
	mu       sync.Mutex
	connects int
}

func (c *connectCounter) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	c.mu.Lock()
	c.connects++
	c.mu.Unlock()
	return ctx
}

func (c *connectCounter) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {}

func (c *connectCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connects
}

// hotFunctions are the PL/pgSQL functions the store's writes call: those
// of the schema's triggers (one entry per trigger: PL/pgSQL compiles a
// trigger function once per trigger), and duroxide_check.
func hotFunctions(t *testing.T, q querier, schema string) []string {
	t.Helper()
	want := queryTexts(t, q, `SELECT p.oid::regprocedure::text FROM pg_trigger AS g JOIN pg_proc AS p ON p.oid = g.tgfoid
WHERE g.tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = $1::regnamespace) AND NOT g.tgisinternal
UNION ALL SELECT $2 ORDER BY 1`, pgx.Identifier{schema}.Sanitize(), "duroxide_check(boolean,text,text)")
	if len(want) < 2 {
		t.Fatalf("hot functions: %v", want)
	}
	return want
}

// compiledFunctions lists the PL/pgSQL functions conn's backend has
// compiled (each keeps a memory context named after it).
func compiledFunctions(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return queryTexts(t, conn, `SELECT ident FROM pg_backend_memory_contexts WHERE name = 'PL/pgSQL function' ORDER BY 1`)
}

// queryTexts runs sql, which returns one text column, and collects it.
func queryTexts(t *testing.T, q querier, sql string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// missingFrom returns the elements of want (with their multiplicity)
// that got lacks.
func missingFrom(got, want []string) []string {
	have := map[string]int{}
	for _, g := range got {
		have[g]++
	}
	var missing []string
	for _, w := range want {
		if have[w] == 0 {
			missing = append(missing, w)
			continue
		}
		have[w]--
	}
	return missing
}

// checkWarm fails unless every idle connection of p's pool (it takes
// them all, as a call would) has compiled the hot functions, and there
// are at least n.
func checkWarm(t *testing.T, p *Provider, n int) {
	t.Helper()
	conns := p.pool.AcquireAllIdle(context.Background())
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	if len(conns) < n {
		t.Errorf("%d idle connections, want at least %d", len(conns), n)
	}
	if len(conns) == 0 {
		return
	}
	want := hotFunctions(t, conns[0], p.schema)
	for i, c := range conns {
		got := compiledFunctions(t, c.Conn())
		if missing := missingFrom(got, want); len(missing) > 0 {
			t.Errorf("connection %d has not compiled %v (it has %v)", i, missing, got)
		}
	}
}

// TestOpenWarmsConnections: Open returns with Options.MinConns
// connections open, each having run the store's triggers once (so their
// first calls do not compile them), and the warm-up left no row behind.
// Then a runtime runs orchestrations one after another, as the latency
// benchmark does, without opening any connection.
func TestOpenWarmsConnections(t *testing.T) {
	t.Parallel()
	tr := &connectCounter{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 8, MinConns: 6})
	// The six the pool opens in the background, and the one Open's setup
	// used.
	waitWarmups(t, p, 7)
	checkWarm(t, p, 7)
	checkNoRows(t, p)

	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "AddOne", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "One", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		err := ctx.ScheduleActivity("AddOne", n).Await(&n)
		return n, err
	})
	ctx := context.Background()
	connects := tr.count()
	rt, err := duroxide.StartRuntime(ctx, p, reg, &duroxide.RuntimeOptions{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	client := duroxide.NewClient(p)
	for i := range 10 {
		id := fmt.Sprintf("one-%d", i)
		if err := client.StartOrchestration(ctx, id, "One", i, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := client.WaitForOrchestration(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := tr.count() - connects; n != 0 {
		t.Errorf("%d connections opened after Open returned, want 0", n)
	}
}

// checkNoRows fails if any table of p's schema but schema_migrations
// holds a row.
func checkNoRows(t *testing.T, p *Provider) {
	t.Helper()
	ctx := context.Background()
	tables := queryTexts(t, p.pool, `SELECT relname::text FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND relname <> 'schema_migrations' ORDER BY 1`,
		pgx.Identifier{p.schema}.Sanitize())
	if len(tables) < 10 {
		t.Fatalf("tables: %v", tables)
	}
	for _, table := range tables {
		var n int
		if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("table %s holds %d rows, want none", table, n)
		}
	}
}

// TestWarmUpLeavesNoRows: warming a connection, again and again, leaves
// every table empty, and the connection outside any transaction.
func TestWarmUpLeavesNoRows(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MinConns: 1, MaxConns: 2})
	ctx := context.Background()
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := p.warmConn(ctx, c.Conn()); err != nil {
			t.Fatal(err)
		}
		if s := c.Conn().PgConn().TxStatus(); s != 'I' {
			t.Fatalf("after a warm-up the connection's transaction status is %c, want I", s)
		}
	}
	c.Release()
	checkNoRows(t, p)
}

// TestWarmUpAfterMigrate: a store opened with NoMigrate on a schema not
// yet migrated opens without warming (its tables are missing: a warm-up
// could only fail), and warms its connections once Migrate ran, before
// they serve.
func TestWarmUpAfterMigrate(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoMigrate: true, MinConns: 2, MaxConns: 3})
	if n := p.warmups(); n != 0 {
		t.Errorf("%d warm-ups ran on a schema not migrated, want 0", n)
	}
	if err := p.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkWarm(t, p, 1)
	checkNoRows(t, p)

	// Opened with NoMigrate on a migrated schema, a store warms at once.
	q := openSchema(t, p.schema, &Options{NoMigrate: true, MinConns: 2, MaxConns: 3})
	waitWarmups(t, q, 3)
	checkWarm(t, q, 3)
}

// TestWarmUpObeysCancellation: a connection that needs warming is not
// handed to a call whose context ended; the call fails with the
// context's error.
func TestWarmUpObeysCancellation(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MinConns: 1, MaxConns: 1})
	ctx := context.Background()
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	delete(c.Conn().PgConn().CustomData(), warmKey) // cold again
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	ok, err := p.prepareConn(canceled, c.Conn())
	if ok || !errors.Is(err, context.Canceled) {
		t.Errorf("prepareConn with a canceled context = %v, %v; want false, context.Canceled", ok, err)
	}
	c.Release()
	// The store still serves.
	if _, err := p.pool.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
}

// waitWarmups waits until p ran at least n warm-ups. The bound only
// keeps a regression from hanging the test binary.
func waitWarmups(t *testing.T, p *Provider, n int) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		p.warm.mu.Lock()
		got, ch := p.warm.warmups, p.warm.warmed
		p.warm.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d warm-ups ran, want %d", got, n)
		}
	}
}

// warmups returns how many warm-ups p ran.
func (p *Provider) warmups() int {
	p.warm.mu.Lock()
	defer p.warm.mu.Unlock()
	return p.warm.warmups
}

// TestMinConnsDefaults: Options.MinConns defaults to DefaultMinConns,
// capped by a smaller pool; a negative value keeps none open.
func TestMinConnsDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		opts Options
		want int32
	}{
		{Options{}, DefaultMinConns},
		{Options{MaxConns: 2}, 2},
		{Options{MinConns: -1}, 0},
		{Options{MinConns: 7}, 7},
	} {
		o, err := c.opts.withDefaults()
		if err != nil || o.MinConns != c.want {
			t.Errorf("withDefaults(%+v).MinConns = %d, %v; want %d", c.opts, o.MinConns, err, c.want)
		}
	}
}
