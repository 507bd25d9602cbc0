package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/nettest"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// holdProxy is a loopback TCP proxy between a store and the test server
// that can be told to stop forwarding (Hold): the bytes sent after that
// are read and kept, never delivered, as on a connection that went silent
// while both ends stay up.
type holdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	pairs []*proxyPair
	wg    sync.WaitGroup
}

// proxyPair is one proxied connection: the store's end and the server's.
type proxyPair struct {
	client, server net.Conn
	dropped        chan struct{}
	once           sync.Once
}

func (pp *proxyPair) drop() {
	pp.once.Do(func() {
		close(pp.dropped)
		_ = pp.client.Close()
		_ = pp.server.Close()
	})
}

// closeAfterDrop closes p once the proxy let go of its connections (pgx
// waits for a silent server's answer to its goodbye before closing).
func closeAfterDrop(hp *holdProxy, p *Provider) {
	hp.Drop()
	_ = p.Close()
}

// newHoldProxy starts a proxy to the test server, stopped when the test
// ends.
func newHoldProxy(t *testing.T) *holdProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hp := &holdProxy{ln: ln, target: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	hp.wg.Add(1)
	go hp.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		hp.Drop()
		hp.wg.Wait()
	})
	return hp
}

// dsn is the test server's DSN with the proxy as its host.
func (hp *holdProxy) dsn(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testDSN(t))
	if err != nil || u.Host == "" {
		t.Skipf("DUROXIDE_TEST_POSTGRES is not a postgres:// URL with a host; the proxy tests need one")
	}
	u.Host = hp.ln.Addr().String()
	return u.String()
}

func (hp *holdProxy) accept() {
	defer hp.wg.Done()
	for {
		c, err := hp.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", hp.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pp := &proxyPair{client: c, server: s, dropped: make(chan struct{})}
		hp.mu.Lock()
		hp.pairs = append(hp.pairs, pp)
		hp.mu.Unlock()
		hp.wg.Add(2)
		go hp.pipe(pp, s, c)
		go hp.pipe(pp, c, s)
	}
}

// pipe forwards src to dst until either end closes; while the proxy holds,
// what it reads waits until the pair is dropped.
func (hp *holdProxy) pipe(pp *proxyPair, dst, src net.Conn) {
	defer hp.wg.Done()
	defer pp.drop()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			hp.mu.Lock()
			held := hp.held
			hp.mu.Unlock()
			if held {
				<-pp.dropped
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Hold stops forwarding on every connection, current and future.
func (hp *holdProxy) Hold() {
	hp.mu.Lock()
	hp.held = true
	hp.mu.Unlock()
}

// Drop closes every proxied connection, both ends, and forwards again.
func (hp *holdProxy) Drop() {
	hp.mu.Lock()
	pairs := hp.pairs
	hp.pairs = nil
	hp.held = false
	hp.mu.Unlock()
	for _, pp := range pairs {
		pp.drop()
	}
}

// holdMidTransaction runs, on a (through the proxy), a write transaction
// that takes instance's lock and then goes silent: the proxy holds its
// next statement. It returns once the lock is held, with the channel the
// write's error arrives on.
func holdMidTransaction(t *testing.T, ctx context.Context, a *Provider, hp *holdProxy, instance string) <-chan error {
	t.Helper()
	locked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.write(ctx, "holding an instance", func(w *wtx) error {
			if err := w.lockInstance(instance); err != nil {
				return err
			}
			hp.Hold()
			close(locked)
			_, err := w.exec("SELECT 1")
			return err
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		t.Fatalf("the holding transaction ended before taking the lock: %v", err)
	}
	return done
}

// waitDone waits for a held call to return. The bound only keeps a
// regression from hanging the test binary; it asserts nothing on timing.
func waitDone(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// enqueueUntilAccepted retries an enqueue for instance on b while it fails
// with a retryable error (each attempt waits at most b's lock timeout on
// the server), until it succeeds.
func enqueueUntilAccepted(t *testing.T, b *Provider, instance string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		_, err := b.Enqueue(ctx, raised(instance))
		if err == nil {
			return
		}
		if !provider.IsRetryable(err) {
			t.Fatalf("enqueue for %s after the stuck connection went away: %v", instance, err)
		}
	}
}

// TestStuckConnectionCostsOthersOnlyALockTimeout: a store whose connection
// goes silent in the middle of a transaction holding an instance's lock
// does not make another store's write to that instance wait forever: the
// write fails with a retryable ErrBusy. The stuck call returns when its
// context ends, and once its connection is dropped the instance is usable
// again.
func TestStuckConnectionCostsOthersOnlyALockTimeout(t *testing.T) {
	t.Parallel()
	hp := newHoldProxy(t)
	schema := freshSchema(t)
	b := openSchema(t, schema, &Options{LockTimeout: 200 * time.Millisecond})
	a, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true,
		StatementTimeout: -1, IdleInTransactionTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAfterDrop(hp, a)
	if _, err := b.Enqueue(t.Context(), testStart("i1")); err != nil {
		t.Fatal(err)
	}

	actx, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	done := holdMidTransaction(t, actx, a, hp, "i1")

	bctx, cancelB := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancelB()
	_, err = b.Enqueue(bctx, raised("i1"))
	if !errors.Is(err, provider.ErrBusy) || !provider.IsRetryable(err) {
		t.Fatalf("enqueue while another store holds the instance: %v, want a retryable ErrBusy", err)
	}

	cancelA()
	if err := waitDone(t, done, "the stuck store call after its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stuck call after cancel: %v, want context.Canceled", err)
	}
	hp.Drop()
	enqueueUntilAccepted(t, b, "i1")
	it := providertest.MustFetch(t, b)
	if it.InstanceID != "i1" || len(it.Messages) != 2 {
		t.Fatalf("fetched %s with %d messages, want i1 with its start and the raised event", it.InstanceID, len(it.Messages))
	}
}

// TestIdleInTransactionTimeoutReleasesLocks: the server ends the session
// of a store that went silent inside a transaction, so the instance's lock
// is released without anyone dropping the connection.
func TestIdleInTransactionTimeoutReleasesLocks(t *testing.T) {
	t.Parallel()
	hp := newHoldProxy(t)
	schema := freshSchema(t)
	b := openSchema(t, schema, &Options{LockTimeout: 200 * time.Millisecond})
	a, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true,
		StatementTimeout: -1, IdleInTransactionTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAfterDrop(hp, a)
	if _, err := b.Enqueue(t.Context(), testStart("i1")); err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	done := holdMidTransaction(t, actx, a, hp, "i1")
	enqueueUntilAccepted(t, b, "i1")
	cancelA()
	_ = waitDone(t, done, "the stuck store call after its context ended")
}

// TestStatementTimeoutBoundsAStuckCall: a store call whose server stops
// answering returns a retryable ErrUnavailable after the statement timeout
// even though its context never ends.
func TestStatementTimeoutBoundsAStuckCall(t *testing.T) {
	t.Parallel()
	hp := newHoldProxy(t)
	schema := freshSchema(t)
	openSchema(t, schema, nil) // migrates
	// No idle connections kept open: hp.Drop below drops every proxied
	// connection, and the call after it must find only fresh ones.
	a, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true,
		StatementTimeout: 300 * time.Millisecond, MinConns: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAfterDrop(hp, a)
	// The connection Open's setup used warms in the background: once it
	// is back in the pool, it is the one the held call takes. (The
	// warm-up's count rises before the connection goes back: wait for
	// the background task itself, or the held call may open a second
	// connection, left idle for hp.Drop to cut under the next call.)
	waitWarmups(t, a, 1)
	a.warm.wg.Wait()
	done := holdMidTransaction(t, context.Background(), a, hp, "i1")
	err = waitDone(t, done, "a store call on a silent connection")
	if !errors.Is(err, provider.ErrUnavailable) || !provider.IsRetryable(err) {
		t.Fatalf("store call on a silent connection: %v, want a retryable ErrUnavailable", err)
	}
	// The dropped connection never returns to the pool: the next call
	// works on a fresh one.
	hp.Drop()
	if _, err := a.Enqueue(t.Context(), testStart("i2")); err != nil {
		t.Fatalf("enqueue after the stuck connection was dropped: %v", err)
	}
}

// TestCanceledCallReturnsWhileServerIsSilent: a read transaction honours
// its context while it waits for a server that stopped answering.
func TestCanceledCallReturnsWhileServerIsSilent(t *testing.T) {
	t.Parallel()
	hp := newHoldProxy(t)
	schema := freshSchema(t)
	openSchema(t, schema, nil)
	a, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true,
		StatementTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAfterDrop(hp, a)
	hp.Hold()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := a.ReadHistory(ctx, "i1", 1)
		done <- err
	}()
	cancel()
	if err := waitDone(t, done, "ReadHistory on a silent server after its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadHistory after cancel: %v, want context.Canceled", err)
	}
}

// TestOpenOnSilentServerTimesOut: a port that accepts connections and
// never answers makes Open fail with a retryable ErrUnavailable, with the
// default connect timeout as with a set one.
func TestOpenOnSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opt  time.Duration
	}{{"default", 0}, {"set", 300 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, _ := nettest.SilentListener(t)
			done := make(chan error, 1)
			go func() {
				p, err := Open(context.Background(), "postgres://nobody@"+addr+"/none?sslmode=disable",
					&Options{Logger: quietLogger, ConnectTimeout: c.opt})
				if err == nil {
					_ = p.Close()
				}
				done <- err
			}()
			err := waitDone(t, done, "Open on a silent server")
			if !errors.Is(err, provider.ErrUnavailable) || !provider.IsRetryable(err) {
				t.Fatalf("Open on a silent server: %v, want a retryable ErrUnavailable", err)
			}
		})
	}
}

// TestConnectionLimits: every connection carries the bounds of the
// options, the connection string's own settings are kept when an option is
// left zero, and a negative option means no limit.
func TestConnectionLimits(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	dsnWith := func(params string) string {
		d := testDSN(t)
		if strings.Contains(d, "?") {
			return d + "&" + params
		}
		return d + "?" + params
	}
	cases := []struct {
		name string
		dsn  string
		opts Options
		want [3]string // lock_timeout, statement_timeout, idle_in_transaction_session_timeout
	}{
		{"defaults", testDSN(t), Options{}, [3]string{"5s", "30s", "10s"}},
		{"options", testDSN(t), Options{LockTimeout: 1500 * time.Millisecond, StatementTimeout: time.Minute, IdleInTransactionTimeout: 2 * time.Second},
			[3]string{"1500ms", "1min", "2s"}},
		{"no limit", testDSN(t), Options{LockTimeout: -1, StatementTimeout: -1, IdleInTransactionTimeout: -1}, [3]string{"0", "0", "0"}},
		{"connection string", dsnWith("lock_timeout=7000&statement_timeout=8000"), Options{}, [3]string{"7s", "8s", "10s"}},
		{"option over connection string", dsnWith("lock_timeout=7000"), Options{LockTimeout: 3 * time.Second}, [3]string{"3s", "30s", "10s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Schema, o.Logger, o.NoListen = schema, quietLogger, true
			p, err := Open(t.Context(), c.dsn, &o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var got [3]string
			err = p.pool.QueryRow(t.Context(), "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").
				Scan(&got[0], &got[1], &got[2])
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("lock, statement and idle-in-transaction timeouts = %q, want %q", got, c.want)
			}
		})
	}
}

// TestApplyLimitsConnectTimeout: the connect timeout defaults unless the
// connection string or the option sets it.
func TestApplyLimitsConnectTimeout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dsn  string
		opt  time.Duration
		want time.Duration
	}{
		{"postgres://u@h/d", 0, DefaultConnectTimeout},
		{"postgres://u@h/d?connect_timeout=3", 0, 3 * time.Second},
		{"postgres://u@h/d?connect_timeout=3", 2 * time.Second, 2 * time.Second},
		{"postgres://u@h/d", -1, 0},
	}
	for _, c := range cases {
		cfg, err := pgconn.ParseConfig(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		applyLimits(cfg, &Options{ConnectTimeout: c.opt})
		if cfg.ConnectTimeout != c.want {
			t.Errorf("%s with ConnectTimeout %v: connect timeout %v, want %v", c.dsn, c.opt, cfg.ConnectTimeout, c.want)
		}
	}
}

// TestCheckWritableSaysWhatFailed: a failed readiness check names its
// cause (refused, no answer, not migrated, read-only) and says "not
// migrated" only when the schema is.
func TestCheckWritableSaysWhatFailed(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckWritable: %v, want an error saying %q", err, want)
		}
		if want != "not migrated" && strings.Contains(err.Error(), "migrate") {
			t.Fatalf("CheckWritable: %v, which blames migrations for something else", err)
		}
	}
	t.Run("not migrated", func(t *testing.T) {
		t.Parallel()
		p := openFresh(t, &Options{NoMigrate: true, NoListen: true})
		check(t, p.CheckWritable(t.Context()), "not migrated")
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		hp := newHoldProxy(t)
		schema := freshSchema(t)
		openSchema(t, schema, nil)
		p, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_ = hp.ln.Close() // the port now refuses connections
		hp.Drop()
		p.pool.Reset() // no idle connection left: the check must connect
		check(t, p.CheckWritable(t.Context()), "refused the connection")
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		hp := newHoldProxy(t)
		schema := freshSchema(t)
		openSchema(t, schema, nil)
		p, err := Open(t.Context(), hp.dsn(t), &Options{Schema: schema, Logger: quietLogger, NoListen: true})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAfterDrop(hp, p)
		hp.Hold()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		check(t, p.CheckWritable(ctx), "did not answer in time")
	})
	t.Run("read-only", func(t *testing.T) {
		t.Parallel()
		schema := freshSchema(t)
		openSchema(t, schema, nil)
		dsn := testDSN(t)
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		ro, err := Open(t.Context(), dsn+sep+"default_transaction_read_only=on",
			&Options{Schema: schema, NoMigrate: true, NoListen: true, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		check(t, ro.CheckWritable(t.Context()), "read-only")
	})
}

// TestNoCreateSchemaRefusesMissingSchema: with NoCreateSchema, Open fails
// on a schema that does not exist, and creates nothing.
func TestNoCreateSchemaRefusesMissingSchema(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	p, err := Open(t.Context(), testDSN(t), &Options{Schema: schema, NoCreateSchema: true, Logger: quietLogger})
	if err == nil {
		_ = p.Close()
		t.Fatal("Open of a missing schema with NoCreateSchema succeeded")
	}
	if !errors.Is(err, ErrSchemaNotFound) || !errors.Is(err, provider.ErrNotFound) || !strings.Contains(err.Error(), schema) {
		t.Fatalf("Open of a missing schema: %v, want ErrSchemaNotFound naming %s", err, schema)
	}
	other := openFresh(t, &Options{NoListen: true})
	var exists bool
	if err := other.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("Open with NoCreateSchema created schema %s", schema)
	}
	openSchema(t, schema, nil) // creates it
	p, err = Open(t.Context(), testDSN(t), &Options{Schema: schema, NoCreateSchema: true, Logger: quietLogger, NoListen: true})
	if err != nil {
		t.Fatalf("Open of an existing schema with NoCreateSchema: %v", err)
	}
	_ = p.Close()
}

// planRows sums the rows each plan node scanning table read (returned or
// removed by a filter, times loops) in an EXPLAIN (ANALYZE, FORMAT JSON)
// plan; the rows an UPDATE writes are counted where it found them.
func planRows(node map[string]any, table string) float64 {
	var n float64
	if node["Relation Name"] == table && node["Node Type"] != "ModifyTable" {
		rows, _ := node["Actual Rows"].(float64)
		removed, _ := node["Rows Removed by Filter"].(float64)
		rechecked, _ := node["Rows Removed by Index Recheck"].(float64)
		loops, _ := node["Actual Loops"].(float64)
		n += (rows + removed + rechecked) * loops
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				n += planRows(m, table)
			}
		}
	}
	return n
}

// TestQuietCheckReadsOneEventWithoutStatistics: the quiet check of
// WorkAck.Then, run at each step of an orchestration, reads one history
// row however long the history, also on a table that autovacuum never
// analyzed (no planner statistics).
func TestQuietCheckReadsOneEventWithoutStatistics(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoListen: true})
	ctx := t.Context()
	mustExec(t, p, `ALTER TABLE history SET (autovacuum_enabled = off)`)
	providertest.RunFirstTurn(t, p, "long") // the instance, unlocked, with its first 2 events
	mustExec(t, p, `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
SELECT 'long', 1, g, 'ActivityCompleted', repeat('x', 200), 0 FROM generate_series(3, 3000) AS g`)
	var planJSON []byte
	err := p.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sqlInstanceQuiet, "long", int64(1), int64(3000), int64(0), int64(0)).Scan(&planJSON)
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(planJSON, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", planJSON, err)
	}
	if n := planRows(plans[0].Plan, "history"); n > 1 {
		t.Fatalf("the quiet check read %v history rows of a 3000-event execution, want at most 1:\n%s", n, planJSON)
	}
}

// TestHistoryTailReadsOnlyTheTail: a fetch that holds an instance's cached
// history reads only the events from the cached one on, one primary-key
// range, however long the history, also on a table never analyzed.
func TestHistoryTailReadsOnlyTheTail(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoListen: true})
	ctx := t.Context()
	mustExec(t, p, `ALTER TABLE history SET (autovacuum_enabled = off)`)
	providertest.RunFirstTurn(t, p, "long")
	mustExec(t, p, `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
SELECT 'long', 1, g, 'ActivityCompleted', repeat('x', 200), 0 FROM generate_series(3, 3000) AS g`)
	var planJSON []byte
	err := p.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sqlHistoriesOf,
		[]string{"long"}, []int64{1}, []int64{2999}).Scan(&planJSON)
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(planJSON, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", planJSON, err)
	}
	if n := planRows(plans[0].Plan, "history"); n > 2 {
		t.Fatalf("reading the tail from event 2999 read %v history rows of a 3000-event execution, want 2:\n%s", n, planJSON)
	}
}

// raised is an external event for instance id.
func raised(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: id, Name: "go", Data: json.RawMessage(`true`)},
	}
}

// testStart is a start of the orchestration "T" as instance id.
func testStart(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item:       history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1, Name: "T", Input: json.RawMessage(`1`)},
		Create:     &provider.NewInstance{OrchestrationName: "T", Input: json.RawMessage(`1`)},
	}
}
