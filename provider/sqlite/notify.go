package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// Notifications (provider.Notifier).
//
// Commits made through this Provider notify at once: each write request
// records in its wtx what it changed (changes), and the writer delivers
// that after the transaction commits, never before and never for a request
// that rolled back.
//
// Commits made by other processes (or other Provider values on the same
// file) are noticed through PRAGMA data_version on the writer connection:
// its value changes exactly when another connection committed, never for
// the writer's own commits. The writer reads it at the start of every
// transaction, and a watcher reads it every Options.ChangeCheckInterval
// while the writer is idle, taking the writer's turn for that one pragma so
// it never waits on, or holds up, a transaction. A change wakes every
// subscriber and every instance watcher: this store cannot tell what the
// other process changed.

// changes is what one write request changed.
type changes struct {
	orch, work bool     // work may be fetchable on the queue
	instances  []string // instances whose state may have changed
}

// notify delivers c to the subscribers after its request committed.
func (p *Provider) notify(c *changes) {
	if c.orch {
		p.hub.Wake(provider.QueueOrchestrator)
	}
	if c.work {
		p.hub.Wake(provider.QueueWorker)
	}
	if len(c.instances) > 0 {
		p.hub.InstanceChanged(c.instances...)
	}
}

// Subscribe implements provider.Notifier.
func (p *Provider) Subscribe(q provider.Queue) (<-chan struct{}, func()) {
	return p.hub.Subscribe(q)
}

// WatchInstance implements provider.Notifier.
func (p *Provider) WatchInstance(instanceID string) (<-chan struct{}, func()) {
	return p.hub.WatchInstance(instanceID)
}

// WakeAll wakes every subscriber and instance watcher, as when another
// process changed the database. Test harnesses that move a fake clock use
// it: dispatchers sleeping on timers of the old time look again.
func (p *Provider) WakeAll() { p.hub.WakeAll() }

// checkForeignCommits reads the writer connection's data_version inside a
// transaction that just began, and wakes everyone if another connection
// committed since the writer last looked.
func (p *Provider) checkForeignCommits(w *wtx) {
	if p.memory {
		return
	}
	var v int64
	if err := w.query(sDataVersion, func(r *sql.Rows) error { return r.Scan(&v) }); err != nil {
		return // a failing transaction reports its own error
	}
	p.sawDataVersion(v)
}

func (p *Provider) sawDataVersion(v int64) {
	if old := p.dataVersion.Swap(v); old != 0 && old != v {
		p.foreignCommits.Add(1)
		p.hub.WakeAll()
	}
}

// watchForeignCommits checks data_version while the writer is idle, until
// Close. The writer checks it itself when busy.
func (p *Provider) watchForeignCommits(every time.Duration) {
	defer close(p.watchDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.watchStop:
			return
		case <-t.C:
		}
		if !p.takeIdleWriter() {
			continue
		}
		var v int64
		err := p.prepare(context.Background())
		if err == nil {
			err = p.wstmts[sDataVersion].QueryRow().Scan(&v)
		}
		p.releaseIdleWriter()
		if err == nil {
			p.sawDataVersion(v)
		}
	}
}

// takeIdleWriter makes the caller the writer's leader if nobody is, so it
// may use the writer connection outside a transaction; it reports false
// when the writer is busy or closed.
func (p *Provider) takeIdleWriter() bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.leading || p.wclosed {
		return false
	}
	p.leading = true
	return true
}

// releaseIdleWriter ends takeIdleWriter: requests that queued meanwhile
// get the writer, as after a transaction.
func (p *Provider) releaseIdleWriter() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(p.pending) > 0 {
		p.pending[0].lead <- struct{}{}
		return
	}
	p.leading = false
	p.wcond.Broadcast()
}
