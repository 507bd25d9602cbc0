package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// NextVisible returns the earliest time a fetch of queue q may find work it
// cannot find now, or the zero time when the queue is empty; see
// provider.Waker. It is one read on the reader pool, an index lookup
// whatever the backlog: orchestrator_ready's ready_at already folds in the
// expiry of instance locks, and a worker fetch moves the row's visible_at
// to its lock expiry.
func (p *Provider) NextVisible(ctx context.Context, q provider.Queue) (time.Time, error) {
	const op = "reading next visible time"
	var id stmtID
	switch q {
	case provider.QueueOrchestrator:
		id = rNextVisibleOrch
	case provider.QueueWorker:
		id = rNextVisibleWork
	default:
		return time.Time{}, p.fail(op, sqlenc.Invalid("unknown queue %d", q))
	}
	var at sql.NullInt64
	err := p.read(ctx, op, func() error {
		return interpretError(p.rstmts[id].QueryRowContext(ctx).Scan(&at), nil)
	})
	if err != nil || !at.Valid {
		return time.Time{}, err
	}
	return msTime(at.Int64), nil
}
