package providertest

import (
	"sync"
	"time"

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

		// A note records a fire out of turn and keeps the next fire.
		ok, err = s.NoteScheduleFire(e.ctx, "s", provider.ScheduleFire{FireAt: due.Add(time.Second), InstanceID: "manual", Outcome: "triggered"})
		e.noErr(err, "note")
		mustEqual(e.t, "noted", ok, true)
		got, err = s.GetSchedule(e.ctx, "s")
		e.noErr(err, "get after note")
		e.sameTime("next fire after note", got.NextFireAt, next)
		mustEqual(e.t, "last instance after note", got.LastInstanceID, "manual")
		ok, err = s.NoteScheduleFire(e.ctx, "missing", provider.ScheduleFire{FireAt: due})
		e.noErr(err, "note on a missing schedule")
		mustEqual(e.t, "noted a missing schedule", ok, false)

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
