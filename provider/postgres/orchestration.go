package postgres

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
func (w *wtx) deadLetter(queue, del string, id int64, instanceID string, payload []byte, cause error) error {
	if payload == nil {
		payload = []byte{}
	}
	if _, err := w.exec(sqlInsertDeadLetter, queue, instanceID, payload, cause.Error(), w.now); err != nil {
		return err
	}
	_, err := w.exec(del, id)
	return err
}

// FetchTurns locks up to limit ready instances; see sqlstore.TurnTx.
func (w *wtx) FetchTurns(limit int, lockMs, aheadMs int64, cached func(string) (int64, int64, bool), names []string) (sqlstore.Fetched, error) {
	f, err := w.fetchTurns(limit, time.Duration(lockMs)*time.Millisecond, aheadMs, cached, names)
	if w.committed {
		// Its first batch carried its COMMIT (fetchRound): what followed
		// ran in a transaction of its own, if anything did.
		if err == nil {
			err = w.tx.(*lazyTx).Commit(w.ctx)
		}
		return f, err
	}
	w.relaxed = len(f.Dead) == 0 // a dead-lettering commits durably
	return f, err
}

func (w *wtx) fetchTurns(limit int, lockTimeout time.Duration, aheadMs int64, cached func(string) (int64, int64, bool), names []string) (sqlstore.Fetched, error) {
	prefix := sqlstore.NewTokenPrefix()
	until := w.now + sqlenc.DurMs(lockTimeout) + aheadMs
	var (
		items []*provider.OrchestrationItem
		dead  []deadLetter
		skip  = []string{} // candidates lost or emptied by dead-lettering
		load  = newTurnLoad(cached)
	)
	for len(items) < limit {
		want := limit - len(items)
		got, lost, d, cands, err := w.fetchRound(want, skip, names, prefix, until, w.now+aheadMs, load, len(skip) == 0 && len(items) == 0)
		if err != nil {
			return sqlstore.Fetched{}, err
		}
		items, dead, skip = append(items, got...), append(dead, d...), append(skip, lost...)
		if cands == 0 {
			break
		}
		if cands < want && len(lost) == 0 {
			// The query saw every ready instance and took them all: another
			// would find none.
			break
		}
	}
	if len(items) == 0 {
		return sqlstore.Fetched{Dead: dead}, nil
	}
	histories, err := w.finishLoad(items, load)
	if err != nil {
		return sqlstore.Fetched{}, err
	}
	if items, err = w.redate(items, prefix, lockTimeout); err != nil {
		return sqlstore.Fetched{}, err
	}
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, nil
}

// FetchUnservedTurns locks instances whose orchestration no live route
// registers, counting no delivery; see sqlstore.TurnTx.
func (w *wtx) FetchUnservedTurns(olderMs int64, limit int, lockMs int64) (sqlstore.Fetched, error) {
	f, err := w.fetchUnservedTurns(olderMs, limit, lockMs)
	w.relaxed = len(f.Dead) == 0 // a dead-lettering commits durably
	return f, err
}

func (w *wtx) fetchUnservedTurns(olderMs int64, limit int, lockMs int64) (sqlstore.Fetched, error) {
	cands, err := w.queryStrings(sqlUnservedTurnCandidates, w.now, w.now-olderMs, limit)
	if err != nil || len(cands) == 0 {
		return sqlstore.Fetched{}, err
	}
	prefix := sqlstore.NewTokenPrefix()
	load := newTurnLoad(nil)
	items, _, dead, err := w.lockTurns(cands, nil, prefix, w.now+lockMs, w.now, 0, load)
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
	return sqlstore.Fetched{Items: items, Histories: histories, Dead: dead}, nil
}

// orchNamesArg is the orchestration-names argument of the turn
// candidate statements: a text array, or NULL for any name.
func orchNamesArg(names []string) any {
	if names == nil {
		return nil
	}
	return names
}

// redate moves the locks of items forward when the clock passed their
// expiry while the transaction ran (a slow transaction, a clock that
// jumped): a fetch never hands out a lease that is already expired. It
// returns the items whose locks it holds: after a COMMIT that carried
// the fetch's batch (fetchRound), an expired lock may have been taken over
// meanwhile; that item is left out (its messages are the new holder's).
func (w *wtx) redate(items []*provider.OrchestrationItem, prefix string, lockTimeout time.Duration) ([]*provider.OrchestrationItem, error) {
	now := w.p.now()
	if len(items) == 0 || items[0].LockedUntil.UnixMilli() > now {
		return items, nil
	}
	until := now + sqlenc.DurMs(lockTimeout)
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.InstanceID
	}
	held, err := w.queryStrings(sqlRedateLocks, ids, prefix, until)
	if err != nil {
		return nil, err
	}
	items = slices.DeleteFunc(items, func(it *provider.OrchestrationItem) bool { return !slices.Contains(held, it.InstanceID) })
	for _, it := range items {
		it.LockedUntil = msTime(until)
	}
	_, err = w.exec(sqlRedateTagged, ids, prefix, until)
	return items, err
}

// lockTurns locks those of the instances cands whose lock is free or
// expired, and whose advisory lock no other transaction holds (free, when
// the caller tried them already), with tokens
// prefix+ID until until, and tags their visible messages, adding count (1,
// or 0) to their deliveries: the items of their turns, without history,
// which it reads into load in the same round trip (finishLoad). lost are
// the candidates it did not lock or that had nothing deliverable. It
// serves the fetches of given instances (FetchUnservedTurns, TakeTurn);
// FetchTurns finds and locks its instances in one statement (fetchRound).
func (w *wtx) lockTurns(cands, free []string, prefix string, until, seen int64, count int, load *turnLoad) (items []*provider.OrchestrationItem, lost []string, dead []deadLetter, err error) {
	if free == nil {
		if free, err = w.queryStrings(sqlAdvisoryTryLock, w.p.lockSpace, cands); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, id := range cands {
		if !slices.Contains(free, id) {
			lost = append(lost, id) // another transaction works on it: try the next one
		}
	}
	if len(free) == 0 {
		return nil, lost, nil, nil
	}
	msgs := make(map[string][]sqlstore.TaggedMessage, len(free))
	locked := make(map[string]bool, len(free))
	b := &pgx.Batch{}
	// Planned once per connection (see sqlFetchPlan): the server plans
	// the turn's reads again at every call otherwise, which costs more
	// than running them.
	b.Queue(sqlFetchPlan)
	b.Queue(sqlLockAndTag, prefix, free, until, w.now, count, seen).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var inst string
			var id, attempts, visible *int64
			var data []byte
			if err := r.Scan(&inst, &id, &data, &attempts, &visible); err != nil {
				return err
			}
			locked[inst] = true
			if id != nil {
				msgs[inst] = append(msgs[inst], sqlstore.TaggedMessage{ID: *id, Data: data, Attempts: int(*attempts), Visible: *visible})
			}
			return nil
		})
	})
	// The turns' reads, in the same round trip; what belongs to the
	// instances not locked is not used.
	w.queueLoad(b, load, free)
	// The transaction goes on (a group's, a work ack's): what follows
	// is planned as the connection's settings say.
	b.Queue(sqlPlanDefault)
	b.Queue(sqlSeqscanDefault)
	if err = w.tx.SendBatch(w.ctx, b).Close(); err != nil {
		return nil, nil, nil, err
	}
	items, lost2, dead, err := w.settleLocked(free, locked, msgs, prefix, until)
	return items, append(lost, lost2...), dead, err
}

// fetchRound is a round of a turn fetch (FetchTurns): one statement
// (sqlFetchAndLock) finds up to want ready instances (not in skip, of the
// routes names), tries their advisory locks, locks those it got with
// tokens prefix+ID until until and tags their visible messages, counting a
// delivery; the same batch reads the instance rows and pending starts of
// those it locked into load. Their histories are read after it, only for
// instances that have one (finishLoad). It returns the items, the
// candidates lost (locked elsewhere, or with nothing deliverable), the
// messages dead-lettered and how many candidates it found.
//
// first: the batch is the first write of the fetch. Run alone
// (wtx.fold), it then carries the transaction's COMMIT, relaxed
// (sendLast): a fetch of instances without history (first turns) is one
// round trip. What may follow it (reading the histories, on the
// connection alone: readQuery) and, rarely, dead-lettering a message
// that cannot be decoded, releasing an instance left with nothing
// deliverable, a further round, re-dating locks that expired meanwhile,
// all token-checked, runs in a transaction of its own that FetchTurns
// commits; its writes to an instance take the instance's advisory lock
// again first, since the COMMIT released it.
func (w *wtx) fetchRound(want int, skip, names []string, prefix string, until, seen int64, load *turnLoad, first bool) (items []*provider.OrchestrationItem, lost []string, dead []deadLetter, cands int, err error) {
	type row struct {
		ord          int64
		inst         string
		got, locked  bool
		id, attempts *int64
		visible      *int64
		data         []byte
	}
	var rows []row
	_, lone := w.tx.(*lazyTx)
	last := first && lone && w.fold
	sql := sqlFetchAndLock
	if names != nil {
		sql = sqlFetchAndLockNamed
	}
	b := &pgx.Batch{}
	// Planned once per connection (see sqlFetchPlan).
	b.Queue(sqlFetchPlan)
	b.Queue(sql, seen, skip, w.p.lockSpace, want, orchNamesArg(names), prefix, until, w.now).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var fetched string
			var ord *int64
			var inst *string
			var got, locked *bool
			var x row
			if err := r.Scan(&fetched, &ord, &inst, &got, &locked, &x.id, &x.data, &x.attempts, &x.visible); err != nil {
				return err
			}
			if inst == nil {
				return nil // no candidate
			}
			x.ord, x.inst, x.got, x.locked = *ord, *inst, *got, *locked
			rows = append(rows, x)
			return nil
		})
	})
	w.queueMetas(b, load, sqlFetchedMetas)
	w.queueStarts(b, load, sqlFetchedStarts, w.now)
	if !last {
		b.Queue(sqlPlanDefault)
		b.Queue(sqlSeqscanDefault)
	}
	if last {
		w.relaxed = true
		err = w.sendLast(b)
	} else {
		err = w.tx.SendBatch(w.ctx, b).Close()
	}
	if err != nil {
		return nil, nil, nil, 0, err
	}
	// In the candidates' order, each one's messages by ID.
	slices.SortFunc(rows, func(a, b row) int {
		if c := cmp.Compare(a.ord, b.ord); c != 0 || a.id == nil || b.id == nil {
			return c
		}
		return cmp.Compare(*a.id, *b.id)
	})
	var free []string
	msgs := map[string][]sqlstore.TaggedMessage{}
	locked := map[string]bool{}
	for i, x := range rows {
		if i == 0 || rows[i-1].inst != x.inst {
			cands++
			if x.got {
				free = append(free, x.inst)
			} else {
				lost = append(lost, x.inst) // another transaction works on it
			}
		}
		if x.locked {
			locked[x.inst] = true
			if x.id != nil {
				msgs[x.inst] = append(msgs[x.inst], sqlstore.TaggedMessage{ID: *x.id, Data: x.data, Attempts: int(*x.attempts), Visible: *x.visible})
			}
		}
	}
	items, lost2, dead, err := w.settleLocked(free, locked, msgs, prefix, until)
	return items, append(lost, lost2...), dead, cands, err
}

// settleLocked turns the instances a fetch's batch locked (locked, of
// free, with their tagged messages msgs) into items: it dead-letters the
// messages that cannot be decoded and releases an instance left with
// nothing deliverable. lost are those of free it did not lock or
// released.
func (w *wtx) settleLocked(free []string, locked map[string]bool, msgs map[string][]sqlstore.TaggedMessage, prefix string, until int64) (items []*provider.OrchestrationItem, lost []string, dead []deadLetter, err error) {
	// relock takes again, after a COMMIT that carried the batch, the
	// advisory lock of an instance about to be written.
	relock := func(inst string) error {
		if !w.committed {
			return nil
		}
		return w.lockInstance(inst)
	}
	for _, inst := range free {
		if !locked[inst] {
			lost = append(lost, inst) // its lock is held: try the next one
			continue
		}
		relocked := false
		it, d, err := sqlstore.NewTurn(inst, prefix+inst, until, w.now, msgs[inst], func(m sqlstore.TaggedMessage, cause error) error {
			if !relocked {
				if err := relock(inst); err != nil {
					return err
				}
				relocked = true
			}
			return w.deadLetter(queueOrchestrator, sqlDeleteMessage, m.ID, inst, m.Data, cause)
		})
		if err != nil {
			return nil, nil, nil, err
		}
		dead = append(dead, d...)
		if it == nil {
			// Nothing deliverable: release the lock and move on.
			if !relocked {
				if err := relock(inst); err != nil {
					return nil, nil, nil, err
				}
			}
			if _, err := w.exec(sqlReleaseLock, inst, prefix+inst); err != nil {
				return nil, nil, nil, err
			}
			lost = append(lost, inst)
			continue
		}
		items = append(items, it)
	}
	return items, lost, dead, nil
}

// turnLoad is what a fetch reads for the turns it locks (queueLoad), by
// instance: the instance rows, the history each needs (only what cached
// does not hold) and when pending starts come due.
type turnLoad struct {
	cached func(string) (int64, int64, bool)
	// The cached position asked for, by instance.
	exs, afters map[string]int64
	metas       map[string]*provider.InstanceMeta
	rows        map[string][]sqlstore.StoredEvent
	starts      map[string]int64
	// histories: rows holds the histories read with the instance rows
	// (queueLoad); otherwise finishLoad reads them.
	histories bool
}

func newTurnLoad(cached func(string) (int64, int64, bool)) *turnLoad {
	return &turnLoad{cached: cached, exs: map[string]int64{}, afters: map[string]int64{},
		metas: map[string]*provider.InstanceMeta{}, rows: map[string][]sqlstore.StoredEvent{}, starts: map[string]int64{}}
}

// queueLoad queues on b the reads of the turns of instances ids (about to
// be locked by the statement queued before, or locked), in one round trip
// with it: finishLoad then keeps what the locked items need.
func (w *wtx) queueLoad(b *pgx.Batch, l *turnLoad, ids []string) {
	n := len(ids)
	exs := make([]int64, n)
	afters := make([]int64, n)
	for i, id := range ids {
		if l.cached != nil {
			if ex, last, ok := l.cached(id); ok && last > 0 {
				exs[i], afters[i] = ex, last
			}
		}
		l.exs[id], l.afters[id] = exs[i], afters[i]
	}
	w.queueMetas(b, l, sqlInstanceMetas, ids)
	l.histories = true
	b.Queue(sqlHistoriesOf, ids, exs, afters).Query(func(r pgx.Rows) error { return forEach(r, func() error { return scanEvent(r, l.rows) }) })
	w.queueStarts(b, l, sqlPendingStarts, ids, w.now)
}

// queueMetas queues on b sql, the read of instance rows (sqlInstanceMetas
// or sqlFetchedMetas) with args, into l.
func (w *wtx) queueMetas(b *pgx.Batch, l *turnLoad, sql string, args ...any) {
	b.Queue(sql, args...).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var id, status string
			m := &provider.InstanceMeta{}
			if err := r.Scan(&id, &m.OrchestrationName, &m.OrchestrationVersion, &status,
				&m.CurrentExecutionID, &m.ParentInstanceID, &m.ParentExecutionID); err != nil {
				return err
			}
			m.Status = provider.Status(status)
			l.metas[id] = m
			return nil
		})
	})
}

// queueStarts queues on b sql, the read of when pending starts come due
// (sqlPendingStarts or sqlFetchedStarts) with args, into l.
func (w *wtx) queueStarts(b *pgx.Batch, l *turnLoad, sql string, args ...any) {
	b.Queue(sql, args...).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var id string
			var delayed, queued int64
			if err := r.Scan(&id, &delayed, &queued); err != nil {
				return err
			}
			if at := max(delayed, queued); at > 0 {
				l.starts[id] = at
			}
			return nil
		})
	})
}

// finishLoad sets the instance of each locked item from what queueLoad
// read, and returns the history each needs (setting HistoryAfter where the
// cached part is left out), reading whole again the histories whose cached
// position the store does not have. The histories are decoded after the
// commit (sqlstore.DecodeHistories).
func (w *wtx) finishLoad(items []*provider.OrchestrationItem, l *turnLoad) (map[string][]sqlstore.StoredEvent, error) {
	rows := make(map[string][]sqlstore.StoredEvent, len(items))
	if !l.histories {
		if err := w.readHistories(items, l); err != nil {
			return nil, err
		}
	}
	var reload []string
	for _, it := range items {
		id := it.InstanceID
		m := l.metas[id]
		it.Instance = m
		if m == nil || m.CurrentExecutionID == 0 {
			if m != nil {
				if at := l.starts[id]; at > 0 {
					m.StartAt = msTime(at)
				}
			}
			continue
		}
		evs := l.rows[id]
		if after := l.afters[id]; after > 0 && l.exs[id] == m.CurrentExecutionID {
			// A cached position is usable only if the store has that
			// event: the query returned it first. Otherwise (the instance
			// was purged and recreated) load the whole history.
			if len(evs) == 0 || evs[0].ID != after {
				reload = append(reload, id)
				continue
			}
			it.HistoryAfter = after
			evs = evs[1:]
		}
		rows[id] = evs
	}
	if len(reload) > 0 {
		zeros := make([]int64, len(reload))
		err := w.readQuery(sqlHistoriesOf, func(r pgx.Rows) error { return scanEvent(r, rows) }, reload, zeros, zeros)
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// readHistories reads into l the histories of those of items whose
// instance has one (a fetch round read their rows but not their
// histories: fetchRound), each from the position l.cached holds, in one
// statement.
func (w *wtx) readHistories(items []*provider.OrchestrationItem, l *turnLoad) error {
	var ids []string
	var exs, afters []int64
	for _, it := range items {
		id := it.InstanceID
		if m := l.metas[id]; m == nil || m.CurrentExecutionID == 0 {
			continue
		}
		var ex, after int64
		if l.cached != nil {
			if e, last, ok := l.cached(id); ok && last > 0 {
				ex, after = e, last
			}
		}
		l.exs[id], l.afters[id] = ex, after
		ids, exs, afters = append(ids, id), append(exs, ex), append(afters, after)
	}
	l.histories = true
	if len(ids) == 0 {
		return nil
	}
	return w.readQuery(sqlHistoriesOf, func(r pgx.Rows) error { return scanEvent(r, l.rows) }, ids, exs, afters)
}

// scanEvent appends the event of r, a row of sqlHistoriesOf, to its
// instance's in rows.
func scanEvent(r pgx.Rows, rows map[string][]sqlstore.StoredEvent) error {
	var id string
	var ev sqlstore.StoredEvent
	if err := r.Scan(&id, &ev.ID, &ev.Data); err != nil {
		return err
	}
	rows[id] = append(rows[id], ev)
	return nil
}

// readQuery runs sql, a read of a fetch, planned as the fetch's
// statements are (sqlFetchPlan), and calls scan for each row: in the
// transaction, or, after a lone fetch's batch committed it (sendLast) and
// nothing began another, on the connection alone, in one round trip (no
// BEGIN or COMMIT). The instances it reads are locked by the fetch's
// tokens, so no other transaction writes their rows meanwhile.
func (w *wtx) readQuery(sql string, scan func(pgx.Rows) error, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sqlFetchPlan)
	b.Queue(sql, args...).Query(func(r pgx.Rows) error { return forEach(r, func() error { return scan(r) }) })
	if lt, ok := w.tx.(*lazyTx); ok && w.committed && !lt.begun {
		// The batch runs as one implicit transaction: the settings are
		// its own.
		return lt.conn.SendBatch(w.ctx, b).Close()
	}
	b.Queue(sqlPlanDefault)
	b.Queue(sqlSeqscanDefault)
	return w.tx.SendBatch(w.ctx, b).Close()
}

// forEach calls fn for each row of r.
func forEach(r pgx.Rows, fn func() error) error {
	for r.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return r.Err()
}

// insertMessage enqueues m (see sqlstore.InsertMessage). A plain start
// (no idempotency key, execution lock, start-if-absent or OnExists)
// creates its instance and enqueues its message in one round trip; when
// it is the transaction's last write (last), its COMMIT rides in that
// round trip too (sendLast: an instance that exists already makes the
// statement write nothing, so the call fails having committed nothing).
func (w *wtx) insertMessage(m *sqlenc.Msg, last bool) error {
	c := m.Create
	if c == nil || c.IdemKey != "" || c.LockKey != "" || c.IfAbsent || c.OnExists != nil {
		return sqlstore.InsertMessage(w, m)
	}
	m.Existed = false
	visible := m.VisibleAt
	if visible == 0 {
		visible = w.now
	}
	var created bool
	b := &pgx.Batch{}
	_ = w.lockInstancesShared(b, []string{m.InstanceID})
	b.Queue(sqlCreateAndEnqueue, m.InstanceID, c.Name, c.Version, c.Input, c.Parent, c.ParentExec, w.now,
		string(m.Item), visible).QueryRow(func(r pgx.Row) error { return r.Scan(&created) })
	// Noted before the batch, for a COMMIT that rides with it.
	ch := w.changes
	w.changes.addInstance(m.InstanceID)
	w.changes.orch = true
	send := func() error { return w.tx.SendBatch(w.ctx, b).Close() }
	if last {
		send = func() error { return w.sendLast(b) }
	}
	if err := send(); err != nil {
		return err
	}
	if !created {
		w.changes = ch
		return fmt.Errorf("creating instance %q: %w", m.InstanceID, provider.ErrInstanceExists)
	}
	return nil
}

// Now is the transaction's time; see sqlstore.MessageTx.
func (w *wtx) Now() int64 { return w.now }

// CreateInstance inserts m's instance row; see sqlstore.MessageTx.
func (w *wtx) CreateInstance(m *sqlenc.Msg) (bool, error) {
	c := m.Create
	n, err := w.exec(sqlCreateInstance, m.InstanceID, c.Name, c.Version, c.Input, c.Parent, c.ParentExec, w.now)
	if err != nil || n == 0 {
		return false, err
	}
	w.changes.addInstance(m.InstanceID)
	return true, nil
}

// RecordStart writes a created start's idempotency key and execution lock
// (or its place in the lock's queue); see sqlstore.MessageTx.
func (w *wtx) RecordStart(m *sqlenc.Msg, visible int64, queued bool) error {
	c := m.Create
	if c.IdemKey != "" {
		if _, err := w.exec(sqlIdemInsert, c.IdemKey, m.InstanceID, w.now, w.now+c.IdemTTL); err != nil {
			return err
		}
	}
	var err error
	switch {
	case queued:
		_, err = w.exec(sqlXLockQueueInsert, c.LockKey, m.InstanceID, string(m.Item), visible, c.LockTTL, w.now)
	case c.LockKey != "":
		_, err = w.exec(sqlXLockInsert, c.LockKey, m.InstanceID, w.now, c.LockTTL)
	}
	return err
}

// InstanceStatus takes the instance's lock, shared, and returns its
// status; see sqlstore.MessageTx.
func (w *wtx) InstanceStatus(id string) (provider.Status, error) {
	if err := w.lockInstancesShared(nil, []string{id}); err != nil {
		return "", err
	}
	var st provider.Status
	err := w.query(sqlInstanceStatus, func(r pgx.Rows) error { return r.Scan(&st) }, id)
	return st, err
}

// RecordExisted writes the idempotency key of a start-if-absent that
// found its instance; see sqlstore.MessageTx.
func (w *wtx) RecordExisted(m *sqlenc.Msg) error {
	c := m.Create
	_, err := w.exec(sqlIdemInsert, c.IdemKey, m.InstanceID, w.now, w.now+c.IdemTTL)
	return err
}

// EnqueueMessage inserts m on the orchestrator queue; see
// sqlstore.MessageTx.
func (w *wtx) EnqueueMessage(m *sqlenc.Msg, visible int64) error {
	b := &pgx.Batch{}
	_ = w.lockInstancesShared(b, []string{m.InstanceID})
	b.Queue(sqlInsertMessage, m.InstanceID, string(m.Item), visible, w.now)
	w.changes.orch = true
	return w.tx.SendBatch(w.ctx, b).Close()
}

// ClaimDedupKey records a message's deduplication key; see
// sqlstore.TurnTx.
func (w *wtx) ClaimDedupKey(instance, key string) (bool, error) {
	n, err := w.exec(sqlDedupInsert, instance, key, w.now)
	return n > 0, err
}

// InsertMessages enqueues msgs: the plain ones (no instance to create) in
// one multi-row insert, the others one by one. See sqlstore.TurnTx.
func (w *wtx) InsertMessages(msgs []*sqlenc.Msg) error {
	var ids, items []string
	var vis []int64
	for _, m := range msgs {
		if m.Create != nil {
			// The only message, after no write (no deduplication key
			// claimed): the transaction's last statement.
			if err := w.insertMessage(m, len(msgs) == 1 && m.DedupKey == ""); err != nil {
				return err
			}
			continue
		}
		v := m.VisibleAt
		if v == 0 {
			v = w.now
		}
		ids, items, vis = append(ids, m.InstanceID), append(items, string(m.Item)), append(vis, v)
	}
	if len(ids) == 0 {
		return nil
	}
	w.changes.orch = true
	b := &pgx.Batch{}
	_ = w.lockInstancesShared(b, ids)
	b.Queue(sqlInsertMessages, ids, items, vis, w.now)
	// The enqueue's last statements: its COMMIT rides with them.
	return w.sendLast(b)
}

// LeaseInserted leases the worker rows ApplyTurn inserted to lease; see
// sqlstore.TurnTx.
func (w *wtx) LeaseInserted(lockMs int64) ([]*provider.WorkItemLease, error) {
	return w.leases, nil
}

// CheckTurnLock takes the instance's advisory lock and reads its lock row
// (in one round trip); see sqlstore.TurnTx.
func (w *wtx) CheckTurnLock(inst, token string) (held, exists bool, err error) {
	// In a pipelined group no other call writes what this reads: the
	// instance's lock row is only ever changed by the ack of its holder
	// (or by a fetch once it expired, which fails this check anyway), and
	// an activity ack carrying a turn of the instance finds it locked.
	markPrivate(w.tx)
	b := &pgx.Batch{}
	w.queueLockInstance(b, inst)
	b.Queue(sqlCheckLock, inst).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var tok string
			var until int64
			if err := r.Scan(&tok, &until, &exists); err != nil {
				return err
			}
			held = tok == token && until > w.now
			return nil
		})
	})
	err = w.tx.SendBatch(w.ctx, b).Close()
	return held, exists, err
}

// ApplyTurn performs steps (b) to (k) of a turn ack for instance inst,
// whose advisory lock the transaction holds; see sqlstore.TurnTx.
func (w *wtx) ApplyTurn(inst string, e *sqlenc.Ack) error {
	w.relaxTurn(e)
	b := &pgx.Batch{}
	t := w.queueTurn(b, inst, e, nil)
	return w.afterTurn(inst, e, t, w.sendTurn(b, t))
}

// ApplyLockedTurn performs steps (a) to (k) of a turn ack that creates
// its instance if it is missing, in one round trip: the instance's
// advisory lock, the check of the turn's lock (which fails the batch
// before any write when the lock is lost) and the writes of ApplyTurn.
// See sqlstore.LockedTurnApplier.
func (w *wtx) ApplyLockedTurn(inst string, e *sqlenc.Ack) error {
	w.relaxTurn(e)
	b := &pgx.Batch{}
	w.queueLockInstance(b, inst)
	b.Queue(sqlCheckTurnLock, inst, e.Token, w.now)
	t := w.queueTurn(b, inst, e, nil)
	err := w.sendTurn(b, t)
	if checkFailed(err, codeLockLost) {
		return fmt.Errorf("turn ack for %q: %w", inst, provider.ErrLockLost)
	}
	return w.afterTurn(inst, e, t, err)
}

// relaxTurn makes the commit of the ack of turn e relaxed (see Relaxed
// commits) unless the turn ends its execution: a turn is deterministic
// code run over what the store holds durably (its messages, its history),
// so losing its ack to a server crash only means running it again, as
// after any ack that failed. An ack that ends an execution (completed,
// failed, canceled, continued as new) waits for the WAL flush: a client
// waiting for the end may act on it at once.
func (w *wtx) relaxTurn(e *sqlenc.Ack) {
	w.relaxed = !e.Terminal
}

// sendTurn sends b, the batch of turn t: with the transaction's COMMIT if
// it is the last (sendLast).
func (w *wtx) sendTurn(b *pgx.Batch, t *queuedTurn) error {
	if t.last {
		return w.sendLast(b)
	}
	return w.tx.SendBatch(w.ctx, b).Close()
}

// checkFailed reports whether err is the failure of a check of an ack's
// batch with SQLSTATE code (duroxide_check).
func checkFailed(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// queuedTurn is what the batch of a turn ack reports back for the steps
// that follow it (afterTurn).
type queuedTurn struct {
	status  string        // the instance's status after the ack
	creates []*sqlenc.Msg // messages that create instances, inserted after the batch
	// released: the batch released the execution locks of an instance
	// that ended, freeing keys.
	released bool
	keys     []string
	// last: the batch is the transaction's last (a lone write's turn that
	// starts no instance): its COMMIT rides with it (sendLast), guarded so
	// that afterTurn has nothing to write.
	last bool
}

// queueTurn queues on b steps (b) to (k) of a turn ack, as ApplyTurn
// performs them, except the starts of new instances and the release of a
// terminal instance's execution locks, which afterTurn performs, and the
// insertion of reused, a work item of e that the batch leases by other
// means (AckWorkThen), if not nil.
func (w *wtx) queueTurn(b *pgx.Batch, inst string, e *sqlenc.Ack, reused *sqlenc.Work) *queuedTurn {
	t := &queuedTurn{}
	// (b) to (f) and (g), (h) in one round trip.
	var completed any
	if e.Terminal {
		completed = w.now
	}
	ids := make([]int64, len(e.Events))
	kinds := make([]string, len(e.Events))
	datas := make([]string, len(e.Events))
	for i, ev := range e.Events {
		ids[i], kinds[i], datas[i] = ev.ID, ev.Kind, string(ev.Data)
	}
	// Whether the batch is the transaction's last (its COMMIT rides with
	// it): the turn starts no instance (those are inserted after the
	// batch). An instance that ends releases its execution locks.
	t.last = w.fold && !slices.ContainsFunc(e.Msgs, func(m *sqlenc.Msg) bool { return m.Create != nil })
	t.released = e.Terminal && e.Status != string(provider.StatusContinuedAsNew)
	// The execution, the instance, the history and the execution locks of
	// a live instance, in one statement, which also guards a last batch
	// whose turn does not end its instance: were the instance left ended,
	// its locks would be released after the batch.
	guard := t.last && !t.released
	scan := func(r pgx.Row) error { return r.Scan(&t.status) }
	if e.KeepsMetadata() {
		b.Queue(sqlUpdateTurn, inst, e.ExecutionID, w.now, e.Custom, e.SetCustom, ids, kinds, datas, guard).QueryRow(scan)
	} else {
		b.Queue(sqlUpsertTurn, inst, e.ExecutionID, e.Status, e.Input, e.Output, e.ErrJSON, w.now, completed,
			e.Name, e.Version, e.Custom, e.SetCustom, e.Parent, e.ParentExec, ids, kinds, datas, guard).QueryRow(scan)
	}
	if e.HasValues() {
		b.Queue(sqlValuesApply, inst, e.SetKeys, e.SetValues, e.ClearKeys, w.now)
	}
	var plain, leased []*sqlenc.Work
	for _, wk := range e.Work {
		if wk == reused {
			continue
		}
		if wk.Lease && e.LeaseMs > 0 {
			leased = append(leased, wk)
		} else {
			plain = append(plain, wk)
		}
	}
	if len(plain) > 0 {
		w.queueWork(b, plain, nil)
		w.changes.work = true
	}
	if len(leased) > 0 {
		// Inserted locked to the caller: nobody is woken.
		w.queueLeasedWork(b, leased, e.Canceled, e.LeaseMs)
	}
	if len(e.Canceled) > 0 {
		is := make([]string, len(e.Canceled))
		es := make([]int64, len(e.Canceled))
		as := make([]int64, len(e.Canceled))
		for i, c := range e.Canceled {
			is[i], es[i], as[i] = c.InstanceID, c.ExecutionID, c.ActivityID
		}
		b.Queue(sqlCancelActivities, is, es, as)
	}
	// (i) Orchestrator items that create nothing (timers, completions to a
	// parent, continue-as-new) go in the same round trip; starts of new
	// instances follow it.
	if plain := w.queuePlainMessages(b, e.Msgs); len(plain) < len(e.Msgs) {
		for _, m := range e.Msgs {
			if m.Create != nil {
				t.creates = append(t.creates, m)
			}
		}
	}
	if t.released {
		// An instance that ended releases its execution locks (and
		// leaves the queues of others); afterTurn hands them over.
		// The keys' advisory locks come first (see sqlXLockKeysOf).
		if t.last {
			// Nothing to hand over (it holds no lock, so the release
			// frees no key), or the turn commits separately.
			b.Queue(sqlGuardNoExecutionLocks, inst)
		}
		b.Queue(sqlXLockKeysOfEnded, w.p.lockSpace, inst)
		b.Queue(sqlXLockReleaseEnded, inst).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var k string
				if err := r.Scan(&k); err != nil {
					return err
				}
				t.keys = append(t.keys, k)
				return nil
			})
		})
	}
	// (j) Delete exactly the messages of this turn, (k) release the lock.
	if e.Token != "" {
		w.queueFinishTurn(b, inst, e.Token)
	}
	w.changes.addInstance(inst)
	if e.Terminal && e.Status != string(provider.StatusContinuedAsNew) {
		w.changes.ending = append(w.changes.ending, inst)
	}
	// The notification other nodes get, decided in SQL (are messages left
	// for the instance?), unless starts or lock hand-overs follow (a
	// last batch has none to follow).
	inline := t.last || len(t.creates) == 0 && (e.Status == nil || !e.Terminal || e.Status == string(provider.StatusContinuedAsNew))
	if inline {
		w.askOrch = append(w.askOrch, inst)
	}
	return t
}

// afterTurn completes a turn ack whose batch (queueTurn) returned err:
// it reports a duplicate event as such, inserts the starts of new
// instances, settles the execution locks of a terminal instance, and
// re-dates the leases of the ack's worker rows if the batch ran long.
func (w *wtx) afterTurn(inst string, e *sqlenc.Ack, t *queuedTurn, err error) error {
	if err != nil {
		if len(e.Events) > 0 {
			if ie := interpretError(err, nil); isDuplicateEvent(ie) {
				return fmt.Errorf("appending history to %q execution %d: %w", inst, e.ExecutionID, ie)
			}
		}
		return err
	}
	if !provider.Status(t.status).IsTerminal() {
		w.changes.live = append(w.changes.live, inst)
	}
	if t.last {
		// Committed with its batch, whose guards left nothing to do
		// but the leases' dates.
		w.redateCommitted(e.LeaseMs)
		return nil
	}
	for _, m := range t.creates {
		if err := w.insertMessage(m, false); err != nil {
			return err
		}
	}
	keys := t.keys
	if provider.Status(t.status).IsTerminal() && !t.released {
		var err error
		if _, err = w.exec(sqlXLockKeysOf, w.p.lockSpace, []string{inst}); err != nil {
			return err
		}
		if keys, err = w.queryStrings(sqlXLockReleaseInstance, inst); err != nil {
			return err
		}
	}
	if len(keys) > 0 {
		if err := w.promoteAll(keys); err != nil {
			return err
		}
	}
	return w.redateLeases(e.LeaseMs)
}

// queuePlainMessages queues on b the insertion, in one statement, of the
// messages of msgs that create no instance, and returns them.
func (w *wtx) queuePlainMessages(b *pgx.Batch, msgs []*sqlenc.Msg) []*sqlenc.Msg {
	var plain []*sqlenc.Msg
	var ids, items []string
	var vis []int64
	for _, m := range msgs {
		if m.Create != nil {
			continue
		}
		v := m.VisibleAt
		if v == 0 {
			v = w.now
		}
		plain = append(plain, m)
		ids, items, vis = append(ids, m.InstanceID), append(items, string(m.Item)), append(vis, v)
	}
	if len(plain) > 0 {
		w.changes.orch = true
		_ = w.lockInstancesShared(b, ids)
		b.Queue(sqlInsertMessages, ids, items, vis, w.now)
	}
	return plain
}

// queueFinishTurn queues on b the consumption of the turn's messages and
// the release of the instance lock, noting whether messages that arrived
// during the turn (or are due later) still wait for it: dispatchers that
// found it locked must look again.
func (w *wtx) queueFinishTurn(b *pgx.Batch, inst, token string) {
	b.Queue(sqlFinishTurn, inst, token).QueryRow(func(r pgx.Row) error {
		var left bool
		if err := r.Scan(&left); err != nil {
			return err
		}
		if left {
			w.changes.orch = true
		}
		return nil
	})
}

// workCols are the columns of worker rows to insert, one array each, as
// sqlInsertWork and sqlInsertWorkLeased take them.
type workCols struct {
	is, items, queues []string
	ss, names         []*string // NULL: none
	es, as            []int64
}

func newWorkCols(ws []*sqlenc.Work) *workCols {
	n := len(ws)
	c := &workCols{is: make([]string, n), items: make([]string, n), queues: make([]string, n),
		ss: make([]*string, n), names: make([]*string, n), es: make([]int64, n), as: make([]int64, n)}
	for i, wk := range ws {
		c.is[i], c.es[i], c.as[i], c.items[i] = wk.InstanceID, wk.ExecutionID, wk.ActivityID, string(wk.Item)
		if s, ok := wk.SessionID.(string); ok {
			c.ss[i] = &s
		}
		name, queue := wk.Route()
		if s, ok := name.(string); ok {
			c.names[i] = &s
		}
		c.queues[i] = queue
	}
	return c
}

// queueWork queues the insertion of worker rows on b; with leased set the
// rows are inserted invisible (to be leased by the ack) and leased is
// called with each row's ID and its index in ws.
func (w *wtx) queueWork(b *pgx.Batch, ws []*sqlenc.Work, leased func(id int64, k int)) {
	c := newWorkCols(ws)
	vs := make([]int64, len(ws))
	for i, wk := range ws {
		switch {
		case leased != nil:
			vs[i] = w.now + 1
		case wk.VisibleAt != 0:
			vs[i] = wk.VisibleAt
		default:
			vs[i] = w.now
		}
	}
	q := b.Queue(sqlInsertWork, c.is, c.es, c.as, c.ss, c.items, vs, w.now, c.names, c.queues)
	if leased != nil {
		q.Query(func(r pgx.Rows) error {
			k := 0
			return forEach(r, func() error {
				var id int64
				if err := r.Scan(&id); err != nil {
					return err
				}
				leased(id, k)
				k++
				return nil
			})
		})
	}
}

// queueLeasedWork queues on b the insertion of worker rows locked to the
// acking caller for lockMs, dated from the clock read now (after the lock
// waits of the ack, which come before its ApplyTurn), and notes their
// leases for LeaseInserted, in insertion order; rows that the same ack
// cancels (canceled) are deleted by it and not leased.
func (w *wtx) queueLeasedWork(b *pgx.Batch, ws []*sqlenc.Work, canceled []provider.ActivityRef, lockMs int64) {
	prefix, until := w.startLeases(lockMs)
	c := newWorkCols(ws)
	b.Queue(sqlInsertWorkLeased, c.is, c.es, c.as, c.ss, c.items, until, w.now, prefix, c.names, c.queues).Query(func(r pgx.Rows) error {
		k := 0
		return forEach(r, func() error {
			var id int64
			if err := r.Scan(&id); err != nil {
				return err
			}
			wk := ws[k]
			k++
			if slices.ContainsFunc(canceled, func(c provider.ActivityRef) bool {
				return c.InstanceID == wk.InstanceID && c.ExecutionID == wk.ExecutionID && c.ActivityID == wk.ActivityID
			}) {
				return nil
			}
			w.noteLease(prefix, until, id, wk)
			return nil
		})
	})
}

// startLeases starts the leases of the worker rows an ack leases to its
// caller for lockMs, dated from the clock read now (after the lock waits
// of the ack, which come before its ApplyTurn): it returns their token
// prefix and their expiry. The ack leases rows with them once.
func (w *wtx) startLeases(lockMs int64) (prefix string, until int64) {
	prefix = sqlstore.NewTokenPrefix()
	w.leasePrefix, w.leaseFrom = prefix, w.p.now()
	return prefix, w.leaseFrom + lockMs
}

// noteLease notes for LeaseInserted the lease of worker row id, which
// holds wk, under a token of prefix (startLeases) until until.
func (w *wtx) noteLease(prefix string, until, id int64, wk *sqlenc.Work) {
	sess, _ := wk.SessionID.(string)
	w.leases = append(w.leases, &provider.WorkItemLease{
		LockToken: prefix + strconv.FormatInt(id, 10), LockedUntil: msTime(until), AttemptCount: 1,
		InstanceID: wk.InstanceID, ExecutionID: wk.ExecutionID, ActivityID: wk.ActivityID,
		SessionID: sess, Item: wk.Msg.Item,
	})
}

// redateLeases moves the leases of the worker rows the ack inserted locked
// (queueLeasedWork) forward when more than a tenth of their lifetime
// passed while the ack's batch ran (it waited for the instance's lock, or
// the clock jumped): a lease is dated from when its rows were locked, so
// that the caller gets the lifetime it asked for.
func (w *wtx) redateLeases(lockMs int64) error {
	if len(w.leases) == 0 {
		return nil
	}
	now := w.p.now()
	if now-w.leaseFrom <= lockMs/10 {
		return nil
	}
	until := now + lockMs
	ids := make([]int64, len(w.leases))
	for i, l := range w.leases {
		ids[i], _ = sqlstore.TokenRow(l.LockToken)
		l.LockedUntil = msTime(until)
	}
	w.leaseFrom = now
	_, err := w.exec(sqlRedateWork, ids, w.leasePrefix, until)
	return err
}

// redateCommitted is redateLeases for leases already committed (the
// ack's batch carried its COMMIT): their rows are re-dated by a statement
// of its own, and the leases only if it re-dated every row (a row whose
// lease expired meanwhile may have been taken by another fetch). A lease
// left as it was is dropped by the caller once expired
// (sqlenc.UnexpiredLeases).
func (w *wtx) redateCommitted(lockMs int64) {
	lt, ok := w.tx.(*lazyTx)
	if !ok || len(w.leases) == 0 {
		return
	}
	now := w.p.now()
	if now-w.leaseFrom <= lockMs/10 {
		return
	}
	until := now + lockMs
	ids := make([]int64, len(w.leases))
	for i, l := range w.leases {
		ids[i], _ = sqlstore.TokenRow(l.LockToken)
	}
	tag, err := lt.conn.Exec(w.ctx, sqlRedateWork, ids, w.leasePrefix, until)
	if err != nil || tag.RowsAffected() != int64(len(ids)) {
		return
	}
	w.leaseFrom = now
	for _, l := range w.leases {
		l.LockedUntil = msTime(until)
	}
}

// FinishTurn consumes the turn's messages and releases the instance lock
// (see queueFinishTurn and sqlstore.TurnTx).
func (w *wtx) FinishTurn(inst, token string) error {
	b := &pgx.Batch{}
	w.queueFinishTurn(b, inst, token)
	return w.tx.SendBatch(w.ctx, b).Close()
}

// AbandonTurn releases the instance lock held by token, under the
// instance's advisory lock; see sqlstore.TurnTx.
func (w *wtx) AbandonTurn(inst, token string, delayMs int64, undo int, untilStart bool, lastErr []byte) (bool, error) {
	if err := w.lockInstance(inst); err != nil {
		return false, err
	}
	n, err := w.exec(sqlAbandonLock, inst, token, w.now)
	if err != nil || n == 0 {
		return false, err
	}
	if _, err := w.exec(sqlUntagMessages, inst, token, w.now+delayMs, undo, untilStart); err != nil {
		return false, err
	}
	// The instance is ready again, now or after the delay.
	w.changes.orch = true
	if lastErr != nil {
		// An instance without a row (a message for an unknown instance)
		// updates nothing: the abandon creates no instance.
		_, err = w.exec(sqlSetLastError, inst, string(lastErr), w.now)
	}
	return true, err
}

// RenewTurn extends the instance lock token holds and its tagged
// messages in one statement; see sqlstore.TurnTx.
func (w *wtx) RenewTurn(inst, token string, extendMs int64) (bool, error) {
	var held bool
	err := w.tx.QueryRow(w.ctx, sqlRenewLock, inst, token, w.now, w.now+extendMs).Scan(&held)
	return held, err
}
