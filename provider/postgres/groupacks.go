package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Set-based activity acks.
//
// The plain activity acks of a pipelined group (a completion that starts
// nothing, no WorkAck.Then: sqlstore.WorkAckBatcher) are applied together,
// by one call of the group that stands for all of them (ackBatch.run): one
// statement deletes their worker rows and enqueues the completions of the
// acks whose rows it deleted (sqlAckWorks), and one asks, for the
// instances whose turns they may take, whether each is busy and, if not,
// tries its advisory lock (sqlInstancesTakeable). Then each ack that
// succeeded runs the rest of its call (TakeTurn) on a transaction of its
// own view, so that its notifications and results are its own. A group of
// n such acks costs those two statements instead of four per ack (its
// deletion, its completion's insert, which fires the scheduling trigger
// once per insert, the busy question and the lock tried). An ack whose
// token no longer holds its row unexpired deletes nothing and enqueues
// nothing: it fails alone with ErrLockLost, as alone, and the group
// commits the others, with no rollback. Of two acks of one row with one
// token the second fails so, as run after the first. Anything else that
// fails (a statement, a TakeTurn) fails the call and so, as for any call
// that failed after sending, rolls the group back and runs each ack alone.
//
// Lock order. A group takes the locks of the instances only its batched
// acks declare in shared mode, not exclusively (the others as before), so
// that two groups of acks for the same instances, which the fan-out of one
// orchestration's activities makes of most groups, run at once on two
// lanes instead of one after the other (measured: most of such a group's
// time went into waiting for the other lane's group to commit). The
// exclusive mode kept two groups from locking the scheduling rows
// (orchestrator_ready) of instances they both hold in different orders,
// call by call. Here each instance held shared has its scheduling row
// locked by one statement only, sqlAckWorks, whose trigger upserts the
// rows in instance order (its INSERT ... ORDER BY instance_id ... ON
// CONFLICT), and since migration 0016 only the rows the completions
// change: as a lone enqueue does, holding its instances shared and
// inserting its messages in one statement. So among the holders of shared
// locks every transaction locks the scheduling rows of the instances it
// holds shared in ascending order, in one statement, and none waits, while
// holding such a row, for a row of a lower instance: no cycle. A holder of
// an exclusive lock (a turn ack, a group's instance that other calls
// touch, a fetch or a TakeTurn whose try succeeded) is the only holder, so
// no other transaction holds or waits for that instance's rows. The
// advisory locks themselves are still taken first, in one statement, in
// instance order, before any row lock. The worker rows a batch deletes
// are locked by their acks' tokens only: a fetch skips locked rows and
// never waits, and a turn ack that cancels an activity holds its
// instance exclusively, which excludes the batch's shared holding. A
// deadlock that remains possible (two groups acking the same rows, or
// touching the same sessions, in different orders) is broken by the
// server and its victim group runs each call alone, as before.
//
// A TakeTurn whose instance another group holds shared finds it busy or
// fails to try its lock, and leaves the turn to a fetch: the completion
// was enqueued and its notification wakes the fetchers.
//
// Nor do the acks try their turns when a call of the group runs after
// their call (pipelineOrder: a fetch, or an enqueue behind them): a turn
// taken is a further round of their call (its lock, its messages, its
// history) after that call sent its own, so the group was rolled back and
// ran again call after call (serialEquivalent), its statements paid
// twice. In the bench's fan-out that was about one group in forty, each
// with its turn acks' activities inserted twice. The acks then leave
// their turns to a fetch (the group's own, or the next) instead.

// ackBatch is the plain activity acks of one pipelined group, applied by
// one call that stands for all of them.
type ackBatch struct {
	group []sqlstore.Request[*groupOp]
	idx   []int // the batched acks' indices in group
	// calls is the group with the batched acks replaced by one call, at
	// index at; orig is each call's index in group (-1 for that call).
	calls []sqlstore.Request[*groupOp]
	at    int
	orig  []int
	// shared are the instances only batched acks declare: the group holds
	// them in shared mode.
	shared map[string]bool
	// noTurns: a call of the group runs after the acks' call, which must
	// then take no further round, so no turn (see the comment above).
	noTurns bool
	// The batched acks' outcomes and transactions, once run succeeded.
	errs []error
	ws   []*wtx
}

// newAckBatch returns the ackBatch of group, nil if it holds no plain
// activity ack. One ack is worth it too: its two statements replace its
// three, and its instance is held shared.
func newAckBatch(group []sqlstore.Request[*groupOp]) *ackBatch {
	b := &ackBatch{group: group, at: -1}
	for i, r := range group {
		if r.Op.ack != nil {
			b.idx = append(b.idx, i)
		}
	}
	if len(b.idx) == 0 {
		return nil
	}
	b.shared = map[string]bool{}
	var locks []sqlstore.Lock
	for _, i := range b.idx {
		for _, l := range group[i].Op.locks {
			locks = append(locks, l)
			b.shared[l.Instance] = true
		}
	}
	for i, r := range group {
		if r.Op.ack != nil {
			if b.at < 0 {
				b.at = len(b.calls)
				b.orig = append(b.orig, -1)
				b.calls = append(b.calls, sqlstore.Request[*groupOp]{Ctx: context.Background(),
					Op: &groupOp{op: "acking work items", locks: locks, fn: b.run}})
			}
			continue
		}
		for _, l := range r.Op.locks {
			delete(b.shared, l.Instance)
		}
		if rank := pipelineRank(r.Op); rank == 2 || rank == 1 && b.at >= 0 {
			b.noTurns = true
		}
		b.orig = append(b.orig, i)
		b.calls = append(b.calls, r)
	}
	return b
}

// expand turns the outcomes of calls (errs, ws) into those of group.
func (b *ackBatch) expand(errs []error, ws []*wtx) ([]error, []*wtx) {
	gerrs, gws := make([]error, len(b.group)), make([]*wtx, len(b.group))
	for j, i := range b.orig {
		if i >= 0 {
			gerrs[i], gws[i] = errs[j], ws[j]
		}
	}
	for k, i := range b.idx {
		if errs[b.at] != nil {
			gerrs[i] = errs[b.at]
		} else {
			gerrs[i], gws[i] = b.errs[k], b.ws[k]
		}
	}
	return gerrs, gws
}

// run applies the batched acks in w (see the comment above).
func (b *ackBatch) run(w *wtx) error {
	n := len(b.idx)
	b.errs, b.ws = make([]error, n), make([]*wtx, n)
	var (
		ids    []int64
		tokens []string
		insts  []*string
		items  []string
		vis    []int64
		seen   = map[rowToken]bool{}
	)
	// The instances whose turns the acks may take, by the routes they
	// serve (one runtime's acks share them).
	takers := map[string][]string{}
	takerNames := map[string][]string{}
	for k, i := range b.idx {
		a := b.group[i].Op.ack
		key := rowToken{a.Row, a.Ack.Token}
		if seen[key] {
			// A second ack of one row with one token finds it gone.
			b.errs[k] = fmt.Errorf("work ack: %w", provider.ErrLockLost)
			continue
		}
		seen[key] = true
		ids, tokens = append(ids, a.Row), append(tokens, a.Ack.Token)
		c := a.Ack.Completion
		if c == nil {
			insts, items, vis = append(insts, nil), append(items, ""), append(vis, 0)
			continue
		}
		inst, v := c.InstanceID, c.VisibleAt
		if v == 0 {
			v = w.now
		}
		insts, items, vis = append(insts, &inst), append(items, string(c.Item)), append(vis, v)
		if a.Ack.TakeMs > 0 && !b.noTurns {
			nk := namesKey(a.Ack.TakeNames)
			if !slices.Contains(takers[nk], inst) {
				takers[nk] = append(takers[nk], inst)
			}
			takerNames[nk] = a.Ack.TakeNames
		}
	}
	deleted := map[int64]string{}
	batch := &pgx.Batch{}
	queueAckWorks(batch, ids, tokens, insts, items, vis, w.now, func(id int64, token string) { deleted[id] = token })
	answers := map[string]map[string]*instanceWork{}
	for nk, insts := range takers {
		answers[nk] = map[string]*instanceWork{}
		w.queueTakeable(batch, insts, takerNames[nk], func(k *instanceWork) { answers[nk][k.instance] = k })
	}
	batch.Queue(sqlSeqscanDefault)
	if err := w.tx.SendBatch(w.ctx, batch).Close(); err != nil {
		return err
	}
	for k, i := range b.idx {
		if b.errs[k] != nil {
			continue
		}
		a := b.group[i].Op.ack
		if token, ok := deleted[a.Row]; !ok || token != a.Ack.Token {
			b.errs[k] = fmt.Errorf("work ack: %w", provider.ErrLockLost)
			continue
		}
		aw := &wtx{ctx: context.WithoutCancel(b.group[i].Ctx), tx: w.tx, p: w.p, now: w.now, groupHeld: w.groupHeld}
		if c := a.Ack.Completion; c != nil {
			aw.changes.orch = true
			switch {
			case a.Ack.TakeMs > 0 && b.noTurns:
				// Found busy: TakeTurn returns at once, with no turn.
				aw.hasWork = &instanceWork{instance: c.InstanceID, busy: true}
			case a.Ack.TakeMs > 0:
				aw.hasWork = answers[namesKey(a.Ack.TakeNames)][c.InstanceID]
			}
		}
		if err := runOp(func(w *wtx) error { return a.After(w) }, aw); err != nil {
			return err
		}
		b.ws[k] = aw
	}
	return nil
}

// rowToken is a worker row as an ack names it: its ID and lock token.
type rowToken struct {
	id    int64
	token string
}

// namesKey keys the routes a TakeTurn serves (nil: any).
func namesKey(names []string) string {
	if names == nil {
		return ""
	}
	return "=" + strings.Join(names, "\x00")
}

// sqlSeqscanOff rules sequential scans out of the plans of the statements
// that follow it in its transaction (until sqlSeqscanDefault).
const sqlSeqscanOff = `SELECT set_config('enable_seqscan', 'off', true)`

// queueAckWorks queues sqlAckWorks, calling deleted for each row it
// deleted, behind sqlSeqscanOff: the statement joins its acks to
// worker_queue, and the generic plan a connection settles on for it,
// often while the queue is small and never analyzed, hashed the whole
// queue at every call, dead rows included, instead of looking up each
// acked row by its key. The caller queues sqlSeqscanDefault after the
// statements that should be planned so.
func queueAckWorks(b *pgx.Batch, ids []int64, tokens []string, insts []*string, items []string, vis []int64, now int64,
	deleted func(id int64, token string)) {
	b.Queue(sqlSeqscanOff)
	b.Queue(sqlAckWorks, ids, tokens, insts, items, vis, now).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			var id int64
			var token string
			if err := r.Scan(&id, &token); err != nil {
				return err
			}
			deleted(id, token)
			return nil
		})
	})
}
