package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

func (w *wtx) insertWork(e *sqlenc.Work) error {
	visible := e.VisibleAt
	if visible == 0 {
		visible = w.now
	}
	_, err := w.exec(sInsertWork, nil, e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), visible, w.now)
	w.changes.work = true
	return err
}

// insertLeased inserts e as insertWork does, but not yet visible, and
// returns its row ID for leaseInserted. Nobody is woken: it is the
// caller's.
func (w *wtx) insertLeased(e *sqlenc.Work) (int64, error) {
	var id int64
	err := w.query(sInsertWorkReturning, func(r *sql.Rows) error { return r.Scan(&id) },
		e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), w.now+1, w.now)
	return id, err
}

// leaseInserted locks the rows ids (inserted by insertLeased; those the
// same ack canceled are gone) for lockMs, as a fetch does, and returns
// their leases in insertion order. byID gives each row's message.
//
// The lease is dated from the clock read now, not from the start of the
// (group) transaction: an ack delayed longer than lockMs still hands out a
// live lease (see sqlenc.UnexpiredLeases for the commit itself).
func (w *wtx) leaseInserted(ids []int64, byID map[int64]*provider.WorkerMessage, lockMs int64) ([]*provider.WorkItemLease, error) {
	until := w.p.now() + lockMs
	var rows []workRow
	err := w.query(sLockWork, func(r *sql.Rows) error {
		var wr workRow
		l := &wr.lease
		if err := r.Scan(&wr.id, &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID, &l.SessionID, &wr.data, &l.AttemptCount); err != nil {
			return err
		}
		l.LockedUntil = msTime(until)
		l.Item = byID[wr.id].Item
		rows = append(rows, wr)
		return nil
	}, sqlstore.NewTokenPrefix(), jsonInts(ids), until)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b workRow) int { return cmp.Compare(a.id, b.id) })
	leases := make([]*provider.WorkItemLease, len(rows))
	for i := range rows {
		leases[i] = &rows[i].lease
	}
	return leases, nil
}

// workRow is one locked worker-queue row before decoding.
type workRow struct {
	lease provider.WorkItemLease
	id    int64
	data  []byte
}

// FetchWorkItems locks up to opts.Max worker rows, oldest first, each with
// its own token; see provider.Provider.
func (p *Provider) FetchWorkItems(ctx context.Context, opts provider.WorkFetchOptions) ([]*provider.WorkItemLease, error) {
	const op = "fetching work items"
	limit, err := sqlenc.WorkFetchLimit(opts)
	if err != nil {
		return nil, p.fail(op, err)
	}
	var (
		leases []*provider.WorkItemLease
		dead   []deadLetter
	)
	err = p.write(ctx, op, func(w *wtx) error {
		var err error
		leases, dead, err = w.fetchWork(limit, sqlenc.DurMs(opts.LockTimeout), opts.Session)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.logDeadLetters(dead)
	return leases, nil
}

type workCandidate struct {
	id      int64
	session sql.NullString
}

func (w *wtx) fetchWork(limit int, lockMs int64, sess *provider.SessionOptions) ([]*provider.WorkItemLease, []deadLetter, error) {
	until := w.now + lockMs
	prefix := sqlstore.NewTokenPrefix()
	var (
		leases  []*provider.WorkItemLease
		dead    []deadLetter
		after   int64
		claimed map[string]bool // session -> claim succeeded, within this fetch
	)
	for len(leases) < limit {
		var cands []workCandidate
		scan := func(r *sql.Rows) error {
			var c workCandidate
			if err := r.Scan(&c.id, &c.session); err != nil {
				return err
			}
			cands = append(cands, c)
			return nil
		}
		var err error
		if sess == nil {
			err = w.query(sWorkCandidatesNoSession, scan, w.now, after)
		} else {
			err = w.query(sWorkCandidatesSession, scan, w.now, after, sess.OwnerID)
		}
		if err != nil {
			return nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		cands = cands[:min(len(cands), limit-len(leases))]
		after = cands[len(cands)-1].id

		ids := make([]int64, 0, len(cands))
		for _, c := range cands {
			if c.session.Valid {
				ok, seen := claimed[c.session.String]
				if !seen {
					n, err := w.exec(sClaimSession, nil, c.session.String, sess.OwnerID, w.now+sqlenc.DurMs(sess.LockTimeout), w.now)
					if err != nil {
						return nil, nil, err
					}
					ok = n > 0
					if claimed == nil {
						claimed = make(map[string]bool)
					}
					claimed[c.session.String] = ok
				}
				if !ok {
					continue // another owner holds the session
				}
			}
			ids = append(ids, c.id)
		}
		if len(ids) == 0 {
			continue
		}

		var rows []workRow
		err = w.query(sLockWork, func(r *sql.Rows) error {
			var wr workRow
			l := &wr.lease
			if err := r.Scan(&wr.id, &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID,
				&l.SessionID, &wr.data, &l.AttemptCount); err != nil {
				return err
			}
			l.LockedUntil = msTime(until)
			rows = append(rows, wr)
			return nil
		}, prefix, jsonInts(ids), until)
		if err != nil {
			return nil, nil, err
		}
		slices.SortFunc(rows, func(a, b workRow) int { return cmp.Compare(a.id, b.id) })
		for i := range rows {
			wr := &rows[i]
			item, derr := history.DecodeWorkItem(wr.data)
			if derr != nil {
				if err := w.deadLetter(queueWorker, sDeleteWork, wr.id, wr.lease.InstanceID, wr.data, derr); err != nil {
					return nil, nil, err
				}
				dead = append(dead, deadLetter{queue: queueWorker, instanceID: wr.lease.InstanceID, id: wr.id, err: derr})
				continue
			}
			wr.lease.Item = item
			lease := wr.lease
			leases = append(leases, &lease)
		}
	}
	return leases, dead, nil
}

// takenTurn is the turn a work ack took (WorkAck.TakeTurn), before its
// history is decoded.
type takenTurn struct {
	item      *provider.OrchestrationItem
	histories map[string][]sqlstore.StoredEvent
	dead      []deadLetter
}

// workAckResult is what a work ack's transaction produced.
type workAckResult struct {
	taken   takenTurn // the turn TakeTurn took
	applied bool      // WorkAck.Then was applied
	leased  []*provider.WorkItemLease
}

// AckWorkItem completes one activity; see provider.Provider. Concurrent
// acks share a transaction (group commit), each in its own savepoint.
func (p *Provider) AckWorkItem(ctx context.Context, ack *provider.WorkAck) error {
	const op = "acking work item"
	e, err := sqlenc.EncodeWorkAck(ack)
	if err != nil {
		return p.fail(op, err)
	}
	ack.ThenApplied = false
	var res workAckResult
	err = p.write(ctx, op, func(w *wtx) error {
		var err error
		res, err = w.applyWorkAck(e)
		return err
	})
	if err != nil {
		return err
	}
	if res.applied {
		ack.ThenApplied, ack.Then.Leased = true, sqlenc.UnexpiredLeases(res.leased, p.clock())
		return nil
	}
	taken := res.taken
	p.logDeadLetters(taken.dead)
	if taken.item != nil {
		decodeHistories([]*provider.OrchestrationItem{taken.item}, taken.histories)
		ack.Turn = taken.item
	}
	return nil
}

func (w *wtx) applyWorkAck(e *sqlenc.WorkAck) (res workAckResult, err error) {
	id, ok := sqlstore.TokenRow(e.Token)
	if !ok {
		return res, fmt.Errorf("work ack: unknown token: %w", provider.ErrLockLost)
	}
	found := false
	var sess sql.NullString
	err = w.query(sAckWork, func(r *sql.Rows) error {
		found = true
		return r.Scan(&sess)
	}, id, e.Token, w.now)
	if err != nil {
		return res, err
	}
	if !found {
		return res, fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if sess.Valid {
		if _, err := w.exec(sTouchSession, nil, sess.String, w.now); err != nil {
			return res, err
		}
	}
	if e.Then != nil {
		inst := e.Completion.InstanceID
		var quiet bool
		err := w.query(sInstanceQuiet, func(r *sql.Rows) error { return r.Scan(&quiet) },
			inst, e.Then.ExecutionID, e.ThenAfter, w.now)
		if err != nil {
			return res, err
		}
		if quiet {
			if err := w.applyTurn(inst, e.Then); err != nil {
				return res, err
			}
			res.applied = true
			if len(w.leaseIDs) > 0 {
				res.leased, err = w.leaseInserted(w.leaseIDs, w.leaseMsgs, e.Then.LeaseMs)
			}
			return res, err
		}
	}
	if e.Completion != nil {
		if err := w.insertMessage(e.Completion); err != nil {
			return res, err
		}
	}
	if e.TakeMs > 0 {
		err = w.takeTurn(e.Completion.InstanceID, e.TakeMs, e.Cached, &res.taken)
	}
	return res, err
}

// takeTurn locks instance, if its lock is free, and loads its turn into
// taken (WorkAck.TakeTurn). Nobody else is woken for it: it is the caller's.
func (w *wtx) takeTurn(instance string, lockMs int64, cached func(string) (int64, int64, bool), taken *takenTurn) error {
	// While other activities of the instance are queued or running, their
	// results should reach one turn together: leave it to a fetch.
	var busy bool
	if err := w.query(sInstanceHasWork, func(r *sql.Rows) error { return r.Scan(&busy) }, instance); err != nil || busy {
		return err
	}
	prefix := sqlstore.NewTokenPrefix()
	items, _, dead, err := w.lockTurns([]string{instance}, prefix, w.p.now()+lockMs) // dated after the waits, as leaseInserted
	if err != nil || len(items) == 0 {
		taken.dead = dead
		return err
	}
	histories, err := w.loadTurns(items, cached)
	if err != nil {
		return err
	}
	if err := w.redate(items, prefix, lockMs); err != nil {
		return err
	}
	*taken = takenTurn{item: items[0], histories: histories, dead: dead}
	w.changes.orch = false // the completion's turn is taken; nothing else was queued
	return nil
}

// AbandonWorkItem unlocks a worker row; see provider.Provider.
func (p *Provider) AbandonWorkItem(ctx context.Context, lockToken string, opts provider.AbandonOptions) error {
	const op = "abandoning work item"
	if opts.Delay < 0 {
		return p.fail(op, sqlenc.Invalid("Delay %v is negative", opts.Delay))
	}
	undo := 0
	if opts.IgnoreAttempt {
		undo = 1
	}
	var lastErr any // NULL: clears the row's error
	if opts.Error != nil {
		if err := opts.Error.Validate(); err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
		b, err := json.Marshal(opts.Error)
		if err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
		lastErr = string(b)
	}
	id, ok := sqlstore.TokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		n, err := w.exec(sAbandonWork, nil, id, lockToken, w.now, w.now+sqlenc.DurMs(opts.Delay), undo, lastErr)
		if err != nil {
			return err
		}
		if n == 0 {
			return provider.ErrLockLost
		}
		w.changes.work = true
		return nil
	})
}

// RenewWorkItemLock extends a valid worker lock and refreshes its
// session's activity time; see provider.Provider.
func (p *Provider) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	const op = "renewing work item lock"
	if extendFor <= 0 {
		return p.fail(op, sqlenc.Invalid("extendFor %v must be positive", extendFor))
	}
	id, ok := sqlstore.TokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		found := false
		var sess sql.NullString
		err := w.query(sRenewWork, func(r *sql.Rows) error {
			found = true
			return r.Scan(&sess)
		}, id, lockToken, w.now, w.now+sqlenc.DurMs(extendFor))
		if err != nil {
			return err
		}
		if !found {
			return provider.ErrLockLost
		}
		if sess.Valid {
			_, err = w.exec(sTouchSession, nil, sess.String, w.now)
		}
		return err
	})
}

// enqueueWork inserts worker messages atomically, all or none. The
// runtime enqueues activities through turn acks; the tests enqueue work
// directly with it.
func (p *Provider) enqueueWork(ctx context.Context, msgs ...*provider.WorkerMessage) error {
	return enqueueAll(ctx, p, "enqueueing work", msgs, sqlenc.EncodeWork, (*wtx).insertWork)
}

// RenewSessionLocks extends the leases of the owners' active sessions; see
// provider.Provider.
func (p *Provider) RenewSessionLocks(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	const op = "renewing session locks"
	if extendFor <= 0 {
		return 0, p.fail(op, sqlenc.Invalid("extendFor %v must be positive", extendFor))
	}
	if idleTimeout < 0 {
		return 0, p.fail(op, sqlenc.Invalid("idleTimeout %v is negative", idleTimeout))
	}
	if len(ownerIDs) == 0 {
		if p.closed.Load() {
			return 0, p.fail(op, provider.ErrClosed)
		}
		return 0, nil
	}
	var n int64
	err := p.write(ctx, op, func(w *wtx) error {
		var err error
		n, err = w.exec(sRenewSessions, nil, jsonStrings(ownerIDs), w.now, w.now+sqlenc.DurMs(extendFor), w.now-sqlenc.DurMs(idleTimeout))
		return err
	})
	return int(n), err
}

// CleanupOrphanedSessions deletes expired sessions no worker row refers
// to; see provider.Provider.
func (p *Provider) CleanupOrphanedSessions(ctx context.Context) (int, error) {
	var n int64
	err := p.write(ctx, "cleaning up sessions", func(w *wtx) error {
		var err error
		n, err = w.exec(sCleanupSessions, nil, w.now)
		// Rows of a deleted session are claimable by any worker now.
		w.changes.work = n > 0
		return err
	})
	return int(n), err
}
