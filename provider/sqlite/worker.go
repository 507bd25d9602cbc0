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
)

// encWork is a worker message validated and encoded before the transaction.
type encWork struct {
	instanceID  string
	executionID int64
	activityID  int64
	sessionID   any // string or nil
	item        []byte
	visibleAt   int64 // 0: now
	lease       bool  // leased to the acking caller (TurnAck.LeaseFor)
	msg         *provider.WorkerMessage
}

func encodeWork(m *provider.WorkerMessage) (*encWork, error) {
	if m == nil {
		return nil, invalid("nil worker message")
	}
	if m.InstanceID == "" {
		return nil, invalid("worker message has no InstanceID")
	}
	if m.ExecutionID < 0 || m.ActivityID < 0 {
		return nil, invalid("worker message for %q has a negative ExecutionID or ActivityID", m.InstanceID)
	}
	data, err := history.EncodeWorkItem(&m.Item)
	if err != nil {
		return nil, fmt.Errorf("%w: worker message for %q: %w", provider.ErrInvalidArgument, m.InstanceID, err)
	}
	if m.Lease && (m.SessionID != "" || !m.VisibleAt.IsZero()) {
		return nil, invalid("worker message for %q: a leased item has no SessionID or VisibleAt", m.InstanceID)
	}
	e := &encWork{
		instanceID: m.InstanceID, executionID: m.ExecutionID, activityID: m.ActivityID,
		sessionID: optString(m.SessionID), item: data, lease: m.Lease, msg: m,
	}
	if !m.VisibleAt.IsZero() {
		e.visibleAt = m.VisibleAt.UnixMilli()
	}
	return e, nil
}

func (w *wtx) insertWork(e *encWork) error {
	visible := e.visibleAt
	if visible == 0 {
		visible = w.now
	}
	_, err := w.exec(sInsertWork, nil, e.instanceID, e.executionID, e.activityID, e.sessionID, string(e.item), visible, w.now)
	w.changes.work = true
	return err
}

// insertLeased inserts e as insertWork does, but not yet visible, and
// returns its row ID for leaseInserted. Nobody is woken: it is the
// caller's.
func (w *wtx) insertLeased(e *encWork) (int64, error) {
	var id int64
	err := w.query(sInsertWorkReturning, func(r *sql.Rows) error { return r.Scan(&id) },
		e.instanceID, e.executionID, e.activityID, e.sessionID, string(e.item), w.now+1, w.now)
	return id, err
}

// leaseInserted locks the rows ids (inserted by insertLeased; those the
// same ack canceled are gone) for lockMs, as a fetch does, and returns
// their leases in insertion order. byID gives each row's message.
func (w *wtx) leaseInserted(ids []int64, byID map[int64]*provider.WorkerMessage, lockMs int64) ([]*provider.WorkItemLease, error) {
	until := w.now + lockMs
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
	}, newTokenPrefix(), jsonInts(ids), until)
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
	if opts.LockTimeout <= 0 {
		return nil, p.fail(op, invalid("LockTimeout %v must be positive", opts.LockTimeout))
	}
	limit := opts.Max
	switch {
	case limit < 0:
		return nil, p.fail(op, invalid("Max %d must not be negative", limit))
	case limit == 0:
		limit = 1
	}
	if s := opts.Session; s != nil {
		if s.OwnerID == "" {
			return nil, p.fail(op, invalid("Session.OwnerID is empty"))
		}
		if s.LockTimeout <= 0 {
			return nil, p.fail(op, invalid("Session.LockTimeout %v must be positive", s.LockTimeout))
		}
	}
	var (
		leases []*provider.WorkItemLease
		dead   []deadLetter
	)
	err := p.write(ctx, op, func(w *wtx) error {
		var err error
		leases, dead, err = w.fetchWork(limit, durMs(opts.LockTimeout), opts.Session)
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
	prefix := newTokenPrefix()
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
					n, err := w.exec(sClaimSession, nil, c.session.String, sess.OwnerID, w.now+durMs(sess.LockTimeout), w.now)
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

// encWorkAck is a work ack validated and encoded before the transaction.
type encWorkAck struct {
	token      string
	completion *encMsg
	takeMs     int64 // TakeTurn's lock timeout; 0: take no turn
	cached     func(string) (int64, int64, bool)
	then       *encAck // WorkAck.Then, or nil
	thenAfter  int64
}

// takenTurn is the turn a work ack took (WorkAck.TakeTurn), before its
// history is decoded.
type takenTurn struct {
	item      *provider.OrchestrationItem
	histories map[string][]storedEvent
	dead      []deadLetter
}

// AckWorkItem completes one activity; see provider.Provider. Concurrent
// acks share a transaction (group commit), each in its own savepoint.
func (p *Provider) AckWorkItem(ctx context.Context, ack *provider.WorkAck) error {
	const op = "acking work item"
	switch {
	case ack == nil:
		return p.fail(op, invalid("nil work ack"))
	case ack.LockToken == "":
		return p.fail(op, invalid("work ack has no LockToken"))
	}
	e := &encWorkAck{token: ack.LockToken}
	if ack.Completion != nil {
		m, err := encodeMessage(ack.Completion)
		if err != nil {
			return p.fail(op, err)
		}
		e.completion = m
	}
	if t := ack.TakeTurn; t != nil {
		if t.LockTimeout <= 0 {
			return p.fail(op, invalid("TakeTurn.LockTimeout %v must be positive", t.LockTimeout))
		}
		if ack.Completion == nil {
			return p.fail(op, invalid("TakeTurn needs a Completion"))
		}
		e.takeMs, e.cached = durMs(t.LockTimeout), t.Cached
	}
	ack.ThenApplied = false
	if t := ack.Then; t != nil {
		switch {
		case ack.Completion == nil:
			return p.fail(op, invalid("Then needs a Completion"))
		case t.LockToken != "":
			return p.fail(op, invalid("Then has a LockToken: it is the turn of an unlocked instance"))
		case ack.ThenAfter < 1:
			return p.fail(op, invalid("ThenAfter %d, want >= 1", ack.ThenAfter))
		}
		then, err := encodeTurn(t)
		if err != nil {
			return p.fail(op, err)
		}
		e.then, e.thenAfter = then, ack.ThenAfter
	}
	var taken takenTurn
	var applied bool
	var leased []*provider.WorkItemLease
	err := p.write(ctx, op, func(w *wtx) error {
		taken, applied, leased = takenTurn{}, false, nil
		return w.applyWorkAck(e, &taken, &applied, &leased)
	})
	if err != nil {
		return err
	}
	if applied {
		ack.ThenApplied, ack.Then.Leased = true, leased
		return nil
	}
	p.logDeadLetters(taken.dead)
	if taken.item != nil {
		decodeHistories([]*provider.OrchestrationItem{taken.item}, taken.histories)
		ack.Turn = taken.item
	}
	return nil
}

func (w *wtx) applyWorkAck(e *encWorkAck, taken *takenTurn, applied *bool, leased *[]*provider.WorkItemLease) error {
	id, ok := tokenRow(e.token)
	if !ok {
		return fmt.Errorf("work ack: unknown token: %w", provider.ErrLockLost)
	}
	found := false
	var sess sql.NullString
	err := w.query(sAckWork, func(r *sql.Rows) error {
		found = true
		return r.Scan(&sess)
	}, id, e.token, w.now)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("work ack: %w", provider.ErrLockLost)
	}
	if sess.Valid {
		if _, err := w.exec(sTouchSession, nil, sess.String, w.now); err != nil {
			return err
		}
	}
	if e.then != nil {
		inst := e.completion.instanceID
		var quiet bool
		err := w.query(sInstanceQuiet, func(r *sql.Rows) error { return r.Scan(&quiet) },
			inst, e.then.executionID, e.thenAfter, w.now)
		if err != nil {
			return err
		}
		if quiet {
			if err := w.applyTurn(inst, e.then); err != nil {
				return err
			}
			*applied = true
			if len(w.leaseIDs) > 0 {
				*leased, err = w.leaseInserted(w.leaseIDs, w.leaseMsgs, e.then.leaseMs)
			}
			return err
		}
	}
	if e.completion != nil {
		if err := w.insertMessage(e.completion); err != nil {
			return err
		}
	}
	if e.takeMs > 0 {
		return w.takeTurn(e.completion.instanceID, e.takeMs, e.cached, taken)
	}
	return nil
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
	prefix := newTokenPrefix()
	items, _, dead, err := w.lockTurns([]string{instance}, prefix, w.now+lockMs)
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
		return p.fail(op, invalid("Delay %v is negative", opts.Delay))
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
	id, ok := tokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		n, err := w.exec(sAbandonWork, nil, id, lockToken, w.now, w.now+durMs(opts.Delay), undo, lastErr)
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
		return p.fail(op, invalid("extendFor %v must be positive", extendFor))
	}
	id, ok := tokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		found := false
		var sess sql.NullString
		err := w.query(sRenewWork, func(r *sql.Rows) error {
			found = true
			return r.Scan(&sess)
		}, id, lockToken, w.now, w.now+durMs(extendFor))
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

// EnqueueWork inserts worker messages atomically, all or none.
//
// It is not part of provider.Provider (the runtime enqueues activities
// through turn acks); tests and tools use it.
func (p *Provider) EnqueueWork(ctx context.Context, msgs ...*provider.WorkerMessage) error {
	return enqueueAll(ctx, p, "enqueueing work", msgs, encodeWork, (*wtx).insertWork)
}

// RenewSessionLocks extends the leases of the owners' active sessions; see
// provider.Provider.
func (p *Provider) RenewSessionLocks(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	const op = "renewing session locks"
	if extendFor <= 0 {
		return 0, p.fail(op, invalid("extendFor %v must be positive", extendFor))
	}
	if idleTimeout < 0 {
		return 0, p.fail(op, invalid("idleTimeout %v is negative", idleTimeout))
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
		n, err = w.exec(sRenewSessions, nil, jsonStrings(ownerIDs), w.now, w.now+durMs(extendFor), w.now-durMs(idleTimeout))
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
