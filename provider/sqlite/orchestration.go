package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// deadLetter records a message moved out of a queue, for logging after commit.
type deadLetter = sqlstore.DeadLetter

// Queue names used in dead_letters.queue.
const (
	queueOrchestrator = sqlstore.QueueOrchestrator
	queueWorker       = sqlstore.QueueWorker
)

// deadLetter moves one undecodable queue row to dead_letters.
func (w *wtx) deadLetter(queue string, del stmtID, id int64, instanceID string, payload []byte, cause error) error {
	if payload == nil {
		payload = []byte{}
	}
	if _, err := w.exec(sInsertDeadLetter, nil, queue, instanceID, payload, cause.Error(), w.now); err != nil {
		return err
	}
	_, err := w.exec(del, nil, id)
	return err
}

// FetchTurns locks up to limit ready instances; see sqlstore.TurnTx.
func (w *wtx) FetchTurns(limit int, lockMs, aheadMs int64, cached func(string) (int64, int64, bool), names []string) (sqlstore.Fetched, error) {
	items, histories, dead, err := w.fetchTurns(limit, lockMs, aheadMs, cached, names)
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, err
}

func (w *wtx) fetchTurns(limit int, lockMs, aheadMs int64, cached func(string) (int64, int64, bool), names []string) ([]*provider.OrchestrationItem, map[string][]sqlstore.StoredEvent, []deadLetter, error) {
	until := w.now + lockMs + aheadMs
	prefix := sqlstore.NewTokenPrefix()
	var (
		items []*provider.OrchestrationItem
		dead  []deadLetter
		skip  []string // candidates lost or emptied by dead-lettering
	)
	for len(items) < limit {
		var cands []string
		err := w.query(sOrchCandidates, func(r *sql.Rows) error {
			var id string
			var first int64
			if err := r.Scan(&id, &first); err != nil {
				return err
			}
			cands = append(cands, id)
			return nil
		}, w.now+aheadMs, jsonStrings(skip), orchNamesArg(names))
		if err != nil {
			return nil, nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		// Every ready instance was among the candidates, and each is now
		// locked here, lost to another lock or emptied: none is left.
		last := len(cands) < candidateRows && len(cands) <= limit-len(items)
		cands = cands[:min(len(cands), limit-len(items))]
		got, lost, d, err := w.lockTurns(cands, prefix, until, w.now+aheadMs, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		items, dead, skip = append(items, got...), append(dead, d...), append(skip, lost...)
		if last {
			break
		}
	}
	if len(items) == 0 {
		return nil, nil, dead, nil
	}
	histories, err := w.loadTurns(items, cached)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := w.redate(items, prefix, lockMs); err != nil {
		return nil, nil, nil, err
	}
	return items, histories, dead, nil
}

// FetchUnservedTurns locks instances whose orchestration no live route
// registers, counting no delivery; see sqlstore.TurnTx.
func (w *wtx) FetchUnservedTurns(olderMs int64, limit int, lockMs int64) (sqlstore.Fetched, error) {
	var cands []string
	err := w.query(sUnservedTurnCandidates, func(r *sql.Rows) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		cands = append(cands, id)
		return nil
	}, w.now, w.now-olderMs, limit)
	if err != nil || len(cands) == 0 {
		return sqlstore.Fetched{}, err
	}
	prefix := sqlstore.NewTokenPrefix()
	items, _, dead, err := w.lockTurns(cands, prefix, w.now+lockMs, w.now, 0)
	if err != nil || len(items) == 0 {
		return sqlstore.Fetched{Dead: dead}, err
	}
	histories, err := w.loadTurns(items, nil)
	if err != nil {
		return sqlstore.Fetched{}, err
	}
	if err := w.redate(items, prefix, lockMs); err != nil {
		return sqlstore.Fetched{}, err
	}
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, nil
}

// orchNamesArg is the orchestration-routes argument of the turn
// candidate statements (and the names or routes of an announcement): a
// JSON array, or NULL for any name.
func orchNamesArg(names []string) any {
	if names == nil {
		return nil
	}
	return jsonStrings(names)
}

// redate moves the locks of items forward when the clock passed their
// expiry while the fetch ran (a slow transaction, a clock that jumped), so
// a fetch never hands out a lease that is already expired.
func (w *wtx) redate(items []*provider.OrchestrationItem, prefix string, lockMs int64) error {
	now := w.p.now()
	if len(items) == 0 || items[0].LockedUntil.UnixMilli() > now {
		return nil
	}
	until := now + lockMs
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.InstanceID
		it.LockedUntil = msTime(until)
	}
	if _, err := w.exec(sRedateLocks, nil, jsonStrings(ids), prefix, until); err != nil {
		return err
	}
	_, err := w.exec(sRedateTagged, nil, jsonStrings(ids), prefix, until)
	return err
}

// lockTurns locks the instances cands (those whose lock is free or
// expired) with tokens prefix+ID until until, and tags their visible
// messages, adding count (1, or 0) to their deliveries: the items of their
// turns, without history. lost are the
// candidates it did not lock or that had nothing deliverable.
func (w *wtx) lockTurns(cands []string, prefix string, until, seen int64, count int) (items []*provider.OrchestrationItem, lost []string, dead []deadLetter, err error) {
	locked := make(map[string]bool, len(cands))
	err = w.query(sLockInstances, func(r *sql.Rows) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		locked[id] = true
		return nil
	}, prefix, jsonStrings(cands), until, w.now)
	if err != nil {
		return nil, nil, nil, err
	}
	lockedIDs := make([]string, 0, len(locked))
	for _, id := range cands {
		if locked[id] {
			lockedIDs = append(lockedIDs, id)
		} else {
			lost = append(lost, id) // lost the race: try the next one
		}
	}
	if len(lockedIDs) == 0 {
		return nil, lost, nil, nil
	}

	msgs := make(map[string][]sqlstore.TaggedMessage, len(lockedIDs))
	err = w.query(sTagMessages, func(r *sql.Rows) error {
		var m sqlstore.TaggedMessage
		var inst string
		if err := r.Scan(&m.ID, &inst, &m.Data, &m.Attempts, &m.Visible); err != nil {
			return err
		}
		msgs[inst] = append(msgs[inst], m)
		return nil
	}, prefix, jsonStrings(lockedIDs), until, seen, count)
	if err != nil {
		return nil, nil, nil, err
	}

	for _, inst := range lockedIDs {
		it, d, err := sqlstore.NewTurn(inst, prefix+inst, until, w.now, msgs[inst], func(m sqlstore.TaggedMessage, cause error) error {
			// Untagged first: the delete trigger skips the messages of a
			// held lock, which its release accounts for (migration 0017),
			// and this lock may be kept for the instance's other messages.
			if _, err := w.exec(sUntagMessage, nil, m.ID); err != nil {
				return err
			}
			return w.deadLetter(queueOrchestrator, sDeleteMessage, m.ID, inst, m.Data, cause)
		})
		if err != nil {
			return nil, nil, nil, err
		}
		dead = append(dead, d...)
		if it == nil {
			// Nothing deliverable: release the lock and move on.
			if _, err := w.exec(sReleaseLock, nil, inst, prefix+inst); err != nil {
				return nil, nil, nil, err
			}
			lost = append(lost, inst)
			continue
		}
		items = append(items, it)
	}
	return items, lost, dead, nil
}

// loadTurns loads the instance rows of the locked items, the history
// each needs (only what cached does not hold) and when pending starts come
// due.
func (w *wtx) loadTurns(items []*provider.OrchestrationItem, cached func(string) (int64, int64, bool)) (map[string][]sqlstore.StoredEvent, error) {
	ids := make([]string, len(items))
	byID := make(map[string]*provider.OrchestrationItem, len(items))
	for i, it := range items {
		ids[i] = it.InstanceID
		byID[it.InstanceID] = it
	}
	idsJSON := jsonStrings(ids)
	err := w.query(sInstanceMetas, func(r *sql.Rows) error {
		var id, status string
		m := &provider.InstanceMeta{}
		if err := r.Scan(&id, &m.OrchestrationName, &m.OrchestrationVersion, &status,
			&m.CurrentExecutionID, &m.ParentInstanceID, &m.ParentExecutionID); err != nil {
			return err
		}
		m.Status = provider.Status(status)
		if it := byID[id]; it != nil {
			it.Instance = m
		}
		return nil
	}, idsJSON)
	if err != nil {
		return nil, err
	}
	// Load only the history the caller does not hold, and when each
	// pending start comes due.
	var pairs [][2]any
	var pending []string
	for _, it := range items {
		m := it.Instance
		switch {
		case m == nil:
			continue
		case m.CurrentExecutionID == 0:
			pending = append(pending, it.InstanceID)
			continue
		}
		if cached != nil {
			if ex, last, ok := cached(it.InstanceID); ok && ex == m.CurrentExecutionID && last > 0 {
				it.HistoryAfter = last
			}
		}
		pairs = append(pairs, [2]any{it.InstanceID, it.HistoryAfter})
	}
	histories, err := w.loadHistories(pairs)
	if err != nil {
		return nil, err
	}
	// A cached position is usable only if the store has that event: the
	// query returned it first. Otherwise (the instance was purged and
	// recreated) load the whole history.
	var reload [][2]any
	for _, it := range items {
		if it.HistoryAfter == 0 {
			continue
		}
		rows := histories[it.InstanceID]
		k := slices.IndexFunc(rows, func(e sqlstore.StoredEvent) bool { return e.ID == it.HistoryAfter })
		if k < 0 {
			it.HistoryAfter = 0
			delete(histories, it.InstanceID)
			reload = append(reload, [2]any{it.InstanceID, 0})
			continue
		}
		histories[it.InstanceID] = slices.Delete(rows, k, k+1)
	}
	if len(reload) > 0 {
		full, err := w.loadHistories(reload)
		if err != nil {
			return nil, err
		}
		maps.Copy(histories, full)
	}
	if len(pending) > 0 {
		err := w.query(sPendingStarts, func(r *sql.Rows) error {
			var id string
			var delayed, queued int64
			if err := r.Scan(&id, &delayed, &queued); err != nil {
				return err
			}
			if at := max(delayed, queued); at > 0 {
				byID[id].Instance.StartAt = msTime(at)
			}
			return nil
		}, jsonStrings(pending), w.now)
		if err != nil {
			return nil, err
		}
	}
	return histories, nil
}

// loadHistories reads the current-execution history of each [instance,
// after] pair from event ID after on (all of it for 0).
func (w *wtx) loadHistories(pairs [][2]any) (map[string][]sqlstore.StoredEvent, error) {
	out := make(map[string][]sqlstore.StoredEvent, len(pairs))
	if len(pairs) == 0 {
		return out, nil
	}
	pj, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	err = w.query(sHistoriesOf, func(r *sql.Rows) error {
		var id string
		var ev sqlstore.StoredEvent
		if err := r.Scan(&id, &ev.ID, &ev.Data); err != nil {
			return err
		}
		out[id] = append(out[id], ev)
		return nil
	}, string(pj))
	return out, err
}

// insertMessage enqueues m (see sqlstore.InsertMessage).
func (w *wtx) insertMessage(m *sqlenc.Msg) error { return sqlstore.InsertMessage(w, m) }

// Now is the transaction's time; see sqlstore.MessageTx.
func (w *wtx) Now() int64 { return w.now }

// CreateInstance inserts m's instance row; see sqlstore.MessageTx.
func (w *wtx) CreateInstance(m *sqlenc.Msg) (bool, error) {
	c := m.Create
	n, err := w.exec(sCreateInstance, nil, m.InstanceID, c.Name, c.Version, c.Input, c.Parent, c.ParentExec, w.now)
	if err != nil || n == 0 {
		return false, err
	}
	w.changes.instances = append(w.changes.instances, m.InstanceID)
	return true, nil
}

// RecordStart writes a created start's idempotency key and execution lock
// (or its place in the lock's queue); see sqlstore.MessageTx.
func (w *wtx) RecordStart(m *sqlenc.Msg, visible int64, queued bool) error {
	c := m.Create
	if c.IdemKey != "" {
		if _, err := w.exec(sIdemInsert, nil, c.IdemKey, m.InstanceID, w.now, w.now+c.IdemTTL); err != nil {
			return err
		}
	}
	var err error
	switch {
	case queued:
		_, err = w.exec(sXLockQueueInsert, nil, c.LockKey, m.InstanceID, string(m.Item), visible, c.LockTTL, w.now)
	case c.LockKey != "":
		_, err = w.exec(sXLockInsert, nil, c.LockKey, m.InstanceID, w.now, c.LockTTL)
	}
	return err
}

// InstanceStatus returns the status of instance id; see
// sqlstore.MessageTx.
func (w *wtx) InstanceStatus(id string) (provider.Status, error) {
	var st provider.Status
	err := w.query(sInstanceStatus, func(r *sql.Rows) error { return r.Scan(&st) }, id)
	return st, err
}

// RecordExisted writes the idempotency key of a start-if-absent that
// found its instance; see sqlstore.MessageTx.
func (w *wtx) RecordExisted(m *sqlenc.Msg) error {
	c := m.Create
	_, err := w.exec(sIdemInsert, nil, c.IdemKey, m.InstanceID, w.now, w.now+c.IdemTTL)
	return err
}

// EnqueueMessage inserts m on the orchestrator queue; see
// sqlstore.MessageTx.
func (w *wtx) EnqueueMessage(m *sqlenc.Msg, visible int64) error {
	_, err := w.exec(sInsertMessage, nil, m.InstanceID, string(m.Item), visible, w.now)
	w.changes.orch = true
	return err
}

// ClaimDedupKey records a message's deduplication key; see
// sqlstore.TurnTx.
func (w *wtx) ClaimDedupKey(instance, key string) (bool, error) {
	n, err := w.exec(sDedupInsert, nil, instance, key, w.now)
	return n > 0, err
}

// InsertMessages enqueues msgs; see sqlstore.TurnTx.
func (w *wtx) InsertMessages(msgs []*sqlenc.Msg) error {
	for _, m := range msgs {
		if err := w.insertMessage(m); err != nil {
			return err
		}
	}
	return nil
}

// CheckTurnLock reports whether token holds the instance's unexpired lock
// and whether the instance row exists; the single writer needs no
// per-instance lock. See sqlstore.TurnTx.
func (w *wtx) CheckTurnLock(inst, token string) (held, exists bool, err error) {
	var (
		n      int
		xlocks bool
	)
	err = w.query(sCheckLock, func(r *sql.Rows) error { return r.Scan(&n, &exists, &xlocks) }, inst, token, w.now)
	if err == nil && !xlocks {
		w.noXLocks = inst
	}
	return n != 0, exists, err
}

// FinishTurn consumes the turn's messages and releases the instance lock;
// see sqlstore.TurnTx.
func (w *wtx) FinishTurn(inst, token string) error {
	if _, err := w.exec(sDeleteTagged, nil, inst, token); err != nil {
		return err
	}
	if _, err := w.exec(sDeleteLock, nil, inst, token); err != nil {
		return err
	}
	return w.noteLeftovers(inst)
}

// LeaseInserted leases the worker rows ApplyTurn inserted to lease; see
// sqlstore.TurnTx.
func (w *wtx) LeaseInserted(lockMs int64) ([]*provider.WorkItemLease, error) {
	if len(w.leases) == 0 || !w.leaseCanceled {
		return w.leases, nil
	}
	// The ack canceled activities: drop the leases of rows it deleted.
	left := make(map[int64]bool, len(w.leaseIDs))
	err := w.query(sWorkExists, func(r *sql.Rows) error {
		var id int64
		if err := r.Scan(&id); err != nil {
			return err
		}
		left[id] = true
		return nil
	}, jsonInts(w.leaseIDs))
	if err != nil {
		return nil, err
	}
	var leases []*provider.WorkItemLease
	for i, id := range w.leaseIDs {
		if left[id] {
			leases = append(leases, w.leases[i])
		}
	}
	return leases, nil
}

// insertEvents appends events to an execution's history, up to 16 in
// one statement (a statement's fixed cost is most of a small row's
// insert). A statement that fails (a duplicate event) wrote nothing, so
// its events are then inserted one by one: the error names the event, as
// it does alone.
func (w *wtx) insertEvents(inst string, execID int64, events []sqlenc.Event) error {
	var args []any
	for len(events) > 0 {
		id, n := sInsertEvent, 1
		switch {
		case len(events) >= 16:
			id, n = sInsertEvents16, 16
		case len(events) >= 4:
			id, n = sInsertEvents4, 4
		case len(events) >= 2:
			id, n = sInsertEvents2, 2
		}
		if n > 1 {
			args = append(args[:0], inst, execID, w.now)
			for _, ev := range events[:n] {
				args = append(args, ev.ID, ev.Kind, string(ev.Data))
			}
			if _, err := w.exec(id, provider.ErrDuplicateEvent, args...); err == nil {
				events = events[n:]
				continue
			}
		}
		for _, ev := range events[:n] {
			if _, err := w.exec(sInsertEvent, provider.ErrDuplicateEvent, inst, execID, ev.ID, ev.Kind, string(ev.Data), w.now); err != nil {
				return fmt.Errorf("appending event %d to %q execution %d: %w", ev.ID, inst, execID, err)
			}
		}
		events = events[n:]
	}
	return nil
}

// ApplyTurn performs steps (b) to (k) of a turn ack for instance inst; see
// sqlstore.TurnTx.
func (w *wtx) ApplyTurn(inst string, e *sqlenc.Ack) error { return w.applyTurn(inst, e, false, false) }

// applyTurn is ApplyTurn. running says the instance and the ack's
// execution are known to be Running (AckWorkThen read it): a turn that
// keeps the execution Running and sets none of its columns then writes
// neither status, whose statements would change nothing. fused says the
// turn is a work ack's (AckWorkThen), applied to an instance that nobody
// held locked: no message waited for its lock to be released, so no
// dispatcher has to look at the instance again for one (noteLeftovers);
// the messages the turn enqueues wake them as any enqueue does.
func (w *wtx) applyTurn(inst string, e *sqlenc.Ack, running, fused bool) error {
	keep := running && e.KeepsExecution()
	// (c) Insert or update the execution; its status decides the instance's.
	var completed any
	if e.Terminal {
		completed = w.now
	}
	execStatus := string(provider.StatusRunning)
	if !keep {
		err := w.query(sUpsertExecution, func(r *sql.Rows) error { return r.Scan(&execStatus) },
			inst, e.ExecutionID, e.Status, e.Input, e.Output, e.ErrJSON, w.now, completed)
		if err != nil {
			return err
		}
	}
	instStatus := execStatus
	if execStatus == string(provider.StatusContinuedAsNew) {
		instStatus = string(provider.StatusRunning)
	}

	// (b), (d), (f) Create or update the instance (it exists when the
	// instance is known to be running).
	upsert := sUpsertInstance
	if running {
		upsert = sUpdateInstance
	}
	_, err := w.exec(upsert, nil, inst, e.Name, e.Version, instStatus, e.ExecutionID,
		e.Input, e.Output, e.ErrJSON, e.Custom, e.SetCustom, e.Parent, e.ParentExec, w.now)
	if err != nil {
		return err
	}
	// On an existing row, the indexed columns change only when they differ
	// (on a row just created these match and write nothing).
	if !keep {
		if _, err := w.exec(sSetInstanceStatus, nil, inst, instStatus, e.ExecutionID); err != nil {
			return err
		}
	}
	if err := w.setInstanceName(inst, e.Name, e.Version); err != nil {
		return err
	}

	if e.HasValues() {
		if err := w.applyValues(inst, e); err != nil {
			return err
		}
	}

	// (e) Append history, insert only.
	if err := w.insertEvents(inst, e.ExecutionID, e.Events); err != nil {
		return err
	}

	// (g) Worker items, then (h) cancellations.
	if err := w.insertWorks(e.Work, e.LeaseMs); err != nil {
		return err
	}
	for _, c := range e.Canceled {
		n, err := w.exec(sCancelActivity, nil, c.InstanceID, c.ExecutionID, c.ActivityID)
		if err != nil {
			return err
		}
		w.leaseCanceled = w.leaseCanceled || n > 0
	}

	// (i) Orchestrator items.
	for _, m := range e.Msgs {
		if err := w.insertMessage(m); err != nil {
			return err
		}
	}

	// (j) Delete exactly the messages of this turn, (k) release the lock,
	// and settle the execution lock the instance holds.
	if e.Token != "" {
		if _, err := w.exec(sDeleteTagged, nil, inst, e.Token); err != nil {
			return err
		}
		if _, err := w.exec(sDeleteLock, nil, inst, e.Token); err != nil {
			return err
		}
	}
	w.changes.instances = append(w.changes.instances, inst)
	if !isTerminalStatus(instStatus) {
		w.changes.live = append(w.changes.live, inst)
	}
	if err := w.settleExecutionLocks(inst, isTerminalStatus(instStatus)); err != nil {
		return err
	}
	if fused {
		return nil
	}
	return w.noteLeftovers(inst)
}

// noteLeftovers notes, after a turn released the lock of instance, whether
// messages that arrived during the turn (or are due later) still wait for
// it: dispatchers that found it locked must look again.
func (w *wtx) noteLeftovers(instance string) error {
	if w.changes.orch {
		return nil
	}
	return w.query(sInstanceHasMessages, func(r *sql.Rows) error { return r.Scan(&w.changes.orch) }, instance)
}

// AbandonTurn releases the instance lock held by token; see
// sqlstore.TurnTx.
func (w *wtx) AbandonTurn(inst, token string, delayMs int64, undo int, untilStart bool, lastErr []byte) (bool, error) {
	n, err := w.exec(sAbandonLock, nil, inst, token, w.now)
	if err != nil || n == 0 {
		return false, err
	}
	if _, err := w.exec(sUntagMessages, nil, inst, token, w.now+delayMs, undo, untilStart); err != nil {
		return false, err
	}
	// The instance is ready again, now or after the delay.
	w.changes.orch = true
	if lastErr != nil {
		// An instance without a row (a message for an unknown instance)
		// updates nothing: the abandon creates no instance.
		_, err = w.exec(sSetLastError, nil, inst, string(lastErr), w.now)
	}
	return true, err
}

// RenewTurn extends the instance lock token holds and then its tagged
// messages; see sqlstore.TurnTx.
func (w *wtx) RenewTurn(inst, token string, extendMs int64) (bool, error) {
	until := w.now + extendMs
	n, err := w.exec(sRenewLock, nil, inst, token, w.now, until)
	if err != nil || n == 0 {
		return false, err
	}
	_, err = w.exec(sRenewTagged, nil, inst, token, until)
	return true, err
}

// applyValues writes an ack's value changes (part of step f).
func (w *wtx) applyValues(inst string, e *sqlenc.Ack) error {
	for i, k := range e.SetKeys {
		if _, err := w.exec(sValueSet, nil, inst, k, e.SetValues[i], w.now); err != nil {
			return err
		}
	}
	for _, k := range e.ClearKeys {
		if _, err := w.exec(sValueClear, nil, inst, k); err != nil {
			return err
		}
	}
	_, err := w.exec(sValuesBump, nil, inst)
	return err
}

// insertMessages enqueues the completions msgs in order, several per
// statement (as insertEvents appends events).
func (w *wtx) insertMessages(msgs []*sqlenc.Msg) error {
	var args []any
	for len(msgs) > 0 {
		n := chunk(len(msgs))
		id := sInsertMessage
		switch n {
		case 16:
			id = sInsertMessages16
		case 4:
			id = sInsertMessages4
		}
		if n == 1 {
			args = append(args[:0], msgs[0].InstanceID, string(msgs[0].Item), msgVisible(msgs[0], w.now), w.now)
		} else {
			args = append(args[:0], w.now)
			for _, m := range msgs[:n] {
				args = append(args, m.InstanceID, string(m.Item), msgVisible(m, w.now))
			}
		}
		if _, err := w.exec(id, nil, args...); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// msgVisible is when message m becomes visible: its VisibleAt, or now.
func msgVisible(m *sqlenc.Msg, now int64) int64 {
	if m.VisibleAt == 0 {
		return now
	}
	return m.VisibleAt
}

// setInstanceName sets the instance's name and version when given
// (strings; nil: unchanged) and changed. A version that changed under an unchanged name
// (an instance started without a version, whose first turn resolved it)
// is set alone, leaving the name's index entry as it is (see
// sSetInstanceVersion); otherwise both are set when either changed.
func (w *wtx) setInstanceName(inst string, name, version any) error {
	if version != nil {
		n, err := w.exec(sSetInstanceVersion, nil, inst, name, version)
		if err != nil || n > 0 || name == nil {
			return err
		}
	}
	if name == nil {
		return nil
	}
	_, err := w.exec(sSetInstanceName, nil, inst, name, version)
	return err
}
