package providertest

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/duroxide/duroxide-go"
)

// Replacing starts (StartOptions.ReplaceIfLocked): the start cancels the
// execution lock's holder in its own store transaction.
var e2eReplaceCases = []e2eCase{
	{"ReplaceIfLockedCancelsTheHolder", e2eReplaceCancelsHolder},
	{"ReplaceIfLockedConcurrentTwoRuntimes", e2eReplaceConcurrent},
}

// replaceStart starts a "Hold" instance on lock key with ReplaceIfLocked
// through c and returns the holder it replaced.
func (e *e2e) replaceStart(c *duroxide.Client, id, key string) (string, error) {
	var replaced string
	err := c.StartOrchestration(e.ctx, id, "Hold", nil, &duroxide.StartOptions{LockKey: key, ReplaceIfLocked: true, Replaced: &replaced})
	return replaced, err
}

// holds waits until id runs holding lock key.
func (e *e2e) holds(key, id string) {
	e.t.Helper()
	e.eventually(id+" running with lock "+key, func() bool {
		l, err := e.c.GetLock(e.ctx, key)
		if err != nil {
			e.t.Fatalf("GetLock(%s): %v", key, err)
		}
		return l.InstanceID != nil && *l.InstanceID == id && e.status(id).State == duroxide.StateRunning
	})
}

func e2eReplaceCancelsHolder(e *e2e) {
	e.runtime(scheduleRegistry())
	// A free key: the start runs at once and replaces nobody.
	if replaced, err := e.replaceStart(e.c, "first", "deploy"); err != nil || replaced != "" {
		e.t.Fatalf("replacing start on a free key: replaced %q, %v; want none", replaced, err)
	}
	e.holds("deploy", "first")

	// A held key: the holder is canceled, naming its replacement, and
	// the new instance takes the lock when it ends.
	replaced, err := e.replaceStart(e.c, "second", "deploy")
	if err != nil || replaced != "first" {
		e.t.Fatalf("replacing start on a held key: replaced %q, %v; want first", replaced, err)
	}
	oe := e.terminalError("first", duroxide.StateCanceled)
	if !strings.Contains(oe.Info.Message, "replaced by second") {
		e.t.Fatalf("holder's cancel: %q, want the reason naming second", oe.Info.Message)
	}
	e.holds("deploy", "second")

	// A start that fails (its instance ID is taken) cancels nothing: the
	// cancel is part of the start's transaction.
	replaced, err = e.replaceStart(e.c, "first", "deploy")
	if !errors.Is(err, duroxide.ErrInstanceExists) || replaced != "" {
		e.t.Fatalf("failing replacing start: replaced %q, %v; want ErrInstanceExists and none", replaced, err)
	}
	if err := e.c.RaiseEvent(e.ctx, "second", "done", nil); err != nil {
		e.t.Fatal(err)
	}
	var out string
	e.result("second", &out) // Completed: not canceled by the failed start

	// Signal-with-start takes the option too; an instance it finds
	// replaces nothing.
	e.startWith("third", "Hold", nil, &duroxide.StartOptions{LockKey: "deploy"})
	e.holds("deploy", "third")
	opts := &duroxide.StartOptions{LockKey: "deploy", ReplaceIfLocked: true, ReplaceReason: "hotfix", Replaced: &replaced}
	if started, err := e.c.SignalWithStart(e.ctx, "fourth", "Hold", nil, "done", nil, opts); err != nil || !started || replaced != "third" {
		e.t.Fatalf("replacing signal-with-start: started %v, replaced %q, %v; want started, third", started, replaced, err)
	}
	if oe := e.terminalError("third", duroxide.StateCanceled); !strings.Contains(oe.Info.Message, "hotfix") {
		e.t.Fatalf("holder's cancel: %q, want the reason hotfix", oe.Info.Message)
	}
	// fourth starts once third ended, with its event: the event may be
	// fetched ahead of the start, in the batch of third's cancel, and
	// still comes with the start (AbandonOptions.UntilStart).
	e.result("fourth", &out)
	if started, err := e.c.SignalWithStart(e.ctx, "second", "Hold", nil, "done", nil, opts); err == nil || started || replaced != "" {
		e.t.Fatalf("signal-with-start to an ended instance: started %v, replaced %q, %v", started, replaced, err)
	}

	// Bad input.
	for _, bad := range []*duroxide.StartOptions{{ReplaceIfLocked: true}, {LockKey: "deploy", ReplaceReason: "why"}} {
		if err := e.c.StartOrchestration(e.ctx, "bad", "Hold", nil, bad); !errors.Is(err, duroxide.ErrInvalidArgument) {
			e.t.Fatalf("StartOrchestration(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// e2eReplaceConcurrent makes two replacing starts at once on one key,
// through two clients with two runtimes serving the store, n times over:
// once on a held key, once on a free one. Whatever their order, one
// instance runs at a time, exactly one holds the lock when things
// settle, and the other one is either queued behind it or canceled.
func e2eReplaceConcurrent(e *e2e) {
	e.runtime(scheduleRegistry())
	e.runtime(scheduleRegistry())
	clients := []*duroxide.Client{e.c, duroxide.NewClient(e.store)}
	for _, held := range []bool{true, false} {
		key := "free"
		var ids []string
		if held {
			key = "held"
			e.startWith("held-0", "Hold", nil, &duroxide.StartOptions{LockKey: key})
			e.holds(key, "held-0")
			ids = append(ids, "held-0")
		}
		pair := []string{key + "-1", key + "-2"}
		ids = append(ids, pair...)
		replaced := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, id := range pair {
			wg.Go(func() { replaced[i], errs[i] = e.replaceStart(clients[i], id, key) })
		}
		wg.Wait()
		for i := range pair {
			if errs[i] != nil {
				e.t.Fatalf("%s: replacing start %s: %v", key, pair[i], errs[i])
			}
		}
		// On a held key each start replaces the holder it finds: held-0,
		// or the other start once held-0 ended and handed it the lock.
		if held && !slices.Contains(replaced, "held-0") || held && (!slices.Contains([]string{"held-0", pair[1]}, replaced[0]) ||
			!slices.Contains([]string{"held-0", pair[0]}, replaced[1])) {
			e.t.Fatalf("held key: replaced %q, want held-0 (or the other start) by each", replaced)
		}
		if !held && !slices.Equal(replaced, []string{"", pair[0]}) && !slices.Equal(replaced, []string{pair[1], ""}) {
			e.t.Fatalf("free key: replaced %q, want the later start to replace the earlier", replaced)
		}
		// Settled: every canceled instance ended and one instance runs
		// holding the lock; never two running at once.
		var holder string
		e.eventually(key+": one holder running", func() bool {
			settled := true
			for _, id := range ids {
				if slices.Contains(replaced, id) && !e.status(id).State.IsTerminal() {
					settled = false
				}
			}
			// Read after the ended ones, which stay ended.
			running := e.runningWithPrefix(key + "-")
			if len(running) > 1 {
				e.t.Fatalf("%s: %v running at once", key, running)
			}
			if len(running) == 1 && settled {
				holder = running[0]
				return true
			}
			return false
		})
		e.holds(key, holder)
		var out string
		first := holder
		for _, id := range ids {
			if id == first || slices.Contains(replaced, id) {
				continue
			}
			// The other one waits its turn behind the holder.
			if st := e.status(id).State; st != duroxide.StatePending {
				e.t.Fatalf("%s: %s is %s, want Pending behind %s", key, id, st, holder)
			}
			if err := e.c.RaiseEvent(e.ctx, holder, "done", nil); err != nil {
				e.t.Fatal(err)
			}
			e.result(holder, &out)
			e.holds(key, id)
			holder = id
		}
		if err := e.c.RaiseEvent(e.ctx, holder, "done", nil); err != nil {
			e.t.Fatal(err)
		}
		e.result(holder, &out)
		for _, id := range ids {
			if st := e.wait(id).State; st != duroxide.StateCompleted && !slices.Contains(replaced, id) {
				e.t.Fatalf("%s: %s ended %s", key, id, st)
			}
		}
	}
}

// runningWithPrefix lists the Running instances whose ID starts with
// prefix, in one read.
func (e *e2e) runningWithPrefix(prefix string) []string {
	e.t.Helper()
	page, err := e.c.ListInstances(e.ctx, &duroxide.ListOptions{IDPrefix: prefix, States: []duroxide.State{duroxide.StateRunning}})
	if err != nil {
		e.t.Fatalf("ListInstances(%s): %v", prefix, err)
	}
	var ids []string
	for _, st := range page.Instances {
		ids = append(ids, st.InstanceID)
	}
	return ids
}
