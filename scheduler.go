package duroxide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

// scheduler is a runtime's loop that fires the store's schedules. It sleeps
// until the earliest next fire time of the unpaused schedules, or until a
// schedule changes (provider.ScheduleWatchKey): there is no polling.
//
// Runtimes sharing a store agree on each fire through the store: a fire
// claims the schedule's next fire time with a conditional update and starts
// its instances in the same transaction
// (provider.ScheduleStore.FireSchedules, one transaction for all the
// schedules due at once), so one runtime wins each fire time
// and starts its instance, the others re-read the schedule, and a schedule
// paused (or changed) before the fire committed starts nothing. The start
// also carries an idempotency key naming the schedule and the fire time.
type scheduler struct {
	c      *Client
	st     provider.ScheduleStore
	clock  clockwork.Clock
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// startScheduler starts the schedule loop of a runtime on store; nil when
// the store keeps no schedules.
func startScheduler(store provider.Provider, clock clockwork.Clock, log *slog.Logger) *scheduler {
	st, ok := store.(provider.ScheduleStore)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &scheduler{c: NewClientWithOptions(store, &ClientOptions{Clock: clock}), st: st, clock: clock, log: log,
		cancel: cancel, done: make(chan struct{})}
	watch, stop := store.WatchInstance(provider.ScheduleWatchKey)
	go s.run(ctx, watch, stop)
	return s
}

// stop ends the loop and waits for it.
func (s *scheduler) stop() {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
}

func (s *scheduler) run(ctx context.Context, watch <-chan struct{}, unwatch func()) {
	defer close(s.done)
	defer unwatch()
	var backoff time.Duration
	for {
		wake, err := s.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		var timer clockwork.Timer
		switch {
		case err != nil:
			backoff = min(max(2*backoff, time.Second), time.Minute)
			s.log.Warn("firing schedules", slog.Any(logkey.Error, err), slog.Duration(logkey.RetryIn, backoff))
			timer = s.clock.NewTimer(backoff)
		case !wake.IsZero():
			backoff = 0
			timer = s.timerAt(wake)
		default:
			backoff = 0
		}
		var tick <-chan time.Time
		if timer != nil {
			tick = timer.Chan()
		}
		select {
		case <-ctx.Done():
		case <-watch:
		case <-tick:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// timerAt returns a timer firing at t. The clock may move between
// reading it and setting the timer (a fake clock in a test, advanced by
// another goroutine): a timer set from a stale reading would fire late, so
// it is set again until the clock reads the same before and after (a few
// tries: a real clock never does, and its drift is negligible).
func (s *scheduler) timerAt(t time.Time) clockwork.Timer {
	for try := 0; ; try++ {
		now := s.clock.Now()
		timer := s.clock.NewTimer(t.Sub(now))
		if try == 3 || s.clock.Now().Equal(now) {
			return timer
		}
		timer.Stop()
	}
}

// maxFireBatch bounds the schedules one FireSchedules call fires.
const maxFireBatch = 64

// pass fires every due schedule and returns the earliest next fire time
// (zero: none).
func (s *scheduler) pass(ctx context.Context) (time.Time, error) {
	list, err := s.st.ListSchedules(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := s.clock.Now()
	nexts := make([]time.Time, len(list))
	errs := make([]error, len(list))
	// The due schedules' fires are planned, then made in one store
	// transaction per batch of schedules (one commit for every schedule
	// due at once, not one each).
	var batch []provider.ScheduleDue
	var batched []int // the index in list of each schedule of batch
	var wg sync.WaitGroup
	for i := range list {
		sc := &list[i]
		if sc.Paused || sc.NextFireAt.IsZero() {
			continue
		}
		nexts[i] = sc.NextFireAt
		if nexts[i].After(now) {
			continue
		}
		due, next, err := s.plan(ctx, sc, now)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("schedule %q: %w", sc.ID, err)
		case due == nil:
			nexts[i] = next
		case len(due.Fires) == 0:
			// Every due fire was missed: move on, keeping the last fire.
			wg.Go(func() {
				var err error
				if nexts[i], err = s.claimMissed(ctx, sc, due, now); err != nil {
					errs[i] = fmt.Errorf("schedule %q: %w", sc.ID, err)
				}
			})
		default:
			batch, batched = append(batch, *due), append(batched, i)
		}
	}
	for len(batch) > 0 {
		n := min(len(batch), maxFireBatch)
		part, idx := batch[:n], batched[:n]
		batch, batched = batch[n:], batched[n:]
		wg.Go(func() { s.fire(ctx, part, idx, list, nexts, errs, now) })
	}
	wg.Wait()
	var wake time.Time
	for _, next := range nexts {
		if !next.IsZero() && (wake.IsZero() || next.Before(wake)) {
			wake = next
		}
	}
	return wake, errors.Join(errs...)
}

// plan prepares the fires of the due schedule sc under its catch-up
// policy: the schedule's part of a FireSchedules call (with no Fires when
// every due fire was missed), or nil, with its next fire time, when it
// fires nothing.
func (s *scheduler) plan(ctx context.Context, sc *provider.Schedule, now time.Time) (*provider.ScheduleDue, time.Time, error) {
	info, err := scheduleInfo(sc)
	var cs *compiledSchedule
	if err == nil {
		cs, err = compileSchedule(&info.ScheduleDefinition)
	}
	if err != nil {
		// A definition this release cannot read fires nothing; the
		// schedule waits for an update (retrying would not mend it).
		s.log.Error("schedule cannot fire", slog.String(logkey.Schedule, sc.ID), slog.Any(logkey.Error, err))
		return nil, time.Time{}, nil
	}
	fires, after := cs.due(sc.NextFireAt, now)
	due := &provider.ScheduleDue{ID: sc.ID, Due: sc.NextFireAt, Next: after}
	// The fires start and claim in one transaction: the instances start
	// only if the schedule still waits for its due time (not fired by
	// another runtime, not paused, changed or deleted meanwhile).
	for _, at := range fires {
		p, err := s.c.planFire(ctx, sc.ID, cs, at, false)
		if err != nil {
			return nil, time.Time{}, err
		}
		due.Fires = append(due.Fires, provider.ScheduleStart{FireAt: at, Start: p.msg, BufferOne: p.bufferOne,
			Settle: func(started provider.EnqueueResult, err error) (string, string, bool) {
				f, ok := p.settle(started, err)
				return f.InstanceID, f.Outcome, ok
			}})
	}
	return due, after, nil
}

// claimMissed moves the schedule sc, whose due fires were all missed, on
// to due.Next, keeping its last fire, and returns its next fire time; now
// when another writer changed it meanwhile (so the loop reads it again).
func (s *scheduler) claimMissed(ctx context.Context, sc *provider.Schedule, due *provider.ScheduleDue, now time.Time) (time.Time, error) {
	s.log.Info("schedule missed its fire times", slog.String(logkey.Schedule, sc.ID),
		slog.Time(logkey.From, due.Due), slog.Time(logkey.Until, now))
	ok, err := s.st.ClaimScheduleFire(ctx, sc.ID, due.Due, due.Next,
		provider.ScheduleFire{FireAt: sc.LastFireAt, InstanceID: sc.LastInstanceID, Outcome: sc.LastOutcome})
	if err != nil || !ok {
		return now, err
	}
	return due.Next, nil
}

// fire fires the schedules of batch (list[idx[i]] is batch[i]) in one
// store transaction and sets their next fire times in nexts: due.Next
// when fired, now when another writer changed the schedule meanwhile (so
// the loop reads it again). When the transaction fails, each schedule is
// fired alone, so that a schedule whose fire fails does not hold the
// others back.
func (s *scheduler) fire(ctx context.Context, batch []provider.ScheduleDue, idx []int, list []provider.Schedule,
	nexts []time.Time, errs []error, now time.Time) {
	fired, err := s.st.FireSchedules(ctx, batch)
	if err != nil && len(batch) > 1 && ctx.Err() == nil {
		for i := range batch {
			s.fire(ctx, batch[i:i+1], idx[i:i+1], list, nexts, errs, now)
		}
		return
	}
	for i, due := range batch {
		j := idx[i]
		switch {
		case err != nil:
			nexts[j], errs[j] = time.Time{}, fmt.Errorf("schedule %q: %w", list[j].ID, err)
		case fired[i]:
			nexts[j] = due.Next
		default:
			nexts[j] = now
		}
	}
}
