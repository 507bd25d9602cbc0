package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/provider"
)

// The bodies of the provider.Admin reads of one instance. Each runs on q
// (GetInstance and GetExecution one statement; ListExecutions and
// ListChildren two, in one read transaction). A missing instance or
// execution is ErrNotFound; driver errors come back untranslated (see
// Querier).

// GetInstance returns one instance.
func GetInstance(ctx context.Context, q Querier, instanceID string) (*provider.InstanceInfo, error) {
	in, err := ScanInstanceInfo(q.QueryRow(ctx, QGetInstance, instanceID))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	return in, err
}

// GetExecution returns one execution.
func GetExecution(ctx context.Context, q Querier, instanceID string, executionID int64) (*provider.ExecutionInfo, error) {
	e, err := ScanExecutionInfo(q.QueryRow(ctx, QGetExecution, instanceID, executionID))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("instance %q execution %d: %w", instanceID, executionID, provider.ErrNotFound)
	}
	return e, err
}

// ListExecutions returns the instance's executions in order (empty, not
// nil, for an instance not started yet).
func ListExecutions(ctx context.Context, q Querier, instanceID string) ([]provider.ExecutionInfo, error) {
	if err := instanceExists(ctx, q, instanceID); err != nil {
		return nil, err
	}
	out := []provider.ExecutionInfo{}
	err := q.Each(ctx, QListExecutions, func(r Row) error {
		e, err := ScanExecutionInfo(r)
		if err != nil {
			return err
		}
		out = append(out, *e)
		return nil
	}, instanceID)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListChildren returns the IDs of the instance's direct
// sub-orchestrations, oldest first (empty, not nil, for none).
func ListChildren(ctx context.Context, q Querier, instanceID string) ([]string, error) {
	if err := instanceExists(ctx, q, instanceID); err != nil {
		return nil, err
	}
	ids := []string{}
	err := q.Each(ctx, QListChildren, func(r Row) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	}, instanceID)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func instanceExists(ctx context.Context, q Querier, instanceID string) error {
	var ok bool
	if err := q.QueryRow(ctx, QInstanceExists, instanceID).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	return nil
}
