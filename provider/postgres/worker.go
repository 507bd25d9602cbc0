package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

func isDuplicateEvent(err error) bool { return errors.Is(err, provider.ErrDuplicateEvent) }

// workRow is one locked worker-queue row before decoding.
type workRow = sqlstore.WorkRow

// lockWork locks the rows ids with tokens prefix+id until until and
// returns them, not yet decoded, in no particular order (fetchWork sorts
// them with the rows its statement locked).
func (w *wtx) lockWork(prefix string, ids []int64, until int64) ([]workRow, error) {
	var rows []workRow
	err := w.query(sqlLockWork, func(r pgx.Rows) error {
		var wr workRow
		l := &wr.Lease
		if err := r.Scan(&wr.ID, &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID,
			&l.SessionID, &wr.Data, &l.AttemptCount); err != nil {
			return err
		}
		l.LockedUntil = msTime(until)
		rows = append(rows, wr)
		return nil
	}, prefix, ids, until)
	return rows, err
}

// FetchWork locks up to limit worker rows, oldest first (by id: the order
// they were queued in), each with its own token; rows another transaction
// is locking are skipped (FOR UPDATE SKIP LOCKED), never waited for. Only
// rows of the given activity names (nil: any) and queues are taken. See
// sqlstore.WorkTx.
func (w *wtx) FetchWork(limit int, lockMs int64, sess *provider.SessionOptions, names, queues []string) ([]*provider.WorkItemLease, []deadLetter, error) {
	leases, dead, claims, err := w.fetchWork(limit, lockMs, sess, names, queues)
	if !w.committed {
		// A session's claim, or a dead-lettering, commits durably; a fetch
		// with a session that claimed none wrote only leases, as one
		// without.
		w.relaxed = claims == 0 && len(dead) == 0
	}
	return leases, dead, err
}

// sqlFetchPlan heads a worker fetch's transaction: its statements use
// the plan their prepared statement was given once on the connection
// (generic), not one planned again at every call (custom), which the
// server chose for the fetch statement and which cost as much as running
// it. The plan must not depend on what the planner estimates of the queue
// when it is made (often empty, at a runtime's start, and never analyzed
// while autovacuum is off): sequential scans are ruled out, so that the
// rows the fetch locks are updated through the primary key, and the
// candidates are read as index ranges, as with custom plans (see
// TestHotFetchPlansAreBounded). A fetch reads no table in full.
const sqlFetchPlan = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// sqlPlanDefault and sqlSeqscanDefault undo sqlFetchPlan for the rest of a
// transaction that goes on after a turn fetch's reads (lockTurns,
// fetchRound in a group).
const (
	sqlPlanDefault    = `SET LOCAL plan_cache_mode TO DEFAULT`
	sqlSeqscanDefault = `SET LOCAL enable_seqscan TO DEFAULT`
)

// fetchWork finds and locks its rows in one statement (sqlFetchWork):
// without a session, a fetch is that one round trip. With one, the rows
// of sessions it found are leased once their sessions are claimed, and
// rows of sessions another owner holds are skipped, the statement running
// again for the rest while it found as many rows as it asked for. claims
// counts the sessions it claimed (or whose lease it refreshed).
//
// Run alone (wtx.fold), the statement carries the transaction's COMMIT,
// relaxed, and notifications (sendLast): the fetch is one round trip.
// With a session option it is refused (codeNotLast, nothing written) when
// it finds a row of a session, and runs again committing separately; the
// store then stops folding such fetches (Provider.sessionRows). A row
// that cannot be decoded is dead-lettered after that COMMIT, in a
// transaction of its own, which also fetches rows in its place.
func (w *wtx) fetchWork(limit int, lockMs int64, sess *provider.SessionOptions, names, queues []string) (leases []*provider.WorkItemLease, dead []deadLetter, claims int, err error) {
	until := w.now + lockMs
	route := routeArgs(names, queues)
	prefix := sqlstore.NewTokenPrefix()
	var (
		skip    = []int64{}         // rows of sessions another owner holds
		claimed = map[string]bool{} // session -> claim succeeded, within this fetch
	)
	type candidate struct {
		id      int64
		session string
	}
	named := 0
	if names != nil {
		named = 1
	}
	first := true
	for len(leases) < limit {
		var (
			rows  []workRow
			cands []candidate
		)
		scan := func(r pgx.Rows) error {
			var (
				wr      workRow
				session *string
				token   *string
			)
			l := &wr.Lease
			if err := r.Scan(&wr.ID, &session, &token, &l.InstanceID, &l.ExecutionID, &l.ActivityID,
				&l.SessionID, &wr.Data, &l.AttemptCount); err != nil {
				return err
			}
			if session != nil {
				cands = append(cands, candidate{wr.ID, *session})
				return nil
			}
			l.LockToken, l.LockedUntil = *token, msTime(until)
			rows = append(rows, wr)
			return nil
		}
		want := limit - len(leases)
		sql, args := sqlFetchWork[named][0], []any{w.now, want, route[0], route[1], prefix, until}
		if sess != nil {
			sql, args = sqlFetchWork[named][1], append(args, sess.OwnerID, skip)
		}
		b := &pgx.Batch{}
		if first {
			// Planned once per connection (see sqlFetchPlan).
			b.Queue(sqlFetchPlan)
			first = false
		}
		if lt, ok := w.tx.(*lazyTx); ok && w.fold && !lt.begun && (sess == nil || !w.p.sessionRows.Load()) {
			if sess != nil {
				sql = sqlFetchWorkLast[named]
			}
			b.Queue(sql, args...).Query(func(r pgx.Rows) error { return forEach(r, func() error { return scan(r) }) })
			w.relaxed = true
			err = w.sendLast(b)
			if checkFailed(err, codeNotLast) {
				w.p.sessionRows.Store(true)
			}
		} else {
			b.Queue(sql, args...).Query(func(r pgx.Rows) error { return forEach(r, func() error { return scan(r) }) })
			err = w.tx.SendBatch(w.ctx, b).Close()
		}
		if err != nil {
			return nil, nil, 0, err
		}
		found := len(rows) + len(cands)
		if found == 0 {
			break
		}
		ids := make([]int64, 0, len(cands))
		for _, c := range cands {
			// Claim the session for the owner (or refresh its lease), once
			// per fetch; skip its rows if another owner holds it.
			ok, seen := claimed[c.session]
			if !seen {
				n, err := w.exec(sqlClaimSession, c.session, sess.OwnerID, w.now+sqlenc.DurMs(sess.LockTimeout), w.now)
				if err != nil {
					return nil, nil, 0, err
				}
				ok = n > 0
				if ok {
					claims++
				}
				claimed[c.session] = ok
			}
			if !ok {
				skip = append(skip, c.id)
				continue
			}
			ids = append(ids, c.id)
		}
		if len(ids) > 0 {
			more, err := w.lockWork(prefix, ids, until)
			if err != nil {
				return nil, nil, 0, err
			}
			rows = append(rows, more...)
		}
		slices.SortFunc(rows, func(a, b workRow) int { return cmp.Compare(a.ID, b.ID) })
		got, d, err := sqlstore.DecodeLeases(rows, func(wr *workRow, cause error) error {
			return w.deadLetter(queueWorker, sqlDeleteWork, wr.ID, wr.Lease.InstanceID, wr.Data, cause)
		})
		if err != nil {
			return nil, nil, 0, err
		}
		leases, dead = append(leases, got...), append(dead, d...)
		if found < want {
			break // the statement saw every visible row it could lock
		}
	}
	if w.committed {
		// The first statement carried the COMMIT: the dead-letterings
		// (and the fetches that replaced their rows) ran in a transaction
		// of their own.
		return leases, dead, claims, w.tx.(*lazyTx).Commit(w.ctx)
	}
	return leases, dead, claims, nil
}

// AckWork deletes the acked worker row and enqueues its completion; see
// sqlstore.WorkTx.
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
// it holds its row, and AckWorkThen keeps the same order.
func (w *wtx) AckWork(id int64, e *sqlenc.WorkAck) error {
	// One round trip: the row's deletion and, for a completion that starts
	// nothing, its enqueueing and the notification (all rolled back if the
	// lock turns out to be lost).
	var found bool
	b := &pgx.Batch{}
	plain := e.Completion != nil && e.Completion.Create == nil
	// Nothing follows the batch (no turn to take, no instance to start):
	// its COMMIT rides with it, and a lost lock fails it (sqlAckWorkChecked)
	// instead of being found after it.
	last := w.fold && e.TakeMs == 0 && (e.Completion == nil || plain)
	if plain {
		_ = w.lockInstancesShared(b, []string{e.Completion.InstanceID})
	}
	if last {
		b.Queue(sqlAckWorkChecked, id, e.Token, w.now).QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
	} else {
		b.Queue(sqlAckWork, id, e.Token, w.now).QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
	}
	if plain {
		w.queuePlainMessages(b, []*sqlenc.Msg{e.Completion})
		if e.TakeMs > 0 {
			// TakeTurn's first question, asked in this round trip: the
			// shared advisory lock keeps any turn ack of the instance (the
			// only writer of its worker rows) out until the transaction
			// ends. And, if the instance is not busy, its advisory lock,
			// tried (a turn it cannot take keeps it only until the commit
			// that follows).
			w.queueTakeable(b, []string{e.Completion.InstanceID}, e.TakeNames, func(k *instanceWork) { w.hasWork = k })
		}
	}
	send := func() error { return w.tx.SendBatch(w.ctx, b).Close() }
	if last {
		send = func() error { return w.sendLast(b) }
	}
	if err := send(); checkFailed(err, codeLockLost) {
		found = false
	} else if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if e.Completion != nil && !plain {
		return w.insertMessage(e.Completion, false)
	}
	return nil
}

// instanceWork says whether worker rows of an instance were queued, as
// AckWork found right after deleting its own, and whether it took the
// instance's advisory lock (free lists the instance then), for TakeTurn.
type instanceWork struct {
	instance string
	busy     bool
	free     []string
}

// queueTakeable queues on b the question TakeTurn asks first, for each
// of instances (sqlInstancesTakeable: whether it is busy and, if not,
// whether its advisory lock was got), calling got with each answer.
func (w *wtx) queueTakeable(b *pgx.Batch, instances, names []string, got func(*instanceWork)) {
	b.Queue(sqlInstancesTakeable, w.p.lockSpace, instances, orchNamesArg(names)).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			k := &instanceWork{free: []string{}}
			var free bool
			if err := r.Scan(&k.instance, &k.busy, &free); err != nil {
				return err
			}
			if free {
				k.free = append(k.free, k.instance)
			}
			got(k)
			return nil
		})
	})
}

// AckWorkThen acks the worker row of a work ack that carries the turn its
// result causes (WorkAck.Then) and, if the instance is quiet (nothing
// happened to it since the caller's copy), applies that turn instead of
// enqueueing the completion: applied is then true. Otherwise it fails with
// sqlstore.ErrThenNotApplied, having written nothing, and the call runs
// again without the turn (a plain ack, then TakeTurn). See sqlstore.WorkTx.
//
// It takes the instance's advisory lock before the quiet check, as a turn
// ack does before its lock check: no fetch can lock the instance and no
// other transaction can add messages or worker rows for it until this one
// ends, so the check stays true while the turn is applied. The advisory
// lock is taken before the worker row (and its session's row), in the
// order a plain work ack and a turn ack take them (see AckWork), so
// neither two acks of one session nor this ack and a turn ack canceling
// its activity wait for each other in a cycle.
func (w *wtx) AckWorkThen(id int64, e *sqlenc.WorkAck) (applied bool, err error) {
	// One round trip: the advisory lock, the quiet check and the row's
	// deletion in one statement, and the turn's writes. A check that
	// fails fails the batch before the turn's writes, undoing the
	// deletion: an instance that is not quiet as
	// sqlstore.ErrThenNotApplied (the ack then runs again without its
	// turn and enqueues the completion), else a lost lock as ErrLockLost.
	inst := e.Completion.InstanceID
	b := &pgx.Batch{}
	w.queueLockInstance(b, inst)
	reuse := reusableLease(e.Then)
	var prefix string
	var until int64
	if reuse != nil {
		// The acked row becomes the one activity the turn leases to
		// the caller (sqlAckWorkIfQuietReuse).
		c := newWorkCols([]*sqlenc.Work{reuse})
		prefix, until = w.startLeases(e.Then.LeaseMs)
		b.Queue(sqlAckWorkIfQuietReuse, inst, e.Then.ExecutionID, e.ThenAfter, w.now, id, e.Token,
			c.es[0], c.as[0], c.ss[0], c.items[0], until, prefix, c.names[0], c.queues[0])
	} else {
		b.Queue(sqlAckWorkIfQuiet, inst, e.Then.ExecutionID, e.ThenAfter, w.now, id, e.Token)
	}
	t := w.queueTurn(b, inst, e.Then, reuse)
	err = w.sendTurn(b, t)
	if err == nil && reuse != nil {
		w.noteLease(prefix, until, id, reuse)
	}
	switch {
	case checkFailed(err, codeLockLost):
		return false, fmt.Errorf("work ack: %w", provider.ErrLockLost)
	case checkFailed(err, codeNotQuiet):
		return false, fmt.Errorf("work ack for %q: %w", inst, sqlstore.ErrThenNotApplied)
	}
	return true, w.afterTurn(inst, e.Then, t, err)
}

// reusableLease returns the one activity turn e leases to the acking
// caller, if it leases exactly one and cancels none: the row of the
// activity whose ack carries e can become it (AckWorkThen). Else nil.
func reusableLease(e *sqlenc.Ack) *sqlenc.Work {
	if e.LeaseMs <= 0 || len(e.Canceled) > 0 {
		return nil
	}
	var one *sqlenc.Work
	for _, wk := range e.Work {
		if !wk.Lease {
			continue
		}
		if one != nil {
			return nil
		}
		one = wk
	}
	return one
}

// TakeTurn locks instance, if its lock is free and no other transaction
// works on it, and loads its turn (WorkAck.TakeTurn). Nobody else is woken
// for it: it is the caller's. See sqlstore.WorkTx.
func (w *wtx) TakeTurn(instance string, lockMs int64, cached func(string) (int64, int64, bool), names []string) (sqlstore.Fetched, error) {
	// While other activities of the instance are queued or running, their
	// results should reach one turn together: leave it to a fetch; so is
	// the turn of an orchestration the caller does not run. AckWork may
	// have asked this already, in its round trip, with the same names,
	// and tried the instance's advisory lock.
	var free []string
	if k := w.hasWork; k != nil && k.instance == instance {
		if k.busy {
			return sqlstore.Fetched{}, nil
		}
		free = k.free
	} else {
		var busy bool
		if err := w.tx.QueryRow(w.ctx, sqlInstanceHasWork, instance, orchNamesArg(names)).Scan(&busy); err != nil || busy {
			return sqlstore.Fetched{}, err
		}
	}
	prefix := sqlstore.NewTokenPrefix()
	load := newTurnLoad(cached)
	items, _, dead, err := w.lockTurns([]string{instance}, free, prefix, w.p.now()+lockMs, w.now, 1, load) // dated after the waits, as leased work
	if err != nil || len(items) == 0 {
		return sqlstore.Fetched{Dead: dead}, err
	}
	histories, err := w.finishLoad(items, load)
	if err != nil {
		return sqlstore.Fetched{}, err
	}
	if items, err = w.redate(items, prefix, time.Duration(lockMs)*time.Millisecond); err != nil {
		return sqlstore.Fetched{}, err
	}
	w.changes.orch = false // the completion's turn is taken; nothing else was queued
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, nil
}

// AbandonWork unlocks a worker row; see sqlstore.WorkTx.
func (w *wtx) AbandonWork(id int64, token string, delayMs int64, undo int, lastErr *string) (bool, error) {
	n, err := w.exec(sqlAbandonWork, id, token, w.now, w.now+delayMs, undo, lastErr)
	if err != nil || n == 0 {
		return false, err
	}
	w.changes.work = true
	return true, nil
}

// RenewWork extends the worker lock token holds and touches its session
// in one statement; see sqlstore.WorkTx.
func (w *wtx) RenewWork(id int64, token string, extendMs int64) (bool, error) {
	var held bool
	err := w.tx.QueryRow(w.ctx, sqlRenewWork, id, token, w.now, w.now+extendMs).Scan(&held)
	return held, err
}

// enqueueWork inserts worker messages atomically, all or none. The
// runtime enqueues activities through turn acks; the tests enqueue work
// directly with it.
func (p *Provider) enqueueWork(ctx context.Context, msgs ...*provider.WorkerMessage) error {
	const op = "enqueueing work"
	enc, err := sqlstore.EncodeWorkAll(msgs)
	if err != nil {
		return p.fail(op, err)
	}
	return p.write(ctx, op, func(w *wtx) error {
		if len(enc) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		w.queueWork(b, enc, nil)
		w.changes.work = true
		return w.tx.SendBatch(w.ctx, b).Close()
	})
}

// RenewSessions extends the owners' active session leases; see
// sqlstore.WorkTx.
func (w *wtx) RenewSessions(owners []string, extendMs, idleMs int64) (int64, error) {
	return w.exec(sqlRenewSessions, owners, w.now, w.now+extendMs, w.now-idleMs)
}

// CleanupSessions deletes expired sessions no worker row refers to; see
// sqlstore.WorkTx.
func (w *wtx) CleanupSessions() (int64, error) {
	n, err := w.exec(sqlCleanupSessions, w.now)
	// Rows of a deleted session are claimable by any worker now.
	w.changes.work = n > 0
	return n, err
}
