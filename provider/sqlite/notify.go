package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Notifications (provider.Notifier).
//
// Commits made through this Provider notify at once: each write request
// records in its wtx what it changed (changes), and the writer delivers
// that after the transaction commits, never before and never for a request
// that rolled back; except that an enqueue wakes the orchestrator queue
// when it is queued (Provider.queued in writer.go).
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
	// live: those of instances that a turn left live (not Completed,
	// Failed or Canceled); their WatchInstanceEnd watchers are not woken
	// (provider.EndWatcher), so a WaitForOrchestration does not read the
	// status of an instance after each of its turns.
	live []string
}

// notify delivers c to the subscribers after its request committed;
// woken: the request woke the orchestrator queue when it was queued
// (Provider.queued), which it need not wake again.
func (p *Provider) notify(c *changes, woken bool) {
	sqlstore.Deliver(&p.hub, c.orch && !woken, c.work, c.instances, c.live)
}

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
		if !p.group.TryAcquire() {
			continue
		}
		var v int64
		err := p.prepare(context.Background())
		if err == nil {
			// An idle store's writer may break too: replace it here, or
			// the store would miss other processes' commits until its
			// next write.
			p.connMu.Lock()
			if !p.writerUsable() {
				err = p.replaceWriter()
			}
			if err == nil {
				err = p.wstmts[sDataVersion].QueryRow().Scan(&v)
			}
			p.connMu.Unlock()
		}
		p.group.Release()
		if err == nil {
			p.sawDataVersion(v)
		}
	}
}
