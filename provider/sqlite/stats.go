package sqlite

import (
	"sync/atomic"

	"github.com/duroxide/duroxide-go/provider"
)

// Stats are counters of a Provider since it was opened (see
// provider.Stats). With group commit one transaction may carry the writes
// of several concurrent calls, so Commits is at most the number of write
// calls that succeeded.
type Stats = provider.Stats

// stats holds the counters behind Stats.
type stats struct {
	commits atomic.Int64
}

// Stats returns the store's counters. It is safe to call concurrently with
// any other method, also after Close.
func (p *Provider) Stats() Stats {
	return Stats{Commits: p.stats.commits.Load()}
}

// counted passes through the error of a transaction's Commit, counting the
// commit when it succeeded.
func (p *Provider) counted(commitErr error) error {
	if commitErr == nil {
		p.stats.commits.Add(1)
	}
	return commitErr
}
