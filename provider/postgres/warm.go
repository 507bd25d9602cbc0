package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/logkey"
)

// Warming connections.
//
// A server process (backend) that just started serves its first store
// calls much slower than the ones after: each of the store's PL/pgSQL
// functions (the triggers that keep orchestrator_ready exact, and
// duroxide_check) is compiled on its first call in the backend, and the
// statements inside it are planned then; the catalog entries of every
// table and index it touches are loaded. Measured on this package's
// benchmark machine, the first insert into orchestrator_queue on a fresh
// backend spent 3-7 ms in its trigger, later ones 0.1 ms. So a node whose
// pool opens connections while it serves (after it started, after a
// connection's lifetime ended) made a few of its first calls on each
// connection several milliseconds slower.
//
// So every pooled connection is warmed before it serves a call: one round
// trip runs, in a transaction that is rolled back, writes that fire every
// trigger of the store's tables once (warmSQL) for an instance ID no
// other call uses. PL/pgSQL keeps a compiled function, and the plans of
// its statements, for the life of the backend, whatever becomes of the
// transaction that compiled it; the rows are rolled back, so nothing of
// the warm-up is ever visible (its rows are dead at once, and its
// visibilities lie past any time a fetch looks at).
//
// A connection is warmed when it is established (AfterConnect), or, if it
// was established before the schema was ready (the connection that ran
// the migrations, or one opened with Options.NoMigrate before Migrate),
// when it is next acquired (PrepareConn). The pool keeps
// Options.MinConns connections open; those it opens while Open sets up
// the schema wait until Open is done with it (BeforeConnect), then
// connect, warm, and join the pool warm.

// warmKey is the key of a connection's custom data holding the warm-up
// generation it ran at.
const warmKey = "duroxide.warm"

// warmSQL fires each trigger of the store's tables, and calls
// duroxide_check, once, for the instance ID $id (a fresh one per
// warm-up, so nothing else writes its rows), with visibilities and lock
// expiries in the far future (no fetch looks that far ahead), and rolls it
// all back. It is one simple-protocol query: one round trip, nothing
// prepared.
const warmSQL = `BEGIN;
INSERT INTO instances (instance_id, orchestration_name, status, created_at, updated_at) VALUES ($id, '', 'Running', 0, 0);
UPDATE instances SET orchestration_name = 'warm' WHERE instance_id = $id;
INSERT INTO executions (instance_id, execution_id, status, started_at) VALUES ($id, 1, 'Running', 0);
INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at) VALUES ($id, 1, 1, 'warm', '{}', 0);
INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ($id, '{}', 4611686018427387904, 0);
INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at) VALUES ($id, 'warm', 4611686018427387904, 0);
UPDATE instance_locks SET locked_until = 4611686018427387905 WHERE instance_id = $id;
UPDATE orchestrator_queue SET visible_at = 4611686018427387905 WHERE instance_id = $id;
DELETE FROM instance_locks WHERE instance_id = $id;
DELETE FROM orchestrator_queue WHERE instance_id = $id;
INSERT INTO worker_queue (instance_id, execution_id, activity_id, work_item, visible_at, created_at) VALUES ($id, 1, 1, '{}', 4611686018427387904, 0);
DELETE FROM worker_queue WHERE instance_id = $id AND execution_id = 1 AND activity_id = 1;
SELECT duroxide_check(true, 'P0001', '');
DELETE FROM instances WHERE instance_id = $id;
ROLLBACK`

// warmState is what the warm-up of connections needs to know.
type warmState struct {
	// mu guards the fields below.
	mu sync.Mutex
	// decided is closed once Open knows whether the schema is ready
	// (or failed): connections the pool opens in the background wait
	// for it, so they join the pool warm.
	decided chan struct{}
	// ready: the schema is migrated to this release's version, so a
	// warm-up can run.
	ready bool
	// gen counts the migrations this Provider applied: a connection
	// warmed before one is warmed again (what it compiled was
	// invalidated).
	gen int
	// warmups counts the warm-ups run, and each closes and replaces
	// warmed, for tests.
	warmups int
	warmed  chan struct{}

	// cancel and wg stop Open's background warm-up (warmIdle).
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWarmState() *warmState {
	return &warmState{decided: make(chan struct{}), warmed: make(chan struct{})}
}

// warmGen returns whether a warm-up can run and the current generation.
func (w *warmState) warmGen() (bool, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready, w.gen
}

// setReady records that the schema is at this release's version; applied:
// this Provider just migrated it, so connections warmed before are warmed
// again.
func (w *warmState) setReady(applied bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready = true
	if applied {
		w.gen++
	}
}

// decide releases the connections waiting for Open to know whether the
// schema is ready. It is idempotent.
func (w *warmState) decide() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.decided:
	default:
		close(w.decided)
	}
}

// setupConn marks the context of Open's own calls before it decided
// (schema creation, migrations): a connection they open must not wait
// for the decision.
type setupConn struct{}

// beforeConnect is the pool's BeforeConnect hook: a connection the pool
// opens in the background (Options.MinConns) before Open decided whether
// the schema is ready waits for the decision before it connects, so it
// neither competes with Open's setup nor joins the pool cold. One that
// Open's own setup opens does not wait (it is warmed when it is next
// acquired).
func (p *Provider) beforeConnect(ctx context.Context, _ *pgx.ConnConfig) error {
	if ctx.Value(setupConn{}) != nil {
		return nil
	}
	select {
	case <-p.warm.decided:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// afterConnect is the pool's AfterConnect hook: it warms a new
// connection if the schema is ready. A warm-up that fails leaves the
// connection cold, unless it broke the connection (then the pool does not
// add it).
func (p *Provider) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if ready, _ := p.warm.warmGen(); !ready {
		return nil
	}
	return p.warmConn(ctx, conn)
}

// prepareConn is the pool's PrepareConn hook: it warms a connection that
// was established before the schema was ready, or before a migration this
// Provider applied, before the call that acquires it uses it. A
// connection the warm-up broke is discarded and the call takes another;
// one whose warm-up ctx cut short fails the call with ctx's error.
func (p *Provider) prepareConn(ctx context.Context, conn *pgx.Conn) (bool, error) {
	ready, gen := p.warm.warmGen()
	if !ready {
		return true, nil
	}
	if g, ok := conn.PgConn().CustomData()[warmKey].(int); ok && g == gen {
		return true, nil
	}
	if err := p.warmConn(ctx, conn); err != nil {
		return false, ctx.Err()
	}
	return true, nil
}

// warmConn runs the warm-up on conn and marks it warmed. The warm-up is
// bounded as a store call is (Options.StatementTimeout) and by ctx. An
// error the warm-up met in SQL (a store whose schema another release
// changed) is logged and leaves the connection usable, marked warmed; an
// error is returned only if the connection is no longer usable.
func (p *Provider) warmConn(ctx context.Context, conn *pgx.Conn) error {
	_, gen := p.warm.warmGen()
	if p.callLimit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.callLimit)
		defer cancel()
	}
	// A fresh ID per warm-up (a hex token: a safe literal).
	sql := strings.ReplaceAll(warmSQL, "$id", "'duroxide-warm-"+newToken()+"'")
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	p.warm.mu.Lock()
	p.warm.warmups++
	close(p.warm.warmed)
	p.warm.warmed = make(chan struct{})
	p.warm.mu.Unlock()
	if err == nil {
		conn.PgConn().CustomData()[warmKey] = gen
		return nil
	}
	if conn.IsClosed() || ctx.Err() != nil {
		return fmt.Errorf("postgres: warming a connection: %w", err)
	}
	// The statements after the one that failed did not run: end the
	// transaction the warm-up opened.
	if conn.PgConn().TxStatus() != 'I' {
		if _, rerr := conn.PgConn().Exec(ctx, "ROLLBACK").ReadAll(); rerr != nil || conn.PgConn().TxStatus() != 'I' {
			return fmt.Errorf("postgres: warming a connection: %w", err)
		}
	}
	p.log.Debug("postgres: warming a connection failed; it serves cold", logkey.Error, err)
	conn.PgConn().CustomData()[warmKey] = gen
	return nil
}

// warmIdle warms, in the background, the pool's idle connections that
// are not warm yet (the one Open's setup used): it takes them all, which
// warms them (prepareConn), and gives them back. Close stops it.
func (p *Provider) warmIdle() {
	ctx, cancel := context.WithCancel(context.Background())
	p.warm.cancel = cancel
	p.warm.wg.Add(1)
	go func() {
		defer p.warm.wg.Done()
		for _, c := range p.pool.AcquireAllIdle(ctx) {
			c.Release()
		}
	}()
}

// stop stops warmIdle's warm-up and waits for it.
func (w *warmState) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

// warmReadiness tells whether the schema is at this release's version,
// for a store opened with Options.NoMigrate: only then are connections
// warmed (a schema not yet migrated would fail the warm-up). Any failure
// to tell means no.
func (p *Provider) warmReadiness(ctx context.Context) bool {
	latest, err := latestVersion()
	if err != nil {
		return false
	}
	var current int
	if err := p.pool.QueryRow(ctx, sqlMaxMigration).Scan(&current); err != nil {
		return false
	}
	return current == latest
}

// stopListener stops the listener, if one runs, and waits for it.
func (p *Provider) stopListener() {
	if p.listenStop != nil {
		p.listenStop()
		<-p.listenDone
	}
}
