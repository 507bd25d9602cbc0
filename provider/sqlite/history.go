package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// ReadHistory returns one execution's events; see provider.Provider.
func (p *Provider) ReadHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error) {
	const op = "reading history"
	if instanceID == "" {
		return nil, p.fail(op, sqlenc.Invalid("empty instance ID"))
	}
	if executionID < 0 {
		return nil, p.fail(op, sqlenc.Invalid("executionID %d is negative", executionID))
	}
	var evs []history.Event
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		var current int64
		err := tx.StmtContext(ctx, p.rstmts[rInstanceCurrent]).QueryRowContext(ctx, instanceID).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
		}
		if err != nil {
			return interpretError(err, nil)
		}
		exec := executionID
		if exec == 0 {
			if current == 0 {
				evs = []history.Event{}
				return nil // not started yet
			}
			exec = current
		} else {
			var n int
			if err := tx.StmtContext(ctx, p.rstmts[rExecutionExists]).QueryRowContext(ctx, instanceID, exec).Scan(&n); err != nil {
				return interpretError(err, nil)
			}
			if n == 0 {
				return fmt.Errorf("instance %q execution %d: %w", instanceID, exec, provider.ErrNotFound)
			}
		}
		var rows []sqlstore.StoredEvent
		err = queryRows(ctx, tx.StmtContext(ctx, p.rstmts[rHistory]), func(r *sql.Rows) error {
			var data []byte
			if err := r.Scan(&data); err != nil {
				return err
			}
			rows = append(rows, sqlstore.StoredEvent{Data: data})
			return nil
		}, instanceID, exec)
		if err != nil {
			return err
		}
		evs, err = sqlstore.DecodeEvents(rows)
		if err != nil {
			return fmt.Errorf("instance %q execution %d: %w", instanceID, exec, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}
