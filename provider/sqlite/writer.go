package sqlite

import (
	"context"
	"fmt"

	"github.com/duroxide/duroxide-go/provider"
)

// Group commit.
//
// Every write of the store runs on the one writer connection, one
// transaction at a time. A caller that finds the writer idle becomes the
// leader and runs its request inline, in its own transaction. Callers that
// arrive while a transaction runs queue up; when it ends, the leader hands
// the writer to the oldest of them, which runs all the queued requests
// (up to maxGroup) together in one transaction, each inside its own
// savepoint, and commits once. A commit (the WAL append, and with
// synchronous=FULL the fsync) is the dominant cost of a small transaction,
// so concurrent callers share it, while a lone caller pays no hand-over.
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

// writeReq is one write request.
type writeReq struct {
	ctx  context.Context
	fn   func(w *wtx) error
	done chan error    // the outcome, once committed or failed
	lead chan struct{} // the writer is handed to this request's caller
}

// write runs fn in a write transaction (possibly shared with other
// requests, each in its own savepoint) and returns once that transaction
// committed or fn failed. fn must reset its outputs when it starts.
func (p *Provider) write(ctx context.Context, op string, fn func(w *wtx) error) error {
	if p.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := p.prepare(ctx); err != nil {
		return p.fail(op, err)
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	if p.testHookSubmit != nil {
		p.testHookSubmit()
	}
	p.wmu.Lock()
	if p.wclosed {
		p.wmu.Unlock()
		return fmt.Errorf("sqlite: %s: %w", op, provider.ErrClosed)
	}
	p.pending = append(p.pending, r)
	leader := !p.leading
	p.leading = true
	p.wmu.Unlock()
	if !leader {
		// Once queued, wait for the outcome even if ctx ends: returning early
		// could hide a committed fetch whose locks nobody would release. A
		// request whose ctx ended before it ran is not run.
		select {
		case err := <-r.done:
			return p.fail(op, err)
		case <-r.lead:
		}
	}
	p.lead()
	return p.fail(op, <-r.done)
}

// lead runs the queued requests (the leader's own is the oldest) as one
// group, then hands the writer to the oldest request still queued, or
// leaves it idle.
func (p *Provider) lead() {
	p.wmu.Lock()
	n := min(len(p.pending), maxGroup)
	group := make([]*writeReq, n)
	copy(group, p.pending)
	p.pending = append(p.pending[:0], p.pending[n:]...)
	p.wmu.Unlock()

	if len(group) == 1 {
		p.runAlone(group[0])
	} else {
		p.runGroup(group)
	}

	p.wmu.Lock()
	if len(p.pending) > 0 {
		p.pending[0].lead <- struct{}{}
	} else {
		p.leading = false
		p.wcond.Broadcast()
	}
	p.wmu.Unlock()
}

// runAlone runs one request in its own transaction.
func (p *Provider) runAlone(r *writeReq) {
	if err := r.ctx.Err(); err != nil {
		r.done <- err
		return
	}
	tx, err := p.writer.BeginTx(context.Background(), nil)
	if err != nil {
		r.done <- interpretError(err, nil)
		return
	}
	// The statements ignore cancellation: interrupting a statement can roll
	// back the whole transaction, and a request runs for milliseconds.
	w := &wtx{ctx: context.WithoutCancel(r.ctx), tx: tx, p: p, now: p.now(), stmts: new(txStmts)}
	p.checkForeignCommits(w)
	if err := run(r.fn, w); err != nil {
		_ = tx.Rollback()
		r.done <- err
		return
	}
	err = interpretError(p.counted(tx.Commit()), nil)
	if err == nil {
		p.notify(&w.changes)
	}
	r.done <- err
}

// runGroup runs several requests in one transaction, each in a savepoint.
func (p *Provider) runGroup(group []*writeReq) {
	p.groups.Add(1)
	results := make([]error, len(group))
	tx, err := p.writer.BeginTx(context.Background(), nil)
	if err != nil {
		err = interpretError(err, nil)
		for _, r := range group {
			r.done <- err
		}
		return
	}
	broken := false
	stmts := new(txStmts)
	p.checkForeignCommits(&wtx{ctx: context.Background(), tx: tx, p: p, stmts: stmts})
	txs := make([]*wtx, len(group))
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		w := &wtx{ctx: context.WithoutCancel(r.ctx), tx: tx, p: p, now: p.now(), stmts: stmts}
		txs[i] = w
		if _, err := w.exec(sGroupSavepoint, nil); err != nil {
			broken = true
			break
		}
		if err := run(r.fn, w); err != nil {
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
		if err := p.counted(tx.Commit()); err != nil {
			// Nothing of the group was written; let each request try alone.
			broken = true
		}
	} else {
		_ = tx.Rollback()
	}
	if broken {
		p.brokenGroups.Add(1)
		for _, r := range group {
			p.runAlone(r)
		}
		return
	}
	for i, r := range group {
		if results[i] == nil && txs[i] != nil {
			p.notify(&txs[i].changes)
		}
		r.done <- results[i]
	}
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

// stopWriter refuses new write requests and waits until the queued ones
// have run.
func (p *Provider) stopWriter() {
	p.wmu.Lock()
	p.wclosed = true
	for p.leading {
		p.wcond.Wait()
	}
	p.wmu.Unlock()
}
