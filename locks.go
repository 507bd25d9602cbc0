package duroxide

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// LockStatus is the state of the execution lock of one workflow ID
// (StartOptions.LockKey). Its JSON form is the HTTP API's.
type LockStatus struct {
	WorkflowID string `json:"workflowId"`
	// IsLocked: a lock row exists (even a stale or expired one, which the
	// next start or cleanup removes).
	IsLocked bool `json:"isLocked"`
	// InstanceID is the instance holding the lock. The HTTP API names it
	// executionId, as the webhook contract does.
	InstanceID  *string    `json:"executionId"`
	LockedSince *time.Time `json:"lockedSince"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	// IsStale: the lock no longer protects a live instance: its holder
	// finished or is gone, or its TTL passed. A start takes it over.
	IsStale bool `json:"isStale"`
	// HolderStatus is the holder's state ("" when it is gone or unlocked).
	HolderStatus State `json:"holderStatus,omitempty"`
	// Queued counts starts waiting for the lock (StartOptions.QueueIfLocked).
	Queued int `json:"queued"`
}

func lockStatusOf(l *provider.ExecutionLock) LockStatus {
	id, since, exp := l.InstanceID, l.LockedAt, l.ExpiresAt
	st := LockStatus{WorkflowID: l.Key, IsLocked: true, InstanceID: &id, LockedSince: &since, ExpiresAt: &exp,
		IsStale: l.Stale || l.Expired, Queued: l.Queued}
	if l.HolderStatus != "" {
		st.HolderStatus = stateOf(l.HolderStatus)
	}
	return st
}

// GetLock returns the lock status of workflowID. A workflow with no lock
// is reported unlocked (IsLocked false), not as an error.
func (c *Client) GetLock(ctx context.Context, workflowID string) (*LockStatus, error) {
	if err := checkLookup("workflow ID", workflowID, MaxKeyLength); err != nil {
		return nil, err
	}
	l, err := c.p.GetExecutionLock(ctx, workflowID)
	if errors.Is(err, provider.ErrNotFound) {
		return &LockStatus{WorkflowID: workflowID}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading lock %q: %w", workflowID, err)
	}
	st := lockStatusOf(l)
	return &st, nil
}

// ListLocks returns every execution lock, ordered by workflow ID.
func (c *Client) ListLocks(ctx context.Context) ([]LockStatus, error) {
	ls, err := c.p.ListExecutionLocks(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing locks: %w", err)
	}
	out := make([]LockStatus, len(ls))
	for i := range ls {
		out[i] = lockStatusOf(&ls[i])
	}
	return out, nil
}

// ReleaseLock force-releases the lock of workflowID, whatever its holder's
// state, and lets the oldest queued start (if any) take it. It reports
// whether there was a lock. For emergencies: the holder, if still alive,
// keeps running without the lock.
func (c *Client) ReleaseLock(ctx context.Context, workflowID string) (bool, error) {
	if err := checkLookup("workflow ID", workflowID, MaxKeyLength); err != nil {
		return false, err
	}
	ok, err := c.p.ReleaseExecutionLock(ctx, workflowID)
	if err != nil {
		return false, fmt.Errorf("releasing lock %q: %w", workflowID, err)
	}
	return ok, nil
}

// CleanupExpiredLocks deletes every lock whose TTL passed or whose holder
// finished or is gone (queued starts take them), and idempotency keys past
// their retention. It returns how many locks were deleted. Runtimes do
// this periodically (RuntimeOptions.LockCleanupInterval).
func (c *Client) CleanupExpiredLocks(ctx context.Context) (int, error) {
	res, err := c.p.CleanupExecutionLocks(ctx)
	if err != nil {
		return 0, fmt.Errorf("cleaning up locks: %w", err)
	}
	return res.Locks, nil
}
