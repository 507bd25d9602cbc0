package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

func (w *wtx) insertWork(e *sqlenc.Work) error {
	visible := e.VisibleAt
	if visible == 0 {
		visible = w.now
	}
	name, queue := e.Route()
	_, err := w.exec(sInsertWork, nil, e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), visible, w.now, name, queue)
	w.changes.work = true
	return err
}

// insertLeased inserts e as insertWork does, but leased to the caller
// for lockMs, as a fetch would lock it, and notes its lease for
// LeaseInserted: the row is inserted with its lock (sInsertWorkLeased)
// rather than inserted and then locked, which rewrote it and its index
// entries. The leases of one ack share a token prefix and an expiry,
// dated from the clock read at its first leased insert (see
// sqlenc.UnexpiredLeases for the commit itself). Leased items have no
// session (sqlenc.EncodeWork). Nobody is woken: it is the caller's.
func (w *wtx) insertLeased(e *sqlenc.Work, lockMs int64) error {
	if w.leasePrefix == "" {
		w.leasePrefix = sqlstore.NewTokenPrefix()
		w.leaseUntil = w.p.now() + lockMs
	}
	var id int64
	name, queue := e.Route()
	err := w.query(sInsertWorkLeased, func(r *sql.Rows) error { return r.Scan(&id) },
		e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), w.leaseUntil, w.now, w.leasePrefix, name, queue)
	if err != nil {
		return err
	}
	w.leases = append(w.leases, &provider.WorkItemLease{
		LockToken: w.leasePrefix + strconv.FormatInt(id, 10), LockedUntil: msTime(w.leaseUntil), AttemptCount: 1,
		InstanceID: e.InstanceID, ExecutionID: e.ExecutionID, ActivityID: e.ActivityID, Item: e.Msg.Item,
	})
	w.leaseIDs = append(w.leaseIDs, id)
	return nil
}

// insertWorks inserts a turn ack's worker items in order, those marked
// Lease leased to the caller for leaseMs (when it is positive): each run
// of consecutive items of one kind up to 16 per statement, as
// insertEvents does, the rows taking the same IDs, in the same order, as
// one statement each would give them.
func (w *wtx) insertWorks(items []*sqlenc.Work, leaseMs int64) error {
	for len(items) > 0 {
		leased := items[0].Lease && leaseMs > 0
		run := 1
		for run < len(items) && (items[run].Lease && leaseMs > 0) == leased {
			run++
		}
		var err error
		if leased {
			err = w.insertLeasedRun(items[:run], leaseMs)
		} else {
			err = w.insertWorkRun(items[:run])
		}
		if err != nil {
			return err
		}
		items = items[run:]
	}
	return nil
}

// chunk is the rows of the next multi-row insert of n left: 16, 4 or 1.
func chunk(n int) int {
	switch {
	case n >= 16:
		return 16
	case n >= 4:
		return 4
	}
	return 1
}

// insertWorkRun inserts items as insertWork does each, several per
// statement.
func (w *wtx) insertWorkRun(items []*sqlenc.Work) error {
	var args []any
	for len(items) > 0 {
		n := chunk(len(items))
		if n == 1 {
			if err := w.insertWork(items[0]); err != nil {
				return err
			}
			items = items[1:]
			continue
		}
		args = append(args[:0], w.now)
		for _, e := range items[:n] {
			visible := e.VisibleAt
			if visible == 0 {
				visible = w.now
			}
			name, queue := e.Route()
			args = append(args, e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), visible, name, queue)
		}
		id := sInsertWorks4
		if n == 16 {
			id = sInsertWorks16
		}
		if _, err := w.exec(id, nil, args...); err != nil {
			return err
		}
		w.changes.work = true
		items = items[n:]
	}
	return nil
}

// insertLeasedRun inserts items as insertLeased does each, several per
// statement: the rows' IDs, which their tokens end with, are the next
// ones (sNextWorkID; the single writer inserts nothing in between).
func (w *wtx) insertLeasedRun(items []*sqlenc.Work, lockMs int64) error {
	if len(items) < 4 {
		for _, e := range items {
			if err := w.insertLeased(e, lockMs); err != nil {
				return err
			}
		}
		return nil
	}
	if w.leasePrefix == "" {
		w.leasePrefix = sqlstore.NewTokenPrefix()
		w.leaseUntil = w.p.now() + lockMs
	}
	var next int64
	if err := w.query(sNextWorkID, func(r *sql.Rows) error { return r.Scan(&next) }); err != nil {
		return err
	}
	var args []any
	for len(items) > 0 {
		n := chunk(len(items))
		if n == 1 {
			if err := w.insertLeased(items[0], lockMs); err != nil {
				return err
			}
			items = items[1:]
			continue
		}
		args = append(args[:0], w.leaseUntil, w.now, w.leasePrefix)
		for k, e := range items[:n] {
			name, queue := e.Route()
			args = append(args, next+int64(k), e.InstanceID, e.ExecutionID, e.ActivityID, e.SessionID, string(e.Item), name, queue)
		}
		id := sInsertWorksLeased4
		if n == 16 {
			id = sInsertWorksLeased16
		}
		if _, err := w.exec(id, nil, args...); err != nil {
			return err
		}
		for k, e := range items[:n] {
			rid := next + int64(k)
			w.leases = append(w.leases, &provider.WorkItemLease{
				LockToken: w.leasePrefix + strconv.FormatInt(rid, 10), LockedUntil: msTime(w.leaseUntil), AttemptCount: 1,
				InstanceID: e.InstanceID, ExecutionID: e.ExecutionID, ActivityID: e.ActivityID, Item: e.Msg.Item,
			})
			w.leaseIDs = append(w.leaseIDs, rid)
		}
		next += int64(n)
		items = items[n:]
	}
	return nil
}

// workRow is one locked worker-queue row before decoding.
type workRow = sqlstore.WorkRow

type workCandidate struct {
	id      int64
	session sql.NullString
}

// FetchWork locks up to limit worker rows of the given activity names
// (nil: any) and queues; see sqlstore.WorkTx.
func (w *wtx) FetchWork(limit int, lockMs int64, sess *provider.SessionOptions, names, queues []string) ([]*provider.WorkItemLease, []deadLetter, error) {
	route := routeArgs(names, queues)
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
			err = w.query(sWorkCandidatesNoSession, scan, w.now, after, route[0], route[1])
		} else {
			err = w.query(sWorkCandidatesSession, scan, w.now, after, sess.OwnerID, route[0], route[1])
		}
		if err != nil {
			return nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		// The scan reached the end of the queue: asking again from the
		// last candidate on finds nothing.
		last := len(cands) < candidateRows && len(cands) <= limit-len(leases)
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
			if last {
				break
			}
			continue
		}

		var rows []workRow
		err = w.query(sLockWork, func(r *sql.Rows) error {
			var wr workRow
			l := &wr.Lease
			if err := r.Scan(&wr.ID, &l.LockToken, &l.InstanceID, &l.ExecutionID, &l.ActivityID,
				&l.SessionID, &wr.Data, &l.AttemptCount); err != nil {
				return err
			}
			l.LockedUntil = msTime(until)
			rows = append(rows, wr)
			return nil
		}, prefix, jsonInts(ids), until)
		if err != nil {
			return nil, nil, err
		}
		slices.SortFunc(rows, func(a, b workRow) int { return cmp.Compare(a.ID, b.ID) })
		got, d, err := sqlstore.DecodeLeases(rows, func(wr *workRow, cause error) error {
			return w.deadLetter(queueWorker, sDeleteWork, wr.ID, wr.Lease.InstanceID, wr.Data, cause)
		})
		if err != nil {
			return nil, nil, err
		}
		leases, dead = append(leases, got...), append(dead, d...)
		if last {
			break
		}
	}
	return leases, dead, nil
}

// ackRow deletes the worker row id, which token must hold unexpired, and
// refreshes its session.
func (w *wtx) ackRow(id int64, token string) error {
	found := false
	var sess sql.NullString
	err := w.query(sAckWork, func(r *sql.Rows) error {
		found = true
		return r.Scan(&sess)
	}, id, token, w.now)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if sess.Valid {
		_, err = w.exec(sTouchSession, nil, sess.String, w.now)
	}
	return err
}

// AckWork deletes the acked worker row and enqueues its completion; see
// sqlstore.WorkTx.
func (w *wtx) AckWork(id int64, e *sqlenc.WorkAck) error {
	if err := w.ackRow(id, e.Token); err != nil {
		return err
	}
	if e.Completion != nil {
		return w.insertMessage(e.Completion)
	}
	return nil
}

// AckWorkThen deletes the acked worker row and applies e.Then when the
// instance is quiet, else enqueues the completion; see sqlstore.WorkTx.
func (w *wtx) AckWorkThen(id int64, e *sqlenc.WorkAck) (bool, error) {
	if err := w.ackRow(id, e.Token); err != nil {
		return false, err
	}
	inst := e.Completion.InstanceID
	var quiet, running, xlocks bool
	err := w.query(sInstanceQuiet, func(r *sql.Rows) error { return r.Scan(&quiet, &running, &xlocks) },
		inst, e.Then.ExecutionID, e.ThenAfter, w.now)
	if err != nil {
		return false, err
	}
	if quiet {
		if !xlocks {
			w.noXLocks = inst
		}
		return true, w.applyTurn(inst, e.Then, running, true)
	}
	return false, w.insertMessage(e.Completion)
}

// TakeTurn locks instance, if its lock is free, and loads its turn
// (WorkAck.TakeTurn). Nobody else is woken for it: it is the caller's.
// See sqlstore.WorkTx.
func (w *wtx) TakeTurn(instance string, lockMs int64, cached func(string) (int64, int64, bool), names []string) (sqlstore.Fetched, error) {
	// While other activities of the instance are queued or running, their
	// results should reach one turn together: leave it to a fetch; so is
	// the turn of an orchestration the caller does not run.
	if may, asked := w.taking[instance]; asked {
		if !may {
			return sqlstore.Fetched{}, nil
		}
	} else {
		var busy bool
		if err := w.query(sInstanceHasWork, func(r *sql.Rows) error { return r.Scan(&busy) }, instance, orchNamesArg(names)); err != nil || busy {
			return sqlstore.Fetched{}, err
		}
	}
	prefix := sqlstore.NewTokenPrefix()
	items, _, dead, err := w.lockTurns([]string{instance}, prefix, w.p.now()+lockMs, w.now, 1) // dated after the waits, as insertLeased
	if err != nil || len(items) == 0 {
		return sqlstore.Fetched{Dead: dead}, err
	}
	histories, err := w.loadTurns(items, cached)
	if err != nil {
		return sqlstore.Fetched{}, err
	}
	if err := w.redate(items, prefix, lockMs); err != nil {
		return sqlstore.Fetched{}, err
	}
	w.changes.orch = false // the completion's turn is taken; nothing else was queued
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, nil
}

// AbandonWork unlocks a worker row; see sqlstore.WorkTx.
func (w *wtx) AbandonWork(id int64, token string, delayMs int64, undo int, lastErr *string) (bool, error) {
	n, err := w.exec(sAbandonWork, nil, id, token, w.now, w.now+delayMs, undo, lastErr)
	if err != nil || n == 0 {
		return false, err
	}
	w.changes.work = true
	return true, nil
}

// RenewWork extends the worker lock token holds and then touches its
// session; see sqlstore.WorkTx.
func (w *wtx) RenewWork(id int64, token string, extendMs int64) (bool, error) {
	found := false
	var sess sql.NullString
	err := w.query(sRenewWork, func(r *sql.Rows) error {
		found = true
		return r.Scan(&sess)
	}, id, token, w.now, w.now+extendMs)
	if err != nil || !found {
		return false, err
	}
	if sess.Valid {
		_, err = w.exec(sTouchSession, nil, sess.String, w.now)
	}
	return true, err
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
		for _, e := range enc {
			if err := w.insertWork(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// RenewSessions extends the owners' active session leases; see
// sqlstore.WorkTx.
func (w *wtx) RenewSessions(owners []string, extendMs, idleMs int64) (int64, error) {
	return w.exec(sRenewSessions, nil, jsonStrings(owners), w.now, w.now+extendMs, w.now-idleMs)
}

// CleanupSessions deletes expired sessions no worker row refers to; see
// sqlstore.WorkTx.
func (w *wtx) CleanupSessions() (int64, error) {
	n, err := w.exec(sCleanupSessions, nil, w.now)
	// Rows of a deleted session are claimable by any worker now.
	w.changes.work = n > 0
	return n, err
}
