package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/notify"
)

// Compile-time interface checks.
var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Admin    = (*Provider)(nil)
	_ provider.Waker    = (*Provider)(nil)

	_ provider.Migrator        = (*Provider)(nil)
	_ provider.WritableChecker = (*Provider)(nil)
	_ provider.StatsReporter   = (*Provider)(nil)
)

// Options configures a Provider. The zero value (or a nil *Options) gives
// the documented defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables, so
	// several deployments (or test runs) can share one database. It is
	// created if missing. Default: "duroxide".
	Schema string

	// MaxConns is the size of the connection pool. Default: 10. The
	// listener for notifications uses one more connection of its own.
	MaxConns int32

	// Clock is the source of every time the store compares or records (lock
	// expiry, message visibility, timestamps). Default: time.Now. The
	// server's clock is never used, so the nodes sharing a database must
	// keep their clocks in sync (NTP): a node whose clock runs ahead takes
	// over locks early.
	Clock func() time.Time

	// Logger receives the store's diagnostics (migrations applied, messages
	// dead-lettered, listener reconnects). Default: warnings and errors to
	// standard error.
	Logger *slog.Logger

	// NoMigrate, when true, makes Open skip applying pending schema
	// migrations; call Provider.Migrate (for example from a CLI command)
	// before using the store. Default: false (Open migrates).
	NoMigrate bool

	// NoListen, when true, opens no listening connection: commits of other
	// nodes are then noticed only by the runtime's slow poll. Default:
	// false (LISTEN/NOTIFY wakes this node when another commits work).
	NoListen bool

	// ListenRetryMax caps the backoff between attempts to re-establish the
	// listening connection after it broke. Default: 5s.
	ListenRetryMax time.Duration
}

// Defaults of Options.
const (
	DefaultSchema         = "duroxide"
	DefaultMaxConns int32 = 10
	// DefaultListenRetryMax is the default of Options.ListenRetryMax.
	DefaultListenRetryMax = 5 * time.Second
)

// maxSchemaLen is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const maxSchemaLen = 63

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Schema == "" {
		r.Schema = DefaultSchema
	}
	if len(r.Schema) > maxSchemaLen {
		return r, fmt.Errorf("postgres: invalid Options.Schema %q: longer than %d bytes", r.Schema, maxSchemaLen)
	}
	for _, c := range r.Schema {
		if c == 0 {
			return r, fmt.Errorf("postgres: invalid Options.Schema %q: contains a NUL byte", r.Schema)
		}
	}
	switch {
	case r.MaxConns == 0:
		r.MaxConns = DefaultMaxConns
	case r.MaxConns < 0:
		return r, fmt.Errorf("postgres: invalid Options.MaxConns %d: must not be negative", r.MaxConns)
	}
	switch {
	case r.ListenRetryMax == 0:
		r.ListenRetryMax = DefaultListenRetryMax
	case r.ListenRetryMax < 0:
		return r, fmt.Errorf("postgres: invalid Options.ListenRetryMax %v: must not be negative", r.ListenRetryMax)
	}
	if r.Clock == nil {
		r.Clock = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return r, nil
}

// Provider is the PostgreSQL store. It is safe for concurrent use, and many
// Providers (in many processes) may share one schema; see the package
// documentation for its guarantees.
type Provider struct {
	schema string
	clock  func() time.Time
	log    *slog.Logger
	pool   *pgxpool.Pool

	// lockSpace is mixed into every advisory lock key, so deployments in
	// other schemas of the same database never contend.
	lockSpace string

	// Notifications (notify.go): in-process subscribers, this Provider's
	// identity in notification payloads, the channel, and the listener.
	hub        notify.Hub
	node       string
	channel    string
	listenCfg  *pgx.ConnConfig
	retryMax   time.Duration
	listenStop context.CancelFunc
	listenDone chan struct{}
	reconnects atomic.Int64
	// listenConnPID is the backend PID of the listening connection (0 when
	// it is down), for tests that terminate it.
	listenConnPID atomic.Uint32

	commits atomic.Int64

	closeOnce sync.Once
	closed    atomic.Bool
}

// Open connects to the database named by dsn (a PostgreSQL URL or
// key=value connection string), creates the schema if it is missing and,
// unless opts.NoMigrate, applies pending migrations. A nil opts means
// defaults.
func Open(ctx context.Context, dsn string, opts *Options) (*Provider, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parsing the connection string: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	// Every connection works in the store's schema.
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	p := &Provider{
		schema:    o.Schema,
		clock:     o.Clock,
		log:       o.Logger,
		lockSpace: "duroxide:" + o.Schema + ":",
		node:      newToken(),
		channel:   channelName(o.Schema),
		retryMax:  o.ListenRetryMax,
	}
	p.listenCfg = cfg.ConnConfig.Copy()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting: %w", interpretError(err, nil))
	}
	p.pool = pool
	if err := p.ensureSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if !o.NoMigrate {
		if err := p.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if !o.NoListen {
		if err := p.startListener(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return p, nil
}

// ensureSchema creates the store's schema if it is missing.
func (p *Provider) ensureSchema(ctx context.Context) error {
	// Look first: creating needs the CREATE privilege on the database,
	// which a role working in an existing schema need not have.
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, p.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: looking up schema %q: %w", p.schema, interpretError(err, nil))
	}
	if exists {
		return nil
	}
	_, err := p.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{p.schema}.Sanitize())
	if err != nil {
		// Concurrent CREATE SCHEMA IF NOT EXISTS may race on the catalog's
		// unique index; the schema then exists.
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return nil
		}
		return fmt.Errorf("postgres: creating schema %q: %w", p.schema, interpretError(err, nil))
	}
	return nil
}

// Schema returns the schema the store's tables live in.
func (p *Provider) Schema() string { return p.schema }

// Close stops the listener and closes the pool. It is idempotent;
// afterwards every method returns provider.ErrClosed.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		if p.listenStop != nil {
			p.listenStop()
			<-p.listenDone
		}
		p.pool.Close()
	})
	return nil
}

// Stats are counters of a Provider since it was opened (see
// provider.Stats).
type Stats = provider.Stats

// Stats returns the store's counters. It is safe to call concurrently with
// any other method, also after Close.
func (p *Provider) Stats() Stats {
	return Stats{Commits: p.commits.Load(), ListenerReconnects: p.reconnects.Load()}
}

func (p *Provider) now() int64 { return p.clock().UnixMilli() }

// msTime converts stored epoch milliseconds to a time.Time in UTC.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fail turns an error of operation op into what the caller sees (see
// sqlstore.Fail).
func (p *Provider) fail(op string, err error) error {
	return sqlstore.Fail("postgres", op, p.closed.Load(), err, interpretError)
}

// wtx is one write transaction.
type wtx struct {
	ctx context.Context
	tx  pgx.Tx
	p   *Provider
	now int64
	// What the transaction changed, for the notifications sent once it
	// committed (notify.go).
	changes changes
	// inlineSent: the notification of a turn ack was sent in its batch,
	// covering the instances changed until then (inlineInstances).
	inlineSent      bool
	inlineInstances int
	// Worker rows a turn ack inserted to lease to its caller.
	leaseIDs  []int64
	leaseMsgs map[int64]*provider.WorkerMessage
}

// write runs fn in one transaction and commits it; the notifications of
// what fn changed are sent in the transaction (pg_notify, delivered to
// other nodes on commit) and to this process's subscribers after the
// commit. Statements ignore cancellation of ctx once the transaction has
// begun, so a committed fetch or ack is never reported as failed because
// its caller gave up at the wrong moment.
func (p *Provider) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	// Waiting for a connection honours ctx; once one is held, the
	// transaction runs to its end.
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return p.fail(op, err)
	}
	defer conn.Release()
	tctx := context.WithoutCancel(ctx)
	tx, err := conn.Begin(tctx)
	if err != nil {
		return p.fail(op, err)
	}
	w := &wtx{ctx: tctx, tx: tx, p: p, now: p.now()}
	if err := fn(w); err != nil {
		_ = tx.Rollback(tctx)
		return p.fail(op, err)
	}
	if err := p.sendNotify(w); err != nil {
		_ = tx.Rollback(tctx)
		return p.fail(op, err)
	}
	if err := tx.Commit(tctx); err != nil {
		return p.fail(op, err)
	}
	p.commits.Add(1)
	p.notifyLocal(&w.changes)
	return nil
}

// single runs fn, one statement that is atomic on its own (it changes
// nothing that needs a notification), on a pooled connection without an
// explicit transaction: one round trip. Like write, waiting for the
// connection honours ctx and the statement then runs to its end.
func (p *Provider) single(ctx context.Context, op string, fn func(ctx context.Context, q querier, now int64) error) error {
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return p.fail(op, err)
	}
	defer conn.Release()
	if err := fn(context.WithoutCancel(ctx), conn, p.now()); err != nil {
		return p.fail(op, err)
	}
	p.commits.Add(1)
	return nil
}

// read runs fn (reads on the pool) with the usual closed check and error
// translation.
func (p *Provider) read(ctx context.Context, op string, fn func() error) error {
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	return p.fail(op, fn())
}

// readTx runs fn in one REPEATABLE READ, read-only transaction, so its
// queries see one snapshot.
func (p *Provider) readTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return p.read(ctx, op, func() error {
		tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		return fn(tx)
	})
}

// exec runs a statement and returns the rows it affected.
func (w *wtx) exec(sql string, args ...any) (int64, error) {
	ct, err := w.tx.Exec(w.ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return ct.RowsAffected(), nil
}

// query runs a statement returning rows; scan is called for each.
func (w *wtx) query(sql string, scan func(pgx.Rows) error, args ...any) error {
	return queryRows(w.ctx, w.tx, sql, scan, args...)
}

// queryStrings runs a statement returning one text column and collects it.
func (w *wtx) queryStrings(sql string, args ...any) ([]string, error) {
	var out []string
	err := w.query(sql, func(r pgx.Rows) error {
		var v string
		if err := r.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, args...)
	return out, err
}

// querier is a pool, connection or transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func queryRows(ctx context.Context, q querier, sql string, scan func(pgx.Rows) error, args ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// lockInstancesShared queues on b (or runs, when b is nil) the taking of
// the advisory locks of instances in shared mode, in sorted order. A
// transaction holds them while it inserts messages for those instances.
//
// It closes the lost wake-up window of a message committed while the
// instance's turn is being acked: the fetch that the message's
// notification triggers finds the instance still locked, and the ack's
// check for messages left waiting ran before the message committed. With
// the shared lock, the message commits either before the ack takes the
// instance's lock (exclusive), so the ack sees it and wakes the
// dispatchers, or after the ack committed, so its own notification finds
// the instance free. Fetches only try the lock and skip an instance whose
// messages are being enqueued; enqueuers never block each other.
func (w *wtx) lockInstancesShared(b *pgx.Batch, instances []string) error {
	ids := slices.Clone(instances)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if b != nil {
		b.Queue(sqlAdvisoryLockShared, w.p.lockSpace, ids)
		return nil
	}
	_, err := w.tx.Exec(w.ctx, sqlAdvisoryLockShared, w.p.lockSpace, ids)
	return err
}

// lockInstance takes the transaction-scoped advisory lock of an instance,
// waiting for it. Every transaction that changes an instance's lock row
// (ack, abandon, renew) takes it first; fetches only try it and skip an
// instance another transaction holds.
func (w *wtx) lockInstance(instance string) error {
	_, err := w.tx.Exec(w.ctx, sqlAdvisoryLock, w.p.lockSpace+instance)
	return err
}
