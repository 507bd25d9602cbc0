package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Group commit.
//
// The runtime's dispatchers fetch, ack and enqueue concurrently, each call
// a small transaction whose commit (the WAL flush) costs more than its
// statements. The calls that may share a transaction (the shared core's
// sqlstore.WriteDB.WriteGrouped) go through writeGrouped:
// sqlstore.GroupCommit runs a lone call at once in its own
// transaction, as write does, and gathers the calls that arrive while
// every lane (Options.GroupCommitLanes) is busy into one transaction of up
// to Options.GroupCommitMax, committed once.
//
// A group runs its calls pipelined when they cannot disturb one another
// (pipeline.go: all of them at once, their statements sent together, one
// round trip for the calls whatever their number); a call that fails after
// it wrote something then rolls the group back and every call runs again
// alone. Otherwise (serial mode) each call runs in turn, in a savepoint of
// its own: one that fails rolls back to it (releasing what it locked) and
// the others go on; its caller gets its error. Results and the in-process
// notifications are delivered after the commit; the notification to other
// nodes (pg_notify) of what the calls that succeeded changed follows the
// COMMIT in its round trip, one for the group (a failed call's changes are
// left out).
//
// Lock order. A group holds the advisory locks of all its calls until it
// commits, so two groups (here or on other nodes) taking them call by call
// could wait for each other in a cycle, which PostgreSQL breaks only after
// deadlock_timeout by aborting one (40P01). Each grouped call therefore
// declares the instance locks it will take (sqlstore.Lock: exclusive for a
// turn's instance, shared for an enqueue's targets), and a group takes all of
// them first, in one statement, in instance order, and exclusively: the
// rows of an instance its calls lock one by one (its scheduling row, which
// enqueuers share) are then never held by two groups at once. A call's own
// lock statements find them held. The exception is the instances that only
// the group's plain activity acks declare, whose rows one statement locks
// in instance order: they are held shared (see groupacks.go for the
// argument). A call run alone that declared several
// instances takes them first in the same order. Fetches only try locks and
// never wait. A call that still loses a deadlock in a group (on row locks
// outside any instance's, such as a session's) is rolled back to its
// savepoint and runs again alone once the group committed. A start
// (sqlstore.Lock.Alone) never joins a group. One that takes an execution
// lock key or an idempotency key cannot declare the key's lock (a
// replacing start locks the holder's instance before the key, and the
// holder is known only once the key is read), and held until a group
// commits it made the group's other keyed calls, and the groups on other
// nodes waiting for them, queue behind one another until lock_timeout.
// An enqueue that starts an instance gains little from a group and waited
// for one: starts made one after another each waited for the running
// group to commit and the next to take it (the bench's sequence workload,
// starting 1,000 instances from one goroutine, ran about 60% faster once
// they ran alone).
//
// A group whose transaction breaks outside any call's savepoint (its
// locks timed out, a savepoint failed) is rolled back and each of its
// calls runs again alone, so a failure is never another call's; only a
// broken connection or a failed commit, whose outcome is unknown, fails
// every call of the group. Request functions must therefore set their
// outputs afresh each time they run.

// groupOp is one call of writeGrouped.
type groupOp struct {
	op    string
	locks []sqlstore.Lock
	fn    func(w *wtx) error
	// ack, if set, is the plain activity ack fn runs (fn is ack.All): a
	// pipelined group applies its acks together (groupacks.go).
	ack *sqlstore.BatchedWorkAck
}

// Savepoint statements of a group. The ones that open a call ride in the
// call's first round trip (savepointTx).
const (
	sqlGroupSavepoint = `SAVEPOINT g`
	sqlGroupRelease   = `RELEASE SAVEPOINT g`
	sqlGroupRollback  = `ROLLBACK TO SAVEPOINT g`
)

// savepointTx is a group's transaction as one call sees it: the
// statements that open the call's savepoint (sp: releasing the previous
// call's, if any, and taking a new one) are sent with the call's first
// statement, at the head of its first batch, so a call in a group costs no
// extra round trip. sp is nil once sent.
type savepointTx struct {
	pgx.Tx
	sp []string
}

// open sends sp on its own, before a statement that is not a batch.
func (t *savepointTx) open(ctx context.Context) error {
	if t.sp == nil {
		return nil
	}
	b := &pgx.Batch{}
	for _, q := range t.sp {
		b.Queue(q)
	}
	t.sp = nil
	return t.Tx.SendBatch(ctx, b).Close()
}

func (t *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.sp != nil {
		head := make([]*pgx.QueuedQuery, len(t.sp))
		for i, q := range t.sp {
			head[i] = &pgx.QueuedQuery{SQL: q}
		}
		b.QueuedQueries = append(head, b.QueuedQueries...)
		t.sp = nil
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.open(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.open(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.open(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.open(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

// errRow is a row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// writeGrouped runs fn as write does, possibly in one transaction with
// other concurrent calls (see the comment above); locks are the instance
// locks fn takes.
func (p *Provider) writeGrouped(ctx context.Context, op string, locks []sqlstore.Lock, fn func(w *wtx) error) error {
	return p.doGrouped(ctx, &groupOp{op: op, locks: locks, fn: fn})
}

// doGrouped runs r as writeGrouped does.
func (p *Provider) doGrouped(ctx context.Context, r *groupOp) error {
	op, locks := r.op, r.locks
	if p.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, provider.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var err error
	if p.group.MaxGroup == 1 || slices.ContainsFunc(locks, func(l sqlstore.Lock) bool { return l.Alone }) {
		// Group commit is off, or the call takes key locks it could not
		// declare (sqlstore.Lock.Alone): it runs alone, as many at once
		// as the pool allows.
		err = p.runAlone(sqlstore.Request[*groupOp]{Ctx: ctx, Op: r})
	} else {
		err = p.group.Do(ctx, r)
	}
	if errors.Is(err, sqlstore.ErrGroupClosed) {
		err = provider.ErrClosed
	}
	return p.fail(op, err)
}

// runGroup runs the calls of one group (sqlstore.GroupCommit.Run).
func (p *Provider) runGroup(group []sqlstore.Request[*groupOp]) []error {
	errs := make([]error, len(group))
	if len(group) == 1 {
		errs[0] = p.runAlone(group[0])
		return errs
	}
	ctx := context.Background()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	guard := p.guardConn(ctx, conn.Conn())
	results, ws, err := p.groupOn(conn, group, false)
	if errors.Is(err, errGroupSerial) && !conn.Conn().IsClosed() {
		// Rolled back: nothing was written.
		results, ws, err = p.groupOn(conn, group, true)
	}
	if cf, ok := errors.AsType[*checkFailedError](err); ok && !conn.Conn().IsClosed() {
		// Rolled back: the call whose check failed fails, and the
		// others run again without it.
		_ = guard(nil)
		conn.Release()
		rest := p.runGroup(slices.Delete(slices.Clone(group), cf.call, cf.call+1))
		return slices.Insert(rest, cf.call, cf.err)
	}
	err = guard(err)
	broken := conn.Conn().IsClosed()
	conn.Release()
	if err == nil {
		p.commits.Add(1)
		p.groups.Add(1)
		for i, w := range ws {
			if w != nil {
				p.notifyLocal(&w.changes)
			} else if isLockConflict(results[i]) || errors.Is(results[i], errRunAlone) {
				// Rolled back to its savepoint, a victim of a deadlock
				// on row locks with another transaction, which has
				// gone on, or a call that could not be pipelined and
				// sent nothing: it wrote nothing, so it runs again
				// alone.
				results[i] = p.runAlone(group[i])
			}
		}
		return results
	}
	if broken || errors.Is(err, errCommitFailed) {
		// The connection broke, or the commit failed: what was written is
		// unknown, as for any call whose commit went unanswered.
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	// Nothing was written: each call runs again on its own.
	for i, r := range group {
		errs[i] = p.runAlone(r)
	}
	return errs
}

// isLockConflict reports a deadlock or serialization failure (40P01,
// 40001): the statement lost to a concurrent transaction and may succeed
// when run again.
func isLockConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// checkFailedError is what groupOn returns for a pipelined group rolled
// back because the check of one of its acks (call) failed with err.
type checkFailedError struct {
	call int
	err  error
}

func (e *checkFailedError) Error() string { return e.err.Error() }

// errCommitFailed marks the failure of a group's commit.
var errCommitFailed = errors.New("committing a group")

// runAlone runs one call in a transaction of its own, as write does. A
// call that declared the locks of several instances takes them first, in
// instance order, as a group does, so it never waits for a group (or
// another such call) in a cycle.
func (p *Provider) runAlone(r sqlstore.Request[*groupOp]) error {
	conn, err := p.pool.Acquire(r.Ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	guard := p.guardConn(r.Ctx, conn.Conn())
	fn := r.Op.fn
	if ids, excl := groupLocks([]sqlstore.Request[*groupOp]{r}); len(ids) > 1 {
		fn = func(w *wtx) error {
			if _, err := w.tx.Exec(w.ctx, sqlAdvisoryLockGroup, p.lockSpace, ids, excl); err != nil {
				return err
			}
			w.now = p.now() // dated after the lock waits
			return r.Op.fn(w)
		}
	}
	err = p.writeOn(r.Ctx, conn, fn)
	for try := 1; try < aloneRuns && isLockConflict(err); try++ {
		// It lost a deadlock (such as a replacing start whose key's
		// holder changed between locking the holder and the key, with
		// the new holder's ack) and wrote nothing: it runs again, as a
		// group's victims do.
		err = p.writeOn(r.Ctx, conn, fn)
	}
	return guard(err)
}

// aloneRuns is how many times runAlone runs a call that keeps losing
// deadlocks before it returns the error (ErrBusy, retryable).
const aloneRuns = 3

// groupOn runs the calls of group in one transaction on conn, pipelined
// when it may and serial is not set (else call after call): each call's
// outcome, the transaction of each that succeeded, and the error that
// broke the transaction (then nothing was committed, unless it wraps
// errCommitFailed: then the outcome is unknown; errGroupSerial: the group
// must run again in serial mode).
func (p *Provider) groupOn(conn *pgxpool.Conn, group []sqlstore.Request[*groupOp], serial bool) ([]error, []*wtx, error) {
	ctx := context.Background()
	tx := newLazyTx(conn.Conn())
	fail := func(err error) ([]error, []*wtx, error) {
		_ = tx.Rollback(ctx)
		return nil, nil, err
	}
	pipelined := !serial && !p.serialGroups && pipelinable(group)
	var acks *ackBatch // the plain activity acks, applied together
	if pipelined {
		acks = newAckBatch(group)
	}
	var (
		held  map[string]bool
		locks *pgx.QueuedQuery
	)
	if ids, _ := groupLocks(group); len(ids) > 0 {
		// Exclusive, also where the calls need them only shared: rows of
		// an instance that enqueuers share (its orchestrator_ready row)
		// are locked call by call in a group, in no global order, so two
		// groups must never hold one instance at once. Except the
		// instances only the group's batched acks declare, whose rows
		// one statement locks in instance order (groupacks.go).
		excl := make([]bool, len(ids))
		held = make(map[string]bool, len(ids))
		for i, id := range ids {
			excl[i] = acks == nil || !acks.shared[id]
			held[id] = excl[i]
		}
		locks = &pgx.QueuedQuery{SQL: sqlAdvisoryLockGroup, Arguments: []any{p.lockSpace, ids, excl}}
		if !pipelined {
			// Taken on their own, so that the calls are dated after
			// the lock waits; a pipelined group sends them at the
			// head of its first round.
			if _, err := tx.Exec(ctx, locks.SQL, locks.Arguments...); err != nil {
				return fail(err)
			}
		}
	}
	errs := make([]error, len(group))
	ws := make([]*wtx, len(group))
	if pipelined {
		calls, orig := group, func(j int) int { return j }
		if acks != nil {
			calls, orig = acks.calls, func(j int) int { return acks.orig[j] }
		}
		cws := make([]*wtx, len(calls))
		cerrs, rerun, serial, checked, err := p.pipelineOn(tx, calls, cws, locks, held)
		switch {
		case err != nil:
			return fail(err)
		case serial:
			return fail(errGroupSerial)
		case checked >= 0 && orig(checked) >= 0:
			return fail(&checkFailedError{call: orig(checked), err: cerrs[checked]})
		case rerun || checked >= 0:
			return fail(errGroupAborted)
		}
		errs, ws = cerrs, cws
		if acks != nil {
			errs, ws = acks.expand(cerrs, cws)
		}
	} else if err := p.serialOn(tx, group, errs, ws, held); err != nil {
		return fail(err)
	}
	// The notifications of the calls that committed follow the COMMIT:
	// one round trip.
	b, after := &pgx.Batch{}, &pgx.Batch{}
	relaxed := groupRelaxed(ws)
	p.relaxCommit(relaxed && tx.begun, b)
	if err := p.queueNotifyAll(after, ws...); err != nil {
		return fail(err)
	}
	if committing, err := tx.commitBatch(ctx, b, after); err != nil {
		if committing {
			return nil, nil, fmt.Errorf("%w: %w", errCommitFailed, err)
		}
		return nil, nil, err
	}
	if relaxed {
		p.relaxedCommits.Add(1)
	}
	return errs, ws, nil
}

// serialOn runs the calls of group one after another in tx (whose group
// holds the locks of the instances held), each in a savepoint of its own,
// setting each call's outcome in errs and the
// transaction of each that succeeded in ws. An error broke the
// transaction outside the calls.
func (p *Provider) serialOn(tx *lazyTx, group []sqlstore.Request[*groupOp], errs []error, ws []*wtx, held map[string]bool) error {
	ctx := context.Background()
	sp := []string{sqlGroupSavepoint}
	for i, r := range group {
		stx := &savepointTx{Tx: tx, sp: sp}
		// Dated after the group's lock waits, as a lone call's is after
		// its own.
		w := &wtx{ctx: context.WithoutCancel(r.Ctx), tx: stx, p: p, now: p.now(), groupHeld: held}
		// The call's notifications follow the group's COMMIT (below).
		err := runOp(r.Op.fn, w)
		if stx.sp != nil {
			// The call sent nothing: its savepoint is still to open.
			if err != nil {
				errs[i] = err
			} else {
				ws[i] = w
			}
			continue
		}
		sp = []string{sqlGroupRelease, sqlGroupSavepoint}
		if err != nil {
			errs[i] = err
			if _, err := tx.Exec(ctx, sqlGroupRollback); err != nil {
				return err
			}
			continue
		}
		ws[i] = w
	}
	return nil
}

// groupRelaxed reports whether every call of a group that succeeded (ws,
// nil for a call that failed and wrote nothing) was relaxed: only then may
// the group commit without waiting for the WAL flush.
func groupRelaxed(ws []*wtx) bool {
	for _, w := range ws {
		if w != nil && !w.relaxed {
			return false
		}
	}
	return true
}

// runOp calls fn, turning a panic into an error, so that one call cannot
// take down the group's other calls with it.
func runOp(fn func(w *wtx) error, w *wtx) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("internal error: %v", rec)
		}
	}()
	return fn(w)
}

// groupLocks lists the instance locks the calls of group declared, in
// instance order, each once, exclusive if any call takes it so.
func groupLocks(group []sqlstore.Request[*groupOp]) (ids []string, exclusive []bool) {
	mode := map[string]bool{}
	for _, r := range group {
		for _, l := range r.Op.locks {
			if l.Instance == "" {
				continue // a call that locks no instance (sqlstore.WorkFetchLocks)
			}
			mode[l.Instance] = mode[l.Instance] || l.Exclusive
		}
	}
	for id := range mode {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	exclusive = make([]bool, len(ids))
	for i, id := range ids {
		exclusive[i] = mode[id]
	}
	return ids, exclusive
}
