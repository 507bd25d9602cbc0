package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
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

// Options configures a Provider. The zero value (or a nil *Options) gives
// the documented defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables, so
	// several deployments (or test runs) can share one database. It is
	// created if missing, unless NoCreateSchema. Default: "duroxide".
	Schema string

	// NoCreateSchema, when true, makes Open fail with ErrSchemaNotFound
	// instead of creating a missing schema, so a mistyped schema name is
	// refused rather than silently made into an empty store. Tools that
	// only read or manage an existing store set it; those that set one up
	// (migrate, serve) leave it false. Default: false (Open creates it).
	NoCreateSchema bool

	// MaxConns is the size of the connection pool. Default: 10. The
	// listener for notifications uses one more connection of its own.
	MaxConns int32

	// MinConns is how many pooled connections the store keeps open, warm
	// (see the package documentation: each connection runs the store's
	// triggers once, rolled back, before it serves a call). Once Open has
	// set up the schema, the pool opens them in the background, each
	// joining it once warm, so the first calls after a start find them
	// ready; it replaces one that closes (its lifetime ended, it broke)
	// in the background too. A negative value keeps none open:
	// connections are then opened, and warmed, by the calls that need
	// them. Default: 4 (or MaxConns, if smaller).
	MinConns int32

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

	// The following bound every wait on the server, so that a node whose
	// connection went silent in the middle of a transaction (paused, cut
	// off by the network) holds its instance's lock for seconds, not
	// forever, and a caller never waits on the server without limit. A
	// wait cut short fails with a retryable provider error (ErrBusy or
	// ErrUnavailable); the runtime retries it.
	//
	// Each duration accepts a negative value for "no limit". A zero value
	// takes the matching setting of the connection string if it has one
	// (connect_timeout, lock_timeout, statement_timeout,
	// idle_in_transaction_session_timeout), else the default.

	// ConnectTimeout bounds establishing one connection: dialing, TLS and
	// authentication, so a port that accepts and never answers fails
	// instead of hanging. Default: 10s.
	ConnectTimeout time.Duration

	// LockTimeout bounds each wait of a statement for a lock
	// (lock_timeout), in particular for an instance's lock held by another
	// node's transaction: the waiting call fails with provider.ErrBusy.
	// Default: 5s.
	LockTimeout time.Duration

	// StatementTimeout bounds each statement on the server
	// (statement_timeout); one that runs longer fails with
	// provider.ErrBusy. It also bounds, on this side, how long one store
	// call may hold a connection for its transaction: past it the
	// connection is dropped (the server then rolls the transaction back)
	// and the call fails with provider.ErrUnavailable, so a connection
	// whose server stopped answering never holds the caller for good.
	// Migrations and exports are not bounded by it. Default: 30s.
	StatementTimeout time.Duration

	// IdleInTransactionTimeout makes the server end the session of a
	// client that stays silent inside a transaction longer than this
	// (idle_in_transaction_session_timeout), which releases the locks it
	// held: a node paused or cut off mid-transaction blocks the instance
	// it was acking for at most this long. Default: 10s.
	IdleInTransactionTimeout time.Duration

	// KeepAlive is the idle time before TCP keep-alive probes start on a
	// connection and the interval between them; after 3 unanswered probes
	// the connection counts as broken, so a server that vanished (host
	// down, network cut) is noticed. Default: 15s.
	KeepAlive time.Duration

	// GroupCommitMax caps how many of the runtime's concurrent write
	// requests (fetches, acks, enqueues, abandons) one transaction
	// commits together (group commit: see the package documentation).
	// Each request runs in a savepoint of its own; PostgreSQL keeps up to
	// 64 subtransactions of a transaction in memory, so the cap is at most
	// 64. 1 turns group commit off: each request commits alone.
	// Default: 32.
	GroupCommitMax int

	// GroupCommitLanes is how many groups may run at once, each on a
	// connection of its own. A request that finds no group running runs
	// at once; while one runs, requests queue up for the next group, and
	// a further lane opens only once a quarter of GroupCommitMax are
	// queued. More lanes run more transactions in parallel under load;
	// fewer make bigger groups and fewer commits. At most MaxConns.
	// Default: 2 (or MaxConns, if smaller).
	GroupCommitLanes int

	// tracer, if set, traces every statement and batch of the pool's
	// connections (tests count round trips with it).
	tracer pgx.QueryTracer
}

// Defaults of Options.
const (
	DefaultSchema         = "duroxide"
	DefaultMaxConns int32 = 10
	// DefaultMinConns is the default of Options.MinConns.
	DefaultMinConns int32 = 4
	// DefaultListenRetryMax is the default of Options.ListenRetryMax.
	DefaultListenRetryMax = 5 * time.Second
	// DefaultConnectTimeout is the default of Options.ConnectTimeout.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultLockTimeout is the default of Options.LockTimeout.
	DefaultLockTimeout = 5 * time.Second
	// DefaultStatementTimeout is the default of Options.StatementTimeout.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultIdleInTransactionTimeout is the default of
	// Options.IdleInTransactionTimeout.
	DefaultIdleInTransactionTimeout = 10 * time.Second
	// DefaultKeepAlive is the default of Options.KeepAlive.
	DefaultKeepAlive = 15 * time.Second
	// DefaultGroupCommitMax is the default of Options.GroupCommitMax.
	DefaultGroupCommitMax = 32
	// DefaultGroupCommitLanes is the default of Options.GroupCommitLanes.
	DefaultGroupCommitLanes = 2
)

// maxGroupCommit is the largest Options.GroupCommitMax: PostgreSQL caches
// 64 subtransactions per transaction; past that every snapshot taken on
// the server looks them up on disk.
const maxGroupCommit = 64

// keepAliveCount is how many unanswered keep-alive probes mark a connection
// as broken.
const keepAliveCount = 3

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
	case r.MinConns == 0:
		r.MinConns = min(DefaultMinConns, r.MaxConns)
	case r.MinConns < 0:
		r.MinConns = 0
	case r.MinConns > r.MaxConns:
		return r, fmt.Errorf("postgres: invalid Options.MinConns %d: must be at most MaxConns %d", r.MinConns, r.MaxConns)
	}
	switch {
	case r.ListenRetryMax == 0:
		r.ListenRetryMax = DefaultListenRetryMax
	case r.ListenRetryMax < 0:
		return r, fmt.Errorf("postgres: invalid Options.ListenRetryMax %v: must not be negative", r.ListenRetryMax)
	}
	switch {
	case r.GroupCommitMax == 0:
		r.GroupCommitMax = DefaultGroupCommitMax
	case r.GroupCommitMax < 0 || r.GroupCommitMax > maxGroupCommit:
		return r, fmt.Errorf("postgres: invalid Options.GroupCommitMax %d: must be in [1, %d]", r.GroupCommitMax, maxGroupCommit)
	}
	switch {
	case r.GroupCommitLanes == 0:
		r.GroupCommitLanes = min(DefaultGroupCommitLanes, int(r.MaxConns))
	case r.GroupCommitLanes < 0 || r.GroupCommitLanes > int(r.MaxConns):
		return r, fmt.Errorf("postgres: invalid Options.GroupCommitLanes %d: must be in [1, MaxConns %d]", r.GroupCommitLanes, r.MaxConns)
	}
	if r.Clock == nil {
		r.Clock = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return r, nil
}

// applyLimits sets the connection bounds of o on cfg: the connect
// timeout, the TCP keep-alives and the server-side timeouts as run-time
// parameters of every connection. An option left zero keeps what the
// connection string set, else takes its default; a negative one means no
// limit.
func applyLimits(cfg *pgconn.Config, o *Options) {
	switch {
	case o.ConnectTimeout > 0:
		cfg.ConnectTimeout = o.ConnectTimeout
	case o.ConnectTimeout < 0:
		cfg.ConnectTimeout = 0
	case cfg.ConnectTimeout == 0:
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	ka := o.KeepAlive
	if ka == 0 {
		ka = DefaultKeepAlive
	}
	d := &net.Dialer{KeepAlive: -1}
	if ka > 0 {
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: ka, Interval: ka, Count: keepAliveCount}
	}
	cfg.DialFunc = d.DialContext
	for _, l := range []struct {
		param string
		opt   time.Duration
		def   time.Duration
	}{
		{"lock_timeout", o.LockTimeout, DefaultLockTimeout},
		{"statement_timeout", o.StatementTimeout, DefaultStatementTimeout},
		{"idle_in_transaction_session_timeout", o.IdleInTransactionTimeout, DefaultIdleInTransactionTimeout},
	} {
		switch {
		case l.opt > 0:
			cfg.RuntimeParams[l.param] = strconv.FormatInt(max(l.opt.Milliseconds(), 1), 10)
		case l.opt < 0:
			cfg.RuntimeParams[l.param] = "0"
		default:
			if _, set := cfg.RuntimeParams[l.param]; !set {
				cfg.RuntimeParams[l.param] = strconv.FormatInt(l.def.Milliseconds(), 10)
			}
		}
	}
}

// callLimit is how long one store call may hold a connection for its
// transaction, given Options.StatementTimeout; 0 means no limit.
func callLimit(statementTimeout time.Duration) time.Duration {
	switch {
	case statementTimeout > 0:
		return statementTimeout
	case statementTimeout < 0:
		return 0
	}
	return DefaultStatementTimeout
}

// Provider is the PostgreSQL store. It is safe for concurrent use, and many
// Providers (in many processes) may share one schema; see the package
// documentation for its guarantees.
//
// It implements provider.Provider, provider.Waker and the optional
// capabilities of package provider; most methods come from the embedded
// core shared by the SQL stores, and are documented by the interfaces
// they implement.
type Provider struct {
	// The calls written once for every SQL store, over this store's
	// transactions and SQL (db, wtx).
	sqlstore.Core
	schedules // provider.ScheduleStore (schedules.go)
	// maintenance implements the maintenance calls (maint.go).
	maintenance
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

	// warm: the warming of the pool's connections (warm.go).
	warm *warmState

	commits atomic.Int64
	// sessionRows: a worker fetch found rows of sessions, so fetches with
	// a session option no longer send their COMMIT with their statement
	// (wtx.fetchWork): one that finds such a row must claim its session
	// first, and would be refused and run again.
	sessionRows atomic.Bool
	// relaxedCommits counts the commits that did not wait for the WAL
	// flush (see wtx.relaxed), for tests.
	relaxedCommits atomic.Int64

	// group forms the groups of the write requests that may share a
	// transaction (writeGrouped); groups counts the transactions that
	// committed more than one, for tests.
	group  sqlstore.GroupCommit[*groupOp]
	groups atomic.Int64
	// serialGroups makes every group run its calls one after another, in
	// savepoints (groupOn's serial mode), for tests.
	serialGroups bool

	// callLimit bounds how long a store call holds a connection for its
	// transaction (see guardConn); 0: only the caller's context does.
	callLimit time.Duration

	// afterInstanceLock, set by tests, runs in a write transaction once
	// it holds an instance's advisory lock (wtx.lockInstance).
	afterInstanceLock func(instanceID string)

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
	// The pool opens its MinConns connections at once, in the background;
	// they wait for Open's setup (warm.go), which needs one more.
	cfg.MinConns = min(o.MinConns, o.MaxConns-1)
	// Every connection works in the store's schema.
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	applyLimits(&cfg.ConnConfig.Config, &o)
	p := &Provider{
		schema:    o.Schema,
		clock:     o.Clock,
		log:       o.Logger,
		lockSpace: "duroxide:" + o.Schema + ":",
		node:      newToken(),
		channel:   channelName(o.Schema),
		retryMax:  o.ListenRetryMax,
		callLimit: callLimit(o.StatementTimeout),
		warm:      newWarmState(),
	}
	p.Core = sqlstore.NewCore(db{p}, db{p}, &p.hub)
	p.schedules = schedules{DB: scheduleDB{p}, Now: p.now}
	p.group = sqlstore.GroupCommit[*groupOp]{MaxGroup: o.GroupCommitMax, Lanes: o.GroupCommitLanes, LaneAfter: max(o.GroupCommitMax/4, 1), Run: p.runGroup}
	p.group.Init()
	p.listenCfg = cfg.ConnConfig.Copy()
	p.maintenance = p.newMaintenance()
	// Connections are warmed before they serve (warm.go), once the schema
	// is ready.
	cfg.BeforeConnect = p.beforeConnect
	cfg.AfterConnect = p.afterConnect
	cfg.PrepareConn = p.prepareConn
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connecting: %w", interpretError(err, nil))
	}
	p.pool = pool
	fail := func(err error) (*Provider, error) {
		p.warm.decide()
		pool.Close()
		return nil, err
	}
	setup := context.WithValue(ctx, setupConn{}, true)
	if err := p.ensureSchema(setup, !o.NoCreateSchema); err != nil {
		return fail(err)
	}
	if !o.NoMigrate {
		if err := p.Migrate(setup); err != nil {
			return fail(err)
		}
	} else if p.warmReadiness(setup) {
		p.warm.setReady(false)
	}
	if !o.NoListen {
		if err := p.startListener(ctx); err != nil {
			return fail(err)
		}
	}
	// The pool's background connections connect now and join it warm;
	// the one the setup used warms in the background too.
	p.warm.decide()
	p.warmIdle()
	return p, nil
}

// ErrSchemaNotFound is returned by Open, with Options.NoCreateSchema, when
// the schema does not exist. It matches provider.ErrNotFound too.
var ErrSchemaNotFound = fmt.Errorf("schema does not exist: %w", provider.ErrNotFound)

// ensureSchema creates the store's schema if it is missing, or, unless
// create, fails with ErrSchemaNotFound.
func (p *Provider) ensureSchema(ctx context.Context, create bool) error {
	// Look first: creating needs the CREATE privilege on the database,
	// which a role working in an existing schema need not have.
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, p.schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: looking up schema %q: %w", p.schema, interpretError(err, nil))
	}
	if exists {
		return nil
	}
	if !create {
		return fmt.Errorf("postgres: schema %q: %w", p.schema, ErrSchemaNotFound)
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
		p.group.Close()
		p.stopListener()
		p.warm.stop()
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
	// askOrch are the instances of the turns acked whose notification
	// asks, after the COMMIT, whether messages wait for them.
	askOrch []string
	// groupHeld are the instances whose advisory locks the transaction's
	// group took, exclusively, before its calls ran (read only: the
	// calls of a group share it); sharedHeld those the call took shared.
	// Their locks are not taken again.
	groupHeld  map[string]bool
	sharedHeld map[string]bool
	// The leases of the worker rows a turn ack inserted locked to its
	// caller.
	leases []*provider.WorkItemLease
	// Their tokens' prefix, and when they were dated (Unix ms).
	leasePrefix string
	leaseFrom   int64
	// Whether other worker rows of the acked activity's instance are
	// queued, read by AckWork's batch for TakeTurn.
	hasWork *instanceWork
	// relaxed: the call wrote only what a server crash may lose without
	// harm (see Relaxed commits): locks and leases (a fetch), or a turn
	// that does not end its execution (relaxTurn).
	relaxed bool
	// fold: the transaction is a lone write's (writeOn), whose last batch
	// may carry its COMMIT (sendLast); committed: sendLast committed it.
	fold, committed bool
	// locked: the transaction took (or queued the taking of) the advisory
	// lock of an instance, exclusive or shared; see wakeSkipped.
	locked bool
}

// Relaxed commits.
//
// A fetch writes only locks and leases (and the delivery counts and
// dead-lettering of what it found), and a lock or lease lost is already
// a case the protocol handles: the instance or activity becomes fetchable
// again when it expires, and the holder's ack then fails with
// provider.ErrLockLost, as after a lease that expired. So a transaction of
// fetches alone commits with synchronous_commit off: COMMIT returns
// without waiting for the WAL flush (one fsync less per fetch on the
// critical path of every turn and activity). A server crash can then lose
// such a commit (at most the last wal_writer_delay of them), never the
// outcome of a turn or activity: an ack commits synchronously, and its
// flush covers the WAL of every commit before it, the fetch that took its
// lock included. A fetch that claims a session (provider.SessionOptions)
// commits synchronously, so a session's owner is never forgotten while it
// runs.
//
// A turn ack that does not end its execution commits relaxed too
// (relaxTurn): the turn is deterministic code run over what the store
// holds durably, so a server crash that loses its ack only makes the
// instance run that turn again from the same messages and history, as
// after an ack that failed. What the lost ack had started meanwhile is
// at-least-once work already: an activity it leased may run twice (its
// ack then fails with provider.ErrLockLost), and anything another
// transaction durably committed after reading the ack's writes (the
// activity's ack, a child instance's turn) flushed the ack's WAL before
// its own. The starts, enqueues and events of clients, activity acks, and
// turn acks that end an execution (a client waiting for the end acts on
// it at once) commit synchronously; so does a group with any such call.

// sqlRelaxCommit makes the transaction's COMMIT not wait for the WAL
// flush; it rides in the commit's batch.
const sqlRelaxCommit = `SET LOCAL synchronous_commit TO OFF`

// relaxCommit queues on b (a commit batch) the statement that relaxes the
// transaction's commit, when relaxed.
func (p *Provider) relaxCommit(relaxed bool, b *pgx.Batch) {
	if relaxed {
		b.Queue(sqlRelaxCommit)
	}
}

// errCallLimit is the cause of a store call cut off by Options.StatementTimeout
// on this side: the server did not answer in time.
var errCallLimit = errors.New("no answer from the server within the statement timeout: connection dropped")

// guardConn bounds a store call that holds conn: when ctx ends, or the
// call has held conn for p.callLimit, it closes conn's network connection.
// The statement waiting on it (if any) fails at once, pgx marks the
// connection broken, the pool discards it on release instead of reusing it
// in the middle of a transaction, and the server, seeing the socket close,
// rolls the transaction back and releases its locks.
//
// The statements themselves run under a context that is not canceled with
// ctx (context.WithoutCancel), so a caller that gives up between two
// statements cannot leave pgx's state half-way; the guard is the only
// thing that cuts a call short. A commit cut short has an unknown outcome,
// like any commit whose answer was lost: the caller gets an error, and an
// ack that did commit is then refused as ErrLockLost on retry.
//
// done must be called once the call is over, before the connection is
// released. It stops the guard; if the guard cut the connection (also just
// after the call ended), it marks the connection closed so the pool never
// reuses it, and turns a failure into its cause: ctx's error when ctx
// ended, ErrUnavailable wrapping errCallLimit when the limit passed. A call
// that succeeded stays a success.
//
// The guard is independent of how the transaction is run: a transaction
// runner only needs to call it between acquiring and releasing the
// connection.
func (p *Provider) guardConn(ctx context.Context, conn *pgx.Conn) (done func(err error) error) {
	gctx, cancel := ctx, context.CancelFunc(func() {})
	if p.callLimit > 0 {
		gctx, cancel = context.WithTimeoutCause(ctx, p.callLimit, errCallLimit)
	}
	cut := make(chan struct{})
	stop := context.AfterFunc(gctx, func() {
		defer close(cut)
		_ = conn.PgConn().Conn().Close()
	})
	return func(err error) error {
		defer cancel()
		if stop() {
			return err // never cut
		}
		// Cut (perhaps just after the call ended): wait for the cut to
		// finish and mark the connection closed, so the pool discards it
		// even when the call itself succeeded.
		<-cut
		closed, stopNow := context.WithCancel(context.Background())
		stopNow()
		_ = conn.Close(closed)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
		}
		return sqlstore.Translated(provider.ErrUnavailable, fmt.Errorf("%w (%v)", context.Cause(gctx), err))
	}
}

// write runs fn in one transaction and commits it; the notifications of
// what fn changed are sent in the transaction (pg_notify, delivered to
// other nodes on commit) and to this process's subscribers after the
// commit. The call ends when ctx does, or after Options.StatementTimeout
// (guardConn).
func (p *Provider) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	return p.onConn(ctx, op, func(conn *pgxpool.Conn) error { return p.writeOn(ctx, conn, fn) })
}

// onConn runs fn on a pooled connection unless the store is closed or ctx
// ended; the call ends when ctx does, or after Options.StatementTimeout
// (guardConn). Errors come back translated and wrapped with op.
func (p *Provider) onConn(ctx context.Context, op string, fn func(conn *pgxpool.Conn) error) error {
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
	guard := p.guardConn(ctx, conn.Conn())
	return p.fail(op, guard(fn(conn)))
}

// writeOn is write's transaction on conn. Its last batch may carry its
// COMMIT and notifications (sendLast); if a guard of that batch refuses
// (the call needs statements after it), fn runs again, committing
// separately.
func (p *Provider) writeOn(ctx context.Context, conn *pgxpool.Conn, fn func(w *wtx) error) error {
	err := p.writeOnce(ctx, conn, fn, true)
	if checkFailed(err, codeNotLast) {
		// Rolled back: nothing was written.
		err = p.writeOnce(ctx, conn, fn, false)
	}
	return err
}

// writeOnce is one run of writeOn's transaction; fold: its last batch may
// carry its COMMIT.
func (p *Provider) writeOnce(ctx context.Context, conn *pgxpool.Conn, fn func(w *wtx) error, fold bool) error {
	tctx := context.WithoutCancel(ctx)
	tx := newLazyTx(conn.Conn())
	w := &wtx{ctx: tctx, tx: tx, p: p, now: p.now(), fold: fold}
	if err := fn(w); err != nil {
		_ = tx.Rollback(tctx)
		p.wakeSkipped(w, err)
		return err
	}
	if w.committed {
		// Its last batch committed it (sendLast) and sent its
		// notifications.
		p.commits.Add(1)
		if w.relaxed {
			p.relaxedCommits.Add(1)
		}
		p.notifyLocal(&w.changes)
		return nil
	}
	// The notifications follow the COMMIT in its round trip.
	b, after := &pgx.Batch{}, &pgx.Batch{}
	p.relaxCommit(w.relaxed && tx.begun, b)
	if err := p.queueNotifyAll(after, w); err != nil {
		_ = tx.Rollback(tctx)
		return err
	}
	if err := tx.CommitBatch(tctx, b, after); err != nil {
		p.wakeSkipped(w, err)
		return err
	}
	if w.relaxed {
		p.relaxedCommits.Add(1)
	}
	p.commits.Add(1)
	p.notifyLocal(&w.changes)
	return nil
}

// wakeSkipped wakes this process's orchestrator subscribers after w, a
// transaction that took an instance's advisory lock, ended without
// committing. An orchestration fetch only tries that lock and skips an
// instance another transaction holds, counting on the holder's commit to
// notify what it changed; a holder that rolls back (a refused rewind,
// pause or resume, a failed enqueue or ack) notifies nothing, and a
// dispatcher whose fetch skipped a ready instance then would sleep until
// its next poll, or, on a clock that does not move, for ever. Other nodes
// are not told: their fetch loops look again after a short back-off.
// A call that ended with err and runs again at once (a guard of its last
// batch refused, or its work ack's turn was not applied) wakes nobody
// yet: it notifies when it ends.
func (p *Provider) wakeSkipped(w *wtx, err error) {
	if w.locked && !checkFailed(err, codeNotLast) && !errors.Is(err, sqlstore.ErrThenNotApplied) {
		p.hub.Wake(provider.QueueOrchestrator)
	}
}

// single runs fn, one statement that is atomic on its own (it changes
// nothing that needs a notification), on a pooled connection without an
// explicit transaction: one round trip. Like write, it ends when ctx does
// or after Options.StatementTimeout.
func (p *Provider) single(ctx context.Context, op string, fn func(ctx context.Context, q querier, now int64) error) error {
	return p.onConn(ctx, op, func(conn *pgxpool.Conn) error {
		if err := fn(context.WithoutCancel(ctx), conn, p.now()); err != nil {
			return err
		}
		p.commits.Add(1)
		return nil
	})
}

// writeAlone runs fn, whose one statement is atomic on its own and
// changes nothing that needs a notification, as single does: on a pooled
// connection without an explicit transaction (the statement commits by
// itself), one round trip. fn gets a wtx whose transaction counts as
// begun, so its statements go to the connection as they are.
func (p *Provider) writeAlone(ctx context.Context, op string, fn func(w *wtx) error) error {
	return p.onConn(ctx, op, func(conn *pgxpool.Conn) error {
		w := &wtx{ctx: context.WithoutCancel(ctx), tx: &lazyTx{conn: conn.Conn(), begun: true}, p: p, now: p.now()}
		if err := fn(w); err != nil {
			return err
		}
		p.commits.Add(1)
		return nil
	})
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
// queries see one snapshot. Like write, it ends when ctx does or after
// Options.StatementTimeout.
func (p *Provider) readTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return p.read(ctx, op, func() error {
		conn, err := p.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		guard := p.guardConn(ctx, conn.Conn())
		return guard(func() error {
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			return fn(tx)
		}())
	})
}

// sendLast sends b, the transaction's last statements. In a lone write
// (wtx.fold) the transaction's COMMIT and its notifications (built from
// what the transaction changed so far: the call must have noted its
// changes before) ride in the same round trip, so a lone write whose
// statements do not depend on one another's results costs one round trip.
// The callbacks of b then run before the COMMIT's outcome is known; the
// caller must neither write after sendLast nor fail after it succeeded,
// except where what it then returns is an error that wrote nothing (a
// guard of b that refuses fails b with codeNotLast instead: writeOn runs
// the call again, committing separately). A statement of b that fails
// rolls everything back, as when b is sent alone; an error of the COMMIT
// leaves the outcome unknown, as for any commit. Elsewhere (a group's
// call) b is sent as it is.
func (w *wtx) sendLast(b *pgx.Batch) error {
	lt, ok := w.tx.(*lazyTx)
	if !w.fold || !ok {
		return w.tx.SendBatch(w.ctx, b).Close()
	}
	after := &pgx.Batch{}
	if err := w.p.queueNotifyAll(after, w); err != nil {
		return err
	}
	if !lt.begun {
		// The BEGIN rides at the batch's head.
		lt.begun = true
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: sqlBegin}}, b.QueuedQueries...)
	}
	w.p.relaxCommit(w.relaxed, b)
	_, err := lt.commitBatch(w.ctx, b, after)
	w.committed = err == nil
	return err
}

// exec runs a statement and returns the rows it affected.
func (w *wtx) exec(sql string, args ...any) (int64, error) {
	ct, err := w.tx.Exec(w.ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return ct.RowsAffected(), nil
}

// query runs a statement returning rows; scan is called for each. It is
// sent as a batch of one, so that it carries the statements a transaction
// has queued to open (its BEGIN, a group's savepoint).
func (w *wtx) query(sql string, scan func(pgx.Rows) error, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sql, args...).Query(func(r pgx.Rows) error { return forEach(r, func() error { return scan(r) }) })
	return w.tx.SendBatch(w.ctx, b).Close()
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
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
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
//
// An instance whose lock the transaction holds already (its group's, or
// shared by an earlier call of this method) is left out: taking it again
// would change nothing.
func (w *wtx) lockInstancesShared(b *pgx.Batch, instances []string) error {
	ids := slices.DeleteFunc(slices.Clone(instances), func(id string) bool { return w.groupHeld[id] || w.sharedHeld[id] })
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if w.sharedHeld == nil {
		w.sharedHeld = map[string]bool{}
	}
	w.locked = true
	for _, id := range ids {
		w.sharedHeld[id] = true
	}
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
	if w.groupHeld[instance] {
		return nil // its group holds it, exclusively
	}
	w.locked = true
	if _, err := w.tx.Exec(w.ctx, sqlAdvisoryLock, w.p.lockSpace+instance); err != nil {
		return err
	}
	if h := w.p.afterInstanceLock; h != nil {
		h(instance)
	}
	return nil
}

// queueLockInstance queues on b the taking of instance's advisory lock, as
// lockInstance takes it.
func (w *wtx) queueLockInstance(b *pgx.Batch, instance string) {
	if !w.groupHeld[instance] {
		w.locked = true
		b.Queue(sqlAdvisoryLock, w.p.lockSpace+instance)
	}
}

// db is the store's side of its sqlstore.Core: reads (sqlstore.ReadDB)
// and writes (sqlstore.WriteDB; its write transaction, wtx, implements
// sqlstore.Tx).
type db struct{ p *Provider }

func (r db) Read(ctx context.Context, op string, fn func(sqlstore.Querier) error) error {
	return r.p.read(ctx, op, func() error { return fn(sharedQuerier{r.p.pool}) })
}

func (r db) ReadTx(ctx context.Context, op string, fn func(sqlstore.Querier) error) error {
	return r.p.readTx(ctx, op, func(tx pgx.Tx) error { return fn(sharedQuerier{tx}) })
}

func (r db) Write(ctx context.Context, op string, fn func(sqlstore.Tx) error) error {
	return r.p.write(ctx, op, func(w *wtx) error { return fn(w) })
}

func (r db) WriteGrouped(ctx context.Context, op string, locks []sqlstore.Lock, fn func(sqlstore.Tx) error) error {
	return r.p.writeGrouped(ctx, op, locks, func(w *wtx) error { return fn(w) })
}

// WriteWorkAck runs a plain activity ack as WriteGrouped does; a
// pipelined group applies the acks it holds together (groupacks.go). See
// sqlstore.WorkAckBatcher.
func (r db) WriteWorkAck(ctx context.Context, op string, locks []sqlstore.Lock, a *sqlstore.BatchedWorkAck) error {
	return r.p.doGrouped(ctx, &groupOp{op: op, locks: locks, ack: a, fn: func(w *wtx) error { return a.All(w) }})
}

func (r db) WriteAlone(ctx context.Context, op string, fn func(sqlstore.Tx) error) error {
	return r.p.writeAlone(ctx, op, func(w *wtx) error { return fn(w) })
}

func (r db) Fail(op string, err error) error { return r.p.fail(op, err) }
func (r db) Now() int64                      { return r.p.now() }
func (r db) Closed() bool                    { return r.p.closed.Load() }
func (r db) Clock() time.Time                { return r.p.clock() }
func (r db) LogDeadLetters(dead []sqlstore.DeadLetter) {
	sqlstore.LogDeadLetters(r.p.log, "postgres", dead)
}

// sharedQuerier runs the shared code's statements on a pool, connection
// or transaction.
type sharedQuerier struct{ q querier }

func (s sharedQuerier) QueryRow(ctx context.Context, id sqlstore.Query, args ...any) sqlstore.Row {
	return sqlstore.MapNoRows(s.q.QueryRow(ctx, sharedSQL[id], args...), pgx.ErrNoRows)
}

func (s sharedQuerier) Each(ctx context.Context, id sqlstore.Query, scan func(sqlstore.Row) error, args ...any) error {
	return queryRows(ctx, s.q, sharedSQL[id], func(r pgx.Rows) error { return scan(r) }, args...)
}

// Batch sends stmts as one pipelined batch: one round trip.
func (s sharedQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	b := &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(sharedSQL[st.Query], st.Args...).Query(func(r pgx.Rows) error {
			return forEach(r, func() error { return st.Scan(r) })
		})
	}
	return s.q.SendBatch(ctx, b).Close()
}

// What a Provider implements (provider.Provider and every optional store
// interface) is checked at compile time for both SQL stores together, in
// the provider package's tests (implements_test.go).
