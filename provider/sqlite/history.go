package sqlite

import (
	"context"
	"database/sql"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// ReadHistory returns one execution's events; see provider.Provider.
func (p *Provider) ReadHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error) {
	const op = "reading history"
	if err := sqlstore.CheckHistoryArgs(instanceID, executionID); err != nil {
		return nil, p.fail(op, err)
	}
	var evs []history.Event
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		evs, err = sqlstore.ReadHistory(ctx, p.readQuerier(tx), instanceID, executionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}
