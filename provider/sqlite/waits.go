package sqlite

import (
	"context"
	"database/sql"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// InstanceQueue returns one instance's queue state in one read
// transaction; see provider.Admin.
func (p *Provider) InstanceQueue(ctx context.Context, instanceID string) (*provider.InstanceQueueState, error) {
	const op = "reading instance queue"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var st *provider.InstanceQueueState
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		st, err = sqlstore.InstanceQueue(ctx, p.readQuerier(tx), instanceID, msTime(p.now()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// maxStalledCandidates caps the rows each stall rule reads.
const maxStalledCandidates = 10000

// StalledInstances lists stalled instances, newest first; see provider.Admin.
func (p *Provider) StalledInstances(ctx context.Context, opts provider.StalledOptions) (*provider.StalledPage, error) {
	const op = "listing stalled instances"
	switch {
	case opts.After <= 0:
		return nil, p.fail(op, sqlenc.Invalid("After %v must be positive", opts.After))
	case opts.MinAttempts < 2:
		return nil, p.fail(op, sqlenc.Invalid("MinAttempts %d must be at least 2", opts.MinAttempts))
	case opts.Limit < 0:
		return nil, p.fail(op, sqlenc.Invalid("Limit %d is negative", opts.Limit))
	}
	limit := opts.Limit
	if limit == 0 {
		limit = sqlstore.DefaultPageSize
	}
	limit = min(limit, sqlstore.MaxPageSize)
	page := &provider.StalledPage{InstanceIDs: []string{}}
	err := p.read(ctx, op, func() error {
		cutoff := p.now() - sqlenc.DurMs(opts.After)
		return queryRows(ctx, p.rstmts[rStalled], func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			page.InstanceIDs = append(page.InstanceIDs, id)
			return nil
		}, cutoff, opts.MinAttempts, limit+1, maxStalledCandidates)
	})
	if err != nil {
		return nil, err
	}
	if len(page.InstanceIDs) > limit {
		page.InstanceIDs, page.More = page.InstanceIDs[:limit], true
	}
	return page, nil
}
