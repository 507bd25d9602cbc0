package providertest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// Schedules, fired by runtimes under the fake clock. They skip on a store
// without provider.ScheduleStore.
var e2eScheduleCases = []e2eCase{
	{"ScheduleWeekWithOutage", e2eScheduleWeekWithOutage},
	{"ScheduleTwoRuntimesFireOnce", e2eScheduleTwoRuntimesFireOnce},
	{"ScheduleOverlapPolicies", e2eScheduleOverlapPolicies},
	{"SchedulePauseResumeTrigger", e2eSchedulePauseResumeTrigger},
}

// scheduleRegistry registers "Tick", which returns at once, and "Hold",
// which waits for the event "done".
func scheduleRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Tick", func(ctx *duroxide.OrchestrationContext, in json.RawMessage) (string, error) {
		return "tick", nil
	})
	duroxide.RegisterOrchestration(reg, "Hold", func(ctx *duroxide.OrchestrationContext, in json.RawMessage) (string, error) {
		return "held", ctx.WaitForEvent("done").Await(nil)
	})
	return reg
}

// scheduleClient returns a client whose schedule calls read the fake clock,
// skipping the scenario on a store without schedules.
func (e *e2e) scheduleClient() *duroxide.Client {
	e.t.Helper()
	if _, ok := e.store.(provider.ScheduleStore); !ok {
		e.t.Skip("the store does not implement provider.ScheduleStore")
	}
	return duroxide.NewClientWithOptions(e.store, &duroxide.ClientOptions{Clock: e.fc})
}

// createSchedule creates a schedule and fails the test on error.
func (e *e2e) createSchedule(c *duroxide.Client, id string, def duroxide.ScheduleDefinition) *duroxide.ScheduleInfo {
	e.t.Helper()
	info, err := c.CreateSchedule(e.ctx, id, &def, false)
	if err != nil {
		e.t.Fatalf("CreateSchedule(%s): %v", id, err)
	}
	return info
}

// waitSchedules waits (woken by the schedule notifications, bounded in
// real time) until cond holds for the stored schedules.
func (e *e2e) waitSchedules(c *duroxide.Client, what string, cond func([]duroxide.ScheduleInfo) bool) []duroxide.ScheduleInfo {
	e.t.Helper()
	ch, stop := e.store.WatchInstance(provider.ScheduleWatchKey)
	defer stop()
	limit := time.NewTimer(e2eTimeout)
	defer limit.Stop()
	for {
		list, err := c.ListSchedules(e.ctx)
		if err != nil {
			e.t.Fatalf("ListSchedules: %v", err)
		}
		if cond(list) {
			return list
		}
		select {
		case <-ch:
		case <-limit.C:
			e.t.Fatalf("timed out waiting for %s (fake time %s): %+v", what, e.fc.Now().Format(time.RFC3339), list)
		}
	}
}

// firedThrough waits until every schedule has moved past t.
func (e *e2e) firedThrough(c *duroxide.Client, t time.Time) {
	e.t.Helper()
	e.waitSchedules(c, "schedules to pass "+t.Format(time.RFC3339), func(list []duroxide.ScheduleInfo) bool {
		for _, s := range list {
			if !s.Paused && !s.NextFireAt.After(t) {
				return false
			}
		}
		return true
	})
}

// advanceTo moves the fake clock to t.
func (e *e2e) advanceTo(t time.Time) {
	if d := t.Sub(e.fc.Now()); d > 0 {
		e.fc.Advance(d)
	}
}

// instancesWithPrefix lists the IDs of the instances whose ID starts with
// prefix, sorted.
func (e *e2e) instancesWithPrefix(c *duroxide.Client, prefix string) []string {
	e.t.Helper()
	var ids []string
	opts := &duroxide.ListOptions{IDPrefix: prefix, Limit: 1000}
	for {
		page, err := c.ListInstances(e.ctx, opts)
		if err != nil {
			e.t.Fatalf("ListInstances(%s): %v", prefix, err)
		}
		for _, st := range page.Instances {
			ids = append(ids, st.InstanceID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	slices.Sort(ids)
	return ids
}

// fireIDs names the instances of schedule id's fires at times.
func fireIDs(id string, times []time.Time) []string {
	out := make([]string, len(times))
	for i, t := range times {
		out[i] = id + "-" + t.UTC().Format("20060102T150405.999Z")
	}
	slices.Sort(out)
	return out
}

// wantIDs compares two sorted ID lists, naming the first difference.
func (e *e2e) wantIDs(what string, got, want []string) {
	e.t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			e.t.Fatalf("%s: %d instances, want %d; first difference at %d: %s, want %s", what, len(got), len(want), i, got[i], want[i])
		}
	}
	e.t.Fatalf("%s: %d instances, want %d", what, len(got), len(want))
}

// outliveClockSteps gives a runtime locks that outlive the scenario's
// clock steps. The scenarios step the fake clock minutes at a time, as
// soon as the schedules moved, while the instances fired may still be in
// a turn: with the default lock timeouts each step would expire those
// locks, the other runtime (or this one) would take the turn again, and
// an instance caught by ten steps in a row would fail as poison.
func outliveClockSteps(o *duroxide.RuntimeOptions) {
	o.OrchestratorLockTimeout, o.WorkerLockTimeout = 24*time.Hour, 24*time.Hour
}

// e2eScheduleWeekWithOutage runs a week of three 5-minute schedules (one
// per catch-up policy; one of them cron, two intervals) through the fake
// clock, with every runtime down for an hour on the third day, and checks
// exactly which fires started. The clock moves to each fire time for the
// first six hours (every fire on time), then an hour at a time: each wake
// finds the hour's twelve fire times due and fires them by the policy
// (all: every one, in one transaction; last: the latest; none: only one
// less than ScheduleGrace late), as after the outage.
func e2eScheduleWeekWithOutage(e *e2e) {
	if e.nocache {
		e.t.Skip("the scheduler does not depend on the instance cache; the cache mode covers it")
	}
	c := e.scheduleClient()
	// The runtimes register no orchestration: the fires' instances are
	// stored and stay Pending, so the week costs the fires and nothing
	// else. (What a fire starts runs as any start does; the other
	// schedule cases run theirs.)
	reg := duroxide.NewRegistry()
	first := e2eStart.Truncate(time.Hour).Add(time.Hour) // 06:00
	every5 := duroxide.ScheduleDefinition{Interval: 5 * time.Minute, Start: first, Orchestration: "Tick", Overlap: duroxide.OverlapAllow}
	none, all := every5, every5
	none.CatchUp, all.CatchUp = duroxide.CatchUpNone, duroxide.CatchUpAll
	last := duroxide.ScheduleDefinition{Cron: "*/5 * * * *", Start: first, Orchestration: "Tick", Overlap: duroxide.OverlapAllow,
		CatchUp: duroxide.CatchUpLast}
	e.createSchedule(c, "none", none)
	e.createSchedule(c, "last", last)
	e.createSchedule(c, "all", all)
	for _, s := range e.waitSchedules(c, "created", func([]duroxide.ScheduleInfo) bool { return true }) {
		if !s.NextFireAt.Equal(first) {
			e.t.Fatalf("schedule %s: next fire %v, want %v", s.ID, s.NextFireAt, first)
		}
	}

	// Notifications drive the dispatchers; without lock cleanup, bulk job
	// runs and session renewals, and with a long poll interval, the
	// clock's steps wake nothing but the scheduler.
	quiet := func(o *duroxide.RuntimeOptions) {
		o.LockCleanupInterval, o.PollInterval, o.BulkJobInterval = -1, 24*time.Hour, -1
		o.SessionLockTimeout = 24 * time.Hour
		outliveClockSteps(o)
	}
	end := first.Add(7 * 24 * time.Hour)
	outage := first.Add(2*24*time.Hour + 4*time.Hour + 30*time.Second) // day 3, 10:00:30: the last wake before the outage
	back := outage.Add(time.Hour + 2*time.Minute)
	// The wakes: every fire time for six hours, then every hour, on the
	// even hours 30s after the fire time (within ScheduleGrace: on
	// time) and on the odd ones 2 minutes after (late), then the
	// outage's end, and the week's last fire time.
	var wakes []time.Time
	for t := first; t.Before(first.Add(6 * time.Hour)); t = t.Add(5 * time.Minute) {
		wakes = append(wakes, t)
	}
	for h := first.Add(6 * time.Hour); h.Before(end); h = h.Add(time.Hour) {
		t := h.Add(30 * time.Second)
		if h.Hour()%2 == 1 {
			t = h.Add(2 * time.Minute)
		}
		if t.After(outage) && t.Before(back) {
			continue
		}
		if !t.Before(back) && wakes[len(wakes)-1].Before(back) {
			wakes = append(wakes, back)
		}
		wakes = append(wakes, t)
	}
	wakes = append(wakes, end.Add(-5*time.Minute))

	// What each policy starts, wake by wake: the fire times due at a wake
	// are those since the previous one.
	want := map[string][]time.Time{}
	var fireTimes int
	prev := first.Add(-time.Nanosecond)
	for _, w := range wakes {
		var due []time.Time
		for f := first; !f.After(w); f = f.Add(5 * time.Minute) {
			if f.After(prev) {
				due = append(due, f)
			}
		}
		fireTimes += len(due)
		want["all"] = append(want["all"], due...)
		if len(due) > 0 {
			latest := due[len(due)-1]
			want["last"] = append(want["last"], latest)
			if w.Sub(latest) < duroxide.ScheduleGrace {
				want["none"] = append(want["none"], latest)
			}
		}
		prev = w
	}
	if fireTimes != 7*24*12 || len(want["all"]) != fireTimes {
		e.t.Fatalf("the wakes cover %d fire times, want %d", fireTimes, 7*24*12)
	}

	rt := e.runtime(reg, quiet)
	for _, w := range wakes {
		if rt == nil {
			rt = e.runtime(reg, quiet)
		}
		e.advanceTo(w)
		e.firedThrough(c, w)
		if w.Equal(outage) {
			e.shutdown(rt)
			rt = nil
		}
	}
	for _, id := range []string{"none", "last", "all"} {
		e.wantIDs("catch-up "+id, e.instancesWithPrefix(c, id+"-"), fireIDs(id, want[id]))
	}
	for _, s := range e.waitSchedules(c, "the last fire", func([]duroxide.ScheduleInfo) bool { return true }) {
		if !s.LastFireAt.Equal(end.Add(-5*time.Minute)) || s.LastOutcome != "started" || !s.NextFireAt.Equal(end) {
			e.t.Fatalf("schedule %s after the week: last %v (%s), next %v", s.ID, s.LastFireAt, s.LastOutcome, s.NextFireAt)
		}
	}
}

// e2eScheduleTwoRuntimesFireOnce: two runtimes on one store fire a day of
// a 5-minute schedule; every fire time starts exactly one instance.
func e2eScheduleTwoRuntimesFireOnce(e *e2e) {
	if e.nocache {
		e.t.Skip("the scheduler does not depend on the instance cache; the cache mode covers it")
	}
	c := e.scheduleClient()
	reg := scheduleRegistry()
	first := e2eStart.Truncate(time.Hour).Add(time.Hour)
	e.createSchedule(c, "both", duroxide.ScheduleDefinition{Interval: 5 * time.Minute, Start: first, Orchestration: "Tick",
		Overlap: duroxide.OverlapAllow, CatchUp: duroxide.CatchUpAll})
	e.runtime(reg, outliveClockSteps)
	e.runtime(reg, outliveClockSteps)
	var times []time.Time
	for t := first; t.Before(first.Add(24 * time.Hour)); t = t.Add(5 * time.Minute) {
		e.advanceTo(t)
		e.firedThrough(c, t)
		times = append(times, t)
	}
	e.wantIDs("instances of two runtimes", e.instancesWithPrefix(c, "both-"), fireIDs("both", times))
	for _, id := range fireIDs("both", times[:3]) {
		if n := len(e.history(id, 0)); n == 0 {
			e.t.Fatalf("instance %s has no history", id)
		}
		if st := e.status(id); st.ExecutionID != 1 {
			e.t.Fatalf("instance %s: execution %d, want 1", id, st.ExecutionID)
		}
	}
}

// e2eScheduleOverlapPolicies fires "Hold" instances that run until told:
// skip skips while one runs, buffer_one queues one and skips the rest,
// replace cancels the running one.
func e2eScheduleOverlapPolicies(e *e2e) {
	c := e.scheduleClient()
	reg := scheduleRegistry()
	first := e2eStart.Truncate(time.Hour).Add(time.Hour)
	for _, p := range []duroxide.ScheduleOverlap{duroxide.OverlapSkip, duroxide.OverlapBufferOne, duroxide.OverlapReplace} {
		e.createSchedule(c, string(p), duroxide.ScheduleDefinition{Interval: 5 * time.Minute, Start: first, Orchestration: "Hold", Overlap: p})
	}
	e.runtime(reg)
	t1, t2, t3 := first, first.Add(5*time.Minute), first.Add(10*time.Minute)
	id := func(s string, t time.Time) string { return fireIDs(s, []time.Time{t})[0] }
	e.advanceTo(t1)
	e.firedThrough(c, t1)
	for _, s := range []string{"skip", "buffer_one", "replace"} {
		e.eventually(s+" first fire running", func() bool { return e.status(id(s, t1)).State == duroxide.StateRunning })
	}
	e.advanceTo(t2)
	list := e.firedThrough2(c, t2)
	if o := list["skip"].LastOutcome; !strings.HasPrefix(o, "skipped: lock schedule:skip is held by instance "+id("skip", t1)) || list["skip"].LastInstanceID != "" {
		e.t.Fatalf("skip, second fire: outcome %q instance %q", o, list["skip"].LastInstanceID)
	}
	if st := e.status(id("buffer_one", t2)); st.State != duroxide.StatePending {
		e.t.Fatalf("buffer_one, second fire: %s, want Pending (queued)", st.State)
	}
	e.terminalError(id("replace", t1), duroxide.StateCanceled)
	e.eventually("replacing fire running", func() bool { return e.status(id("replace", t2)).State == duroxide.StateRunning })

	e.advanceTo(t3)
	list = e.firedThrough2(c, t3)
	if o := list["buffer_one"].LastOutcome; !strings.HasPrefix(o, "skipped: a fire already waits") {
		e.t.Fatalf("buffer_one, third fire: outcome %q", o)
	}
	if list["skip"].LastOutcome != "skipped: lock schedule:skip is held by instance "+id("skip", t1) {
		e.t.Fatalf("skip, third fire: outcome %q", list["skip"].LastOutcome)
	}
	// The buffered fire runs once the first one ends.
	if err := c.RaiseEvent(e.ctx, id("buffer_one", t1), "done", nil); err != nil {
		e.t.Fatal(err)
	}
	e.wait(id("buffer_one", t1))
	e.eventually("buffered fire running", func() bool { return e.status(id("buffer_one", t2)).State == duroxide.StateRunning })
	e.wantIDs("buffer_one instances", e.instancesWithPrefix(c, "buffer_one-"), fireIDs("buffer_one", []time.Time{t1, t2}))
	e.wantIDs("skip instances", e.instancesWithPrefix(c, "skip-"), fireIDs("skip", []time.Time{t1}))
}

// firedThrough2 is firedThrough returning the schedules by ID.
func (e *e2e) firedThrough2(c *duroxide.Client, t time.Time) map[string]duroxide.ScheduleInfo {
	e.t.Helper()
	e.firedThrough(c, t)
	list, err := c.ListSchedules(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]duroxide.ScheduleInfo{}
	for _, s := range list {
		out[s.ID] = s
	}
	return out
}

// e2eSchedulePauseResumeTrigger: a paused schedule does not fire, a
// trigger fires it anyway, and resuming skips the paused fire times.
func e2eSchedulePauseResumeTrigger(e *e2e) {
	c := e.scheduleClient()
	reg := scheduleRegistry()
	first := e2eStart.Truncate(time.Hour).Add(time.Hour)
	e.createSchedule(c, "p", duroxide.ScheduleDefinition{Interval: 5 * time.Minute, Start: first, Orchestration: "Tick",
		CatchUp: duroxide.CatchUpAll})
	e.runtime(reg)
	e.advanceTo(first)
	e.firedThrough(c, first)
	info, err := c.PauseSchedule(e.ctx, "p")
	if err != nil || !info.Paused || !info.NextFireAt.IsZero() {
		e.t.Fatalf("PauseSchedule: %+v, %v", info, err)
	}
	e.advanceTo(first.Add(time.Hour + time.Minute))
	f, err := c.TriggerSchedule(e.ctx, "p")
	if err != nil || f.Outcome != "triggered" || !strings.HasSuffix(f.InstanceID, "-manual") {
		e.t.Fatalf("TriggerSchedule: %+v, %v", f, err)
	}
	var out string
	e.result(f.InstanceID, &out)
	info, err = c.ResumeSchedule(e.ctx, "p")
	if err != nil || info.Paused || !info.NextFireAt.Equal(first.Add(65*time.Minute)) {
		e.t.Fatalf("ResumeSchedule: %+v, %v", info, err)
	}
	if info.LastInstanceID != f.InstanceID || info.LastOutcome != "triggered" {
		e.t.Fatalf("after trigger: last %q (%s)", info.LastInstanceID, info.LastOutcome)
	}
	e.advanceTo(first.Add(65 * time.Minute))
	e.firedThrough(c, first.Add(65*time.Minute))
	want := append(fireIDs("p", []time.Time{first, first.Add(65 * time.Minute)}), f.InstanceID)
	slices.Sort(want)
	e.wantIDs("instances", e.instancesWithPrefix(c, "p-"), want)

	// Update: a new definition moves the next fire; delete stops it.
	info, err = c.UpdateSchedule(e.ctx, "p", &duroxide.ScheduleDefinition{Cron: "0 * * * *", Orchestration: "Tick"})
	if err != nil || !info.NextFireAt.Equal(first.Add(2*time.Hour)) || info.Cron != "0 * * * *" {
		e.t.Fatalf("UpdateSchedule: %+v, %v", info, err)
	}
	if ok, err := c.DeleteSchedule(e.ctx, "p"); !ok || err != nil {
		e.t.Fatalf("DeleteSchedule: %v, %v", ok, err)
	}
	if _, err := c.GetSchedule(e.ctx, "p"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetSchedule after delete: %v", err)
	}
}
