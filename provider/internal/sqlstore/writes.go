package sqlstore

import (
	"context"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/notify"
)

// WriteDB is a store's write side as Writes uses it.
type WriteDB interface {
	// Write runs fn in one write transaction through the store's
	// transaction runner (SQLite's single-writer group commit,
	// PostgreSQL's pooled transactions) and returns fn's error translated
	// into the provider sentinels and wrapped for the call op; ErrClosed
	// after Close. fn may run more than once (a group commit re-runs the
	// requests of a failed group), so it sets its results from scratch.
	Write(ctx context.Context, op string, fn func(Tx) error) error
	// WriteGrouped runs fn as Write does, for the calls the runtime makes
	// concurrently (fetches, acks, enqueues, abandons), which the store may
	// commit together in one transaction (group commit), each in a
	// savepoint of its own. locks are the instance locks fn takes: a store
	// with concurrent writers (PostgreSQL) takes a group's locks first, in
	// instance order, so that groups never wait for each other in a cycle;
	// SQLite's single writer needs none and ignores them.
	WriteGrouped(ctx context.Context, op string, locks []Lock, fn func(Tx) error) error
	// WriteAlone runs fn as Write does, for a call whose one step is a
	// single statement, atomic on its own, that changes nothing other
	// nodes are notified of (a lock renewal): a store may run it without
	// an explicit transaction (PostgreSQL: one round trip, no BEGIN or
	// COMMIT).
	WriteAlone(ctx context.Context, op string, fn func(Tx) error) error
	// Fail translates and wraps, for the call op, an error found before
	// the transaction began (an invalid argument).
	Fail(op string, err error) error
	// Closed reports whether the store was closed.
	Closed() bool
	// Clock is the store clock's time.
	Clock() time.Time
	// LogDeadLetters logs the messages a committed transaction
	// dead-lettered.
	LogDeadLetters(dead []DeadLetter)
}

// EnqueueWriter is implemented by a WriteDB that treats Writes.Enqueue's
// write apart: it runs fn as WriteGrouped does, and may wake the
// orchestrator queue's subscribers once the enqueue is queued in its single
// write order (provider.Notifier), before it commits. Enqueue calls it
// instead of WriteGrouped when the store implements it.
type EnqueueWriter interface {
	WriteEnqueue(ctx context.Context, op string, locks []Lock, fn func(Tx) error) error
}

// Tx is one write transaction of a store: the steps of the shared write
// calls, each written in the store's dialect (one statement or several,
// batched where the store can). Steps return driver errors untranslated;
// each notes what it changed for the notifications the store sends after
// the commit. The shared calls end their transactions with the step that
// writes last (InsertMessages, ApplyTurn, ApplyLockedTurn, AckWorkThen,
// AckWork without TakeTurn after it) and never fail after it succeeded:
// a store may send the COMMIT with that step's statements (PostgreSQL's
// lone writes do).
type Tx interface {
	TurnTx
	WorkTx
	LockCleaner

	// ReleaseExecutionLock deletes the lock on key (serialized with other
	// writers of key where the store needs it) and, when there was one,
	// hands the key to its oldest queued start. It reports whether a lock
	// was deleted.
	ReleaseExecutionLock(key string) (bool, error)

	// PurgeTree returns instanceIDs and, recursively, their children,
	// serialized with every other writer of those instances where the
	// store needs it (PostgreSQL takes their advisory locks until the
	// tree stops growing).
	PurgeTree(instanceIDs []string) ([]string, error)
	// PurgeRows returns the purge check rows (ScanPurgeRow) of tree.
	PurgeRows(tree []string) (map[string]PurgeRow, error)
	// PurgeDelete deletes tree's instances, executions, history, queued
	// messages and worker rows, takes them out of the execution-lock
	// queues, stamps their idempotency keys as purged, frees the locks
	// they held (each handed to its oldest queued start) and returns the
	// counts.
	PurgeDelete(tree []string) (*provider.PurgeResult, error)
}

// Writes implements the store calls that write whose steps are written
// once for every SQL store over its WriteDB: each store embeds it in its
// Provider.
type Writes struct {
	DB WriteDB
}

// ReleaseExecutionLock force-releases the lock on key; see
// provider.LockStore.
func (w Writes) ReleaseExecutionLock(ctx context.Context, key string) (bool, error) {
	const op = "releasing execution lock"
	if key == "" {
		return false, w.DB.Fail(op, sqlenc.Invalid("empty lock key"))
	}
	var released bool
	err := w.DB.Write(ctx, op, func(tx Tx) error {
		var err error
		released, err = tx.ReleaseExecutionLock(key)
		return err
	})
	if err != nil {
		return false, err
	}
	return released, nil
}

// CleanupExecutionLocks frees expired and stale locks and drops expired
// idempotency keys; see provider.LockStore.
func (w Writes) CleanupExecutionLocks(ctx context.Context) (*provider.LockCleanup, error) {
	var res *provider.LockCleanup
	err := w.DB.Write(ctx, "cleaning up execution locks", func(tx Tx) error {
		var err error
		res, err = CleanupExecutionLocks(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// PurgeInstances deletes instances and all their descendants in one
// transaction; see provider.Admin.
func (w Writes) PurgeInstances(ctx context.Context, instanceIDs []string, opts provider.PurgeOptions) (*provider.PurgeResult, error) {
	const op = "purging instances"
	if err := CheckPurgeArgs(instanceIDs); err != nil {
		return nil, w.DB.Fail(op, err)
	}
	if len(instanceIDs) == 0 {
		if w.DB.Closed() {
			return nil, w.DB.Fail(op, provider.ErrClosed)
		}
		return &provider.PurgeResult{}, nil
	}
	var res *provider.PurgeResult
	err := w.DB.Write(ctx, op, func(tx Tx) error {
		tree, err := tx.PurgeTree(instanceIDs)
		if err != nil {
			return err
		}
		rows, err := tx.PurgeRows(tree)
		if err != nil {
			return err
		}
		if err := CheckPurge(instanceIDs, tree, rows, opts.Force); err != nil {
			return err
		}
		res, err = tx.PurgeDelete(tree)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Notifications implements provider.Notifier over the store's hub: each
// store embeds it in its Provider and delivers to the hub what its
// committed transactions changed (Deliver) and what its transport
// (SQLite's data_version watcher, PostgreSQL's LISTEN/NOTIFY) heard from
// other processes.
type Notifications struct {
	Hub *notify.Hub
}

// Subscribe implements provider.Notifier.
func (n Notifications) Subscribe(q provider.Queue) (<-chan struct{}, func()) {
	return n.Hub.Subscribe(q)
}

// WatchInstance implements provider.Notifier.
func (n Notifications) WatchInstance(instanceID string) (<-chan struct{}, func()) {
	return n.Hub.WatchInstance(instanceID)
}

// WatchInstanceEnd implements provider.EndWatcher.
func (n Notifications) WatchInstanceEnd(instanceID string) (<-chan struct{}, func()) {
	return n.Hub.WatchInstanceEnd(instanceID)
}

// WatchInstanceEndStatus implements provider.EndStatusWatcher (the
// rows come from stores that hand them to the hub: notify.Hub.InstanceEnded).
func (n Notifications) WatchInstanceEndStatus(instanceID string) (<-chan *provider.InstanceInfo, func()) {
	return n.Hub.WatchInstanceEndStatus(instanceID)
}

// WakeAll wakes every subscriber and instance watcher, as when another
// process changed the store in a way this one cannot tell. Test harnesses
// that move a fake clock use it: dispatchers sleeping on timers of the old
// time look again.
func (n Notifications) WakeAll() { n.Hub.WakeAll() }

// Deliver wakes hub's subscribers for what one committed transaction
// changed: work may be fetchable on the orchestrator queue (orch) or the
// worker queue (work), and instances may have changed; those of them also
// in live are known to be live after the commit (provider.EndWatcher).
func Deliver(hub *notify.Hub, orch, work bool, instances, live []string) {
	if orch {
		hub.Wake(provider.QueueOrchestrator)
	}
	if work {
		hub.Wake(provider.QueueWorker)
	}
	if len(live) == 0 {
		if len(instances) > 0 {
			hub.InstanceChanged(instances...)
		}
		return
	}
	var changed, left []string
	for _, id := range instances {
		if slices.Contains(live, id) {
			left = append(left, id)
		} else {
			changed = append(changed, id)
		}
	}
	if len(changed) > 0 {
		hub.InstanceChanged(changed...)
	}
	if len(left) > 0 {
		hub.InstanceLive(left...)
	}
}

// Core is the part of provider.Provider written once for every SQL store:
// each store embeds it in its Provider (NewCore), over its read side, its
// write side and its notification hub.
type Core struct {
	Reads
	Writes
	Notifications
}

// NewCore returns the core of a store.
func NewCore(r ReadDB, w WriteDB, hub *notify.Hub) Core {
	return Core{Reads{DB: r}, Writes{DB: w}, Notifications{Hub: hub}}
}
