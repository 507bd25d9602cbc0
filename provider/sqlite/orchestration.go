package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Queue names used in dead_letters.queue.
const (
	queueOrchestrator = "orchestrator"
	queueWorker       = "worker"
)

// deadLetter records a message moved out of a queue, for logging after commit.
type deadLetter struct {
	queue, instanceID string
	id                int64
	err               error
}

func (p *Provider) logDeadLetters(dls []deadLetter) {
	for _, d := range dls {
		p.log.Warn("sqlite: moved an undecodable message to the dead-letter list",
			logkey.Queue, d.queue, logkey.Instance, d.instanceID, logkey.Error, d.err)
	}
}

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

// fetchedMsg is one tagged orchestrator-queue row.
type fetchedMsg struct {
	id       int64
	data     []byte
	attempts int
}

// FetchOrchestrationItems locks up to opts.Max ready instances in one
// transaction; see provider.Provider.
func (p *Provider) FetchOrchestrationItems(ctx context.Context, opts provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	const op = "fetching orchestration items"
	limit, err := sqlenc.FetchLimit(opts.LockTimeout, opts.Max)
	if err != nil {
		return nil, p.fail(op, err)
	}
	var (
		items     []*provider.OrchestrationItem
		histories map[string][]sqlstore.StoredEvent
		dead      []deadLetter
	)
	err = p.write(ctx, op, func(w *wtx) error {
		var err error
		items, histories, dead, err = w.fetchTurns(limit, sqlenc.DurMs(opts.LockTimeout), opts.Cached)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.logDeadLetters(dead)
	decodeHistories(items, histories)
	return items, nil
}

// decodeHistories decodes the loaded history of each item, after the
// transaction committed: the instance locks keep it stable and the writer
// is free sooner.
func decodeHistories(items []*provider.OrchestrationItem, histories map[string][]sqlstore.StoredEvent) {
	for _, it := range items {
		if it.Instance == nil {
			it.History = []history.Event{}
			continue
		}
		rows := histories[it.InstanceID]
		slices.SortFunc(rows, func(a, b sqlstore.StoredEvent) int { return cmp.Compare(a.ID, b.ID) })
		evs, herr := sqlstore.DecodeEvents(rows)
		if herr != nil {
			it.HistoryError = fmt.Errorf("instance %q execution %d: %w", it.InstanceID, it.Instance.CurrentExecutionID, herr)
			continue
		}
		it.History = evs
	}
}

func (w *wtx) fetchTurns(limit int, lockMs int64, cached func(string) (int64, int64, bool)) ([]*provider.OrchestrationItem, map[string][]sqlstore.StoredEvent, []deadLetter, error) {
	until := w.now + lockMs
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
		}, w.now, jsonStrings(skip))
		if err != nil {
			return nil, nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		cands = cands[:min(len(cands), limit-len(items))]
		got, lost, d, err := w.lockTurns(cands, prefix, until)
		if err != nil {
			return nil, nil, nil, err
		}
		items, dead, skip = append(items, got...), append(dead, d...), append(skip, lost...)
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
// messages: the items of their turns, without history. lost are the
// candidates it did not lock or that had nothing deliverable.
func (w *wtx) lockTurns(cands []string, prefix string, until int64) (items []*provider.OrchestrationItem, lost []string, dead []deadLetter, err error) {
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

	msgs := make(map[string][]fetchedMsg, len(lockedIDs))
	err = w.query(sTagMessages, func(r *sql.Rows) error {
		var m fetchedMsg
		var inst string
		if err := r.Scan(&m.id, &inst, &m.data, &m.attempts); err != nil {
			return err
		}
		msgs[inst] = append(msgs[inst], m)
		return nil
	}, prefix, jsonStrings(lockedIDs), until, w.now)
	if err != nil {
		return nil, nil, nil, err
	}

	for _, inst := range lockedIDs {
		batch := msgs[inst]
		slices.SortFunc(batch, func(a, b fetchedMsg) int { return cmp.Compare(a.id, b.id) })
		it := &provider.OrchestrationItem{
			InstanceID:  inst,
			LockToken:   prefix + inst,
			LockedUntil: msTime(until),
			Messages:    make([]history.WorkItem, 0, len(batch)),
		}
		for _, m := range batch {
			wi, derr := history.DecodeWorkItem(m.data)
			if derr != nil {
				if err := w.deadLetter(queueOrchestrator, sDeleteMessage, m.id, inst, m.data, derr); err != nil {
					return nil, nil, nil, err
				}
				dead = append(dead, deadLetter{queue: queueOrchestrator, instanceID: inst, id: m.id, err: derr})
				continue
			}
			it.Messages = append(it.Messages, wi)
			it.AttemptCount = max(it.AttemptCount, m.attempts)
		}
		if len(it.Messages) == 0 {
			// Nothing deliverable: release the lock and move on.
			if _, err := w.exec(sReleaseLock, nil, inst, it.LockToken); err != nil {
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

// insertMessage enqueues m, creating its instance if asked: when the ID is
// taken it enqueues OnExists instead, or fails with ErrInstanceExists.
// A start carrying an idempotency key or an execution lock checks them
// first, in that order (see provider.Provider.Enqueue).
func (w *wtx) insertMessage(m *sqlenc.Msg) error {
	visible := m.VisibleAt
	if visible == 0 {
		visible = w.now
	}
	queued := false
	if c := m.Create; c != nil {
		if c.IdemKey != "" {
			if err := w.checkIdempotencyKey(c.IdemKey); err != nil {
				return err
			}
		}
		if c.LockKey != "" {
			holder, err := w.liveLockHolder(c.LockKey)
			if err != nil {
				return err
			}
			if holder != nil && !c.LockQueue {
				return holder
			}
			queued = holder != nil
		}
		n, err := w.exec(sCreateInstance, nil, m.InstanceID, c.Name, c.Version, c.Input, c.Parent, c.ParentExec, w.now)
		if err != nil {
			return err
		}
		if n == 0 {
			if c.OnExists != nil {
				return w.insertMessage(c.OnExists)
			}
			return fmt.Errorf("creating instance %q: %w", m.InstanceID, provider.ErrInstanceExists)
		}
		if c.IdemKey != "" {
			if _, err := w.exec(sIdemInsert, nil, c.IdemKey, m.InstanceID, w.now, w.now+c.IdemTTL); err != nil {
				return err
			}
		}
		switch {
		case queued:
			_, err := w.exec(sXLockQueueInsert, nil, c.LockKey, m.InstanceID, string(m.Item), visible, c.LockTTL, w.now)
			return err
		case c.LockKey != "":
			if _, err := w.exec(sXLockInsert, nil, c.LockKey, m.InstanceID, w.now, c.LockTTL); err != nil {
				return err
			}
		}
	}
	_, err := w.exec(sInsertMessage, nil, m.InstanceID, string(m.Item), visible, w.now)
	w.changes.orch = true
	if m.Create != nil {
		w.changes.instances = append(w.changes.instances, m.InstanceID)
	}
	return err
}

// Enqueue inserts orchestrator messages atomically; see provider.Provider.
func (p *Provider) Enqueue(ctx context.Context, msgs ...*provider.OrchestratorMessage) error {
	return enqueueAll(ctx, p, "enqueueing", msgs, sqlenc.EncodeMessage, (*wtx).insertMessage)
}

// enqueueAll validates and encodes msgs before the transaction, then
// inserts them all in one: all or none.
func enqueueAll[M, E any](ctx context.Context, p *Provider, op string, msgs []M,
	encode func(M) (E, error), insert func(*wtx, E) error) error {
	enc := make([]E, len(msgs))
	for i, m := range msgs {
		e, err := encode(m)
		if err != nil {
			return p.fail(op, err)
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
		for _, e := range enc {
			if err := insert(w, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// AckOrchestrationItem commits one turn; see provider.Provider. Concurrent
// acks share a transaction (group commit), each in its own savepoint.
func (p *Provider) AckOrchestrationItem(ctx context.Context, ack *provider.TurnAck) error {
	const op = "acking turn"
	e, err := sqlenc.EncodeAck(ack)
	if err != nil {
		return p.fail(op, err)
	}
	var leased []*provider.WorkItemLease
	err = p.write(ctx, op, func(w *wtx) error {
		var err error
		leased, err = w.applyAck(e)
		return err
	})
	if err != nil {
		return err
	}
	ack.Leased = sqlenc.UnexpiredLeases(leased, p.clock())
	return nil
}

// applyAck performs steps (a) to (k) of one turn ack, and returns the
// leases of the worker items it leased to the caller.
func (w *wtx) applyAck(e *sqlenc.Ack) ([]*provider.WorkItemLease, error) {
	err := w.applyAckSteps(e)
	if err != nil || len(w.leaseIDs) == 0 {
		return nil, err
	}
	return w.leaseInserted(w.leaseIDs, w.leaseMsgs, e.LeaseMs)
}

func (w *wtx) applyAckSteps(e *sqlenc.Ack) error {
	// (a) The lock must be held and unexpired.
	inst, ok := sqlstore.TokenInstance(e.Token)
	if !ok {
		return fmt.Errorf("turn ack: unknown token: %w", provider.ErrLockLost)
	}
	var held int
	var exists bool
	err := w.query(sCheckLock, func(r *sql.Rows) error { return r.Scan(&held, &exists) }, inst, e.Token, w.now)
	if err != nil {
		return err
	}
	if held == 0 {
		return fmt.Errorf("turn ack for %q: %w", inst, provider.ErrLockLost)
	}
	if !exists && e.Name == nil {
		// No instance and nothing to create it from: the turn only consumes
		// messages sent to an unknown instance.
		if !e.ConsumeOnly() {
			return sqlenc.Invalid("turn ack for unknown instance %q has no Metadata.OrchestrationName to create it from", inst)
		}
		if _, err := w.exec(sDeleteTagged, nil, inst, e.Token); err != nil {
			return err
		}
		if _, err = w.exec(sDeleteLock, nil, inst, e.Token); err != nil {
			return err
		}
		return w.noteLeftovers(inst)
	}
	return w.applyTurn(inst, e)
}

// applyTurn performs steps (b) to (k) of a turn ack for instance inst:
// with e.token, the turn of a locked instance whose tagged messages it
// deletes and whose lock it releases; without, a WorkAck.Then, whose only
// message was never enqueued and which holds no lock.
func (w *wtx) applyTurn(inst string, e *sqlenc.Ack) error {
	// (c) Insert or update the execution; its status decides the instance's.
	var completed any
	if e.Terminal {
		completed = w.now
	}
	var execStatus string
	err := w.query(sUpsertExecution, func(r *sql.Rows) error { return r.Scan(&execStatus) },
		inst, e.ExecutionID, e.Status, e.Input, e.Output, e.ErrJSON, w.now, completed)
	if err != nil {
		return err
	}
	instStatus := execStatus
	if execStatus == string(provider.StatusContinuedAsNew) {
		instStatus = string(provider.StatusRunning)
	}

	// (b), (d), (f) Create or update the instance.
	_, err = w.exec(sUpsertInstance, nil, inst, e.Name, e.Version, instStatus, e.ExecutionID,
		e.Input, e.Output, e.ErrJSON, e.Custom, e.SetCustom, e.Parent, e.ParentExec, w.now)
	if err != nil {
		return err
	}
	// On an existing row, the indexed columns change only when they differ
	// (on a row just created these match and write nothing).
	if _, err := w.exec(sSetInstanceStatus, nil, inst, instStatus, e.ExecutionID); err != nil {
		return err
	}
	if e.Name != nil || e.Version != nil {
		if _, err := w.exec(sSetInstanceName, nil, inst, e.Name, e.Version); err != nil {
			return err
		}
	}

	// (e) Append history, insert only.
	for _, ev := range e.Events {
		if _, err := w.exec(sInsertEvent, provider.ErrDuplicateEvent, inst, e.ExecutionID, ev.ID, ev.Kind, string(ev.Data), w.now); err != nil {
			return fmt.Errorf("appending event %d to %q execution %d: %w", ev.ID, inst, e.ExecutionID, err)
		}
	}

	// (g) Worker items, then (h) cancellations.
	for _, wk := range e.Work {
		if wk.Lease && e.LeaseMs > 0 {
			id, err := w.insertLeased(wk)
			if err != nil {
				return err
			}
			if w.leaseMsgs == nil {
				w.leaseMsgs = map[int64]*provider.WorkerMessage{}
			}
			w.leaseIDs = append(w.leaseIDs, id)
			w.leaseMsgs[id] = wk.Msg
			continue
		}
		if err := w.insertWork(wk); err != nil {
			return err
		}
	}
	for _, c := range e.Canceled {
		if _, err := w.exec(sCancelActivity, nil, c.InstanceID, c.ExecutionID, c.ActivityID); err != nil {
			return err
		}
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
		if _, err = w.exec(sDeleteLock, nil, inst, e.Token); err != nil {
			return err
		}
	}
	w.changes.instances = append(w.changes.instances, inst)
	if err := w.settleExecutionLocks(inst, isTerminalStatus(instStatus)); err != nil {
		return err
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

// AbandonOrchestrationItem releases an instance lock without committing,
// recording opts.Error (if any) as the instance's last error in the same
// transaction; see provider.Provider.
func (p *Provider) AbandonOrchestrationItem(ctx context.Context, lockToken string, opts provider.AbandonOptions) error {
	const op = "abandoning turn"
	if opts.Delay < 0 {
		return p.fail(op, sqlenc.Invalid("Delay %v is negative", opts.Delay))
	}
	undo := 0
	if opts.IgnoreAttempt {
		undo = 1
	}
	var lastErr []byte
	if opts.Error != nil {
		if err := opts.Error.Validate(); err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
		var err error
		if lastErr, err = json.Marshal(opts.Error); err != nil {
			return p.fail(op, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err))
		}
	}
	inst, ok := sqlstore.TokenInstance(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		n, err := w.exec(sAbandonLock, nil, inst, lockToken, w.now)
		if err != nil {
			return err
		}
		if n == 0 {
			return provider.ErrLockLost
		}
		if _, err := w.exec(sUntagMessages, nil, inst, lockToken, w.now+sqlenc.DurMs(opts.Delay), undo); err != nil {
			return err
		}
		// The instance is ready again, now or after the delay.
		w.changes.orch = true
		if lastErr != nil {
			// An instance without a row (a message for an unknown instance)
			// updates nothing: the abandon creates no instance.
			_, err = w.exec(sSetLastError, nil, inst, string(lastErr), w.now)
		}
		return err
	})
}

// RenewOrchestrationItemLock extends a valid instance lock; see
// provider.Provider.
func (p *Provider) RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	const op = "renewing turn lock"
	if extendFor <= 0 {
		return p.fail(op, sqlenc.Invalid("extendFor %v must be positive", extendFor))
	}
	inst, ok := sqlstore.TokenInstance(lockToken)
	if !ok {
		return p.fail(op, provider.ErrLockLost)
	}
	return p.write(ctx, op, func(w *wtx) error {
		until := w.now + sqlenc.DurMs(extendFor)
		n, err := w.exec(sRenewLock, nil, inst, lockToken, w.now, until)
		if err != nil {
			return err
		}
		if n == 0 {
			return provider.ErrLockLost
		}
		_, err = w.exec(sRenewTagged, nil, inst, lockToken, until)
		return err
	})
}
