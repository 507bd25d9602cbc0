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

// PurgeRow is what PurgeInstances checks of each instance of the tree it
// would delete: its status and its parent ("" for none), and whether that
// parent still exists.
type PurgeRow struct {
	Status, Parent string
	ParentExists   bool
}

// ScanPurgeRow reads one row of a store's purge-rows statement: instance
// ID, status, parent ID (empty for none), whether the parent exists.
func ScanPurgeRow(r Row) (string, PurgeRow, error) {
	var id string
	var x PurgeRow
	err := r.Scan(&id, &x.Status, &x.Parent, &x.ParentExists)
	return id, x, err
}

// CheckPurge decides whether PurgeInstances may delete tree, the named
// instances and all their descendants, whose rows are rows: a named
// instance that does not exist is ErrNotFound, one whose parent exists
// and is not purged with it ErrChildInstance, and, unless force, an
// instance of the tree that is pending or running ErrStillRunning.
func CheckPurge(instanceIDs, tree []string, rows map[string]PurgeRow, force bool) error {
	inTree := make(map[string]bool, len(tree))
	for _, id := range tree {
		inTree[id] = true
	}
	for _, id := range instanceIDs {
		x, ok := rows[id]
		if !ok {
			return fmt.Errorf("instance %q: %w", id, provider.ErrNotFound)
		}
		if x.Parent != "" && x.ParentExists && !inTree[x.Parent] {
			return fmt.Errorf("instance %q (parent %q): %w", id, x.Parent, provider.ErrChildInstance)
		}
	}
	if !force {
		for _, id := range tree {
			if s := provider.Status(rows[id].Status); s == provider.StatusPending || s == provider.StatusRunning {
				return fmt.Errorf("instance %q is %s: %w", id, s, provider.ErrStillRunning)
			}
		}
	}
	return nil
}

// CheckPurgeArgs validates PurgeInstances' arguments before a store opens
// its transaction.
func CheckPurgeArgs(instanceIDs []string) error {
	for _, id := range instanceIDs {
		if err := CheckInstanceID(id); err != nil {
			return err
		}
	}
	return nil
}
