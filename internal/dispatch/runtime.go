// Package dispatch schedules orchestrations and activities against a
// store: the orchestration dispatcher fetches instances with ready
// messages, completes their history from the cache of live executions,
// has internal/turn decide each turn and commits (acks) or abandons it; the
// activity dispatcher fetches activities, runs them and acks their results.
// It owns the concurrency slots, lock renewal, the cache and the periodic
// sweeps; what a turn means is decided in internal/turn.
//
// Neither polls on a fixed period. The store's notifications
// (provider.Notifier) wake them when work may be ready; an idle dispatcher
// sleeps until the store's next visible message (provider.Waker), bounded
// by Options.PollInterval, a slow fallback for lost notifications.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// Registry resolves names to code.
type Registry interface {
	// Orchestration returns the function of name at version ("" = the
	// default for new instances) and the resolved version.
	Orchestration(name, version string) (replay.Func, string, bool)
	// Activity returns the function of the activity name.
	Activity(name string) (ActivityFunc, bool)
}

// ActivityFunc is an activity as the dispatcher sees it.
type ActivityFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// Options configures a Runtime. Zero values are replaced by defaults in Start.
type Options struct {
	// CancelGrace is the grace period of new cancel requests (see
	// turn.Policy.CancelGrace).
	CancelGrace              time.Duration
	OrchestrationConcurrency int
	WorkerConcurrency        int
	FetchBatch               int
	OrchestratorLockTimeout  time.Duration
	WorkerLockTimeout        time.Duration
	MaxAttempts              int
	BackoffBase              time.Duration
	BackoffMax               time.Duration
	// CacheSize is the number of live executions kept; 0 disables the cache.
	CacheSize            int
	PollInterval         time.Duration
	FailOnNondeterminism bool
	WorkerID             string
	SessionLockTimeout   time.Duration
	SessionIdleTimeout   time.Duration
	// LockCleanupInterval is how often expired execution locks are swept;
	// zero disables the sweep (the root package fills its default).
	LockCleanupInterval time.Duration
	// ShutdownGrace bounds how long Shutdown waits, in real time, for
	// activities to return once their contexts were canceled (0 = 1s;
	// negative: no wait).
	ShutdownGrace time.Duration
	Clock         clockwork.Clock
	Logger        *slog.Logger
	// Limits bounds what an execution may record (the root package fills
	// the defaults; zero fields: no limit).
	Limits replay.Limits
	// Tracer, when set, receives a span per turn and activity attempt.
	Tracer Tracer
	// Queues are the activity queues served (nil: the default queue "").
	Queues []string
	// UnservedTimeout, when > 0, fails activities no live runtime has
	// served for that long (see maintainRoutes).
	UnservedTimeout time.Duration

	// testHookActivityStart, set by tests, runs in an activity's goroutine
	// just before the runtime decides to start its function.
	testHookActivityStart func()
}

// Runtime is a running pair of dispatchers.
type Runtime struct {
	p     provider.Provider
	reg   Registry
	o     Options
	cache *cache
	clock clockwork.Clock
	log   *slog.Logger

	// io is the context of store calls; canceled only when Shutdown gives up.
	io     context.Context
	ioStop context.CancelCauseFunc
	// acts is the parent context of activities; canceled when Shutdown's
	// deadline passes.
	acts     context.Context
	actsStop context.CancelCauseFunc

	stopping chan struct{}
	stopOnce sync.Once
	loops    sync.WaitGroup // fetch loops and maintenance
	work     sync.WaitGroup // turns and activities in flight

	orchSlots chan struct{}
	// holding counts the turns waiting for their items to come due
	// (holdUntilDue).
	holding   atomic.Int64
	workSlots chan struct{}
	// workerKick wakes the activity fetch loop (kickWorker).
	workerKick chan struct{}
	// pool runs the turns and activities (pool.go).
	pool *pool

	metrics metrics // what Metrics reports

	// storeDown: the last fetch found the store unreachable
	// (provider.ErrUnavailable); the fetch loops log its changes only.
	storeDown atomic.Bool

	mu sync.Mutex
	// running holds the activities whose function runs, by lock token;
	// runningOf counts them by instance.
	running   map[string]*inflight
	runningOf map[string]int
	// drained, when set, is closed once running is empty.
	drained chan struct{}
	parked  map[string]int // instance -> consecutive parks, for backoff
}

type activityKey struct {
	instanceID  string
	executionID int64
	activityID  int64
}

// errActivityCanceled is the cause given to an activity whose work item was
// taken away (its orchestration ended or was canceled, or its lock was lost).
var errActivityCanceled = errors.New("activity canceled: its orchestration no longer needs it or its lock was lost")

// ErrRuntimeStopped is the cause given to activities still running when
// Shutdown's deadline passes. The root package exports it as
// duroxide.ErrRuntimeStopped.
var ErrRuntimeStopped = errors.New("runtime stopped")

// DefaultPollInterval bounds an idle dispatcher's sleep: the fallback for
// notifications a store failed to deliver.
const DefaultPollInterval = 5 * time.Second

// Start validates o, fills defaults, and starts the dispatchers.
func Start(p provider.Provider, reg Registry, o Options) (*Runtime, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil store", provider.ErrInvalidArgument)
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	stopping := make(chan struct{})
	r := &Runtime{
		p: p, reg: reg, o: o,
		clock:      o.Clock,
		log:        o.Logger,
		stopping:   stopping,
		orchSlots:  make(chan struct{}, o.OrchestrationConcurrency),
		workSlots:  make(chan struct{}, o.WorkerConcurrency),
		workerKick: make(chan struct{}, 1),
		pool:       newPool(stopping),
		running:    map[string]*inflight{},
		runningOf:  map[string]int{},
		parked:     map[string]int{},
	}
	if o.CacheSize > 0 {
		r.cache = newCache(o.CacheSize)
	}
	r.io, r.ioStop = context.WithCancelCause(context.Background())
	r.acts, r.actsStop = context.WithCancelCause(context.Background())
	r.announce()
	r.loops.Add(4)
	go r.fetchLoop(provider.QueueOrchestrator, r.orchSlots, r.fetchTurns)
	go r.fetchLoop(provider.QueueWorker, r.workSlots, r.fetchActivities)
	go r.maintainSessions()
	go r.maintainRoutes()
	if o.LockCleanupInterval > 0 {
		r.loops.Add(1)
		go r.maintainLocks()
	}
	return r, nil
}

// The defaults of Options.WorkerConcurrency and Options.FetchBatch. Many
// activities in flight and large fetches let the store commit their acks
// and fetches in large groups: with 64 activity slots and fetches of 16, a
// 100-activity fan-out made about 9 commits per orchestration on SQLite and
// 18 on PostgreSQL, with 512 and 32 about 3.6 and 7.7, and ran 1.7x
// (SQLite) and 1.9x (PostgreSQL) as fast. An activity waiting for a slot is
// a row in the store, so a larger default costs nothing until work is
// there; an activity that holds a slot is a goroutine.
const (
	DefaultWorkerConcurrency = 512
	DefaultFetchBatch        = 32
)

func (o *Options) fill() error {
	if o.OrchestrationConcurrency < 0 || o.WorkerConcurrency < 0 || o.MaxAttempts < 0 || o.FetchBatch < 0 {
		return fmt.Errorf("%w: concurrency, batch and attempt options must not be negative", provider.ErrInvalidArgument)
	}
	def := func(d *time.Duration, v time.Duration) error {
		if *d < 0 {
			return fmt.Errorf("%w: durations must not be negative", provider.ErrInvalidArgument)
		}
		if *d == 0 {
			*d = v
		}
		return nil
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{
		{&o.OrchestratorLockTimeout, 10 * time.Second},
		{&o.WorkerLockTimeout, 30 * time.Second},
		{&o.BackoffBase, time.Second},
		{&o.BackoffMax, time.Minute},
		{&o.PollInterval, DefaultPollInterval},
		{&o.SessionLockTimeout, 30 * time.Second},
		{&o.SessionIdleTimeout, 5 * time.Minute},
	} {
		if err := def(d.p, d.v); err != nil {
			return err
		}
	}
	if o.OrchestratorLockTimeout < 10*time.Millisecond || o.WorkerLockTimeout < 10*time.Millisecond {
		return fmt.Errorf("%w: lock timeouts must be at least 10ms", provider.ErrInvalidArgument)
	}
	if o.OrchestrationConcurrency == 0 {
		o.OrchestrationConcurrency = 64
	}
	if o.WorkerConcurrency == 0 {
		o.WorkerConcurrency = DefaultWorkerConcurrency
	}
	if o.FetchBatch == 0 {
		o.FetchBatch = DefaultFetchBatch
	}
	switch {
	case o.ShutdownGrace == 0:
		o.ShutdownGrace = time.Second
	case o.ShutdownGrace < 0:
		o.ShutdownGrace = 0
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 10
	}
	if o.UnservedTimeout < 0 {
		return fmt.Errorf("%w: UnservedTimeout must not be negative", provider.ErrInvalidArgument)
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
	}
	return nil
}

// Shutdown stops fetching, waits for in-flight turns and activities to
// finish, and returns. If ctx ends first, running activities are canceled
// with cause ErrRuntimeStopped; those that return within
// Options.ShutdownGrace give their work items back themselves, and the
// work items of the others are given back without waiting for their
// functions to return. Shutdown then waits only for turns and for the
// runtime's own store calls, and returns ctx's error. The goroutine of an
// activity that ignores its context is left running the user's function;
// when it returns, its result is discarded without touching the store.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stopping) })
	r.loops.Wait()
	r.withdraw()
	done := make(chan struct{})
	go func() {
		r.work.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		r.actsStop(ErrRuntimeStopped)
		r.awaitActivities(r.o.ShutdownGrace)
		r.abandonRunning()
		<-done
	}
	r.ioStop(ErrRuntimeStopped)
	r.actsStop(ErrRuntimeStopped)
	r.cache.clear()
	return err
}

// fetchLoop fetches work for one queue while slots are free and sleeps
// when there is none, until woken by the store's notifications, its next
// visible time, or the poll interval. A fetch made because delayed work
// came due (the sleep ended at the store's next visible time, or the loop
// found that time passed, having learned of a delayed message before) is
// prompt (provider.FetchOptions.Prompt), and so are the fetches that
// follow it at once while they fill every slot asked for: the work they
// take is due already. Work that is visible as soon as it is sent
// (completions, starts) is fetched in ordinary fetches, which may share a
// group's commit, unless delayed work the loop knows of comes due (or came
// due) within promptLead of the fetch: a fetch that waited for a group's
// commit then would hold back the fetch of that work, which the loop makes
// only after it.
func (r *Runtime) fetchLoop(q provider.Queue, slots chan struct{}, fetch func(max int, prompt bool) (int, error)) {
	defer r.loops.Done()
	wake, unsubscribe := r.p.Subscribe(q)
	defer unsubscribe()
	var kick <-chan struct{}
	if q == provider.QueueWorker {
		kick = r.workerKick
	}
	waker, _ := r.p.(provider.Waker)
	errors := 0
	idle := time.Duration(0)
	prompt := false
	// delayed is the latest future visible time the store reported (a
	// delayed message, such as a timer), kept until it reports the queue
	// empty.
	var delayed time.Time
	for {
		select {
		case slots <- struct{}{}:
		case <-r.stopping:
			return
		}
		n := 1
	fill:
		for n < r.o.FetchBatch {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		if !prompt && !delayed.IsZero() {
			now := r.clock.Now()
			prompt = delayed.Before(now.Add(promptLead)) && delayed.After(now.Add(-promptLead))
		}
		got, err := fetch(n, prompt)
		for i := got; i < n; i++ {
			<-slots
		}
		if err != nil {
			errors++
			d := min(100*time.Millisecond<<min(errors, 5), 3*time.Second)
			if !provider.IsRetryable(err) {
				d = 100 * time.Millisecond
			}
			if unreachable(err) && r.storeDown.CompareAndSwap(false, true) {
				r.log.Error("store unreachable: orchestrations wait until it is back", logkey.Error, err)
			}
			r.log.Warn("fetch failed", logkey.Queue, queueName(q), logkey.Error, err, logkey.RetryIn, d)
			if !r.sleep(d, nil) {
				return
			}
			continue
		}
		errors = 0
		if r.storeDown.CompareAndSwap(true, false) {
			r.log.Warn("store reachable again")
		}
		if got > 0 {
			idle = 0
			if got == n {
				continue // there may be more
			}
			// The store had less than asked: it was drained when it
			// looked. Fetch again only when something new may be there
			// (a notification, or work coming due), not at once: an
			// empty fetch costs a write transaction.
		}
		prompt = false
		due := false // wait ends when work comes due
		now := r.clock.Now()
		wait := r.o.PollInterval
		if waker != nil {
			next, err := waker.NextVisible(r.io, q)
			switch {
			case err != nil:
				r.log.Warn("reading next visible time failed", logkey.Queue, queueName(q), logkey.Error, err)
			case next.IsZero():
				delayed = time.Time{}
			default:
				d := next.Sub(now)
				switch {
				case d > fetchAhead/2:
					// Wake before it comes due, to take it early, with
					// what comes due within fetchAhead (see fetchAhead).
					delayed = next
					idle = 0
					due = d-fetchAhead/2 <= wait
					wait = min(d-fetchAhead/2, wait)
				case d > 0 && idle != 0:
					// It comes due soon, but the fetch just made at once
					// did not take it early (the turns held for their due
					// time fill their share of the slots, see fetchTurns):
					// wake when it comes due, for a prompt fetch, instead
					// of backing off as below.
					delayed = next
					due = d <= wait
					wait = min(d, wait)
				case idle == 0:
					// It may have come due after the fetch looked (a timer
					// firing just then), or comes due soon: look again at
					// once.
					// Prompt if a delayed message was known to come due
					// by now (it, or a later one, did) or is about to.
					// Otherwise what is there was sent while the fetch ran
					// (completions), which may share a group's commit.
					idle = time.Millisecond
					if d > 0 {
						delayed = next
					}
					prompt = !delayed.IsZero()
					continue
				default:
					// Something is visible that this node cannot take (a
					// session another node owns): back off instead of
					// spinning. A commit that frees it notifies.
					idle = min(idle*2, r.o.PollInterval)
					wait = idle
				}
			}
		}
		ok, expired := r.sleepFor(now.Add(wait), wake, kick)
		if !ok {
			return
		}
		prompt = due && expired
	}
}

// promptLead is how close to the due time of delayed work a fetch the
// fetch loop makes for other work is prompt (see fetchLoop). A turn fetch
// that joins a group waits for the group's commit: on PostgreSQL under
// load, during 1000 timers coming due among starts and completions, such
// fetches took 11 ms at the median and 65 ms at the 99th percentile, while
// timers that came due meanwhile waited for them.
const promptLead = 100 * time.Millisecond

// fetchAhead is how long before delayed work comes due the fetch loop may
// fetch it (provider.FetchOptions.Ahead, in prompt turn fetches): the
// store locks the instance and hands over its messages with their due
// time (OrchestrationItem.DueAt), and the turn waits for that time (see
// holdUntilDue) instead of starting a fetch then, so the round trips of
// the fetch, and a commit it waits behind, no longer make a timer late.
// The loop wakes fetchAhead/2 before the next due time, so each such
// fetch takes what comes due over at least fetchAhead/2, not one timer
// at a time.
// A held turn keeps its orchestration slot: while a quarter of the slots
// are held, fetches take only what is due, so timers coming due faster
// than the turns run never crowd out the turns of other work.
const fetchAhead = 50 * time.Millisecond

// unreachable reports whether err says the store cannot be reached.
func unreachable(err error) bool { return errors.Is(err, provider.ErrUnavailable) }

// kickWorker wakes this runtime's activity fetch loop: for work it was not
// notified of, such as a leased activity whose lock was lost.
func (r *Runtime) kickWorker() {
	select {
	case r.workerKick <- struct{}{}:
	default:
	}
}

// sleepUntil waits until the clock reads deadline, a wake-up (either
// channel; nil never fires), or shutdown;
// it reports false on shutdown. If the clock jumps while the timer is being
// armed (a fake clock advanced by a test), the timer is armed again, so the
// deadline is not overslept by the jump.
func (r *Runtime) sleepUntil(deadline time.Time, wake, kick <-chan struct{}) bool {
	ok, _ := r.sleepFor(deadline, wake, kick)
	return ok
}

// sleepFor is sleepUntil, also reporting whether the sleep reached its
// deadline (expired) rather than ending on a wake-up.
func (r *Runtime) sleepFor(deadline time.Time, wake, kick <-chan struct{}) (ok, expired bool) {
	for {
		now := r.clock.Now()
		if !now.Before(deadline) {
			return true, true
		}
		t := r.clock.NewTimer(deadline.Sub(now))
		if r.clock.Since(now) > time.Millisecond {
			// The clock jumped while the timer was armed: arm it again
			// for what is left. (A real clock moves microseconds here.)
			t.Stop()
			continue
		}
		select {
		case <-t.Chan():
			t.Stop()
			return true, true
		case <-wake:
			t.Stop()
			return true, false
		case <-kick:
			t.Stop()
			return true, false
		case <-r.stopping:
			t.Stop()
			return false, false
		}
	}
}

// sleep waits for d, a wake-up, or shutdown; it reports false on shutdown.
func (r *Runtime) sleep(d time.Duration, wake <-chan struct{}) bool {
	return r.sleepUntil(r.clock.Now().Add(d), wake, nil)
}

// retry runs op until it succeeds or fails permanently, retrying transient
// failures (provider.IsRetryable) five times, 10 to 160 ms apart. It gives
// up early, with the last error, when the runtime stops.
func (r *Runtime) retry(op func() error) error {
	err := op()
	for attempt := 0; attempt < 5 && err != nil && provider.IsRetryable(err); attempt++ {
		if !r.sleep(10*time.Millisecond<<attempt, nil) {
			break
		}
		err = op()
	}
	return err
}

func queueName(q provider.Queue) string {
	if q == provider.QueueWorker {
		return "worker"
	}
	return "orchestrator"
}

// backoff is base·2^(attempt−1), capped.
func (r *Runtime) backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := r.o.BackoffBase << min(attempt-1, 20)
	if d <= 0 || d > r.o.BackoffMax {
		d = r.o.BackoffMax
	}
	return d
}

// renewer renews a lock every third of its timeout until stopped.
type renewer struct {
	mu      sync.Mutex
	timer   clockwork.Timer
	stopped bool
	ticking sync.WaitGroup // a renewal in progress
}

func (r *Runtime) startRenewer(timeout time.Duration, renew func() error, lost func(error)) *renewer {
	rn := &renewer{}
	every := max(timeout/3, 5*time.Millisecond)
	var tick func()
	tick = func() {
		rn.mu.Lock()
		if rn.stopped {
			rn.mu.Unlock()
			return
		}
		rn.ticking.Add(1)
		rn.mu.Unlock()
		defer rn.ticking.Done()
		if err := renew(); err != nil {
			if errors.Is(err, provider.ErrLockLost) {
				lost(err)
				return
			}
			r.log.Warn("lock renewal failed; will retry", logkey.Error, err)
		}
		rn.mu.Lock()
		if !rn.stopped {
			rn.timer = r.clock.AfterFunc(every, tick)
		}
		rn.mu.Unlock()
	}
	// Under the lock: the first tick may fire (and set rn.timer) before
	// AfterFunc returns.
	rn.mu.Lock()
	rn.timer = r.clock.AfterFunc(every, tick)
	rn.mu.Unlock()
	return rn
}

// stop stops the renewals and waits for one in progress, so that no
// renewal runs once stop returns. It may be called more than once, but
// not from the renew or lost functions.
func (rn *renewer) stop() {
	rn.mu.Lock()
	rn.stopped = true
	if rn.timer != nil {
		rn.timer.Stop()
	}
	rn.mu.Unlock()
	rn.ticking.Wait()
}

// maintainSessions renews the session leases this runtime owns and sweeps
// orphaned sessions.
func (r *Runtime) maintainSessions() {
	defer r.loops.Done()
	every := max(r.o.SessionLockTimeout/3, 10*time.Millisecond)
	sweepEvery := 5 * time.Minute
	lastSweep := r.clock.Now()
	for r.sleep(every, nil) {
		if _, err := r.p.RenewSessionLocks(r.io, []string{r.o.WorkerID}, r.o.SessionLockTimeout, r.o.SessionIdleTimeout); err != nil {
			r.log.Warn("renewing session leases failed", logkey.Worker, r.o.WorkerID, logkey.Error, err)
		}
		if r.clock.Since(lastSweep) >= sweepEvery {
			lastSweep = r.clock.Now()
			if _, err := r.p.CleanupOrphanedSessions(r.io); err != nil {
				r.log.Warn("sweeping orphaned sessions failed", logkey.Error, err)
			}
		}
	}
}
