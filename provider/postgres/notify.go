package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Notifications (provider.Notifier).
//
// Commits made through this Provider notify its own subscribers at once,
// after the commit. A transaction that rolled back notifies nobody, except
// that one which took an instance's advisory lock wakes this process's
// orchestrator subscribers: a fetch may have skipped the instance while it
// held the lock (wakeSkipped). Every write
// transaction that changed something also calls pg_notify on the store's
// channel right after its COMMIT, in the same round trip (the statements
// follow the COMMIT in its pipeline, each in a transaction of its own), so
// other nodes are told only once the change is visible to them.
//
// Not inside the transaction: PostgreSQL serialises the commits of the
// transactions that sent a notification with one lock for the whole
// server, held through the commit's WAL flush, so notifying transactions
// would commit one at a time, each with a flush of its own, and no two
// groups (or nodes) could share a flush. A transaction that only notifies
// writes no WAL of its own and commits without a flush: the lock is held
// for microseconds. The cost: a server crash between a commit and its
// notification (the same round trip) loses the notification, and other
// nodes find the work at their next poll. The payload names the
// sending node (a node ignores its own notifications: it already woke its
// subscribers), the queues that may have work and the instances that
// changed.
//
// Each Provider listens on a dedicated connection, not from the pool, so
// the pool's connections stay interchangeable. When that connection breaks
// the listener reconnects with capped exponential backoff and then wakes
// every subscriber and watcher: notifications sent while it was down are
// lost, and the runtime must look again.

// maxNotifyInstances caps the instance IDs a notification names; beyond it
// the notification says "every instance".
const maxNotifyPayload = 7000 // PostgreSQL's limit is 8000 bytes

// changes is what one write transaction changed.
type changes struct {
	orch, work bool     // work may be fetchable on the queue
	instances  []string // instances whose state may have changed
	// live: those of instances whose turn left them live (not ended),
	// as the turn's batch read their status (afterTurn).
	live []string
	// ending: those of instances whose turn ends their execution
	// (Completed, Failed, Canceled: the commit waits for the WAL flush);
	// ended: the rows of those a waiter of this process watches
	// (provider.EndStatusWatcher), read right after the COMMIT
	// (queueEndedRows).
	ending []string
	ended  []*provider.InstanceInfo
}

func (c *changes) addInstance(ids ...string) { c.instances = append(c.instances, ids...) }

// payload is the JSON carried by a notification.
type payload struct {
	Node      string   `json:"n"`
	Orch      bool     `json:"o,omitempty"`
	Work      bool     `json:"w,omitempty"`
	Instances []string `json:"i,omitempty"`
	// All: the instance list was too long; every watcher should look.
	All bool `json:"a,omitempty"`
}

// channelName is the notification channel of a schema: one per schema, so
// deployments sharing a database do not wake each other. It is a quoted
// identifier of at most 63 bytes.
func channelName(schema string) string {
	name := "duroxide_" + schema
	if len(name) > maxSchemaLen {
		sum := sha256.Sum256([]byte(schema))
		name = "duroxide_" + hex.EncodeToString(sum[:16])
	}
	return name
}

// queueNotifyAll queues on b the one notification of what the
// transactions ws (nil for a call that failed: a group's) changed, if
// anything: a transaction or group sends it right after its COMMIT, in the
// same round trip. Whether the orchestrator queue has news for the
// instances of turn acks (askOrch) is decided in SQL then: messages may
// still wait for them.
func (p *Provider) queueNotifyAll(b *pgx.Batch, ws ...*wtx) error {
	var (
		orch, work bool
		ids, ask   []string
	)
	for _, w := range ws {
		if w == nil {
			continue
		}
		orch = orch || w.changes.orch
		work = work || w.changes.work
		ids = append(ids, w.changes.instances...)
		ask = append(ask, w.askOrch...)
	}
	if !orch && !work && len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	pl := payload{Node: p.node, Orch: orch, Work: work, Instances: ids}
	raw, err := json.Marshal(pl)
	if err != nil {
		return err
	}
	if len(raw) > maxNotifyPayload {
		pl.Instances, pl.All = nil, true
		if raw, err = json.Marshal(pl); err != nil {
			return err
		}
	}
	if orch || len(ask) == 0 {
		b.Queue(`SELECT pg_notify($1, $2)`, p.channel, string(raw))
	} else {
		b.Queue(sqlAckNotify, p.channel, p.node, work, ask, pl.Instances, pl.All)
	}
	p.queueEndedRows(b, ws)
	return nil
}

// sqlEndedRows reads the rows of instances that a transaction ended, right
// after its COMMIT (in a transaction of its own, in the COMMIT's round
// trip). $1 instance IDs.
const sqlEndedRows = `SELECT ` + instanceColumns + ` FROM instances WHERE instance_id = ANY($1)
   AND status IN ('Completed', 'Failed', 'Canceled')`

// queueEndedRows queues on b, which follows the COMMIT of the
// transactions ws, the read of the rows of the instances whose execution
// they end and for which a waiter of this process is watching
// (provider.EndStatusWatcher): notifyLocal hands them over, so that
// Client.WaitForOrchestration returns without reading the status itself,
// a round trip and a wake-up later. The read costs no round trip of its
// own, and is queued only when someone waits. It runs after the COMMIT
// returned, so it sees what the transactions committed, durably (a turn
// that ends its execution waits for the WAL flush, and so does its
// group): a row it finds Completed, Failed or Canceled is what a read of
// the waiter would have found; a row it does not find (purged meanwhile,
// or a commit that failed) is not handed over, and the waiter, signalled
// as before, reads.
func (p *Provider) queueEndedRows(b *pgx.Batch, ws []*wtx) {
	var ending []string
	for _, w := range ws {
		if w != nil {
			ending = append(ending, w.changes.ending...)
		}
	}
	if len(ending) == 0 {
		return
	}
	ids := p.hub.EndStatusWatched(ending)
	if len(ids) == 0 {
		return
	}
	b.Queue(sqlEndedRows, ids).Query(func(r pgx.Rows) error {
		return forEach(r, func() error {
			in, err := sqlstore.ScanInstanceInfo(r)
			if err != nil {
				return nil // not handed over: the waiter reads it
			}
			for _, w := range ws {
				if w != nil && slices.Contains(w.changes.ending, in.InstanceID) {
					w.changes.ended = append(w.changes.ended, in)
					break
				}
			}
			return nil
		})
	})
}

// notifyLocal delivers c to this process's subscribers after its
// transaction committed.
func (p *Provider) notifyLocal(c *changes) {
	if len(c.ended) == 0 {
		sqlstore.Deliver(&p.hub, c.orch, c.work, c.instances, c.live)
		return
	}
	// The instances whose rows were read signal their watchers with
	// them, the others as usual.
	rest := slices.DeleteFunc(slices.Clone(c.instances), func(id string) bool {
		return slices.ContainsFunc(c.ended, func(in *provider.InstanceInfo) bool { return in.InstanceID == id })
	})
	sqlstore.Deliver(&p.hub, c.orch, c.work, rest, c.live)
	p.hub.InstanceEnded(c.ended...)
}

// handleNotification wakes the subscribers a notification of another node
// concerns.
func (p *Provider) handleNotification(raw string) {
	var pl payload
	if err := json.Unmarshal([]byte(raw), &pl); err != nil {
		p.hub.WakeAll() // not ours to parse: look again anyway
		return
	}
	if pl.Node == p.node {
		return // our own commit: its subscribers were woken already
	}
	if pl.All {
		p.hub.WakeAll()
		return
	}
	if pl.Orch {
		p.hub.Wake(provider.QueueOrchestrator)
	}
	if pl.Work {
		p.hub.Wake(provider.QueueWorker)
	}
	if len(pl.Instances) > 0 {
		p.hub.InstanceChanged(pl.Instances...)
	}
}

// listen connects the listening connection and subscribes to the channel.
func (p *Provider) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.listenCfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{p.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	p.listenConnPID.Store(conn.PgConn().PID())
	return conn, nil
}

// startListener opens the listening connection (so notifications are
// delivered once Open returns) and starts the goroutine that reads it.
func (p *Provider) startListener(ctx context.Context) error {
	conn, err := p.listen(ctx)
	if err != nil {
		return fmt.Errorf("postgres: opening the listening connection: %w", interpretError(err, nil))
	}
	lctx, cancel := context.WithCancel(context.Background())
	p.listenStop, p.listenDone = cancel, make(chan struct{})
	go p.runListener(lctx, conn)
	return nil
}

// runListener reads notifications until ctx ends, reconnecting with capped
// exponential backoff when the connection breaks.
func (p *Provider) runListener(ctx context.Context, conn *pgx.Conn) {
	defer close(p.listenDone)
	backoff := 10 * time.Millisecond
	for {
		if conn != nil {
			err := p.readNotifications(ctx, conn)
			_ = conn.Close(context.Background())
			conn = nil
			p.listenConnPID.Store(0)
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("postgres: the listening connection broke; reconnecting", logkey.Error, err)
		}
		c, err := p.listen(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("postgres: reconnecting the listening connection failed", logkey.Error, err, logkey.RetryIn, backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, p.retryMax)
			continue
		}
		conn, backoff = c, 10*time.Millisecond
		p.reconnects.Add(1)
		// Notifications sent while the connection was down are lost.
		p.hub.WakeAll()
	}
}

// readNotifications delivers the connection's notifications until it breaks
// or ctx ends.
func (p *Provider) readNotifications(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		p.handleNotification(n.Payload)
	}
}
