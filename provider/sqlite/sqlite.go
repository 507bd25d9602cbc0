package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/notify"
)

// Options configures a Provider. The zero value (or a nil *Options) gives
// the documented defaults.
type Options struct {
	// Clock is the source of every time the store compares or records (lock
	// expiry, message visibility, timestamps). Default: time.Now. SQLite's
	// own clock is never used.
	Clock func() time.Time

	// Synchronous is the SQLite synchronous mode of the writer: "NORMAL"
	// (default; with WAL, a commit survives a process crash and the database
	// never corrupts, but the last commits may roll back on power loss) or
	// "FULL" (every commit is durable on power loss, and slower). Other
	// values are rejected.
	Synchronous string

	// BusyTimeout is how long a connection waits for a lock held by another
	// process before giving up with provider.ErrBusy. Default: 5s. Inside one
	// process the store never contends with itself: it has one writer
	// connection.
	BusyTimeout time.Duration

	// MaxReaders is the size of the read-only connection pool used by
	// ReadHistory, NextVisible and the Admin methods. Default: 4. In-memory
	// stores use their single connection for everything and ignore it.
	MaxReaders int

	// Logger receives the store's diagnostics (migrations applied, messages
	// dead-lettered). Default: warnings and errors to standard error.
	Logger *slog.Logger

	// ChangeCheckInterval is how often an idle store checks whether another
	// process committed to the database, to wake this process's
	// dispatchers and waiters (see Provider.Subscribe). The check is one
	// PRAGMA on the writer connection. Default: 20ms; negative disables it
	// (other processes' work is then noticed by the runtime's slow poll).
	// In-memory stores have no other processes and never check.
	ChangeCheckInterval time.Duration

	// NoMigrate, when true, makes Open skip applying pending schema
	// migrations; call Provider.Migrate (for example from a CLI command)
	// before using the store. Default: false (Open migrates).
	NoMigrate bool
}

// Defaults of Options.
const (
	DefaultSynchronous = "NORMAL"
	DefaultBusyTimeout = 5 * time.Second
	DefaultMaxReaders  = 4
	// DefaultChangeCheckInterval is the default of Options.ChangeCheckInterval.
	DefaultChangeCheckInterval = 20 * time.Millisecond
)

// Provider is the embedded SQLite store. It is safe for concurrent use; see
// the package documentation for its guarantees.
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
	path   string
	memory bool
	clock  func() time.Time
	log    *slog.Logger

	// writer runs the writer's statements: for a file store, the writer
	// pool's one connection, pinned for the store's life (wconn); for an
	// in-memory store, the pool itself (writerDB). Every transaction is
	// BEGIN IMMEDIATE.
	writer   writerConn
	writerDB *sql.DB
	wconn    *sql.Conn // nil for in-memory stores
	// connMu is held for each transaction on wconn (begin to commit or
	// rollback), and by Migrate, whose statements must not run inside one.
	connMu sync.Mutex
	// ckpt checkpoints the WAL off the writer (checkpoint.go); nil for
	// in-memory stores and under synchronous FULL.
	ckpt    *checkpointer
	readers *sql.DB // read-only pool; == writerDB for in-memory stores

	prepMu  sync.Mutex
	prepped atomic.Bool
	wstmts  [numWriterStmts]*sql.Stmt
	rstmts  [sqlstore.NumQueries]*sql.Stmt

	// Group commit (see writer.go): the leader of the writer's one lane.
	group sqlstore.GroupCommit[*writeReq]

	// Group-commit statistics and a test hook run before a request is
	// queued for the writer.
	groups, brokenGroups atomic.Int64
	redoneGroups         atomic.Int64 // groups run again with savepoints (writer.go)
	batchedAcks          atomic.Int64 // work acks runAcks applied set-based
	// rollbacks counts the transactions SQLite rolled back on the pinned
	// writer connection (its rollback hook), explicitly or on an error;
	// watched reports that the hook is registered (see "Groups without
	// savepoints" in writer.go).
	rollbacks      atomic.Int64
	watched        atomic.Bool
	writerReplaced atomic.Int64 // broken writer connections replaced (writer.go)
	testHookSubmit func()
	testHookStmt   func(stmtID) // called with each writer statement a request runs
	stats          stats        // counters of Stats (stats.go)

	// Notifications (notify.go): subscribers, the writer connection's last
	// data_version, how many foreign commits were seen, and the watcher.
	hub                  notify.Hub
	dataVersion          atomic.Int64
	foreignCommits       atomic.Int64
	watchStop, watchDone chan struct{}

	closeOnce sync.Once
	closed    atomic.Bool
	closeErr  error
}

// Open opens (creating if needed) the store at path and, unless
// opts.NoMigrate, applies pending migrations. path "" or ":memory:" opens a
// private in-memory store that lives until Close. A nil opts means defaults.
func Open(ctx context.Context, path string, opts *Options) (*Provider, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Provider{
		path:   path,
		memory: path == "" || path == ":memory:",
		clock:  o.Clock,
		log:    o.Logger,
	}
	p.Core = sqlstore.NewCore(db{p}, db{p}, &p.hub)
	p.schedules = schedules{DB: scheduleDB{p}, Now: p.now}
	p.group = sqlstore.GroupCommit[*writeReq]{MaxGroup: maxGroup, Lanes: 1, Run: p.runWrites, Yield: true, Queued: p.queued}
	p.group.Init()
	p.maintenance = p.newMaintenance()
	if err := p.openDBs(ctx, o); err != nil {
		_ = p.closeDBs()
		return nil, err
	}
	if !o.NoMigrate {
		if err := p.Migrate(ctx); err != nil {
			_ = p.closeDBs()
			return nil, err
		}
	}
	if !p.memory {
		// The baseline: commits from now on are news.
		var v int64
		if err := p.writer.QueryRowContext(ctx, sqlDataVersion).Scan(&v); err != nil {
			_ = p.closeDBs()
			return nil, fmt.Errorf("sqlite: opening %s: %w", p.path, interpretError(err, nil))
		}
		p.dataVersion.Store(v)
	}
	if !p.memory && o.ChangeCheckInterval > 0 {
		p.watchStop, p.watchDone = make(chan struct{}), make(chan struct{})
		go p.watchForeignCommits(o.ChangeCheckInterval)
	}
	return p, nil
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Clock == nil {
		r.Clock = time.Now
	}
	switch strings.ToUpper(r.Synchronous) {
	case "":
		r.Synchronous = DefaultSynchronous
	case "NORMAL", "FULL":
		r.Synchronous = strings.ToUpper(r.Synchronous)
	default:
		return r, fmt.Errorf("sqlite: invalid Options.Synchronous %q: want \"NORMAL\" or \"FULL\"", r.Synchronous)
	}
	switch {
	case r.BusyTimeout == 0:
		r.BusyTimeout = DefaultBusyTimeout
	case r.BusyTimeout < 0:
		return r, fmt.Errorf("sqlite: invalid Options.BusyTimeout %v: must not be negative", r.BusyTimeout)
	case r.BusyTimeout < time.Millisecond:
		return r, fmt.Errorf("sqlite: invalid Options.BusyTimeout %v: must be at least 1ms", r.BusyTimeout)
	}
	switch {
	case r.MaxReaders == 0:
		r.MaxReaders = DefaultMaxReaders
	case r.MaxReaders < 0:
		return r, fmt.Errorf("sqlite: invalid Options.MaxReaders %d: must not be negative", r.MaxReaders)
	}
	if r.ChangeCheckInterval == 0 {
		r.ChangeCheckInterval = DefaultChangeCheckInterval
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return r, nil
}

// dsn builds a connection string: pragmas are set per connection by the
// driver, so every pooled connection has them.
func dsn(path string, pragmas []string, params map[string]string) string {
	q := url.Values{}
	for _, pr := range pragmas {
		q.Add("_pragma", pr)
	}
	for k, v := range params {
		q.Set(k, v)
	}
	// A "file:" URI, so the path may hold any character once escaped.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

func (p *Provider) openDBs(ctx context.Context, o Options) error {
	busy := "busy_timeout(" + strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10) + ")"
	if p.memory {
		// One private in-memory database on one connection that is never
		// recycled: everything is serialized, nothing can be busy.
		db, err := sql.Open("sqlite", dsn(":memory:", []string{busy, "temp_store(memory)"}, nil))
		if err != nil {
			return fmt.Errorf("sqlite: opening in-memory store: %w", err)
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		p.writer, p.writerDB, p.readers = db, db, db
		if err := db.PingContext(ctx); err != nil {
			return fmt.Errorf("sqlite: opening in-memory store: %w", interpretError(err, nil))
		}
		return nil
	}

	pragmas := []string{
		busy,
		"journal_mode(WAL)",
		"synchronous(" + o.Synchronous + ")",
		"foreign_keys(0)",
		"temp_store(memory)",
		"cache_size(-32768)",
	}
	// Under NORMAL the checkpointer (checkpoint.go) checkpoints beside the
	// writer. Under FULL every commit syncs the WAL, and a WAL that grows
	// between checkpoints makes each of those syncs dearer (the file's size
	// changes) than the checkpoints it saves: the writer checkpoints itself,
	// as SQLite does by default.
	background := o.Synchronous != "FULL"
	if background {
		pragmas = append(pragmas, "wal_autocheckpoint(0)")
	}
	w, err := sql.Open("sqlite", dsn(p.path, pragmas, map[string]string{"_txlock": "immediate"}))
	if err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	p.writerDB = w
	c, err := w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, interpretError(err, nil))
	}
	p.wconn, p.writer = c, c
	p.watched.Store(p.watchRollbacks(c))
	var mode string
	if err := c.QueryRowContext(ctx, sqlJournalMode).Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, interpretError(err, nil))
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: opening %s: journal mode is %q, WAL could not be enabled", p.path, mode)
	}

	r, err := sql.Open("sqlite", dsn(p.path, []string{
		busy,
		"query_only(1)",
		"temp_store(memory)",
		"cache_size(-8192)",
	}, nil))
	if err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, err)
	}
	r.SetMaxOpenConns(o.MaxReaders)
	r.SetMaxIdleConns(o.MaxReaders)
	r.SetConnMaxLifetime(0)
	p.readers = r
	if err := r.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, interpretError(err, nil))
	}
	if !background {
		return nil
	}
	if err := p.openCheckpointer(ctx, busy); err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", p.path, err)
	}
	return nil
}

// Close releases the store's connections. It is idempotent; afterwards
// every method returns provider.ErrClosed.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		if p.watchStop != nil {
			close(p.watchStop)
			<-p.watchDone
		}
		p.group.Close()
		p.prepMu.Lock()
		// The statements of a writer connection database/sql closed are
		// only dropped: the driver cannot finalize them (writer.go).
		writerGone := p.wconn != nil && errors.Is(p.writerState(), sql.ErrConnDone)
		for _, s := range p.wstmts {
			if s != nil && !writerGone {
				_ = s.Close()
			}
		}
		for _, s := range p.rstmts {
			if s != nil {
				_ = s.Close()
			}
		}
		p.prepMu.Unlock()
		p.closeErr = p.closeDBs()
	})
	return p.closeErr
}

func (p *Provider) closeDBs() error {
	var errs []error
	if p.ckpt != nil {
		errs = append(errs, p.ckpt.close())
		p.ckpt = nil
	}
	if p.readers != nil && p.readers != p.writerDB {
		errs = append(errs, p.readers.Close())
	}
	if p.wconn != nil {
		// A writer connection that broke was closed already (writer.go).
		if err := p.wconn.Close(); !errors.Is(err, sql.ErrConnDone) {
			errs = append(errs, err)
		}
	}
	if p.writerDB != nil {
		errs = append(errs, p.writerDB.Close())
	}
	return errors.Join(errs...)
}

// prepare prepares every statement once, outside any transaction (the
// writer's only connection must be free). It is retried until it succeeds,
// so a store opened with NoMigrate works once migrated.
func (p *Provider) prepare(ctx context.Context) error {
	if p.prepped.Load() {
		return nil
	}
	p.prepMu.Lock()
	defer p.prepMu.Unlock()
	if p.prepped.Load() {
		return nil
	}
	if p.closed.Load() {
		return provider.ErrClosed
	}
	for i, q := range writerSQL {
		if p.wstmts[i] != nil {
			continue
		}
		s, err := p.writer.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("preparing statements (is the schema migrated?): %w", interpretError(err, nil))
		}
		p.wstmts[i] = s
	}
	for i, q := range readerSQL {
		if p.rstmts[i] != nil {
			continue
		}
		s, err := p.readers.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("preparing statements (is the schema migrated?): %w", interpretError(err, nil))
		}
		p.rstmts[i] = s
	}
	p.prepped.Store(true)
	return nil
}

// now returns the clock's time in epoch milliseconds.
func (p *Provider) now() int64 { return p.clock().UnixMilli() }

// msTime converts stored epoch milliseconds to a time.Time in UTC.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// fail turns an error of operation op into what the caller sees (see
// sqlstore.Fail).
func (p *Provider) fail(op string, err error) error {
	return sqlstore.Fail("sqlite", op, p.closed.Load(), err, interpretError)
}

// wtx is one request's view of a write transaction on the writer
// connection.
type wtx struct {
	ctx context.Context
	tx  sqlTxRunner // the pinned connection in a transaction, or a *sql.Tx
	p   *Provider
	now int64
	// stmts caches the statements bound to a *sql.Tx, shared by the
	// requests of one transaction; nil on the pinned connection, whose
	// prepared statements run as they are.
	stmts *txStmts
	// What the request changed, for the notifications sent once it has
	// committed (see notify.go).
	changes changes
	// Worker rows a turn ack inserted leased to its caller (insertLeased):
	// their IDs and leases, in insertion order, the leases' token prefix
	// and expiry, and whether the ack canceled activities (which may have
	// deleted some of them).
	leaseIDs      []int64
	leases        []*provider.WorkItemLease
	leasePrefix   string
	leaseUntil    int64
	leaseCanceled bool
	// taking, when not nil, holds what runAcks asked the store for a
	// group's work acks that may take their turn (WorkAck.TakeTurn), as
	// TakeTurn would ask it of each: for each instance asked, whether its
	// turn may be taken. TakeTurn does not ask again for those.
	taking map[string]bool
	// wrote reports that a statement of the request changed a row, or
	// may have (it failed, or ran outside the prepared statements): a
	// request of a group without savepoints that fails having written
	// cannot be undone alone (see writer.go).
	wrote bool
	// noXLocks is an instance that a statement of the request found
	// holding no execution lock and no start queued for one (holdsXLocks),
	// when no execution lock or queued start was written since: its turn
	// has no execution lock to settle.
	noXLocks string
}

type txStmts [numWriterStmts]*sql.Stmt

func (w *wtx) stmt(id stmtID) *sql.Stmt {
	if w.p.testHookStmt != nil {
		w.p.testHookStmt(id)
	}
	if w.stmts == nil {
		return w.p.wstmts[id]
	}
	if s := w.stmts[id]; s != nil {
		return s
	}
	s := w.tx.(*sql.Tx).StmtContext(w.ctx, w.p.wstmts[id])
	w.stmts[id] = s
	return s
}

// writerConn is what the writer's statements run on: a *sql.Conn (a file
// store's pinned connection) or a *sql.DB (an in-memory store's pool of
// one).
type writerConn interface {
	sqlTxRunner
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// sqlTxRunner runs statements in a write transaction: a *sql.Tx, or the
// pinned writer connection while it holds one.
type sqlTxRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exec runs a statement and returns the rows it affected. conflict is what
// a unique-constraint violation means here (nil: ErrInvalidArgument).
func (w *wtx) exec(id stmtID, conflict error, args ...any) (int64, error) {
	if id == sXLockInsert || id == sXLockQueueInsert {
		w.noXLocks = ""
	}
	res, err := w.stmt(id).ExecContext(w.ctx, args...)
	if err != nil {
		w.wrote = true
		return 0, interpretError(err, conflict)
	}
	n, err := res.RowsAffected()
	if err != nil || n != 0 {
		// A statement that changed no row of its table fired no trigger
		// (SQLite's triggers are per row) and changed nothing.
		w.wrote = true
	}
	if err != nil {
		return 0, interpretError(err, nil)
	}
	return n, nil
}

// query runs a statement returning rows; scan is called for each.
func (w *wtx) query(id stmtID, scan func(*sql.Rows) error, args ...any) error {
	k := writerStmtKinds[id]
	if k == stmtReads {
		err := queryRows(w.ctx, w.stmt(id), scan, args...)
		w.wrote = w.wrote || err != nil
		return err
	}
	// A write with RETURNING returns a row for each row it changed.
	rows := 0
	err := queryRows(w.ctx, w.stmt(id), func(r *sql.Rows) error {
		rows++
		return scan(r)
	}, args...)
	w.wrote = w.wrote || err != nil || rows > 0 || k != stmtReturns
	return err
}

// queryStrings runs a statement returning one text column and collects it.
func (w *wtx) queryStrings(id stmtID, args ...any) ([]string, error) {
	var out []string
	err := w.query(id, func(r *sql.Rows) error {
		var v string
		if err := r.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, args...)
	return out, err
}

func queryRows(ctx context.Context, s *sql.Stmt, scan func(*sql.Rows) error, args ...any) error {
	rows, err := s.QueryContext(ctx, args...)
	if err != nil {
		return interpretError(err, nil)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return interpretError(err, nil)
		}
	}
	if err := rows.Err(); err != nil {
		return interpretError(err, nil)
	}
	return interpretError(rows.Close(), nil)
}

// read runs fn with the reader statements (and, for in-memory stores, the
// single connection).
func (p *Provider) read(ctx context.Context, op string, fn func() error) error {
	if p.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	if err := p.prepare(ctx); err != nil {
		return p.fail(op, err)
	}
	return p.fail(op, fn())
}

// readTx runs fn in one read transaction, so its queries see one snapshot.
func (p *Provider) readTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return p.read(ctx, op, func() error {
		tx, err := p.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return interpretError(err, nil)
		}
		defer func() { _ = tx.Rollback() }()
		return fn(tx)
	})
}

// jsonStrings encodes ids as a JSON array for json_each.
func jsonStrings(ids []string) string {
	if len(ids) == 0 {
		return "[]" // not "null": json_each('null') yields one NULL row
	}
	b, _ := json.Marshal(ids) // strings always encode
	return string(b)
}

// jsonInts encodes ids as a JSON array for json_each.
func jsonInts(ids []int64) string {
	b := make([]byte, 0, 8*len(ids)+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// db is the store's side of its sqlstore.Core: reads (sqlstore.ReadDB)
// and writes (sqlstore.WriteDB; its write transaction, wtx, implements
// sqlstore.Tx).
type db struct{ p *Provider }

func (r db) Read(ctx context.Context, op string, fn func(sqlstore.Querier) error) error {
	return r.p.read(ctx, op, func() error { return fn(r.p.readQuerier(nil)) })
}

func (r db) ReadTx(ctx context.Context, op string, fn func(sqlstore.Querier) error) error {
	return r.p.readTx(ctx, op, func(tx *sql.Tx) error { return fn(r.p.readQuerier(tx)) })
}

func (r db) Write(ctx context.Context, op string, fn func(sqlstore.Tx) error) error {
	return r.p.write(ctx, op, func(w *wtx) error { return fn(w) })
}

// WriteGrouped is Write: every write shares the single writer's group
// commit, and the writer needs no instance locks.
func (r db) WriteGrouped(ctx context.Context, op string, _ []sqlstore.Lock, fn func(sqlstore.Tx) error) error {
	return r.Write(ctx, op, fn)
}

// WriteEnqueue is WriteGrouped for an enqueue (sqlstore.EnqueueWriter):
// it may wake the orchestrator queue once queued (Provider.queued).
func (r db) WriteEnqueue(ctx context.Context, op string, _ []sqlstore.Lock, fn func(sqlstore.Tx) error) error {
	return r.p.writeReq(ctx, op, &writeReq{fn: func(w *wtx) error { return fn(w) }, early: true})
}

// WriteWorkAck runs a work ack in the single writer's group commit, where
// the work acks of one group are applied together (runAcks); see
// sqlstore.WorkAckBatcher.
func (r db) WriteWorkAck(ctx context.Context, op string, _ []sqlstore.Lock, a *sqlstore.BatchedWorkAck) error {
	return r.p.writeReq(ctx, op, &writeReq{fn: func(w *wtx) error { return a.All(w) }, ack: a})
}

// WriteAlone is Write: the single writer's transactions are what makes
// SQLite's writes atomic and cheap (they share its group commit).
func (r db) WriteAlone(ctx context.Context, op string, fn func(sqlstore.Tx) error) error {
	return r.Write(ctx, op, fn)
}

func (r db) Fail(op string, err error) error { return r.p.fail(op, err) }
func (r db) Now() int64                      { return r.p.now() }
func (r db) Closed() bool                    { return r.p.closed.Load() }
func (r db) Clock() time.Time                { return r.p.clock() }
func (r db) LogDeadLetters(dead []sqlstore.DeadLetter) {
	sqlstore.LogDeadLetters(r.p.log, "sqlite", dead)
}

// txQuerier runs the shared code's statements on the prepared reader
// statements: in a read transaction, or each on its own (tx nil).
type txQuerier struct {
	tx *sql.Tx
	p  *Provider
}

func (p *Provider) readQuerier(tx *sql.Tx) sqlstore.Querier {
	return txQuerier{tx: tx, p: p}
}

func (q txQuerier) stmt(ctx context.Context, id sqlstore.Query) *sql.Stmt {
	s := q.p.rstmts[id]
	if q.tx == nil {
		return s
	}
	return q.tx.StmtContext(ctx, s)
}

func (q txQuerier) QueryRow(ctx context.Context, id sqlstore.Query, args ...any) sqlstore.Row {
	return sqlstore.MapNoRows(q.stmt(ctx, id).QueryRowContext(ctx, args...), sql.ErrNoRows)
}

func (q txQuerier) Each(ctx context.Context, id sqlstore.Query, scan func(sqlstore.Row) error, args ...any) error {
	return queryRows(ctx, q.stmt(ctx, id), func(r *sql.Rows) error { return scan(r) }, args...)
}

// Batch runs stmts one after the other: the reader is local, a round
// trip costs nothing.
func (q txQuerier) Batch(ctx context.Context, stmts []sqlstore.Stmt) error {
	for _, s := range stmts {
		if err := q.Each(ctx, s.Query, s.Scan, s.Args...); err != nil {
			return err
		}
	}
	return nil
}

// What a Provider implements (provider.Provider and every optional store
// interface) is checked at compile time for both SQL stores together, in
// the provider package's tests (implements_test.go).
