package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Group commit.
//
// A commit (the WAL append and its fsync) is the dominant cost of a small
// write transaction, so a store runs the write requests that arrive
// together in one transaction and commits once: GroupCommit is the leader
// that forms those groups, shared by the stores; each store runs a group
// its own way (SQLite on its one writer connection, PostgreSQL on a pooled
// connection), every request in a savepoint of its own so that it succeeds
// or fails alone.
//
// Up to Lanes groups run at once (SQLite: 1, its single writer). A caller
// that finds every lane free becomes a leader at once and runs what is
// queued (its own request included), so a lone caller pays no hand-over;
// while a group runs, a further lane opens only once LaneAfter requests
// are queued, so groups stay big unless the queue is long. Callers that
// arrive while no lane may open queue up; when a group ends, its
// leader hands the lane to the oldest queued caller, which runs all the
// queued requests (up to MaxGroup) as the next group. Results are
// delivered only after the group committed (or failed).
//
// A queued caller whose context ends before a leader took its request
// withdraws it and returns the context's error; once taken, a request runs
// and its caller waits for the outcome (a committed fetch must reach its
// caller, or nobody would release what it locked). A leader drops the
// requests whose context ended before their group began.

// ErrGroupClosed is returned by GroupCommit.Do after Close.
var ErrGroupClosed = errors.New("the store's writer is closed")

// Request is one write request of a group.
type Request[T any] struct {
	Ctx context.Context
	Op  T
}

// GroupCommit forms groups of concurrent write requests (see the comment
// above). Set its fields, then call Init, before any Do.
type GroupCommit[T any] struct {
	// MaxGroup caps the requests of one group, bounding the wait of the
	// first one; at least 1.
	MaxGroup int
	// Lanes is how many groups may run at once; at least 1.
	Lanes int
	// LaneAfter is how many requests must be queued, while a group runs,
	// before a caller opens a further lane instead of waiting for the next
	// group: so that lanes run in parallel only when the queue is long,
	// and groups stay big otherwise. 0 or 1: a free lane is taken at once.
	LaneAfter int
	// Run runs the requests of one group (a single one when nothing else
	// was queued) and returns the outcome of each, in order.
	Run func(group []Request[T]) []error
	// Yield makes a leader yield its processor (runtime.Gosched) once
	// before it takes the queued requests, so that goroutines ready to run
	// (activities just finished, on a machine with few cores) submit their
	// requests into its group rather than each into a group of its own
	// next. A lone caller with nobody ready to run pays next to nothing.
	// SQLite sets it: its one writer makes every extra commit a wait for
	// all.
	Yield bool
	// Queued, if set, is called with each request once it is queued,
	// before any leader can take it (so before the caller of Do that
	// leads yields): what a request started now is ordered after it.
	// leader: the caller leads the next group (no group was running), so
	// a request started now, while it yields, may join its group. SQLite
	// wakes the dispatchers of an enqueue there (see its package
	// documentation).
	Queued func(op T, leader bool)

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a lane is released with nothing queued
	pending []*groupReq[T]
	running int // lanes in use
	closed  bool
}

type groupReq[T any] struct {
	Request[T]
	done chan error    // the outcome
	lead chan struct{} // the lane is handed to this request's caller
	// taken: a leader took the request into its group (under mu).
	taken bool
}

// Init prepares g for use.
func (g *GroupCommit[T]) Init() {
	g.idle = sync.NewCond(&g.mu)
	g.MaxGroup = max(g.MaxGroup, 1)
	g.Lanes = max(g.Lanes, 1)
}

// Do runs op in a group and returns its outcome, once its group committed
// or failed; ErrGroupClosed after Close.
func (g *GroupCommit[T]) Do(ctx context.Context, op T) error {
	r := &groupReq[T]{Request: Request[T]{Ctx: ctx, Op: op}, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrGroupClosed
	}
	g.pending = append(g.pending, r)
	leader := g.running < g.Lanes && (g.running == 0 || len(g.pending) >= g.LaneAfter)
	if leader {
		g.running++
	}
	g.mu.Unlock()
	if g.Queued != nil {
		g.Queued(op, leader)
	}
	if leader {
		g.lead()
		return g.outcome(r)
	}
	canceled := ctx.Done()
	for {
		select {
		case err := <-r.done:
			return g.finish(r, err)
		case <-r.lead:
			g.lead()
			return g.outcome(r)
		case <-canceled:
		}
		// Withdraw the request unless a leader took it or the lane was
		// just handed to this caller; then wait as before.
		canceled = nil
		g.mu.Lock()
		if !r.taken && len(r.lead) == 0 {
			g.pending = slices.DeleteFunc(g.pending, func(q *groupReq[T]) bool { return q == r })
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
	}
}

// outcome waits for r's outcome after its caller led a group (r may have
// been left for the next group when more than MaxGroup were queued).
func (g *GroupCommit[T]) outcome(r *groupReq[T]) error {
	return g.finish(r, <-r.done)
}

// finish returns err, after leading a group first if the lane was handed
// to r's caller before its request was taken (the hand-over always comes
// first, so once the outcome is in, a hand-over would be seen).
func (g *GroupCommit[T]) finish(r *groupReq[T], err error) error {
	select {
	case <-r.lead:
		g.lead()
	default:
	}
	return err
}

// lead runs the queued requests (up to MaxGroup, oldest first) as one
// group, then hands the lane on.
func (g *GroupCommit[T]) lead() {
	if g.Yield {
		runtime.Gosched()
	}
	g.mu.Lock()
	n := min(len(g.pending), g.MaxGroup)
	taken := slices.Clone(g.pending[:n])
	g.pending = slices.Delete(g.pending, 0, n)
	for _, r := range taken {
		r.taken = true
	}
	g.mu.Unlock()

	group := make([]Request[T], 0, len(taken))
	runs := make([]*groupReq[T], 0, len(taken))
	for _, r := range taken {
		if err := r.Ctx.Err(); err != nil {
			r.done <- err // not begun: not run
			continue
		}
		group = append(group, r.Request)
		runs = append(runs, r)
	}
	if len(group) > 0 {
		errs := g.run(group)
		for i, r := range runs {
			r.done <- errs[i]
		}
	}
	g.Release()
}

// run calls Run, turning a panic into an error for every request: a
// request must never leave a lane taken and every later write waiting.
func (g *GroupCommit[T]) run(group []Request[T]) (errs []error) {
	defer func() {
		if rec := recover(); rec != nil {
			err := fmt.Errorf("internal error: %v", rec)
			errs = make([]error, len(group))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	errs = g.Run(group)
	if len(errs) != len(group) {
		panic("sqlstore: GroupCommit.Run returned a wrong number of outcomes")
	}
	return errs
}

// TryAcquire takes a free lane for the caller's own use outside any group
// (SQLite reads its data_version on the idle writer), reporting false when
// every lane is busy or g is closed. Release gives it back.
func (g *GroupCommit[T]) TryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running >= g.Lanes || g.closed {
		return false
	}
	g.running++
	return true
}

// Release gives back a lane taken by TryAcquire (or left by a leader): the
// oldest queued caller gets it, else it becomes free.
func (g *GroupCommit[T]) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.pending {
		if len(r.lead) == 0 {
			r.lead <- struct{}{}
			return
		}
	}
	g.running--
	g.idle.Broadcast()
}

// Close refuses new requests and waits until the queued and running ones
// have finished.
func (g *GroupCommit[T]) Close() {
	g.mu.Lock()
	g.closed = true
	for g.running > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}
