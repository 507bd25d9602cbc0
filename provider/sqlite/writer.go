package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	msqlite "modernc.org/sqlite"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Group commit.
//
// Every write of the store runs on the one writer connection, one
// transaction at a time: sqlstore.GroupCommit with a single lane. A caller
// that finds the writer idle runs its request inline, after yielding its
// processor once (GroupCommit.Yield): the goroutines ready to run, such as
// activities that finished together, submit theirs into the same
// transaction instead of each waiting for a commit of its own. Callers that arrive while a transaction runs queue up; when
// it ends, the writer is handed to the oldest of them, which runs all the
// queued requests (up to maxGroup) together in one transaction, each
// inside its own savepoint (on a file store, only when one of them fails
// after it wrote: see "Groups without savepoints"), and commits once. A commit (the WAL append,
// and with synchronous=FULL the fsync) is the dominant cost of a small
// transaction, so concurrent callers share it, while a lone caller pays no
// hand-over.
//
// A request that fails rolls back to its savepoint and the others go on;
// its caller gets the error. Results are delivered only after the commit,
// so a caller never sees a fetch or an ack that is not durable.
//
// If the shared transaction itself breaks (an I/O error, or SQLite rolling
// it back), it is rolled back and each request of the group runs again in a
// transaction of its own, so one request's failure is never another's.
// Request functions therefore must reset their outputs when they start:
// they may run twice.

// maxGroup caps the requests committed together, bounding the wait of the
// first one.
const maxGroup = 32

// write runs fn in a write transaction (possibly shared with other
// requests, each in its own savepoint) and returns once that transaction
// committed or fn failed. fn must reset its outputs when it starts.
func (p *Provider) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	return p.writeReq(ctx, op, &writeReq{fn: fn})
}

// writeReq is one request of the group commit: fn, and for a work ack
// that runAcks may apply together with the other work acks of its group,
// the ack.
type writeReq struct {
	fn  func(w *wtx) error
	ack *sqlstore.BatchedWorkAck
	// early: an enqueue (db.WriteEnqueue), whose orchestrator queue subscribers may be
	// woken once it is queued (queued); woke: they were, and its commit
	// need not wake them again.
	early, woke bool
}

// queued is the group commit's Queued: it wakes the orchestrator queue's
// subscribers of an enqueue as soon as the enqueue is queued, when it
// leads the next group (the writer was idle; a busy writer's groups are
// formed from what queued meanwhile, and an enqueue waits for its commit
// as before: the fetch it wakes then takes whatever else was enqueued
// with it, rather than one instance per fetch). A fetch
// they start then queues behind it, so it runs after the enqueue, in the
// same transaction when it arrives before the enqueue's group is taken
// (the leader yields once first): a start and the fetch of its first
// turn then share one commit. The enqueue's commit does not wake them
// again (notify): each fetch started since the wake sees its messages.
// A wake for an enqueue that rolls back, or inserts nothing, costs a
// fetch that finds nothing.
func (p *Provider) queued(r *writeReq, leader bool) {
	if r.early && leader {
		r.woke = true // read by this goroutine, which runs the group
		p.hub.Wake(provider.QueueOrchestrator)
	}
}

// writeReq runs r as write runs r.fn.
func (p *Provider) writeReq(ctx context.Context, op string, r *writeReq) error {
	if p.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := p.prepare(ctx); err != nil {
		return p.fail(op, err)
	}
	if p.testHookSubmit != nil {
		p.testHookSubmit()
	}
	err := p.group.Do(ctx, r)
	if errors.Is(err, sqlstore.ErrGroupClosed) {
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	return p.fail(op, err)
}

// runWrites runs the requests of one group (sqlstore.GroupCommit.Run).
func (p *Provider) runWrites(group []sqlstore.Request[*writeReq]) []error {
	if len(group) == 1 {
		return []error{p.runAlone(group[0])}
	}
	return p.runGroup(group)
}

// runAlone runs one request in its own transaction.
func (p *Provider) runAlone(r sqlstore.Request[*writeReq]) error {
	if err := r.Ctx.Err(); err != nil {
		return err
	}
	tx, stmts, err := p.begin()
	if err != nil {
		return interpretError(err, nil)
	}
	// The statements ignore cancellation: interrupting a statement can roll
	// back the whole transaction, and a request runs for milliseconds.
	w := &wtx{ctx: context.WithoutCancel(r.Ctx), tx: tx, p: p, now: p.now(), stmts: stmts}
	p.checkForeignCommits(w)
	if err := run(r.Op.fn, w); err != nil {
		p.rollback(tx)
		return err
	}
	err = interpretError(p.counted(p.commit(tx)), nil)
	if err == nil {
		p.notify(&w.changes, r.Op.woke)
	}
	return err
}

// Groups without savepoints.
//
// A savepoint per request costs two statements, and SQLite copies each
// page a request is the first of the group to change into the savepoint's
// journal. Most requests succeed, and most that fail fail before they
// write (a lock no longer held, say). On a file store a group therefore
// first runs without savepoints: a request that fails having written
// nothing (wtx.wrote) leaves nothing to undo, and its error is its own.
// If one fails after it wrote, the whole transaction is rolled back,
// nothing of the group having committed, and the group runs again with a
// savepoint per request, as before: each request may run twice anyway
// (see above). SQLite's rollback hook tells whether a request's error
// made SQLite roll the transaction back itself (the later requests would
// otherwise run outside it): the group is then broken and each of its
// requests runs alone, as when a savepoint statement fails. This relies on
// every statement of a request going through its wtx (exec, query, or its
// tx, which counts any other statement as a write), and on SQLite's
// triggers being per row, so that a statement that changed no row changed
// nothing: a request must not use the writer's statements (p.wstmts) or
// another handle directly, nor run DDL.

// runGroup runs several requests in one transaction (see "Groups without
// savepoints").
func (p *Provider) runGroup(group []sqlstore.Request[*writeReq]) []error {
	p.groups.Add(1)
	if p.wconn != nil && p.watched.Load() {
		if results, ok := p.runGroupTx(group, false); ok {
			return results
		}
		p.redoneGroups.Add(1)
	}
	results, _ := p.runGroupTx(group, true)
	return results
}

// runGroupTx runs the requests of a group in one transaction, each in a
// savepoint if savepoints is set. Without savepoints, it reports false
// (having rolled the transaction back) when a request failed after it
// wrote.
func (p *Provider) runGroupTx(group []sqlstore.Request[*writeReq], savepoints bool) ([]error, bool) {
	results := make([]error, len(group))
	tx, stmts, err := p.begin()
	if err != nil {
		err = interpretError(err, nil)
		for i := range results {
			results[i] = err
		}
		return results, true
	}
	broken := false
	p.checkForeignCommits(&wtx{ctx: context.Background(), tx: tx, p: p, stmts: stmts})
	rollbacks := p.rollbacks.Load()
	txs := make([]*wtx, len(group))
	batched := p.runAcks(tx, stmts, group, results, txs)
	broken = batched == nil || p.rollbacks.Load() != rollbacks
	for i, r := range group {
		if broken {
			break
		}
		if batched[i] {
			continue
		}
		if err := r.Ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		w := &wtx{ctx: context.WithoutCancel(r.Ctx), p: p, now: p.now(), stmts: stmts}
		txs[i] = w
		if !savepoints {
			w.tx = markingTx{tx, w}
			err := run(r.Op.fn, w)
			if p.rollbacks.Load() != rollbacks {
				broken = true // SQLite ended the transaction
				break
			}
			if err != nil && w.wrote {
				p.rollback(tx)
				return nil, false
			}
			results[i] = err
			continue
		}
		w.tx = tx
		if _, err := w.exec(sGroupSavepoint, nil); err != nil {
			broken = true
			break
		}
		if err := run(r.Op.fn, w); err != nil {
			results[i] = err
			if _, rerr := w.exec(sGroupRollbackTo, nil); rerr != nil {
				broken = true
				break
			}
		}
		if _, err := w.exec(sGroupRelease, nil); err != nil {
			broken = true
			break
		}
	}
	if !broken {
		if err := p.counted(p.commit(tx)); err != nil {
			// Nothing of the group was written; let each request try alone.
			broken = true
		}
	} else {
		p.rollback(tx)
	}
	if broken {
		p.brokenGroups.Add(1)
		for i, r := range group {
			results[i] = p.runAlone(r)
		}
		return results, true
	}
	for i := range group {
		if results[i] == nil && txs[i] != nil {
			p.notify(&txs[i].changes, group[i].Op.woke)
		}
	}
	return results, true
}

// markingTx is the transaction of a request of a group without
// savepoints: a statement it runs other than the writer's prepared ones
// counts as a write (wtx.wrote).
type markingTx struct {
	sqlTxRunner
	w *wtx
}

func (t markingTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.w.wrote = true
	return t.sqlTxRunner.ExecContext(ctx, query, args...)
}

func (t markingTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.w.wrote = true
	return t.sqlTxRunner.QueryContext(ctx, query, args...)
}

func (t markingTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.w.wrote = true
	return t.sqlTxRunner.QueryRowContext(ctx, query, args...)
}

// watchRollbacks registers the rollback hook that counts c's rolled back
// transactions (Provider.rollbacks), and reports whether it could.
func (p *Provider) watchRollbacks(c *sql.Conn) bool {
	err := c.Raw(func(dc any) error {
		h, ok := dc.(msqlite.HookRegisterer)
		if !ok {
			return errors.New("no rollback hook")
		}
		h.RegisterRollbackHook(func() { p.rollbacks.Add(1) })
		return nil
	})
	return err == nil
}

// begin starts a write transaction. A file store runs BEGIN IMMEDIATE on
// its pinned writer connection and then the prepared statements as they
// are: unlike a *sql.Tx, which wraps every statement for the transaction
// and starts a goroutine per query to watch the transaction's context,
// this costs nothing per statement. stmts is nil then. An in-memory
// store, whose one connection the readers share, uses a *sql.Tx: its
// readers wait for the connection until the transaction ends.
func (p *Provider) begin() (tx sqlTxRunner, stmts *txStmts, err error) {
	if p.wconn == nil {
		t, err := p.writerDB.BeginTx(context.Background(), nil)
		if err != nil {
			return nil, nil, err
		}
		return t, new(txStmts), nil
	}
	p.connMu.Lock()
	if !p.writerUsable() {
		if err := p.replaceWriter(); err != nil {
			p.connMu.Unlock()
			return nil, nil, err
		}
	}
	_, err = p.wstmts[sBegin].Exec()
	if isBadConn(err) {
		// The connection broke before BEGIN ran: no transaction began, so
		// BEGIN may run again on a fresh connection.
		if err = p.replaceWriter(); err == nil {
			_, err = p.wstmts[sBegin].Exec()
		}
	}
	if err != nil {
		p.connMu.Unlock()
		return nil, nil, err
	}
	return p.wconn, nil, nil
}

// A broken writer connection.
//
// The file store's writer connection is pinned, so database/sql never
// checks it the way it checks a pooled connection before reusing it. If
// it breaks (database/sql closed it after the driver returned
// driver.ErrBadConn, or the driver reports it unusable), begin replaces
// it before the next transaction: it discards the connection, takes a
// fresh one from the writer's pool (whose DSN sets the writer's pragmas
// on every connection it opens), prepares the writer's statements on it
// and takes a new data_version baseline. Nothing is retried that may
// have committed: a request whose statement or COMMIT failed on the
// broken connection returns its error (ErrUnavailable), as any failed
// write; only BEGIN, which began nothing when it failed that way, runs
// again. A group whose shared transaction broke runs each request alone
// (see runGroup): none of it committed, the connection that held it
// rolled it back when it closed.

// errUnusable is what writerUsable's check reports to database/sql.
var errUnusable = errors.New("sqlite: the writer connection is unusable")

// isBadConn reports whether err says the writer connection is gone.
func isBadConn(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// writerUsable reports whether the pinned writer connection is open and
// the driver holds it usable (driver.Validator, what database/sql asks
// before it pools a connection). connMu is held.
func (p *Provider) writerUsable() bool { return p.writerState() == nil }

// writerState is nil for a usable writer connection, errUnusable for one
// the driver reports unusable, and sql.ErrConnDone for one database/sql
// closed.
func (p *Provider) writerState() error {
	return p.wconn.Raw(func(dc any) error {
		if v, ok := dc.(driver.Validator); ok && !v.IsValid() {
			return errUnusable
		}
		return nil
	})
}

// replaceWriter replaces the pinned writer connection with a fresh one
// from the writer's pool (see "A broken writer connection"). If that
// fails, the old connection stays, and the next begin tries again.
// connMu is held, and no transaction is open.
func (p *Provider) replaceWriter() error {
	p.prepMu.Lock()
	defer p.prepMu.Unlock()
	if p.closed.Load() {
		return provider.ErrClosed
	}
	old := p.wstmts
	for i := range p.wstmts {
		p.wstmts[i] = nil
	}
	if !errors.Is(p.writerState(), sql.ErrConnDone) {
		// Close the statements while their connection is open: the
		// driver cannot finalize a statement of a closed connection
		// (database/sql does not track a *sql.Conn's statements), so those
		// of a connection database/sql closed are only dropped.
		for _, s := range old {
			if s != nil {
				_ = s.Close()
			}
		}
		// Returning driver.ErrBadConn from Raw makes database/sql close
		// the connection instead of pooling it.
		_ = p.wconn.Raw(func(any) error { return driver.ErrBadConn })
	}
	ctx := context.Background()
	c, err := p.writerDB.Conn(ctx)
	if err != nil {
		return err
	}
	var stmts [numWriterStmts]*sql.Stmt
	fresh := func() error {
		var mode string
		if err := c.QueryRowContext(ctx, sqlJournalMode).Scan(&mode); err != nil {
			return err
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("sqlite: new writer connection: journal mode is %q, not WAL", mode)
		}
		for i, q := range writerSQL {
			s, err := c.PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			stmts[i] = s
		}
		var v int64
		if err := stmts[sDataVersion].QueryRow().Scan(&v); err != nil {
			return err
		}
		p.dataVersion.Store(v)
		return nil
	}
	if err := fresh(); err != nil {
		for _, s := range stmts {
			if s != nil {
				_ = s.Close()
			}
		}
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		return err
	}
	p.wstmts = stmts
	p.wconn, p.writer = c, c
	p.watched.Store(p.watchRollbacks(c))
	p.writerReplaced.Add(1)
	p.log.Warn("sqlite: the writer connection broke and was replaced", logkey.Path, p.path)
	// Another process may have committed while no connection watched.
	p.hub.WakeAll()
	return nil
}

// commit commits a transaction of begin.
func (p *Provider) commit(tx sqlTxRunner) error {
	if t, ok := tx.(*sql.Tx); ok {
		return t.Commit()
	}
	defer p.connMu.Unlock()
	if _, err := p.wstmts[sCommit].Exec(); err != nil {
		// SQLite may keep the transaction open after a failed COMMIT (a
		// busy one): end it, so the next begin does not find it.
		_, _ = p.wstmts[sRollback].Exec()
		return err
	}
	p.ckpt.committed()
	return nil
}

// rollback rolls back a transaction of begin. On the pinned connection,
// a transaction SQLite rolled back itself (after an I/O error, say) makes
// ROLLBACK fail harmlessly: there is nothing left to end.
func (p *Provider) rollback(tx sqlTxRunner) {
	if t, ok := tx.(*sql.Tx); ok {
		_ = t.Rollback()
		return
	}
	_, _ = p.wstmts[sRollback].Exec()
	p.connMu.Unlock()
}

// run calls fn, turning a panic into an error: a request must never leave
// the writer's transaction open and every later write waiting for it.
func run(fn func(w *wtx) error, w *wtx) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("sqlite: internal error: %v", rec)
		}
	}()
	return fn(w)
}

// runAcks applies the work acks of a group set-based (see
// sqlstore.WorkAckBatcher) when it holds two or more whose context has
// not ended: one statement deletes their rows, one enqueues the
// completions of the acks whose rows it deleted (in the group's order),
// and then each such ack's After runs, on a wtx of its own (txs) so that
// its notifications are its own. An ack whose token no longer holds its
// row unexpired fails with ErrLockLost and enqueues nothing, as alone. It
// sets the results of the acks it applied and reports which it applied;
// nil if any other step failed: the group's transaction is then broken
// and each of its requests runs alone.
func (p *Provider) runAcks(tx sqlTxRunner, stmts *txStmts, group []sqlstore.Request[*writeReq], results []error, txs []*wtx) []bool {
	batched := make([]bool, len(group))
	var idx []int
	for i, r := range group {
		if r.Op.ack != nil && r.Ctx.Err() == nil {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return batched
	}
	w := &wtx{ctx: context.Background(), tx: tx, p: p, now: p.now(), stmts: stmts}
	ids := make([]int64, len(idx))
	tokens := make([]string, len(idx))
	for k, i := range idx {
		a := group[i].Op.ack
		ids[k], tokens[k] = a.Row, a.Ack.Token
	}
	type row struct {
		token string
		sess  sql.NullString
	}
	deleted := make(map[int64]row, len(idx))
	err := w.query(sAckWorks, func(r *sql.Rows) error {
		var id int64
		var d row
		if err := r.Scan(&id, &d.token, &d.sess); err != nil {
			return err
		}
		deleted[id] = d
		return nil
	}, jsonInts(ids), jsonStrings(tokens), w.now)
	if err != nil {
		return nil
	}
	var (
		touched map[string]bool
		msgs    []*sqlenc.Msg
	)
	applied := make([]bool, len(idx))
	for k, i := range idx {
		a := group[i].Op.ack
		batched[i] = true
		d, ok := deleted[a.Row]
		if !ok || d.token != a.Ack.Token {
			results[i] = fmt.Errorf("work ack: %w", provider.ErrLockLost)
			continue
		}
		delete(deleted, a.Row) // a second ack of the row finds it gone
		sess := d.sess
		applied[k] = true
		if sess.Valid && !touched[sess.String] {
			if touched == nil {
				touched = make(map[string]bool)
			}
			touched[sess.String] = true
			if _, err := w.exec(sTouchSession, nil, sess.String, w.now); err != nil {
				return nil
			}
		}
		if m := a.Ack.Completion; m != nil {
			msgs = append(msgs, m)
		}
	}
	if err := w.insertMessages(msgs); err != nil {
		return nil
	}
	// Whether the turns the acks may take (WorkAck.TakeTurn) can be taken,
	// asked once for the group as TakeTurn asks it of one: nothing After
	// does adds or removes a worker row or renames an instance. Asked once
	// per set of orchestrations the acks serve (one, unless runtimes of
	// different registries share the store) that two or more acks share;
	// a lone ack's TakeTurn asks on its own.
	type takerSet struct {
		names  []string
		ids    []string
		taking map[string]bool
	}
	var sets []*takerSet
	setOf := make([]*takerSet, len(idx))
	for k, i := range idx {
		a := group[i].Op.ack
		if !applied[k] || a.Ack.TakeMs == 0 {
			continue
		}
		names := a.Ack.TakeNames
		at := slices.IndexFunc(sets, func(s *takerSet) bool {
			return (s.names == nil) == (names == nil) && slices.Equal(s.names, names)
		})
		if at < 0 {
			at = len(sets)
			sets = append(sets, &takerSet{names: names})
		}
		sets[at].ids = append(sets[at].ids, a.Ack.Completion.InstanceID)
		setOf[k] = sets[at]
	}
	for _, s := range sets {
		if len(s.ids) < 2 {
			continue
		}
		s.taking = make(map[string]bool, len(s.ids))
		for _, id := range s.ids {
			s.taking[id] = true
		}
		err := w.query(sInstancesWithWork, func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			s.taking[id] = false
			return nil
		}, jsonStrings(s.ids), orchNamesArg(s.names))
		if err != nil {
			return nil
		}
	}
	for k, i := range idx {
		if !applied[k] {
			continue
		}
		a := group[i].Op.ack
		aw := &wtx{ctx: context.WithoutCancel(group[i].Ctx), tx: tx, p: p, now: w.now, stmts: stmts}
		if s := setOf[k]; s != nil {
			aw.taking = s.taking
		}
		aw.changes.orch = a.Ack.Completion != nil
		txs[i] = aw
		if err := run(func(w *wtx) error { return a.After(w) }, aw); err != nil {
			return nil
		}
	}
	p.batchedAcks.Add(int64(len(idx)))
	return batched
}
