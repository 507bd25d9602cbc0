package sqlite

import (
	"context"
	"database/sql"
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
	e := &encWork{
		instanceID: m.InstanceID, executionID: m.ExecutionID, activityID: m.ActivityID,
		sessionID: optString(m.SessionID), item: data,
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
	return err
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
			err = w.query(sWorkCandidatesNoSession, scan, w.now, after, limit-len(leases))
		} else {
			err = w.query(sWorkCandidatesSession, scan, w.now, after, limit-len(leases), sess.OwnerID)
		}
		if err != nil {
			return nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
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
		slices.SortFunc(rows, func(a, b workRow) int { return cmpInt64(a.id, b.id) })
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
}

// AckWorkItems completes a batch of activities in one transaction; see
// provider.Provider.
func (p *Provider) AckWorkItems(ctx context.Context, acks []*provider.WorkAck) ([]error, error) {
	const op = "acking work items"
	errs := make([]error, len(acks))
	enc := make([]*encWorkAck, len(acks))
	pending := 0
	for i, a := range acks {
		switch {
		case a == nil:
			errs[i] = p.fail(op, invalid("nil work ack"))
			continue
		case a.LockToken == "":
			errs[i] = p.fail(op, invalid("work ack has no LockToken"))
			continue
		}
		e := &encWorkAck{token: a.LockToken}
		if a.Completion != nil {
			m, err := encodeMessage(a.Completion)
			if err != nil {
				errs[i] = p.fail(op, err)
				continue
			}
			e.completion = m
		}
		enc[i] = e
		pending++
	}
	if pending == 0 {
		if p.closed.Load() {
			return nil, p.fail(op, provider.ErrClosed)
		}
		return errs, nil
	}
	err := p.write(ctx, op, func(w *wtx) error {
		for i, e := range enc {
			if e == nil {
				continue
			}
			errs[i] = nil // this may be a re-run (see writer.go)
			var err error
			if e.completion != nil && e.completion.create != nil {
				// Creating an instance can fail after the delete.
				err = w.savepoint(func() error { return w.applyWorkAck(e) })
			} else {
				// The delete is the only step that can fail for this ack.
				err = w.applyWorkAck(e)
			}
			if err != nil {
				if !isAckError(err) {
					return err
				}
				errs[i] = p.fail(op, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

func (w *wtx) applyWorkAck(e *encWorkAck) error {
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
	if e.completion != nil {
		if err := w.insertMessage(e.completion); err != nil {
			return err
		}
	}
	if sess.Valid {
		_, err = w.exec(sTouchSession, nil, sess.String, w.now)
	}
	return err
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
	id, ok := tokenRow(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		n, err := w.exec(sAbandonWork, nil, id, lockToken, w.now, w.now+durMs(opts.Delay), undo)
		if err != nil {
			return err
		}
		if n == 0 {
			return provider.ErrLockLost
		}
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

// EnqueueWork inserts worker messages atomically; see provider.Provider.
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
		return err
	})
	return int(n), err
}
