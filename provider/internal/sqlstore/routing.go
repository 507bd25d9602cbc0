package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// FetchRoutes returns the activity names (nil: any) and queues (the
// default queue "" when opts names none) a worker fetch serves, sorted and
// without duplicates.
func FetchRoutes(opts provider.WorkFetchOptions) (names, queues []string) {
	if opts.Activities != nil {
		names = slices.Compact(slices.Sorted(slices.Values(opts.Activities)))
		if names == nil {
			names = []string{}
		}
	}
	queues = []string{""}
	if len(opts.Queues) > 0 {
		queues = slices.Compact(slices.Sorted(slices.Values(opts.Queues)))
	}
	return names, queues
}

// RouteArgs are the activity-name and queue arguments of a store's worker
// candidate statement for the names and queues FetchRoutes returned, each
// list encoded by enc (a JSON array, a text array); the names are nil,
// for NULL, when any name is served.
func RouteArgs(names, queues []string, enc func([]string) any) [2]any {
	var n any
	if names != nil {
		n = enc(names)
	}
	return [2]any{n, enc(queues)}
}

// UnservedLease completes the lease of a row that FetchUnservedWorkItems
// locked until untilMs, decoding its work item; false for a row that
// cannot be decoded (it is left locked until the lock lapses, and a fetch
// dead-letters it).
func UnservedLease(l *provider.WorkItemLease, data []byte, untilMs int64) bool {
	item, err := history.DecodeWorkItem(data)
	if err != nil {
		return false
	}
	l.LockedUntil, l.Item = MsTime(untilMs), item
	return true
}

// Routes is an announcement (provider.Router.AnnounceRoutes) validated and
// encoded: the activity names and queues as FetchRoutes returns them, the
// orchestration names as sqlenc.OrchestrationNames does and their routes
// as sqlenc.OrchestrationRoutes does (both nil: none announced, any
// served). Stores keep the names for runtimes of earlier releases, which
// read only those, and route by the routes.
type Routes struct {
	Activities, Queues, Orchestrations, OrchestrationRoutes []string
}

// CheckRoutes validates an announcement and encodes it.
func CheckRoutes(r provider.WorkerRoutes, ttl time.Duration) (Routes, error) {
	if r.WorkerID == "" {
		return Routes{}, sqlenc.Invalid("routes without a WorkerID")
	}
	if ttl <= 0 {
		return Routes{}, sqlenc.Invalid("routes ttl %v must be positive", ttl)
	}
	names, queues := FetchRoutes(provider.WorkFetchOptions{Activities: r.Activities, Queues: r.Queues})
	if names == nil {
		names = []string{}
	}
	return Routes{Activities: names, Queues: queues, Orchestrations: sqlenc.OrchestrationNames(r.Orchestrations),
		OrchestrationRoutes: sqlenc.OrchestrationRoutes(r.Orchestrations, r.OrchestrationVersions)}, nil
}

// CheckHeartbeat validates the arguments of HeartbeatWorkItem and returns
// the row its token names and the details to store (nil: keep).
func CheckHeartbeat(lockToken string, extendFor time.Duration, details json.RawMessage) (id int64, keep any, err error) {
	if extendFor <= 0 {
		return 0, nil, sqlenc.Invalid("extendFor %v must be positive", extendFor)
	}
	if details != nil && !json.Valid(details) {
		return 0, nil, sqlenc.Invalid("heartbeat details are not JSON")
	}
	id, ok := TokenRow(lockToken)
	if !ok {
		return 0, nil, provider.ErrLockLost
	}
	if details != nil {
		keep = string(details)
	}
	return id, keep, nil
}

// WorkItemHeartbeat is the body of provider.Heartbeater.WorkItemHeartbeat
// over q: QWorkHeartbeat (id, token, now) returns heartbeat_at and
// heartbeat_details of the row while the token holds its lock.
func WorkItemHeartbeat(ctx context.Context, q Querier, lockToken string, now int64) (provider.WorkHeartbeat, error) {
	var hb provider.WorkHeartbeat
	id, ok := TokenRow(lockToken)
	if !ok {
		return hb, provider.ErrLockLost
	}
	var at *int64
	var details *string
	err := q.QueryRow(ctx, QWorkHeartbeat, id, lockToken, now).Scan(&at, &details)
	if errors.Is(err, ErrNoRows) {
		return hb, fmt.Errorf("work item heartbeat: %w", provider.ErrLockLost)
	}
	if err != nil {
		return hb, err
	}
	if at != nil {
		hb.At = MsTime(*at)
	}
	if details != nil {
		hb.Details = json.RawMessage(*details)
	}
	return hb, nil
}
