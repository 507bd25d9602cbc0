package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

func isDuplicateEvent(err error) bool { return errors.Is(err, provider.ErrDuplicateEvent) }

// workRow is one locked worker-queue row before decoding.
type workRow struct {
	lease provider.WorkItemLease
	id    int64
	data  []byte
}

// lockWork locks the rows ids with tokens prefix+id until until and
// returns them in id order, not yet decoded.
func (w *wtx) lockWork(prefix string, ids []int64, until int64) ([]workRow, error) {
	var rows []workRow
	err := w.query(sqlLockWork, func(r pgx.Rows) error {
		var wr workRow
		l := &wr.lease
		if err := r.Scan(&wr.id, &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID,
			&l.SessionID, &wr.data, &l.AttemptCount); err != nil {
			return err
		}
		l.LockedUntil = msTime(until)
		rows = append(rows, wr)
		return nil
	}, prefix, ids, until)
	slices.SortFunc(rows, func(a, b workRow) int { return cmp.Compare(a.id, b.id) })
	return rows, err
}

// leaseInserted locks the rows ids (inserted by a turn ack to lease to its
// caller; those the same ack canceled are gone) for lockMs, as a fetch
// does, and returns their leases in insertion order. byID gives each row's
// message.
//
// The lease is dated from the clock read now, after every lock the ack
// waited for, not from the transaction's start: an ack delayed longer than
// lockMs still hands out a live lease (see sqlenc.UnexpiredLeases for the
// commit itself).
func (w *wtx) leaseInserted(ids []int64, byID map[int64]*provider.WorkerMessage, lockMs int64) ([]*provider.WorkItemLease, error) {
	rows, err := w.lockWork(sqlstore.NewTokenPrefix(), ids, w.p.now()+lockMs)
	if err != nil {
		return nil, err
	}
	leases := make([]*provider.WorkItemLease, len(rows))
	for i := range rows {
		rows[i].lease.Item = byID[rows[i].id].Item
		leases[i] = &rows[i].lease
	}
	return leases, nil
}

// FetchWorkItems locks up to opts.Max worker rows, oldest first, each with
// its own token; see provider.Provider. Rows another transaction is locking
// are skipped (FOR UPDATE SKIP LOCKED), never waited for.
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
		leases, dead, err = w.fetchWork(limit, opts.LockTimeout, opts.Session)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.logDeadLetters(dead)
	return leases, nil
}

func (w *wtx) fetchWork(limit int, lockTimeout time.Duration, sess *provider.SessionOptions) ([]*provider.WorkItemLease, []deadLetter, error) {
	until := w.now + sqlenc.DurMs(lockTimeout)
	prefix := sqlstore.NewTokenPrefix()
	var (
		leases  []*provider.WorkItemLease
		dead    []deadLetter
		skip    = []int64{}         // rows of sessions another owner holds
		claimed = map[string]bool{} // session -> claim succeeded, within this fetch
	)
	type candidate struct {
		id      int64
		session *string
	}
	for len(leases) < limit {
		var cands []candidate
		scan := func(r pgx.Rows) error {
			var c candidate
			if err := r.Scan(&c.id, &c.session); err != nil {
				return err
			}
			cands = append(cands, c)
			return nil
		}
		var err error
		want := limit - len(leases)
		if sess == nil {
			err = w.query(sqlWorkCandidatesNoSession, scan, w.now, want)
		} else {
			err = w.query(sqlWorkCandidatesSession, scan, w.now, want, sess.OwnerID, skip)
		}
		if err != nil {
			return nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		ids := make([]int64, 0, len(cands))
		for _, c := range cands {
			if c.session != nil {
				// Claim the session for the owner (or refresh its lease),
				// once per fetch; skip its rows if another owner holds it.
				ok, seen := claimed[*c.session]
				if !seen {
					n, err := w.exec(sqlClaimSession, *c.session, sess.OwnerID, w.now+sqlenc.DurMs(sess.LockTimeout), w.now)
					if err != nil {
						return nil, nil, err
					}
					ok = n > 0
					claimed[*c.session] = ok
				}
				if !ok {
					skip = append(skip, c.id)
					continue
				}
			}
			ids = append(ids, c.id)
		}
		if len(ids) > 0 {
			rows, err := w.lockWork(prefix, ids, until)
			if err != nil {
				return nil, nil, err
			}
			for i := range rows {
				wr := &rows[i]
				item, derr := history.DecodeWorkItem(wr.data)
				if derr != nil {
					if err := w.deadLetter(queueWorker, sqlDeleteWork, wr.id, wr.lease.InstanceID, wr.data, derr); err != nil {
						return nil, nil, err
					}
					dead = append(dead, deadLetter{queue: queueWorker, instanceID: wr.lease.InstanceID, err: derr})
					continue
				}
				wr.lease.Item = item
				lease := wr.lease
				leases = append(leases, &lease)
			}
		}
		if len(cands) < want {
			break // the query saw every visible row it could lock
		}
	}
	return leases, dead, nil
}

// workAckResult is what a work ack's transaction produced.
type workAckResult struct {
	turn    *provider.OrchestrationItem // the turn TakeTurn took
	dead    []deadLetter
	applied bool // WorkAck.Then was applied
	leased  []*provider.WorkItemLease
}

// AckWorkItem completes one activity; see provider.Provider.
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
	p.logDeadLetters(res.dead)
	if err != nil {
		return err
	}
	if res.applied {
		ack.ThenApplied, ack.Then.Leased = true, sqlenc.UnexpiredLeases(res.leased, p.clock())
		return nil
	}
	ack.Turn = res.turn
	return nil
}

func (w *wtx) applyWorkAck(e *sqlenc.WorkAck) (workAckResult, error) {
	id, ok := sqlstore.TokenRow(e.Token)
	if !ok {
		return workAckResult{}, fmt.Errorf("work ack: unknown token: %w", provider.ErrLockLost)
	}
	if e.Then != nil {
		if res, done, err := w.applyThen(id, e); done || err != nil {
			return res, err
		}
	} else if err := w.ackWorkRow(id, e); err != nil {
		return workAckResult{}, err
	}
	if e.TakeMs > 0 {
		turn, dead, err := w.takeTurn(e.Completion.InstanceID, e.TakeMs, e.Cached)
		return workAckResult{turn: turn, dead: dead}, err
	}
	return workAckResult{}, nil
}

// ackWorkRow deletes the acked worker row and enqueues its completion.
//
// Lock order. Every transaction that takes an instance's advisory lock
// and row locks takes the advisory lock first: a turn ack holds it
// (exclusive) when it deletes the activities it cancels
// (TurnAck.CanceledActivities), and a work ack whose completion is for
// that instance takes it (shared) before it deletes its worker row. Were
// the row deleted first, a turn ack canceling that very activity could
// wait for the row while the work ack waited for the advisory lock: a
// deadlock the server breaks by aborting one of them (40P01). A work ack
// without a completion takes no advisory lock and waits for nothing once
// it holds its row, and applyThen keeps the same order.
func (w *wtx) ackWorkRow(id int64, e *sqlenc.WorkAck) error {
	// One round trip: the row's deletion and, for a completion that starts
	// nothing, its enqueueing and the notification (all rolled back if the
	// lock turns out to be lost).
	var found bool
	b := &pgx.Batch{}
	plain := e.Completion != nil && e.Completion.Create == nil
	if plain {
		_ = w.lockInstancesShared(b, []string{e.Completion.InstanceID})
	}
	b.Queue(sqlAckWork, id, e.Token, w.now).QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
	if plain {
		w.queuePlainMessages(b, []*sqlenc.Msg{e.Completion})
		w.queueNotify(b)
	}
	if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if e.Completion != nil && !plain {
		return w.insertMessage(e.Completion)
	}
	return nil
}

// applyThen acks the worker row of a work ack that carries the turn its
// result causes (WorkAck.Then) and, if the instance is quiet (nothing
// happened to it since the caller's copy), applies that turn instead of
// enqueueing the completion: done is then true. Otherwise it enqueues the
// completion, as a plain ack does, and the caller goes on (TakeTurn).
//
// It takes the instance's advisory lock before the quiet check, as a turn
// ack does before its lock check: no fetch can lock the instance and no
// other transaction can add messages or worker rows for it until this one
// ends, so the check stays true while the turn is applied. The advisory
// lock is taken before the worker row (and its session's row), in the
// order a plain work ack and a turn ack take them (see ackWorkRow), so
// neither two acks of one session nor this ack and a turn ack canceling
// its activity wait for each other in a cycle.
func (w *wtx) applyThen(id int64, e *sqlenc.WorkAck) (res workAckResult, done bool, err error) {
	inst := e.Completion.InstanceID
	var found, quiet bool
	b := &pgx.Batch{}
	b.Queue(sqlAdvisoryLock, w.p.lockSpace+inst)
	b.Queue(sqlAckWork, id, e.Token, w.now).QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
	b.Queue(sqlInstanceQuiet, inst, e.Then.ExecutionID, e.ThenAfter, w.now).QueryRow(func(r pgx.Row) error { return r.Scan(&quiet) })
	if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
		return res, false, err
	}
	if !found {
		return res, false, fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if !quiet {
		return res, false, w.insertMessages([]*sqlenc.Msg{e.Completion})
	}
	if err := w.applyTurn(inst, e.Then); err != nil {
		return res, false, err
	}
	res.applied = true
	if len(w.leaseIDs) > 0 {
		res.leased, err = w.leaseInserted(w.leaseIDs, w.leaseMsgs, e.Then.LeaseMs)
	}
	return res, true, err
}

// takeTurn locks instance, if its lock is free and no other transaction
// works on it, and loads its turn (WorkAck.TakeTurn). Nobody else is woken
// for it: it is the caller's.
func (w *wtx) takeTurn(instance string, lockMs int64, cached func(string) (int64, int64, bool)) (*provider.OrchestrationItem, []deadLetter, error) {
	// While other activities of the instance are queued or running, their
	// results should reach one turn together: leave it to a fetch.
	var busy bool
	if err := w.tx.QueryRow(w.ctx, sqlInstanceHasWork, instance).Scan(&busy); err != nil || busy {
		return nil, nil, err
	}
	prefix := sqlstore.NewTokenPrefix()
	items, _, dead, err := w.lockTurns([]string{instance}, nil, prefix, w.p.now()+lockMs) // dated after the waits, as leaseInserted
	if err != nil || len(items) == 0 {
		return nil, dead, err
	}
	if err := w.loadTurns(items, cached); err != nil {
		return nil, nil, err
	}
	if err := w.redate(items, prefix, time.Duration(lockMs)*time.Millisecond); err != nil {
		return nil, nil, err
	}
	w.changes.orch = false // the completion's turn is taken; nothing else was queued
	return items[0], dead, nil
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
	var lastErr *string // nil: clears the row's error
	if opts.Error != nil {
		if err := opts.Error.Validate(); err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
		b, err := json.Marshal(opts.Error)
		if err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
		s := string(b)
		lastErr = &s
	}
	id, ok := sqlstore.TokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		n, err := w.exec(sqlAbandonWork, id, lockToken, w.now, w.now+sqlenc.DurMs(opts.Delay), undo, lastErr)
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
	return p.single(ctx, op, func(ctx context.Context, q querier, now int64) error {
		var held bool
		if err := q.QueryRow(ctx, sqlRenewWork, id, lockToken, now, now+sqlenc.DurMs(extendFor)).Scan(&held); err != nil {
			return err
		}
		if !held {
			return provider.ErrLockLost
		}
		return nil
	})
}

// enqueueWork inserts worker messages atomically, all or none. The
// runtime enqueues activities through turn acks; the tests enqueue work
// directly with it.
func (p *Provider) enqueueWork(ctx context.Context, msgs ...*provider.WorkerMessage) error {
	const op = "enqueueing work"
	enc := make([]*sqlenc.Work, len(msgs))
	for i, m := range msgs {
		e, err := sqlenc.EncodeWork(m)
		if err != nil {
			return p.fail(op, err)
		}
		if e.Lease {
			e.Lease = false // only a turn ack leases
		}
		enc[i] = e
	}
	if len(enc) == 0 {
		if p.closed.Load() {
			return p.fail(op, provider.ErrClosed)
		}
		return nil
	}
	return p.write(ctx, op, func(w *wtx) error {
		b := &pgx.Batch{}
		w.queueWork(b, enc, nil)
		w.changes.work = true
		return w.tx.SendBatch(w.ctx, b).Close()
	})
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
		n, err = w.exec(sqlRenewSessions, ownerIDs, w.now, w.now+sqlenc.DurMs(extendFor), w.now-sqlenc.DurMs(idleTimeout))
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
		n, err = w.exec(sqlCleanupSessions, w.now)
		// Rows of a deleted session are claimable by any worker now.
		w.changes.work = n > 0
		return err
	})
	return int(n), err
}
