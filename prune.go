package duroxide

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// PruneOptions tunes Client.Prune, one retention pass.
type PruneOptions struct {
	// OlderThan purges the root instances (and with them their
	// sub-orchestrations) that finished (Completed, Failed or Canceled)
	// more than OlderThan before Now. 0 purges no instance.
	OlderThan time.Duration
	// KeepExecutions, when positive, deletes all but the last
	// KeepExecutions executions (rows and history) of every instance that
	// continued as new, live ones included; 0 keeps every execution. It
	// needs a store implementing provider.ExecutionPruner.
	KeepExecutions int
	// BatchSize bounds the instances purged, and the ContinueAsNew chains
	// pruned, by one store transaction (0 = DefaultRetentionBatch; at
	// most 1000).
	BatchSize int
	// MaxBatches bounds the batches of each kind one pass runs (0 = until
	// done); Report.More says whether work was left.
	MaxBatches int
	// DryRun counts what the pass would delete and changes nothing.
	DryRun bool
	// Now is the time OlderThan counts back from (zero: time.Now()).
	Now time.Time
	// Progress, when set, is called after each batch with the totals so far.
	Progress func(PruneReport)
}

// DefaultRetentionBatch is the default PruneOptions.BatchSize.
const DefaultRetentionBatch = 100

// pruneFirstIDs is how many instance IDs a PruneReport lists.
const pruneFirstIDs = 20

// PruneReport says what a retention pass deleted (or, in a dry run,
// would delete).
type PruneReport struct {
	DryRun bool `json:"dryRun,omitempty"`
	// Instances counts the root instances purged (their
	// sub-orchestrations go with them); InstanceIDs lists the first ones.
	Instances   int64    `json:"instances"`
	InstanceIDs []string `json:"instanceIds"`
	// Skipped counts finished root instances that could not be purged
	// (a sub-orchestration still running).
	Skipped int64 `json:"skipped"`
	// Events counts the history events deleted with purged instances
	// (not counted in a dry run).
	Events int64 `json:"events"`
	// Chains counts the instances whose old executions were pruned;
	// ChainIDs lists the first ones; Executions and ExecutionEvents
	// count the executions and their history events.
	Chains          int64    `json:"chains"`
	ChainIDs        []string `json:"chainIds,omitempty"`
	Executions      int64    `json:"executions"`
	ExecutionEvents int64    `json:"executionEvents"`
	// Batches counts the store transactions (dry run: pages read).
	Batches int `json:"batches"`
	// More reports that MaxBatches stopped the pass with work left.
	More bool `json:"more,omitempty"`
}

// Prune runs one retention pass over the store: it purges the instances
// that finished more than opts.OlderThan ago and prunes old executions
// of ContinueAsNew chains, in batches of opts.BatchSize, each its own
// transaction. Idempotency keys are not deleted with their instances: a
// key stays until its own retention (StartOptions.IdempotencyRetention)
// ends, so a repeated start is still refused, and the runtimes' lock
// cleanup deletes it then. Runtimes run Prune periodically with
// RuntimeOptions.Retention; 'duroxide prune' runs it once.
func (c *Client) Prune(ctx context.Context, opts *PruneOptions) (*PruneReport, error) {
	if opts == nil || opts.OlderThan <= 0 && opts.KeepExecutions <= 0 {
		return nil, fmt.Errorf("%w: Prune needs OlderThan or KeepExecutions", ErrInvalidArgument)
	}
	if opts.OlderThan < 0 || opts.KeepExecutions < 0 || opts.BatchSize < 0 || opts.MaxBatches < 0 {
		return nil, fmt.Errorf("%w: Prune options must not be negative", ErrInvalidArgument)
	}
	batch := min(cmp.Or(opts.BatchSize, DefaultRetentionBatch), 1000)
	rep := &PruneReport{DryRun: opts.DryRun, InstanceIDs: []string{}}
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(*rep)
		}
	}
	if opts.OlderThan > 0 {
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		if err := c.pruneInstances(ctx, opts, now.Add(-opts.OlderThan), batch, rep, progress); err != nil {
			return rep, err
		}
	}
	if opts.KeepExecutions > 0 {
		if err := c.pruneExecutions(ctx, opts, batch, rep, progress); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (c *Client) pruneInstances(ctx context.Context, opts *PruneOptions, cutoff time.Time, batch int, rep *PruneReport, progress func()) error {
	lo := provider.ListInstancesOptions{FinishedBefore: cutoff, RootsOnly: true, Limit: batch}
	for n := 0; opts.MaxBatches == 0 || n < opts.MaxBatches; n++ {
		page, err := c.p.ListInstances(ctx, lo)
		if err != nil {
			return fmt.Errorf("listing finished instances: %w", err)
		}
		ids := make([]string, 0, len(page.Instances))
		for _, in := range page.Instances {
			ids = append(ids, in.InstanceID)
		}
		if !opts.DryRun && len(ids) > 0 {
			if err := c.purgeBatch(ctx, ids, rep); err != nil {
				return err
			}
		} else {
			rep.Instances += int64(len(ids))
			rep.InstanceIDs = appendFirst(rep.InstanceIDs, ids)
		}
		rep.Batches++
		progress()
		if page.NextCursor == "" {
			return nil
		}
		lo.Cursor = page.NextCursor
	}
	rep.More = true
	return nil
}

// purgeBatch purges ids in one transaction or, if one of them cannot be
// purged, one by one, counting the ones that could not.
func (c *Client) purgeBatch(ctx context.Context, ids []string, rep *PruneReport) error {
	res, err := c.p.PurgeInstances(ctx, ids, provider.PurgeOptions{})
	if err == nil {
		rep.Instances += int64(len(ids))
		rep.Events += res.Events
		rep.InstanceIDs = appendFirst(rep.InstanceIDs, ids)
		return nil
	}
	if !skippablePurge(err) {
		return fmt.Errorf("purging finished instances: %w", err)
	}
	for _, id := range ids {
		res, err := c.p.PurgeInstances(ctx, []string{id}, provider.PurgeOptions{})
		switch {
		case err == nil:
			rep.Instances++
			rep.Events += res.Events
			rep.InstanceIDs = appendFirst(rep.InstanceIDs, []string{id})
		case skippablePurge(err):
			rep.Skipped++
		default:
			return fmt.Errorf("purging %q: %w", id, err)
		}
	}
	return nil
}

// skippablePurge: the instance is gone, or part of its tree still runs.
func skippablePurge(err error) bool {
	return errors.Is(err, provider.ErrStillRunning) || errors.Is(err, provider.ErrNotFound) ||
		errors.Is(err, provider.ErrChildInstance)
}

func (c *Client) pruneExecutions(ctx context.Context, opts *PruneOptions, batch int, rep *PruneReport, progress func()) error {
	pr, ok := c.p.(provider.ExecutionPruner)
	if !ok {
		return fmt.Errorf("%w: the store cannot prune executions (provider.ExecutionPruner)", ErrInvalidArgument)
	}
	for n := 0; opts.MaxBatches == 0 || n < opts.MaxBatches; n++ {
		res, err := pr.PruneExecutions(ctx, provider.PruneExecutionsOptions{Keep: opts.KeepExecutions, Limit: batch, DryRun: opts.DryRun})
		if err != nil {
			return fmt.Errorf("pruning executions: %w", err)
		}
		rep.Chains += int64(len(res.InstanceIDs))
		rep.ChainIDs = appendFirst(rep.ChainIDs, res.InstanceIDs)
		rep.Executions += res.Executions
		rep.ExecutionEvents += res.Events
		rep.Batches++
		progress()
		// A dry run deletes nothing, so its next batch would be the same:
		// it counts the first batch and says whether there is more.
		if !res.More || opts.DryRun {
			rep.More = rep.More || res.More
			return nil
		}
	}
	rep.More = true
	return nil
}

func appendFirst(have, ids []string) []string {
	for _, id := range ids {
		if len(have) >= pruneFirstIDs {
			break
		}
		have = append(have, id)
	}
	return have
}
