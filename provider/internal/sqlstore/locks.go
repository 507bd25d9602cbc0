package sqlstore

import (
	"slices"

	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// Lock is an instance lock a grouped write declares it takes (see
// WriteDB.WriteGrouped): exclusive for the instance whose turn it commits,
// shared for the instances it only sends messages to.
type Lock struct {
	Instance  string
	Exclusive bool
	// Alone, on any lock of a call, asks a store that groups calls into
	// one transaction to run the call in a transaction of its own. These
	// calls ask it:
	//   - A start that takes an execution lock key or an idempotency key
	//     takes the key's lock too, which it cannot declare (a replacing
	//     start takes the holder's instance lock before its key's, and
	//     the holder is known only once the call reads the key). In a
	//     group it would be held until the group commits, while the
	//     group's other calls wait for keys that other groups hold in
	//     another order.
	//   - An enqueue that starts an instance (EnqueueLocks) touches no
	//     instance that runs, so it gains little from a group and would
	//     wait for one: a caller starting instances one after another
	//     would wait, at each start, for the running group to commit and
	//     for the next to take the start.
	//   - A worker fetch (WorkFetchLocks) locks no instance and writes
	//     only leases, which a store may commit without waiting for a
	//     flush; in a group it would wait for the group's acks to commit
	//     durably, and an activity fetch loop waiting so idles its workers
	//     (on PostgreSQL, fan-out ran about a third faster once worker
	//     fetches ran alone). Its Lock names no instance.
	//   - A prompt turn fetch (FetchLocks), made when work came due: a
	//     group's commit it waited for would make that work late (timers
	//     fire later). Ordinary turn fetches still group. Its Lock names
	//     no instance.
	Alone bool
}

// WorkFetchLocks declares a worker fetch: no instance, Alone (see
// Lock.Alone).
var WorkFetchLocks = []Lock{{Alone: true}}

// SharedLocks appends to locks a shared lock of the instance of each of
// msgs (an enqueue's targets), marked Alone for a start that takes an
// execution lock or an idempotency key.
func SharedLocks(locks []Lock, msgs ...*sqlenc.Msg) []Lock {
	for _, m := range msgs {
		if m != nil {
			keyed := m.Create != nil && (m.Create.LockKey != "" || m.Create.IdemKey != "")
			locks = append(locks, Lock{Instance: m.InstanceID, Alone: keyed})
		}
	}
	return locks
}

// FetchLocks declares the locks of a turn fetch: none (a fetch only tries
// instance locks), and, for a prompt fetch (provider.FetchOptions.Prompt),
// a Lock marked Alone that names no instance, so that it does not wait
// for a group to commit.
func FetchLocks(prompt bool) []Lock {
	if prompt {
		return []Lock{{Alone: true}}
	}
	return nil
}

// EnqueueLocks declares the locks of an enqueue of msgs: SharedLocks,
// all marked Alone when one of msgs starts an instance (see Lock.Alone).
func EnqueueLocks(msgs ...*sqlenc.Msg) []Lock {
	locks := SharedLocks(nil, msgs...)
	if slices.ContainsFunc(msgs, func(m *sqlenc.Msg) bool { return m != nil && m.Create != nil }) {
		for i := range locks {
			locks[i].Alone = true
		}
	}
	return locks
}

// TurnAckLocks declares the locks of a turn ack: its own instance's (the
// token's), exclusive, and those of the instances it sends messages to.
func TurnAckLocks(e *sqlenc.Ack) []Lock {
	var locks []Lock
	if inst, ok := TokenInstance(e.Token); ok {
		locks = append(locks, Lock{Instance: inst, Exclusive: true})
	}
	return SharedLocks(locks, e.Msgs...)
}

// WorkAckLocks declares the locks of a work ack: its completion's
// instance, shared, or exclusive with a Then turn, plus the Then turn's
// targets.
func WorkAckLocks(e *sqlenc.WorkAck) []Lock {
	if e.Completion == nil {
		return nil
	}
	if e.Then == nil {
		return SharedLocks(nil, e.Completion)
	}
	locks := []Lock{{Instance: e.Completion.InstanceID, Exclusive: true}}
	return SharedLocks(locks, e.Then.Msgs...)
}
