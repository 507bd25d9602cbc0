package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// The queue calls of provider.Provider: what every SQL store does the
// same way (validation, encoding, the order of the steps, the results),
// written once over the steps of Tx.

// DeadLetter is a message a transaction moved out of its queue because it
// could not be decoded, logged once the transaction committed.
type DeadLetter struct {
	Queue, InstanceID string
	Err               error
}

// Queue names used in dead_letters.queue.
const (
	QueueOrchestrator = "orchestrator"
	QueueWorker       = "worker"
)

// Fetched is what a fetch of turns produced in its transaction: the
// locked items, their histories not yet decoded (by instance), and the
// messages it dead-lettered.
type Fetched struct {
	Items     []*provider.OrchestrationItem
	Histories map[string][]StoredEvent
	Dead      []DeadLetter
}

// TurnTx is the part of Tx the turn calls run on.
type TurnTx interface {
	// FetchTurns locks up to limit ready instances for lockMs and tags
	// their visible messages (see provider.Provider.FetchOrchestrationItems),
	// loading the history each item needs: all of the current execution,
	// or, where cached holds the current execution up to an event the
	// store has, the events after it (HistoryAfter set). With names not
	// nil (routes: see sqlenc.OrchestrationRoutes) it takes only instances
	// whose orchestration name, or name and version, is one of names, and
	// those whose name it does not know (see
	// provider.FetchOptions.Orchestrations), skipping the others in the
	// same candidate query: no other instance is locked or counted. With
	// aheadMs > 0 it also takes messages visible within aheadMs of its
	// time (provider.FetchOptions.Ahead; NewTurn sets their items' DueAt),
	// locking for lockMs + aheadMs.
	FetchTurns(limit int, lockMs, aheadMs int64, cached func(string) (int64, int64, bool), names []string) (Fetched, error)
	// CheckTurnLock takes the instance's per-instance lock (PostgreSQL's
	// advisory lock; nothing under SQLite's single writer) and reports
	// whether token holds its unexpired instance lock and whether the
	// instance row exists.
	CheckTurnLock(instance, token string) (held, exists bool, err error)
	// FinishTurn deletes the messages tagged with token, releases the
	// instance lock and notes whether messages still wait for it.
	FinishTurn(instance, token string) error
	// ApplyTurn performs steps (b) to (k) of a turn ack of instance (see
	// provider.Provider.AckOrchestrationItem): with e.Token, the turn of
	// a locked instance, whose tagged messages it deletes and whose lock
	// it releases; without, a WorkAck.Then, whose only message was never
	// enqueued and which holds no lock. Worker items marked Lease (with
	// e.LeaseMs > 0) are inserted for LeaseInserted.
	ApplyTurn(instance string, e *sqlenc.Ack) error
	// LeaseInserted locks for lockMs, dated from the clock read now, the
	// worker rows ApplyTurn inserted to lease (those the same ack canceled
	// are gone), and returns their leases in insertion order; nil when
	// there are none.
	LeaseInserted(lockMs int64) ([]*provider.WorkItemLease, error)
	// AbandonTurn releases the instance lock held by token, makes the
	// tagged messages visible after delayMs (undoing their attempt with
	// undo 1; with untilStart, no later than the instance's earliest
	// untagged message: provider.AbandonOptions.UntilStart) and records
	// lastErr (JSON; nil for none) as the instance's last error. It
	// reports false when token holds no lock.
	AbandonTurn(instance, token string, delayMs int64, undo int, untilStart bool, lastErr []byte) (bool, error)
	// RenewTurn extends to the transaction's time plus extendMs the
	// unexpired instance lock token holds on instance, and the lock of
	// the messages tagged with it, reporting false (changing nothing)
	// when token holds no unexpired lock. It runs as WriteAlone's step.
	RenewTurn(instance, token string, extendMs int64) (bool, error)
	// FetchUnservedTurns locks, as FetchTurns does but counting no
	// delivery, up to limit instances ready since olderMs ago or longer
	// whose orchestration no route live now registers (see
	// provider.Router.FetchUnservedOrchestrationItems).
	FetchUnservedTurns(olderMs int64, limit int, lockMs int64) (Fetched, error)
	// InsertMessages enqueues msgs on the orchestrator queue, creating
	// the instances they ask for (see provider.Provider.Enqueue). It is
	// its transaction's last step: a store may send the COMMIT with its
	// statements.
	InsertMessages(msgs []*sqlenc.Msg) error
	// ClaimDedupKey records key for instance and reports true, or reports
	// false, changing nothing, when the instance already has it.
	ClaimDedupKey(instance, key string) (bool, error)
}

// LockedTurnApplier is implemented by a Tx that can check a turn's lock
// and apply the turn together, in fewer round trips than CheckTurnLock
// then ApplyTurn (PostgreSQL: one pipelined batch).
type LockedTurnApplier interface {
	// ApplyLockedTurn takes the instance's per-instance lock, fails with
	// provider.ErrLockLost (having written nothing) unless e.Token holds
	// its unexpired instance lock, and performs steps (b) to (k) as
	// ApplyTurn does. It is used only for acks that carry the instance's
	// name (e.Name), which create the instance if its row is missing.
	ApplyLockedTurn(instance string, e *sqlenc.Ack) error
}

// WorkTx is the part of Tx the worker calls run on.
type WorkTx interface {
	// FetchWork locks up to limit worker rows for lockMs, each with its
	// own token, claiming sessions for sess (see
	// provider.Provider.FetchWorkItems), dead-lettering the rows that
	// cannot be decoded. It takes only rows of the activity names (nil:
	// any) and queues given (see FetchRoutes).
	FetchWork(limit int, lockMs int64, sess *provider.SessionOptions, names, queues []string) ([]*provider.WorkItemLease, []DeadLetter, error)
	// AckWork deletes the worker row id, which token must hold unexpired
	// (else ErrLockLost), refreshes its session, and enqueues
	// e.Completion when set.
	AckWork(id int64, e *sqlenc.WorkAck) error
	// AckWorkThen deletes the worker row as AckWork does and, if the
	// completion's instance is quiet (see provider.WorkAck.Then), applies
	// e.Then as ApplyTurn does instead of enqueueing the completion,
	// reporting true; otherwise it enqueues the completion, or fails with
	// ErrThenNotApplied having written nothing (the call then runs again
	// without e.Then).
	AckWorkThen(id int64, e *sqlenc.WorkAck) (applied bool, err error)
	// TakeTurn locks instance for lockMs if its lock is free and no other
	// activity of it is queued, and, with names not nil, its
	// orchestration is one of the routes names (or unknown), and loads its turn as
	// FetchTurns would; no item when it does not.
	TakeTurn(instance string, lockMs int64, cached func(string) (int64, int64, bool), names []string) (Fetched, error)
	// AbandonWork unlocks the worker row id held by token, visible after
	// delayMs (undoing its attempt with undo 1), recording lastErr (JSON;
	// nil clears it). It reports false when token holds no lock.
	AbandonWork(id int64, token string, delayMs int64, undo int, lastErr *string) (bool, error)
	// RenewWork extends to the transaction's time plus extendMs the
	// unexpired lock token holds on worker row id (and its visibility)
	// and refreshes the activity time of the row's session, if any, while
	// its lease is valid; it reports false (changing nothing) when token
	// holds no unexpired lock. It runs as WriteAlone's step.
	RenewWork(id int64, token string, extendMs int64) (bool, error)
	// RenewSessions extends by extendMs the valid leases of the sessions
	// of owners active within idleMs, returning how many.
	RenewSessions(owners []string, extendMs, idleMs int64) (int64, error)
	// CleanupSessions deletes expired sessions no worker row refers to,
	// returning how many.
	CleanupSessions() (int64, error)
}

// DecodeHistories decodes the loaded history of each item, after the
// transaction committed (the instance locks keep it stable): an item
// without an instance row gets an empty history, one whose history cannot
// be decoded a HistoryError.
func DecodeHistories(items []*provider.OrchestrationItem, histories map[string][]StoredEvent) {
	for _, it := range items {
		if it.Instance == nil {
			it.History = []history.Event{}
			continue
		}
		rows := histories[it.InstanceID]
		slices.SortFunc(rows, func(a, b StoredEvent) int { return cmp.Compare(a.ID, b.ID) })
		evs, err := DecodeEvents(rows)
		if err != nil {
			it.HistoryError = fmt.Errorf("instance %q execution %d: %w", it.InstanceID, it.Instance.CurrentExecutionID, err)
			it.History = nil
			continue
		}
		it.History = evs
	}
}

// FetchOrchestrationItems locks up to opts.Max ready instances in one
// transaction; see provider.Provider.
func (w Writes) FetchOrchestrationItems(ctx context.Context, opts provider.FetchOptions) ([]*provider.OrchestrationItem, error) {
	const op = "fetching orchestration items"
	limit, err := sqlenc.FetchLimit(opts.LockTimeout, opts.Max)
	if err != nil {
		return nil, w.DB.Fail(op, err)
	}
	var f Fetched
	names := sqlenc.OrchestrationRoutes(opts.Orchestrations, opts.OrchestrationVersions)
	err = w.DB.WriteGrouped(ctx, op, FetchLocks(opts.Prompt), func(tx Tx) error {
		var err error
		f, err = tx.FetchTurns(limit, sqlenc.DurMs(opts.LockTimeout), max(sqlenc.DurMs(opts.Ahead), 0), opts.Cached, names)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.DB.LogDeadLetters(f.Dead)
	DecodeHistories(f.Items, f.Histories)
	return f.Items, nil
}

// FetchUnservedOrchestrationItems locks instances no live route
// registers the orchestration of, counting no delivery; see
// provider.Router.
func (w Writes) FetchUnservedOrchestrationItems(ctx context.Context, olderThan, lockTimeout time.Duration, max int) ([]*provider.OrchestrationItem, error) {
	const op = "fetching unserved orchestration items"
	limit, err := sqlenc.FetchLimit(lockTimeout, max)
	if err != nil {
		return nil, w.DB.Fail(op, err)
	}
	if olderThan < 0 {
		return nil, w.DB.Fail(op, sqlenc.Invalid("olderThan %v is negative", olderThan))
	}
	var f Fetched
	err = w.DB.WriteGrouped(ctx, op, nil, func(tx Tx) error {
		var err error
		f, err = tx.FetchUnservedTurns(sqlenc.DurMs(olderThan), limit, sqlenc.DurMs(lockTimeout))
		return err
	})
	if err != nil {
		return nil, err
	}
	w.DB.LogDeadLetters(f.Dead)
	DecodeHistories(f.Items, f.Histories)
	return f.Items, nil
}

// Enqueue inserts orchestrator messages atomically; see provider.Provider.
func (w Writes) Enqueue(ctx context.Context, msgs ...*provider.OrchestratorMessage) ([]provider.EnqueueResult, error) {
	const op = "enqueueing"
	enc := make([]*sqlenc.Msg, len(msgs))
	for i, m := range msgs {
		e, err := sqlenc.EncodeMessage(m)
		if err != nil {
			return nil, w.DB.Fail(op, err)
		}
		enc[i] = e
	}
	if len(enc) == 0 {
		if w.DB.Closed() {
			return nil, w.DB.Fail(op, provider.ErrClosed)
		}
		return nil, nil
	}
	write := w.DB.WriteGrouped
	if e, ok := w.DB.(EnqueueWriter); ok {
		write = e.WriteEnqueue
	}
	err := write(ctx, op, EnqueueLocks(enc...), func(tx Tx) error {
		ins, err := dedup(tx, enc)
		if err != nil || len(ins) == 0 {
			return err
		}
		return tx.InsertMessages(ins)
	})
	if err != nil {
		return nil, err
	}
	return sqlenc.EnqueueResults(msgs, enc), nil
}

// dedup returns the messages of enc to insert: those without a DedupKey,
// and those whose key tx records now (a key the instance already has
// drops its message, marked Duplicate). It sets Duplicate on every keyed
// message, so a re-run starts afresh.
func dedup(tx Tx, enc []*sqlenc.Msg) ([]*sqlenc.Msg, error) {
	if !slices.ContainsFunc(enc, func(m *sqlenc.Msg) bool { return m.DedupKey != "" }) {
		return enc, nil
	}
	ins := make([]*sqlenc.Msg, 0, len(enc))
	for _, m := range enc {
		if m.DedupKey != "" {
			ok, err := tx.ClaimDedupKey(m.InstanceID, m.DedupKey)
			if err != nil {
				return nil, err
			}
			m.Duplicate = !ok
			if !ok {
				continue
			}
		}
		ins = append(ins, m)
	}
	return ins, nil
}

// AckOrchestrationItem commits one turn; see provider.Provider.
func (w Writes) AckOrchestrationItem(ctx context.Context, ack *provider.TurnAck) (provider.TurnResult, error) {
	const op = "acking turn"
	e, err := sqlenc.EncodeAck(ack)
	if err != nil {
		return provider.TurnResult{}, w.DB.Fail(op, err)
	}
	var leased []*provider.WorkItemLease
	err = w.DB.WriteGrouped(ctx, op, TurnAckLocks(e), func(tx Tx) error {
		var err error
		leased, err = applyAck(tx, e)
		return err
	})
	if err != nil {
		return provider.TurnResult{}, err
	}
	return provider.TurnResult{Leased: sqlenc.UnexpiredLeases(leased, w.DB.Clock())}, nil
}

// applyAck performs steps (a) to (k) of one turn ack, and returns the
// leases of the worker items it leased to the caller.
func applyAck(tx Tx, e *sqlenc.Ack) ([]*provider.WorkItemLease, error) {
	// (a) The lock must be held and unexpired.
	inst, ok := TokenInstance(e.Token)
	if !ok {
		return nil, fmt.Errorf("turn ack: unknown token: %w", provider.ErrLockLost)
	}
	if a, ok := tx.(LockedTurnApplier); ok && e.Name != nil {
		if err := a.ApplyLockedTurn(inst, e); err != nil {
			return nil, err
		}
		return tx.LeaseInserted(e.LeaseMs)
	}
	held, exists, err := tx.CheckTurnLock(inst, e.Token)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("turn ack for %q: %w", inst, provider.ErrLockLost)
	}
	if !exists && e.Name == nil {
		// No instance and nothing to create it from: the turn only consumes
		// messages sent to an unknown instance.
		if !e.ConsumeOnly() {
			return nil, sqlenc.Invalid("turn ack for unknown instance %q has no Metadata.OrchestrationName to create it from", inst)
		}
		return nil, tx.FinishTurn(inst, e.Token)
	}
	if err := tx.ApplyTurn(inst, e); err != nil {
		return nil, err
	}
	return tx.LeaseInserted(e.LeaseMs)
}

// abandonArgs validates the options of an abandon call and returns how
// many attempts it undoes and the error it records (JSON; nil for none).
func abandonArgs(opts provider.AbandonOptions) (undo int, lastErr []byte, err error) {
	if opts.Delay < 0 {
		return 0, nil, sqlenc.Invalid("Delay %v is negative", opts.Delay)
	}
	if opts.IgnoreAttempt {
		undo = 1
	}
	if opts.Error != nil {
		if err := opts.Error.Validate(); err != nil {
			return 0, nil, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err)
		}
		if lastErr, err = json.Marshal(opts.Error); err != nil {
			return 0, nil, fmt.Errorf("%w: Error: %w", provider.ErrInvalidArgument, err)
		}
	}
	return undo, lastErr, nil
}

// AbandonOrchestrationItem releases an instance lock without committing,
// recording opts.Error (if any) as the instance's last error in the same
// transaction; see provider.Provider.
func (w Writes) AbandonOrchestrationItem(ctx context.Context, lockToken string, opts provider.AbandonOptions) error {
	const op = "abandoning turn"
	undo, lastErr, err := abandonArgs(opts)
	if err != nil {
		return w.DB.Fail(op, err)
	}
	inst, ok := TokenInstance(lockToken)
	if !ok {
		return w.DB.Fail(op, provider.ErrLockLost)
	}
	return w.DB.WriteGrouped(ctx, op, []Lock{{Instance: inst, Exclusive: true}}, func(tx Tx) error {
		held, err := tx.AbandonTurn(inst, lockToken, sqlenc.DurMs(opts.Delay), undo, opts.UntilStart, lastErr)
		if err == nil && !held {
			err = provider.ErrLockLost
		}
		return err
	})
}

// RenewOrchestrationItemLock extends a valid instance lock and the lock of
// its turn's messages; see provider.Provider. The lock's own conditions
// (token, expiry) make the renewal safe without the instance's lock: an
// ack or abandon that releases the lock first leaves nothing to renew
// (ErrLockLost), and one that comes after sees the extended lock.
func (w Writes) RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	return renew(ctx, w, "renewing turn lock", lockToken, extendFor, TokenInstance, Tx.RenewTurn)
}

// RenewWorkItemLock extends a valid worker lock and refreshes its
// session's activity time; see provider.Provider.
func (w Writes) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	return renew(ctx, w, "renewing work item lock", lockToken, extendFor, TokenRow, Tx.RenewWork)
}

// renew is a lock renewal: its arguments checked (parse reads what the
// token names), then step, alone; a lock no longer held is ErrLockLost.
func renew[K any](ctx context.Context, w Writes, op, lockToken string, extendFor time.Duration,
	parse func(string) (K, bool), step func(Tx, K, string, int64) (bool, error)) error {
	key, err := RenewArgs(lockToken, extendFor, parse)
	if err != nil {
		return w.DB.Fail(op, err)
	}
	return w.DB.WriteAlone(ctx, op, func(tx Tx) error {
		held, err := step(tx, key, lockToken, sqlenc.DurMs(extendFor))
		if err == nil && !held {
			err = provider.ErrLockLost
		}
		return err
	})
}

// RenewArgs validates the arguments of a lock renewal and returns the
// instance (a turn's token) or row ID (a work item's token) it names.
func RenewArgs[T any](lockToken string, extendFor time.Duration, parse func(string) (T, bool)) (T, error) {
	var zero T
	if extendFor <= 0 {
		return zero, sqlenc.Invalid("extendFor %v must be positive", extendFor)
	}
	v, ok := parse(lockToken)
	if !ok {
		return zero, provider.ErrLockLost
	}
	return v, nil
}

// FetchWorkItems locks up to opts.Max worker rows, oldest first, each with
// its own token; see provider.Provider.
func (w Writes) FetchWorkItems(ctx context.Context, opts provider.WorkFetchOptions) ([]*provider.WorkItemLease, error) {
	const op = "fetching work items"
	limit, err := sqlenc.WorkFetchLimit(opts)
	if err != nil {
		return nil, w.DB.Fail(op, err)
	}
	var (
		leases []*provider.WorkItemLease
		dead   []DeadLetter
	)
	names, queues := FetchRoutes(opts)
	err = w.DB.WriteGrouped(ctx, op, WorkFetchLocks, func(tx Tx) error {
		var err error
		leases, dead, err = tx.FetchWork(limit, sqlenc.DurMs(opts.LockTimeout), opts.Session, names, queues)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.DB.LogDeadLetters(dead)
	return leases, nil
}

// workAckResult is what a work ack's transaction produced.
type workAckResult struct {
	taken   Fetched // the turn TakeTurn took
	applied bool    // WorkAck.Then was applied
	leased  []*provider.WorkItemLease
}

// ErrThenNotApplied is what a Tx's AckWorkThen may fail with, having
// written nothing, when the completion's instance is not quiet: the work
// ack then runs again, in a transaction of its own, without its Then (it
// enqueues the completion). A store that checks the instance and applies
// the turn in one round trip (PostgreSQL) fails rather than undo its
// writes; the check rarely fails, since the runtime fuses a step only when
// it knows of nothing else happening to the instance.
var ErrThenNotApplied = errors.New("the instance is not quiet: the work ack's turn was not applied")

// AckWorkItem completes one activity; see provider.Provider.
func (w Writes) AckWorkItem(ctx context.Context, ack *provider.WorkAck) (provider.WorkResult, error) {
	const op = "acking work item"
	e, err := sqlenc.EncodeWorkAck(ack)
	if err != nil {
		return provider.WorkResult{}, w.DB.Fail(op, err)
	}
	var res workAckResult
	run := func() error {
		all := func(tx Tx) error {
			var err error
			res, err = applyWorkAck(tx, e)
			return err
		}
		if b, ok := w.DB.(WorkAckBatcher); ok && e.Then == nil && (e.Completion == nil || e.Completion.Create == nil) {
			if row, ok := TokenRow(e.Token); ok {
				return b.WriteWorkAck(ctx, op, WorkAckLocks(e), &BatchedWorkAck{Row: row, Ack: e, All: all,
					After: func(tx Tx) error {
						res = workAckResult{}
						if e.TakeMs == 0 {
							return nil
						}
						var err error
						res.taken, err = tx.TakeTurn(e.Completion.InstanceID, e.TakeMs, e.Cached, e.TakeNames)
						return err
					}})
			}
		}
		return w.DB.WriteGrouped(ctx, op, WorkAckLocks(e), all)
	}
	err = run()
	if errors.Is(err, ErrThenNotApplied) {
		e.Then = nil
		err = run()
	}
	if err != nil {
		return provider.WorkResult{}, err
	}
	if res.applied {
		return provider.WorkResult{Then: &provider.TurnResult{Leased: sqlenc.UnexpiredLeases(res.leased, w.DB.Clock())}}, nil
	}
	w.DB.LogDeadLetters(res.taken.Dead)
	if len(res.taken.Items) == 0 {
		return provider.WorkResult{}, nil
	}
	DecodeHistories(res.taken.Items, res.taken.Histories)
	return provider.WorkResult{Turn: res.taken.Items[0]}, nil
}

// WorkAckBatcher is a WriteDB that can apply the work acks of one group
// of its group commit set-based: the acked rows deleted by one statement,
// the completions enqueued by another, instead of each ack in a savepoint
// with statements of its own. AckWorkItem hands it the acks without Then
// whose completion creates no instance (activity results).
type WorkAckBatcher interface {
	// WriteWorkAck runs a as WriteGrouped runs a.All, with the same
	// outcome: in a group with other such acks, the store deletes the
	// rows and enqueues the completions of all of them together, fails
	// with ErrLockLost (wrapped) each ack whose row its token does not
	// hold unexpired (enqueueing nothing for it), and then runs After for
	// each ack that succeeded; if anything else fails, it runs each ack
	// alone (All), as a group commit does when its transaction breaks.
	WriteWorkAck(ctx context.Context, op string, locks []Lock, a *BatchedWorkAck) error
}

// BatchedWorkAck is a work ack as a WorkAckBatcher receives it.
type BatchedWorkAck struct {
	Row int64           // the acked worker row, from Ack.Token
	Ack *sqlenc.WorkAck // Then is nil; Completion, if any, creates nothing
	// After is the rest of the ack (TakeTurn), run in the same
	// transaction once the row is deleted and the completion enqueued. It
	// sets its results from scratch.
	After func(Tx) error
	// All is the whole ack as one request (applyWorkAck).
	All func(Tx) error
}

func applyWorkAck(tx Tx, e *sqlenc.WorkAck) (res workAckResult, err error) {
	id, ok := TokenRow(e.Token)
	if !ok {
		return res, fmt.Errorf("work ack: unknown token: %w", provider.ErrLockLost)
	}
	if e.Then != nil {
		if res.applied, err = tx.AckWorkThen(id, e); err != nil {
			return res, err
		}
		if res.applied {
			res.leased, err = tx.LeaseInserted(e.Then.LeaseMs)
			return res, err
		}
	} else if err := tx.AckWork(id, e); err != nil {
		return res, err
	}
	if e.TakeMs > 0 {
		res.taken, err = tx.TakeTurn(e.Completion.InstanceID, e.TakeMs, e.Cached, e.TakeNames)
	}
	return res, err
}

// AbandonWorkItem unlocks a worker row; see provider.Provider.
func (w Writes) AbandonWorkItem(ctx context.Context, lockToken string, opts provider.AbandonOptions) error {
	const op = "abandoning work item"
	undo, lastErr, err := abandonArgs(opts)
	if err != nil {
		return w.DB.Fail(op, err)
	}
	var errJSON *string // nil: clears the row's error
	if lastErr != nil {
		s := string(lastErr)
		errJSON = &s
	}
	id, ok := TokenRow(lockToken)
	if !ok {
		return w.DB.Fail(op, provider.ErrLockLost)
	}
	return w.DB.WriteGrouped(ctx, op, nil, func(tx Tx) error {
		held, err := tx.AbandonWork(id, lockToken, sqlenc.DurMs(opts.Delay), undo, errJSON)
		if err == nil && !held {
			err = provider.ErrLockLost
		}
		return err
	})
}

// RenewSessionLocks extends the leases of the owners' active sessions; see
// provider.Provider.
func (w Writes) RenewSessionLocks(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	const op = "renewing session locks"
	if extendFor <= 0 {
		return 0, w.DB.Fail(op, sqlenc.Invalid("extendFor %v must be positive", extendFor))
	}
	if idleTimeout < 0 {
		return 0, w.DB.Fail(op, sqlenc.Invalid("idleTimeout %v is negative", idleTimeout))
	}
	if len(ownerIDs) == 0 {
		if w.DB.Closed() {
			return 0, w.DB.Fail(op, provider.ErrClosed)
		}
		return 0, nil
	}
	var n int64
	err := w.DB.Write(ctx, op, func(tx Tx) error {
		var err error
		n, err = tx.RenewSessions(ownerIDs, sqlenc.DurMs(extendFor), sqlenc.DurMs(idleTimeout))
		return err
	})
	return int(n), err
}

// CleanupOrphanedSessions deletes expired sessions no worker row refers
// to; see provider.Provider.
func (w Writes) CleanupOrphanedSessions(ctx context.Context) (int, error) {
	var n int64
	err := w.DB.Write(ctx, "cleaning up sessions", func(tx Tx) error {
		var err error
		n, err = tx.CleanupSessions()
		return err
	})
	return int(n), err
}

// EncodeWorkAll validates and encodes worker messages for a store's
// test-only enqueue of work (the runtime enqueues work through turn acks):
// nothing is leased.
func EncodeWorkAll(msgs []*provider.WorkerMessage) ([]*sqlenc.Work, error) {
	enc := make([]*sqlenc.Work, len(msgs))
	for i, m := range msgs {
		e, err := sqlenc.EncodeWork(m)
		if err != nil {
			return nil, err
		}
		e.Lease = false // only a turn ack leases
		enc[i] = e
	}
	return enc, nil
}

// TaggedMessage is one orchestrator-queue row a fetch tagged for a turn.
type TaggedMessage struct {
	ID       int64
	Data     []byte
	Attempts int
	// Visible is the message's visible time (Unix ms): after the fetch's
	// time for a message a fetch with FetchOptions.Ahead took early.
	Visible int64
}

// NewTurn builds the turn of instance, locked with token until untilMs,
// from its tagged messages (any order; the turn has them in ID order),
// without history; a message visible after nowMs (taken early, see
// provider.FetchOptions.Ahead) sets the item's DueAt. A message that cannot be decoded is handed to
// deadLetter, which moves it to the dead-letter list, reported in dead and
// left out. The item is nil when nothing deliverable remains: the caller
// releases the lock and moves on.
func NewTurn(instance, token string, untilMs, nowMs int64, msgs []TaggedMessage,
	deadLetter func(m TaggedMessage, cause error) error) (it *provider.OrchestrationItem, dead []DeadLetter, err error) {
	slices.SortFunc(msgs, func(a, b TaggedMessage) int { return cmp.Compare(a.ID, b.ID) })
	it = &provider.OrchestrationItem{
		InstanceID:  instance,
		LockToken:   token,
		LockedUntil: MsTime(untilMs),
		Messages:    make([]history.WorkItem, 0, len(msgs)),
	}
	for _, m := range msgs {
		wi, derr := history.DecodeWorkItem(m.Data)
		if derr != nil {
			if err := deadLetter(m, derr); err != nil {
				return nil, nil, err
			}
			dead = append(dead, DeadLetter{Queue: QueueOrchestrator, InstanceID: instance, Err: derr})
			continue
		}
		it.Messages = append(it.Messages, wi)
		it.AttemptCount = max(it.AttemptCount, m.Attempts)
		if m.Visible > nowMs && m.Visible > it.DueAt.UnixMilli() {
			it.DueAt = MsTime(m.Visible)
		}
	}
	if len(it.Messages) == 0 {
		return nil, dead, nil
	}
	return it, dead, nil
}

// MessageTx is what InsertMessage runs on: the steps of enqueueing one
// orchestrator message in a store's write transaction.
type MessageTx interface {
	// Now is the transaction's time (Unix ms).
	Now() int64
	// CheckIdempotencyKey fails with *provider.DuplicateStartError when
	// key is retained; a key past its retention is deleted for reuse.
	CheckIdempotencyKey(key string) error
	// LiveLockHolder returns the live, unexpired execution lock on key,
	// or nil once the key is free (stale and expired locks met on the way
	// are freed, each handed to its oldest queued start).
	LiveLockHolder(key string) (*provider.LockedError, error)
	// CreateInstance inserts m's instance row (state Pending) and reports
	// false when the ID is taken.
	CreateInstance(m *sqlenc.Msg) (bool, error)
	// RecordStart writes what a created start holds: its idempotency key,
	// and its execution lock, or, queued, its place in the key's queue
	// with its message (visible at visible once it gets the key).
	RecordStart(m *sqlenc.Msg, visible int64, queued bool) error
	// EnqueueMessage inserts m on the orchestrator queue, visible at
	// visible.
	EnqueueMessage(m *sqlenc.Msg, visible int64) error
	// InstanceStatus returns the status of instance id, "" when it does
	// not exist, for a start-if-absent. A store with concurrent writers
	// takes the instance's lock (shared) first: a turn ack of the instance
	// may hold it while it waits for the execution lock's key, so the
	// instance's lock is taken before the key's, in the ack's order.
	InstanceStatus(id string) (provider.Status, error)
	// RecordExisted writes the idempotency key of a start-if-absent whose
	// instance exists, naming the instance found.
	RecordExisted(m *sqlenc.Msg) error
	// LockHolderInstance prepares a start that replaces the holder of
	// the execution lock key: a store with concurrent writers takes the
	// lock (shared) of the instance holding key now, before the key's own
	// lock (LiveLockHolder), in the order of a turn ack that frees the
	// key, so that the cancel enqueued for the holder cannot deadlock
	// with the holder's last ack.
	LockHolderInstance(key string) error
}

// InsertMessage enqueues m, creating its instance if asked: when the ID
// is taken it enqueues OnExists instead, or fails with ErrInstanceExists.
// A start carrying an idempotency key or an execution lock checks them
// first, in that order (see provider.Provider.Enqueue); a start-if-absent
// checks the instance right after the key, and whose instance exists
// inserts nothing but its key (m.Existed; see provider.NewInstance.IfAbsent).
func InsertMessage(tx MessageTx, m *sqlenc.Msg) error {
	visible := m.VisibleAt
	if visible == 0 {
		visible = tx.Now()
	}
	m.Existed, m.Replaced = false, ""
	if c := m.Create; c != nil {
		if c.IdemKey != "" {
			if err := tx.CheckIdempotencyKey(c.IdemKey); err != nil {
				return err
			}
		}
		if c.IfAbsent {
			status, err := tx.InstanceStatus(m.InstanceID)
			switch {
			case err != nil:
				return err
			case status.IsTerminal():
				return fmt.Errorf("instance %q is %s: %w", m.InstanceID, status, provider.ErrInstanceEnded)
			case status != "":
				return startExisted(tx, m)
			}
		}
		queued, replace := false, ""
		if c.LockKey != "" {
			if c.LockReplace {
				if err := tx.LockHolderInstance(c.LockKey); err != nil {
					return err
				}
			}
			holder, err := tx.LiveLockHolder(c.LockKey)
			if err != nil {
				return err
			}
			if holder != nil && c.IfAbsent && holder.InstanceID == m.InstanceID {
				return startExisted(tx, m) // created by a call that committed since
			}
			if holder != nil && !c.LockQueue {
				return holder
			}
			queued = holder != nil
			if queued && c.LockReplace && holder.InstanceID != m.InstanceID {
				replace = holder.InstanceID
			}
		}
		created, err := tx.CreateInstance(m)
		if err != nil {
			return err
		}
		if !created {
			if c.IfAbsent {
				return startExisted(tx, m)
			}
			if c.OnExists != nil {
				return InsertMessage(tx, c.OnExists)
			}
			return fmt.Errorf("creating instance %q: %w", m.InstanceID, provider.ErrInstanceExists)
		}
		if err := tx.RecordStart(m, visible, queued); err != nil {
			return err
		}
		if replace != "" {
			return cancelHolder(tx, m, replace)
		}
		if queued {
			return nil
		}
	}
	return tx.EnqueueMessage(m, visible)
}

// cancelHolder enqueues the cancel of holder, the live holder of the lock
// that the start m queued for (provider.LockRequest.Replace), in m's
// transaction, and records it in m.Replaced.
func cancelHolder(tx MessageTx, m *sqlenc.Msg, holder string) error {
	cancel, err := sqlenc.EncodeMessage(&provider.OrchestratorMessage{InstanceID: holder,
		Item: history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: holder, Reason: m.Create.ReplaceReason}})
	if err != nil {
		return err
	}
	if err := tx.EnqueueMessage(cancel, tx.Now()); err != nil {
		return err
	}
	m.Replaced = holder
	return nil
}

// startExisted ends the insert of a start-if-absent whose instance exists:
// nothing is inserted for it but its idempotency key, which names the
// instance found.
func startExisted(tx MessageTx, m *sqlenc.Msg) error {
	m.Existed = true
	if m.Create.IdemKey != "" {
		return tx.RecordExisted(m)
	}
	return nil
}

// LogDeadLetters logs, for the store named store, the messages a committed
// transaction dead-lettered.
func LogDeadLetters(log *slog.Logger, store string, dead []DeadLetter) {
	for _, x := range dead {
		log.Warn(store+": moved an undecodable message to the dead-letter list",
			logkey.Queue, x.Queue, logkey.Instance, x.InstanceID, logkey.Error, x.Err)
	}
}

// WorkRow is one locked worker-queue row before its item is decoded.
type WorkRow struct {
	Lease provider.WorkItemLease
	ID    int64
	Data  []byte
}

// DecodeLeases decodes the items of locked worker rows into their leases,
// in order. A row whose item cannot be decoded is handed to deadLetter,
// which moves it to the dead-letter list, reported in dead and left out.
func DecodeLeases(rows []WorkRow, deadLetter func(r *WorkRow, cause error) error) (leases []*provider.WorkItemLease, dead []DeadLetter, err error) {
	for i := range rows {
		r := &rows[i]
		item, derr := history.DecodeWorkItem(r.Data)
		if derr != nil {
			if err := deadLetter(r, derr); err != nil {
				return nil, nil, err
			}
			dead = append(dead, DeadLetter{Queue: QueueWorker, InstanceID: r.Lease.InstanceID, Err: derr})
			continue
		}
		r.Lease.Item = item
		leases = append(leases, &r.Lease)
	}
	return leases, dead, nil
}
