package postgres

import (
	"context"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// NextVisible returns the earliest time a fetch of queue q may find work it
// cannot find now, or the zero time when the queue is empty; see
// provider.Waker. It is one read on the pool and locks nothing. For the
// orchestrator queue it is, over the instances with queued messages, the
// later of an instance's earliest message and its lock's expiry; for the
// worker queue the earliest visible_at (a fetch moves a row's visible_at
// to its lock expiry).
func (p *Provider) NextVisible(ctx context.Context, q provider.Queue) (time.Time, error) {
	const op = "reading next visible time"
	var query string
	switch q {
	case provider.QueueOrchestrator:
		query = sqlNextVisibleOrch
	case provider.QueueWorker:
		query = sqlNextVisibleWork
	default:
		return time.Time{}, p.fail(op, sqlenc.Invalid("unknown queue %d", q))
	}
	var at *int64
	err := p.read(ctx, op, func() error {
		return p.pool.QueryRow(ctx, query).Scan(&at)
	})
	if err != nil || at == nil {
		return time.Time{}, err
	}
	return msTime(*at), nil
}
