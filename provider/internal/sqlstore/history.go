package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// CheckHistoryArgs validates ReadHistory's arguments before a store opens
// its transaction.
func CheckHistoryArgs(instanceID string, executionID int64) error {
	if instanceID == "" {
		return sqlenc.Invalid("empty instance ID")
	}
	if executionID < 0 {
		return sqlenc.Invalid("executionID %d is negative", executionID)
	}
	return nil
}

// ReadHistory is the body of provider.Provider.ReadHistory, run in one read
// transaction q (one snapshot): the events of execution executionID of
// the instance, of its current execution when executionID is 0 (none, an
// empty slice, before the instance started). A missing instance or
// execution is ErrNotFound; an undecodable event ErrCorruptData. Driver
// errors come back untranslated (see Querier).
func ReadHistory(ctx context.Context, q Querier, instanceID string, executionID int64) ([]history.Event, error) {
	var current int64
	err := q.QueryRow(ctx, QInstanceCurrent, instanceID).Scan(&current)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	exec := executionID
	if exec == 0 {
		if current == 0 {
			return []history.Event{}, nil // not started yet
		}
		exec = current
	} else {
		var ok bool
		if err := q.QueryRow(ctx, QExecutionExists, instanceID, exec).Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("instance %q execution %d: %w", instanceID, exec, provider.ErrNotFound)
		}
	}
	var rows []StoredEvent
	err = q.Each(ctx, QHistory, func(r Row) error {
		var data []byte
		if err := r.Scan(&data); err != nil {
			return err
		}
		rows = append(rows, StoredEvent{Data: data})
		return nil
	}, instanceID, exec)
	if err != nil {
		return nil, err
	}
	evs, err := DecodeEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("instance %q execution %d: %w", instanceID, exec, err)
	}
	return evs, nil
}
