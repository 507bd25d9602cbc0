package providertest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// scheduleCases cover provider.ScheduleStore: the rows, their revisions,
// the conditional fire that lets runtimes sharing a store agree on each
// fire, and the notifications of ScheduleWatchKey. They skip on a store
// without the capability.
var scheduleCases = []testCase{
	{name: "create_get_list_update_delete", run: func(e *env) {
		s := e.schedules()
		next := e.clock.Now().Add(time.Hour)
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "b", Spec: []byte(`{"v":1}`), NextFireAt: next}), "create b")
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "a", Spec: []byte(`{}`), Paused: true}), "create a")
		e.wantErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "b", Spec: []byte(`{}`)}), provider.ErrScheduleExists, "create b again")
		got, err := s.GetSchedule(e.ctx, "b")
		e.noErr(err, "get b")
		mustEqual(e.t, "spec", string(got.Spec), `{"v":1}`)
		e.sameTime("next fire", got.NextFireAt, next)
		e.sameTime("created", got.CreatedAt, e.clock.Now())
		if got.Paused || got.Revision != 1 || !got.LastFireAt.IsZero() || got.LastInstanceID != "" {
			e.t.Fatalf("new schedule = %+v", got)
		}
		list, err := s.ListSchedules(e.ctx)
		e.noErr(err, "list")
		if len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" || !list[0].Paused || !list[0].NextFireAt.IsZero() {
			e.t.Fatalf("list = %+v, want a (paused, never) then b", list)
		}

		e.clock.Advance(time.Second)
		got.Spec, got.Paused, got.NextFireAt = []byte(`{"v":2}`), true, time.Time{}
		e.noErr(s.UpdateSchedule(e.ctx, got), "update b at revision 1")
		e.wantErr(s.UpdateSchedule(e.ctx, got), provider.ErrConflict, "update b at the old revision")
		e.wantErr(s.UpdateSchedule(e.ctx, &provider.Schedule{ID: "zz", Spec: []byte(`{}`), Revision: 1}), provider.ErrNotFound, "update a missing schedule")
		again, err := s.GetSchedule(e.ctx, "b")
		e.noErr(err, "get b after update")
		if string(again.Spec) != `{"v":2}` || !again.Paused || !again.NextFireAt.IsZero() || again.Revision != 2 {
			e.t.Fatalf("updated schedule = %+v", again)
		}
		e.sameTime("updated", again.UpdatedAt, e.clock.Now())

		ok, err := s.DeleteSchedule(e.ctx, "b")
		e.noErr(err, "delete b")
		mustEqual(e.t, "deleted", ok, true)
		ok, err = s.DeleteSchedule(e.ctx, "b")
		e.noErr(err, "delete b again")
		mustEqual(e.t, "deleted again", ok, false)
		_, err = s.GetSchedule(e.ctx, "b")
		e.wantErr(err, provider.ErrNotFound, "get a deleted schedule")
	}},

	{name: "list_pages_by_id", run: func(e *env) {
		s := e.schedules()
		for _, id := range []string{"c", "a", "d", "b"} {
			e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: id, Spec: []byte(`{}`)}), "create "+id)
		}
		page := func(after string, limit int) string {
			list, err := s.ListSchedulesPage(e.ctx, after, limit)
			e.noErr(err, "list page")
			out := ""
			for _, sc := range list {
				out += sc.ID
			}
			return out
		}
		mustEqual(e.t, "first page", page("", 2), "ab")
		mustEqual(e.t, "second page", page("b", 2), "cd")
		mustEqual(e.t, "after the last", page("d", 2), "")
		mustEqual(e.t, "after an ID that is not stored", page("bb", 10), "cd")
		_, err := s.ListSchedulesPage(e.ctx, "", 0)
		e.wantErr(err, provider.ErrInvalidArgument, "list a page of 0")
	}},

	{name: "claim_moves_the_next_fire_once", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		next := due.Add(5 * time.Minute)
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`), NextFireAt: due}), "create")
		ok, err := s.ClaimScheduleFire(e.ctx, "s", due.Add(-time.Minute), next, provider.ScheduleFire{FireAt: due})
		e.noErr(err, "claim a fire that is not the next one")
		mustEqual(e.t, "claimed a stale due time", ok, false)
		f := provider.ScheduleFire{FireAt: due, InstanceID: "s-1", Outcome: "started"}
		ok, err = s.ClaimScheduleFire(e.ctx, "s", due, next, f)
		e.noErr(err, "claim")
		mustEqual(e.t, "claimed", ok, true)
		ok, err = s.ClaimScheduleFire(e.ctx, "s", due, next, f)
		e.noErr(err, "claim again")
		mustEqual(e.t, "claimed twice", ok, false)
		got, err := s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get")
		e.sameTime("next fire", got.NextFireAt, next)
		e.sameTime("last fire", got.LastFireAt, due)
		if got.LastInstanceID != "s-1" || got.LastOutcome != "started" || got.Revision != 2 {
			e.t.Fatalf("after claim: %+v", got)
		}

		// A trigger records a fire out of turn, starts its instance and
		// keeps the next fire.
		ok, err = s.TriggerSchedule(e.ctx, "s", fireStart("manual", due.Add(time.Second)))
		e.noErr(err, "trigger")
		mustEqual(e.t, "triggered", ok, true)
		e.wantInstance("manual")
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after trigger")
		e.sameTime("next fire after trigger", got.NextFireAt, next)
		e.sameTime("last fire after trigger", got.LastFireAt, due.Add(time.Second))
		mustEqual(e.t, "last instance after trigger", got.LastInstanceID, "manual")

		// Paused: no claim. The last fire leaves the next one unset.
		got.Paused = true
		e.noErr(s.UpdateSchedule(e.ctx, got), "pause")
		ok, err = s.ClaimScheduleFire(e.ctx, "s", next, time.Time{}, f)
		e.noErr(err, "claim while paused")
		mustEqual(e.t, "claimed while paused", ok, false)
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get paused")
		got.Paused = false
		e.noErr(s.UpdateSchedule(e.ctx, got), "resume")
		ok, err = s.ClaimScheduleFire(e.ctx, "s", next, time.Time{}, f)
		e.noErr(err, "claim the last fire")
		mustEqual(e.t, "claimed the last fire", ok, true)
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after the last fire")
		if !got.NextFireAt.IsZero() {
			e.t.Fatalf("next fire after the last = %v, want none", got.NextFireAt)
		}
	}},

	{name: "concurrent_claims_of_one_fire_have_one_winner", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`), NextFireAt: due}), "create")
		const n = 8
		var wg sync.WaitGroup
		wins := make(chan bool, n)
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				ok, err := s.ClaimScheduleFire(e.ctx, "s", due, due.Add(time.Minute), provider.ScheduleFire{FireAt: due})
				wins <- ok
				errs <- err
			})
		}
		wg.Wait()
		close(wins)
		close(errs)
		for err := range errs {
			e.noErr(err, "claim")
		}
		won := 0
		for ok := range wins {
			if ok {
				won++
			}
		}
		e.wantCount("winning claims", won, 1)
	}},

	{name: "fire_claims_and_starts_in_one_transaction", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		next := due.Add(5 * time.Minute)
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`), NextFireAt: due}), "create")
		ok, err := s.FireSchedule(e.ctx, "s", due.Add(-time.Minute), next, []provider.ScheduleStart{fireStart("s-0", due)})
		e.noErr(err, "fire a time that is not the next one")
		mustEqual(e.t, "fired a stale due time", ok, false)
		e.wantNoInstance("s-0")
		// Two fires (a catch-up): both start; the last is recorded.
		ok, err = s.FireSchedule(e.ctx, "s", due, next, []provider.ScheduleStart{fireStart("s-1", due.Add(-time.Minute)), fireStart("s-2", due)})
		e.noErr(err, "fire")
		mustEqual(e.t, "fired", ok, true)
		e.wantInstance("s-1")
		e.wantInstance("s-2")
		got, err := s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get")
		e.sameTime("next fire", got.NextFireAt, next)
		e.sameTime("last fire", got.LastFireAt, due)
		if got.LastInstanceID != "s-2" || got.LastOutcome != "started" || got.Revision != 2 {
			e.t.Fatalf("after fire: %+v", got)
		}
		ok, err = s.FireSchedule(e.ctx, "s", due, next, []provider.ScheduleStart{fireStart("s-3", due)})
		e.noErr(err, "fire again")
		mustEqual(e.t, "fired twice", ok, false)
		e.wantNoInstance("s-3")

		// A refused start is an outcome: the fire is recorded as Settle
		// words it, and the schedule moves on.
		dup := fireStart("s-1", next)
		var seen error
		dup.Settle = func(_ provider.EnqueueResult, err error) (string, string, bool) {
			seen = err
			return "s-1", "duplicate", errors.Is(err, provider.ErrInstanceExists)
		}
		later := next.Add(5 * time.Minute)
		ok, err = s.FireSchedule(e.ctx, "s", next, later, []provider.ScheduleStart{dup})
		e.noErr(err, "fire onto a taken instance ID")
		mustEqual(e.t, "fired onto a taken instance ID", ok, true)
		e.wantErr(seen, provider.ErrInstanceExists, "the start Settle saw")
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after a refused start")
		e.sameTime("next fire after a refused start", got.NextFireAt, later)
		mustEqual(e.t, "outcome of a refused start", got.LastOutcome, "duplicate")

		// A Settle that refuses the error fails the whole fire: nothing
		// is claimed nor started.
		bad := fireStart("s-1", later)
		bad.Settle = func(_ provider.EnqueueResult, err error) (string, string, bool) { return "", "", err == nil }
		ok, err = s.FireSchedule(e.ctx, "s", later, time.Time{}, []provider.ScheduleStart{fireStart("s-4", later), bad})
		if err == nil || ok {
			e.t.Fatalf("fire with a refused start = %v, %v; want an error", ok, err)
		}
		e.wantNoInstance("s-4")
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after a failed fire")
		e.sameTime("next fire after a failed fire", got.NextFireAt, later)

		// Paused: nothing fires, nothing starts.
		got.Paused = true
		e.noErr(s.UpdateSchedule(e.ctx, got), "pause")
		ok, err = s.FireSchedule(e.ctx, "s", later, time.Time{}, []provider.ScheduleStart{fireStart("s-5", later)})
		e.noErr(err, "fire while paused")
		mustEqual(e.t, "fired while paused", ok, false)
		e.wantNoInstance("s-5")
		_, err = s.FireSchedule(e.ctx, "s", later, time.Time{}, nil)
		e.wantErr(err, provider.ErrInvalidArgument, "fire without fires")
	}},

	{name: "fire_schedules_fires_several_in_one_transaction", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		next := due.Add(time.Minute)
		for _, id := range []string{"a", "b", "c"} {
			e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: id, Spec: []byte(`{}`), NextFireAt: due}), "create "+id)
		}
		one := func(id string, at time.Time, fires ...provider.ScheduleStart) provider.ScheduleDue {
			return provider.ScheduleDue{ID: id, Due: at, Next: next, Fires: fires}
		}
		// Each schedule's claim is its own: c, given a stale due time, is
		// skipped while a and b fire (given out of ID order).
		fired, err := s.FireSchedules(e.ctx, []provider.ScheduleDue{
			one("b", due, fireStart("b-1", due)),
			one("c", due.Add(-time.Minute), fireStart("c-1", due)),
			one("a", due, fireStart("a-1", due), fireStart("a-2", due)),
		})
		e.noErr(err, "fire three")
		mustEqual(e.t, "fired", fmt.Sprint(fired), "[true false true]")
		for _, id := range []string{"a-1", "a-2", "b-1"} {
			e.wantInstance(id)
		}
		e.wantNoInstance("c-1")
		for id, want := range map[string]time.Time{"a": next, "b": next, "c": due} {
			got, err := s.GetSchedule(e.ctx, id)
			e.noErr(err, "get "+id)
			e.sameTime("next fire of "+id, got.NextFireAt, want)
		}

		// A start whose error Settle refuses fails the whole call:
		// neither schedule moves, no instance starts.
		bad := fireStart("a-1", next)
		bad.Settle = func(_ provider.EnqueueResult, err error) (string, string, bool) { return "", "", err == nil }
		_, err = s.FireSchedules(e.ctx, []provider.ScheduleDue{one("c", due, fireStart("c-2", due)), one("a", next, bad)})
		if err == nil {
			e.t.Fatal("a fire with a refused start: no error")
		}
		e.wantNoInstance("c-2")
		got, err := s.GetSchedule(e.ctx, "c")
		e.noErr(err, "get c after the failed call")
		e.sameTime("next fire of c after the failed call", got.NextFireAt, due)

		_, err = s.FireSchedules(e.ctx, []provider.ScheduleDue{one("c", due, fireStart("c-3", due)), one("c", due, fireStart("c-4", due))})
		e.wantErr(err, provider.ErrInvalidArgument, "one schedule twice")
		_, err = s.FireSchedules(e.ctx, []provider.ScheduleDue{one("c", due)})
		e.wantErr(err, provider.ErrInvalidArgument, "no fire")
	}},

	{name: "trigger_records_and_starts_in_one_transaction", run: func(e *env) {
		s := e.schedules()
		next := e.clock.Now().Add(time.Hour)
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`), NextFireAt: next}), "create")
		at := e.clock.Now()

		// A trigger starts its instance and records it, keeping the next
		// fire, even while the schedule is paused.
		got, err := s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get")
		got.Paused, got.NextFireAt = true, time.Time{}
		e.noErr(s.UpdateSchedule(e.ctx, got), "pause")
		ok, err := s.TriggerSchedule(e.ctx, "s", fireStart("s-manual-1", at))
		e.noErr(err, "trigger")
		mustEqual(e.t, "triggered", ok, true)
		e.wantInstance("s-manual-1")
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after trigger")
		e.sameTime("last fire", got.LastFireAt, at)
		if got.LastInstanceID != "s-manual-1" || got.LastOutcome != "started" || got.Revision != 3 || !got.Paused || !got.NextFireAt.IsZero() {
			e.t.Fatalf("after trigger: %+v", got)
		}

		// A refused start is recorded as Settle words it.
		dup := fireStart("s-manual-1", at.Add(time.Second))
		dup.Settle = func(_ provider.EnqueueResult, err error) (string, string, bool) {
			return "s-manual-1", "duplicate", errors.Is(err, provider.ErrInstanceExists)
		}
		ok, err = s.TriggerSchedule(e.ctx, "s", dup)
		e.noErr(err, "trigger onto a taken instance ID")
		mustEqual(e.t, "triggered onto a taken instance ID", ok, true)
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after a refused start")
		mustEqual(e.t, "outcome of a refused start", got.LastOutcome, "duplicate")
		e.sameTime("last fire after a refused start", got.LastFireAt, at.Add(time.Second))

		// A Settle that refuses the error fails the trigger: neither the
		// record nor any start commits.
		bad := fireStart("s-manual-1", at.Add(2*time.Second))
		bad.Settle = func(_ provider.EnqueueResult, err error) (string, string, bool) { return "", "", err == nil }
		ok, err = s.TriggerSchedule(e.ctx, "s", bad)
		if err == nil || ok {
			e.t.Fatalf("trigger with a refused start = %v, %v; want an error", ok, err)
		}
		again, err := s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after a failed trigger")
		if again.Revision != got.Revision || again.LastOutcome != "duplicate" {
			e.t.Fatalf("a failed trigger changed the schedule: %+v, was %+v", again, got)
		}

		// A missing schedule starts nothing.
		ok, err = s.TriggerSchedule(e.ctx, "missing", fireStart("missing-manual", at))
		e.noErr(err, "trigger a missing schedule")
		mustEqual(e.t, "triggered a missing schedule", ok, false)
		e.wantNoInstance("missing-manual")
		_, err = s.TriggerSchedule(e.ctx, "s", provider.ScheduleStart{FireAt: at, Start: startMsg("x")})
		e.wantErr(err, provider.ErrInvalidArgument, "trigger without Settle")
	}},

	{name: "pause_racing_a_fire_never_starts_a_paused_schedule", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		for round := range 20 {
			id := fmt.Sprintf("s%d", round)
			inst := id + "-fire"
			e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: id, Spec: []byte(`{}`), NextFireAt: due}), "create")
			sc, err := s.GetSchedule(e.ctx, id)
			e.noErr(err, "get")
			var fired bool
			var fireErr, pauseErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				fired, fireErr = s.FireSchedule(e.ctx, id, due, due.Add(time.Minute), []provider.ScheduleStart{fireStart(inst, due)})
			})
			wg.Go(func() {
				p := *sc
				p.Paused, p.NextFireAt = true, time.Time{}
				pauseErr = s.UpdateSchedule(e.ctx, &p)
			})
			wg.Wait()
			e.noErr(fireErr, "fire")
			paused := pauseErr == nil
			if !paused && !errors.Is(pauseErr, provider.ErrConflict) {
				e.t.Fatalf("round %d: pause: %v", round, pauseErr)
			}
			// Exactly one of them won: a pause that committed first leaves
			// nothing to fire; a fire that committed first moved the
			// revision the pause was made at.
			if fired == paused {
				e.t.Fatalf("round %d: fired %v and paused %v; want exactly one", round, fired, paused)
			}
			if fired {
				e.wantInstance(inst)
			} else {
				e.wantNoInstance(inst)
			}
		}
	}},

	{name: "concurrent_fires_of_one_time_start_one_instance", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		for round := range 5 {
			id := fmt.Sprintf("s%d", round)
			e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: id, Spec: []byte(`{}`), NextFireAt: due}), "create")
			// Each firer starts an instance of its own ID, without an
			// idempotency key: only the claim keeps a second one out.
			const n = 6
			wins := make([]bool, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					wins[i], errs[i] = s.FireSchedule(e.ctx, id, due, due.Add(time.Minute),
						[]provider.ScheduleStart{fireStart(fmt.Sprintf("%s-by-%d", id, i), due)})
				})
			}
			wg.Wait()
			won := 0
			for i := range n {
				e.noErr(errs[i], "fire")
				if wins[i] {
					won++
					e.wantInstance(fmt.Sprintf("%s-by-%d", id, i))
				} else {
					e.wantNoInstance(fmt.Sprintf("%s-by-%d", id, i))
				}
			}
			e.wantCount("winning fires", won, 1)
		}
	}},

	{name: "buffer_one_fires_sharing_a_lock_queue_at_most_one", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		bufferOne := func(inst, key string, seen *error) provider.ScheduleStart {
			return provider.ScheduleStart{FireAt: due, Start: queuedStart(inst, key, lockTTL), BufferOne: true,
				Settle: func(_ provider.EnqueueResult, err error) (string, string, bool) {
					*seen = err
					var waiting *provider.StartWaitingError
					switch {
					case err == nil:
						return inst, "started", true
					case errors.As(err, &waiting):
						return "", "skipped", waiting.Key == key && errors.Is(err, provider.ErrLocked)
					}
					return "", "", false
				}}
		}

		// On a free key a buffer_one start takes the lock at once; on a
		// held key the first one queues.
		var seen error
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "free", Spec: []byte(`{}`), NextFireAt: due}), "create")
		ok, err := s.FireSchedule(e.ctx, "free", due, due.Add(time.Minute), []provider.ScheduleStart{bufferOne("free-1", "kf", &seen)})
		e.noErr(err, "fire on a free key")
		mustEqual(e.t, "fired on a free key", ok, true)
		e.noErr(seen, "start on a free key")
		mustEqual(e.t, "holder of kf", e.getLock("kf").InstanceID, "free-1")

		// Two schedules sharing a held key, firing at once: one start
		// waits, the other is refused in its transaction.
		for round := range 10 {
			key := fmt.Sprintf("k%d", round)
			e.enqueue(lockedStart(fmt.Sprintf("holder-%d", round), key))
			ids := [2]string{fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)}
			var fired [2]bool
			var errs, seen [2]error
			for _, id := range ids {
				e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: id, Spec: []byte(`{}`), NextFireAt: due}), "create")
			}
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Go(func() {
					fired[i], errs[i] = s.FireSchedule(e.ctx, id, due, due.Add(time.Minute),
						[]provider.ScheduleStart{bufferOne(id+"-fire", key, &seen[i])})
				})
			}
			wg.Wait()
			started := 0
			for i, id := range ids {
				e.noErr(errs[i], "fire "+id)
				mustEqual(e.t, "fired "+id, fired[i], true)
				got, err := s.GetSchedule(e.ctx, id)
				e.noErr(err, "get "+id)
				if seen[i] == nil {
					started++
					e.wantStatus(id+"-fire", provider.StatusPending)
					mustEqual(e.t, "outcome of "+id, got.LastOutcome, "started")
				} else {
					e.wantErr(seen[i], provider.ErrLocked, "the refused start of "+id)
					e.wantNoInstance(id + "-fire")
					mustEqual(e.t, "outcome of "+id, got.LastOutcome, "skipped")
				}
			}
			e.wantCount(fmt.Sprintf("round %d: starts queued", round), started, 1)
			mustEqual(e.t, "starts waiting for "+key, e.getLock(key).Queued, 1)
		}
	}},

	{name: "replace_cancels_the_holder_in_the_fire_transaction", run: func(e *env) {
		s := e.schedules()
		due := e.clock.Now()
		// replacing is a fire that replaces the holder of key; its Settle
		// keeps the start's result in *started.
		replacing := func(inst, key string, at time.Time, started *provider.EnqueueResult) provider.ScheduleStart {
			f := fireStart(inst, at)
			f.Start = queuedStart(inst, key, lockTTL)
			f.Start.Create.Lock.Replace, f.Start.Create.Lock.ReplaceReason = true, "replaced by "+inst
			f.Settle = func(res provider.EnqueueResult, err error) (string, string, bool) {
				*started = res
				return inst, "started", err == nil
			}
			return f
		}
		e.enqueue(lockedStart("holder", "k"))
		e.runStart("holder")
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`), NextFireAt: due}), "create")

		// The fire queues its instance behind the holder and, in the
		// same transaction, sends the holder its cancel: once the fire
		// returns, the cancel is committed (no step after the commit can
		// be lost to a crash).
		var started provider.EnqueueResult
		ok, err := s.FireSchedule(e.ctx, "s", due, due.Add(time.Minute), []provider.ScheduleStart{replacing("s-1", "k", due, &started)})
		e.noErr(err, "fire")
		mustEqual(e.t, "fired", ok, true)
		mustEqual(e.t, "start of the fire", started, provider.EnqueueResult{Replaced: "holder"})
		e.wantHolder("k", "holder")
		e.wantStatus("s-1", provider.StatusPending)
		it := e.fetchFor("holder")
		mustEqual(e.t, "messages of the holder", kinds(it.Messages), []history.WorkItemKind{history.WorkCancelInstance})
		mustEqual(e.t, "cancel reason", it.Messages[0].Reason, "replaced by s-1")
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{}), "abandon")

		// A trigger replaces in its transaction too; on a free key it
		// takes the lock and cancels nothing.
		started = provider.EnqueueResult{Replaced: "stale"}
		ok, err = s.TriggerSchedule(e.ctx, "s", replacing("s-manual", "free", due.Add(time.Second), &started))
		e.noErr(err, "trigger")
		mustEqual(e.t, "triggered", ok, true)
		mustEqual(e.t, "start on a free key", started, provider.EnqueueResult{})
		e.wantHolder("free", "s-manual")
		ok, err = s.TriggerSchedule(e.ctx, "s", replacing("s-manual-2", "free", due.Add(2*time.Second), &started))
		e.noErr(err, "trigger on a held key")
		mustEqual(e.t, "triggered on a held key", ok, true)
		mustEqual(e.t, "start of a trigger on a held key", started, provider.EnqueueResult{Replaced: "s-manual"})

		// A plain Enqueue replaces the same way; Replace needs Queue.
		m := queuedStart("direct", "k", lockTTL)
		m.Create.Lock.Replace = true
		mustEqual(e.t, "results of a replacing enqueue", e.enqueue(m, eventMsg("holder", "x", 1)),
			[]provider.EnqueueResult{{Replaced: "holder"}, {}})
		bad := lockedStart("bad", "k")
		bad.Create.Lock.Replace = true
		e.wantErr(errOf(e.p.Enqueue(e.ctx, bad)), provider.ErrInvalidArgument, "replace without queue")
	}},

	{name: "changes_wake_the_schedule_watchers", run: func(e *env) {
		s := e.schedules()
		w := e.watch(provider.ScheduleWatchKey)
		e.noErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`)}), "create")
		e.notified(w, "schedule watcher after create")
		got, err := s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get")
		e.notNotified(w, "schedule watcher after a read")
		e.noErr(s.UpdateSchedule(e.ctx, got), "update")
		e.notified(w, "schedule watcher after update")
		e.wantErr(s.UpdateSchedule(e.ctx, got), provider.ErrConflict, "stale update")
		e.notNotified(w, "schedule watcher after a refused update")
		_, err = s.DeleteSchedule(e.ctx, "s")
		e.noErr(err, "delete")
		e.notified(w, "schedule watcher after delete")
	}},

	{name: "another_store_on_the_same_database_wakes_the_schedule_watchers", run: func(e *env) {
		e.schedules()
		other := e.sharing()
		w := e.watch(provider.ScheduleWatchKey)
		e.noErr(other.(provider.ScheduleStore).CreateSchedule(e.ctx, &provider.Schedule{ID: "s", Spec: []byte(`{}`)}), "create through the other store")
		e.notifiedWithin(w, 10*time.Second, "schedule watcher after another store created a schedule")
	}},

	{name: "bad_input", run: func(e *env) {
		s := e.schedules()
		e.wantErr(s.CreateSchedule(e.ctx, &provider.Schedule{Spec: []byte(`{}`)}), provider.ErrInvalidArgument, "create without ID")
		e.wantErr(s.CreateSchedule(e.ctx, &provider.Schedule{ID: "s"}), provider.ErrInvalidArgument, "create without spec")
		_, err := s.GetSchedule(e.ctx, "")
		e.wantErr(err, provider.ErrInvalidArgument, "get without ID")
		_, err = s.ClaimScheduleFire(e.ctx, "s", time.Time{}, time.Time{}, provider.ScheduleFire{})
		e.wantErr(err, provider.ErrInvalidArgument, "claim without a due time")
		_, err = s.DeleteSchedule(e.ctx, "")
		e.wantErr(err, provider.ErrInvalidArgument, "delete without ID")
	}},
}

// schedules returns the store's ScheduleStore, skipping the case when it
// has none.
func (e *env) schedules() provider.ScheduleStore {
	e.t.Helper()
	s, ok := e.p.(provider.ScheduleStore)
	if !ok {
		e.t.Skip("the store does not implement provider.ScheduleStore")
	}
	return s
}

// fireStart is a fire at at starting instance id, recording "started" (or
// failing on any start error).
func fireStart(id string, at time.Time) provider.ScheduleStart {
	return provider.ScheduleStart{FireAt: at, Start: startMsg(id), Settle: func(_ provider.EnqueueResult, err error) (string, string, bool) {
		return id, "started", err == nil
	}}
}

// wantInstance fails unless instance id exists.
func (e *env) wantInstance(id string) {
	e.t.Helper()
	if _, err := e.admin().GetInstance(e.ctx, id); err != nil {
		e.t.Fatalf("instance %s: %v, want it to exist", id, err)
	}
}

// wantNoInstance fails unless instance id does not exist.
func (e *env) wantNoInstance(id string) {
	e.t.Helper()
	if _, err := e.admin().GetInstance(e.ctx, id); !errors.Is(err, provider.ErrNotFound) {
		e.t.Fatalf("instance %s: %v, want ErrNotFound", id, err)
	}
}
