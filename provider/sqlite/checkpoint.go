package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// Checkpoints.
//
// In WAL mode a commit appends pages to the WAL; a checkpoint copies them
// back into the database file (and, in synchronous NORMAL or FULL, syncs
// it). By default SQLite checkpoints inside the commit that takes the WAL
// past 1000 pages: every few dozen commits one caller's ack would pay
// milliseconds of copying and an fsync. The writer connection therefore
// never checkpoints (wal_autocheckpoint 0). Instead, every checkpointEvery
// commits wake a goroutine that runs a PASSIVE checkpoint on a connection
// of its own: it copies what no reader still needs, without waiting for
// the writer or the readers. It waits for a pause in the writer's commits
// (checkpointIdle) before it starts, up to checkpointForce commits: on a
// 2-core machine a checkpoint running beside a burst of commits (a thousand
// timers due at once) takes CPU from the turns of that burst and makes
// them late, while in a pause it costs nobody anything. Once a
// checkpoint copied the whole WAL, the writer starts it again from the
// beginning at its next transaction, so the file stays bounded as with
// SQLite's own checkpoints. The last connection to close checkpoints what
// is left. Checkpoints change nothing a reader or a crash can see: the
// pages they copy are committed already.

const (
	// checkpointEvery is how many commits of the writer wake the
	// checkpointer (a small commit writes a few pages: about SQLite's
	// 1000-page default).
	checkpointEvery = 64
	// checkpointIdle is the pause in the writer's commits the checkpointer
	// waits for once woken.
	checkpointIdle = 10 * time.Millisecond
	// checkpointForce is how many commits since the last checkpoint make
	// the checkpointer start without waiting for a pause: the bound on the
	// WAL under a load that never pauses.
	checkpointForce = 16 * checkpointEvery
)

// checkpointer is the state of a file store's checkpoint goroutine.
type checkpointer struct {
	db      *sql.DB       // its own connection
	kick    chan struct{} // a checkpoint is due (capacity 1)
	stop    chan struct{}
	done    chan struct{}
	commits int64 // commits since the last kick; the writer's only
	// pending counts the commits since the last checkpoint began, and
	// last is when the latest one committed (since epoch, monotonic).
	pending atomic.Int64
	last    atomic.Int64
	epoch   time.Time
	// testHook, if set, gets each checkpoint's result: the WAL's frames
	// and how many of them are in the database file now.
	testHook func(busy bool, log, checkpointed int64, err error)
}

// openCheckpointer opens the checkpoint connection of a file store and
// starts its goroutine.
func (p *Provider) openCheckpointer(ctx context.Context, busy string) error {
	db, err := sql.Open("sqlite", dsn(p.path, []string{busy}, nil))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return interpretError(err, nil)
	}
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), epoch: time.Now()}
	p.ckpt = c
	go c.run()
	return nil
}

// committed counts a commit of the writer (whose lane the caller holds)
// and wakes the checkpointer every checkpointEvery commits.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	c.pending.Add(1)
	c.last.Store(int64(time.Since(c.epoch)))
	if c.commits++; c.commits < checkpointEvery {
		return
	}
	c.commits = 0
	select {
	case c.kick <- struct{}{}:
	default: // one is due already
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		if !c.waitForPause() {
			return
		}
		c.pending.Store(0)
		var busy, log, done int64
		err := c.db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done)
		if c.testHook != nil {
			c.testHook(busy != 0, log, done, err)
		}
		// A failed checkpoint is tried again at the next kick; the WAL
		// only grows meanwhile.
	}
}

// waitForPause waits until the writer made no commit for checkpointIdle,
// or checkpointForce commits are pending. It returns false when the
// checkpointer is stopped meanwhile.
func (c *checkpointer) waitForPause() bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		quiet := time.Since(c.epoch) - time.Duration(c.last.Load())
		if quiet >= checkpointIdle || c.pending.Load() >= checkpointForce {
			return true
		}
		if timer == nil {
			timer = time.NewTimer(checkpointIdle - quiet)
		} else {
			timer.Reset(checkpointIdle - quiet)
		}
		select {
		case <-c.stop:
			return false
		case <-timer.C:
		}
	}
}

// close stops the goroutine and closes the connection.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	return c.db.Close()
}
