package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Pipelined groups.
//
// A group run call after call (groupOn's serial mode) pays a round trip
// per call, and its calls are almost all one batch each (acks, enqueues)
// or two (fetches). So a group runs its calls at once: each call runs on a goroutine of its own over a pipeTx,
// whose statements are not sent but handed to the group (a round); once
// every call still running has handed over its next batch, the group
// sends all of them as one pipeline, in call order, and gives each call
// its results. A group of acks then costs one round trip for its calls
// (headed by the statement that takes the group's locks) and one for its
// COMMIT, whatever its size.
//
// The calls of one round run in order on the server (pipelineOrder). A
// call may run a further round only while no call after it in order has
// sent anything (the calls that declare no instance, fetches, go last;
// fetches of different kinds touch different rows); otherwise the group is
// rolled back and runs again in serial mode (serialEquivalent).
// So the server runs the statements of the group exactly as it would run
// the calls one after another, in some order: whatever the calls share.
//
// There are no savepoints: a call that fails after it sent something (a
// statement failed, which aborts the transaction, or the call returned an
// error) rolls the whole group back, and every call runs again alone, as
// when a group's locks time out, so one call's failure never reaches
// another: each caller gets the outcome of its call run alone. The
// expected failures of acks, the checks that stop an ack's batch before it
// writes (a lost lock, an instance found not quiet), cost less: the group
// is rolled back, the ack fails with its check's error (as it would have
// had it run alone after the calls before it), and the other calls run
// again as a group without it. A call that fails
// before sending anything wrote nothing and simply fails. A call that
// needs what a pipeTx does not offer (a streamed query, COPY) runs again
// alone once the group committed.

// errRunAlone is the error a pipeTx returns for what it cannot pipeline:
// the call runs again alone.
var errRunAlone = errors.New("postgres: the call cannot be pipelined")

// errGroupAborted is what a call still waiting for its round gets when
// the group is abandoned (its round failed): the call's outcome is
// discarded and it runs again alone.
var errGroupAborted = errors.New("postgres: the group was rolled back")

// errGroupSerial is what groupOn returns for a pipelined group that must
// run again call after call (see serialEquivalent).
var errGroupSerial = errors.New("postgres: the group must run call after call")

// pipelinable reports whether the calls of group may run pipelined: not
// with two fetches of one kind, each of which would need its second round
// after the other's first (see serialEquivalent), which would only make the
// group run again call after call.
func pipelinable(group []sqlstore.Request[*groupOp]) bool {
	kinds := map[string]bool{}
	for _, r := range group {
		kind := fetchKind(r.Op)
		if kind == "" {
			continue
		}
		if kinds[kind] {
			return false
		}
		kinds[kind] = true
	}
	return true
}

// roundSend is a batch a call hands to its group.
type roundSend struct {
	call  int
	batch *pgx.Batch // nil: the call returned err
	// private: the batch only reads rows no other call writes (see
	// pipeTx.private).
	private bool
	err     error
	reply   chan error // the call's outcome of the round
}

// pipeTx is a group's transaction as one pipelined call sees it: it
// implements what the store's write transactions use of pgx.Tx by handing
// every statement to the group (send) and waiting for its round.
type pipeTx struct {
	pgx.Tx
	call  int
	sends chan<- roundSend
	sent  bool // the call handed over a batch
	// rounds counts the rounds the call's batches were sent in.
	rounds int
	// private marks the next batch as one that only reads rows no other
	// call of the group writes (a turn ack's check of its own lock, under
	// its instance's lock): it could run right before the call's next
	// round as well, so that round may follow what other calls sent
	// meanwhile (serialEquivalent).
	private bool
	// shared: a batch of the call's sent so far was not private.
	shared bool
}

// markPrivate marks the next batch tx sends as private (see
// pipeTx.private); it does nothing to a transaction that is not a
// pipelined call's.
func markPrivate(tx pgx.Tx) {
	if t, ok := tx.(*pipeTx); ok {
		t.private = true
	}
}

// round hands b to the group and waits for the outcome of the call's part
// of the round.
func (t *pipeTx) round(b *pgx.Batch) error {
	t.sent = true
	reply := make(chan error, 1)
	t.sends <- roundSend{call: t.call, batch: b, private: t.private, reply: reply}
	t.private = false
	return <-reply
}

func (t *pipeTx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	return errBatch{t.round(b)}
}

func (t *pipeTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	var tag pgconn.CommandTag
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	err := t.round(b)
	return tag, err
}

func (t *pipeTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	return &pipeRow{t: t, sql: sql, args: args}
}

func (t *pipeTx) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errRunAlone
}

func (t *pipeTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errRunAlone
}

// pipeRow is a QueryRow of a pipelined call: sent when scanned.
type pipeRow struct {
	t    *pipeTx
	sql  string
	args []any
}

func (r *pipeRow) Scan(dest ...any) error {
	b := &pgx.Batch{}
	b.Queue(r.sql, r.args...).QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	return r.t.round(b)
}

// errBatch is the results of a batch whose callbacks already ran: Close
// returns their outcome.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errRunAlone }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, errRunAlone }
func (b errBatch) QueryRow() pgx.Row                { return errRow{errRunAlone} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// pipelineOn runs the calls of group pipelined in tx, each with its wtx
// in ws; locks, if set, takes the group's locks (of the instances held)
// at the head of the first round. It returns each call's outcome,
// whether every call must run again alone (the group must then be rolled
// back: a call failed after it sent something, or a round failed),
// whether the group must run again in serial mode (rolled back too: a call
// needed a further round after calls behind it ran, see serialEquivalent),
// the call whose check failed a round (an ack whose lock was lost or whose
// instance was not quiet, -1 if none: its error is its outcome, and the
// others run again without it), and an error that broke the transaction
// outside the calls.
func (p *Provider) pipelineOn(tx *lazyTx, group []sqlstore.Request[*groupOp], ws []*wtx, locks *pgx.QueuedQuery, held map[string]bool) (errs []error, rerun, serial bool, checked int, err error) {
	ctx := context.Background()
	checked = -1
	n := len(group)
	sends := make(chan roundSend, n)
	txs := make([]*pipeTx, n)
	for i, r := range group {
		txs[i] = &pipeTx{call: i, sends: sends}
		w := &wtx{ctx: context.WithoutCancel(r.Ctx), tx: txs[i], p: p, now: p.now(), groupHeld: held}
		ws[i] = w
		go func() {
			err := runOp(r.Op.fn, w)
			sends <- roundSend{call: i, err: err}
		}()
	}
	order := pipelineOrder(group)
	kinds := make([]string, n)
	for i, r := range group {
		kinds[i] = fetchKind(r.Op)
	}
	errs = make([]error, n)
	live := n
	pending := make([]*roundSend, n)
	for live > 0 {
		// Wait until every running call handed over a batch or returned.
		waiting := 0
		for waiting < live {
			s := <-sends
			if s.batch == nil {
				errs[s.call] = s.err
				live--
				continue
			}
			pending[s.call] = &s
			waiting++
		}
		if waiting == 0 {
			break
		}
		if !rerun && !serial && !serialEquivalent(order, kinds, pending, txs) {
			// A call needs another round after calls behind it ran
			// theirs: run the group again call after call.
			serial = true
		}
		if rerun || serial {
			// A round failed: release the waiting calls.
			for i, s := range pending {
				if s != nil {
					s.reply <- errGroupAborted
					pending[i] = nil
				}
			}
			continue
		}
		callErrs := make([]error, n)
		merged := &pgx.Batch{}
		if locks != nil {
			// The group's locks (held) head its first round. The calls
			// were dated before their waits: a turn ack re-dates the
			// leases it took if its batch ran long, and a fetch the
			// locks it took if they expired meanwhile.
			merged.QueuedQueries = append(merged.QueuedQueries, locks)
			locks = nil
		}
		for _, i := range order {
			s := pending[i]
			if s == nil {
				continue
			}
			txs[i].rounds++
			txs[i].shared = txs[i].shared || !s.private
			for _, q := range s.batch.QueuedQueries {
				merged.QueuedQueries = append(merged.QueuedQueries, wrapQuery(q, &callErrs[i]))
			}
		}
		if rerr := tx.SendBatch(ctx, merged).Close(); rerr != nil {
			// A statement failed (the transaction is aborted) or the
			// connection broke: nothing of the group stands.
			rerun = true
			if tx.conn.IsClosed() {
				err = rerr
			}
			for _, i := range order {
				if pending[i] != nil && isCheckFailure(callErrs[i]) {
					checked = i
					break
				}
			}
		}
		for i, s := range pending {
			if s == nil {
				continue
			}
			e := callErrs[i]
			if rerun && i != checked {
				e = errGroupAborted
			}
			s.reply <- e
			pending[i] = nil
		}
	}
	for i, t := range txs {
		if errs[i] == nil {
			continue
		}
		if t.sent {
			// It failed after writing: only a rollback undoes that.
			rerun = true
		}
		// Failed before sending anything: its own error (or, for
		// errRunAlone, a run alone once the group committed).
		ws[i] = nil
	}
	if checked >= 0 && (errs[checked] == nil || errors.Is(errs[checked], errGroupAborted)) {
		checked = -1 // it went on after its check failed: run it alone too
	}
	return errs, rerun, serial, checked, err
}

// isCheckFailure reports whether err is the failure of one of the checks
// that stop an ack's batch before it writes (duroxide_check: a lost lock,
// an instance not quiet): the call's own outcome, whatever ran before it.
func isCheckFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "DX")
}

// pipelineOrder is the order in which the calls of group run: the calls
// that take an instance exclusively (turn acks, activity acks carrying
// their turn) first, then those that only send messages to instances
// (enqueues, plain activity acks), then those that declare none (fetches,
// whose second round then follows every other call's only one). Any order
// is one the group's calls could have run in, and this one runs a turn
// before the messages that arrive for its instance in the same group, so
// that an activity ack's turn (WorkAck.Then) does not find the instance
// busy with them.
func pipelineOrder(group []sqlstore.Request[*groupOp]) []int {
	order := make([]int, len(group))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return pipelineRank(group[a].Op) - pipelineRank(group[b].Op) })
	return order
}

// pipelineRank is op's place in pipelineOrder: 0 for a call that takes an
// instance exclusively, 1 for one that only sends messages, 2 for one
// that declares no instance.
func pipelineRank(op *groupOp) int {
	switch {
	case len(op.locks) == 0:
		return 2
	case slices.ContainsFunc(op.locks, func(l sqlstore.Lock) bool { return l.Exclusive }):
		return 0
	}
	return 1
}

// fetchKind is the kind of a call that declares no instance (its op, a
// fetch of turns served or unserved counting as one), "" for the others.
func fetchKind(op *groupOp) string {
	if len(op.locks) > 0 {
		return ""
	}
	return strings.Replace(op.op, "unserved ", "", 1)
}

// serialEquivalent reports whether the round the calls pending hand over
// keeps the group equivalent to running its calls one after another in
// order: a call may run a further round only if no call after it in order
// has sent anything, but fetches of different kinds (turns, work items),
// which touch different rows, may interleave, and a call whose rounds so
// far were private (they read only rows no other call writes) may go on:
// it is as if they ran right before this one.
func serialEquivalent(order []int, kinds []string, pending []*roundSend, txs []*pipeTx) bool {
	for k, i := range order {
		if pending[i] == nil || txs[i].rounds == 0 || !txs[i].shared {
			continue
		}
		for _, j := range order[k+1:] {
			sent := txs[j].rounds > 0 || pending[j] != nil
			if sent && (kinds[i] == "" || kinds[j] == "" || kinds[i] == kinds[j]) {
				return false
			}
		}
	}
	return true
}

// wrapQuery returns q with a callback that runs q's own (or reads its
// result, as a batch does for a query without one) and keeps its error in
// *callErr instead of stopping the batch: the other calls' results must
// still be read. After the call's first error its later results are only
// read, as a batch skips the callbacks after a failed one. A statement
// that failed on the server still stops the batch (pgx records it), and
// the round fails.
func wrapQuery(q *pgx.QueuedQuery, callErr *error) *pgx.QueuedQuery {
	own := q.Fn
	nq := &pgx.QueuedQuery{SQL: q.SQL, Arguments: q.Arguments}
	nq.Fn = func(br pgx.BatchResults) error {
		if own == nil || *callErr != nil {
			_, err := br.Exec()
			if *callErr == nil {
				*callErr = err
			}
			return nil
		}
		if err := own(br); err != nil {
			*callErr = err
		}
		return nil
	}
	return nq
}
