package providertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// copyCases cover the optional copy capabilities (provider.Exporter and
// provider.Importer): an export of a store in every state, imported into a
// fresh store, reads back record for record, without the leases, and the
// work the leases held is fetchable at once in the copy. Skipped for
// stores that implement neither.
var copyCases = []testCase{
	{"RoundTripKeepsEveryRowAndDropsLeases", func(e *env) {
		e.copyable()
		e.fillForCopy()
		snap := e.export(e.p)
		want := snap.counts
		mustEqual(e.t, "the source's live leases", snap.leases, provider.LiveLeases{InstanceLocks: 1, WorkerLeases: 2, Sessions: 1})
		for _, tbl := range provider.Tables {
			if want.Of(tbl) == 0 && (tbl != provider.TableDeadLetters || e.h.CorruptOrchestratorMessages != nil) {
				e.t.Fatalf("the filled store has no %s row: the case does not cover it", tbl)
			}
		}

		dst := e.newStore()
		imp := dst.(provider.Importer)
		for i := 0; i < len(snap.records); i += 4 {
			e.noErr(imp.Import(e.ctx, snap.records[i:min(i+4, len(snap.records))]), "Import")
		}
		got, err := imp.CopyCounts(e.ctx)
		e.noErr(err, "CopyCounts of the copy")
		mustEqual(e.t, "the copy's row counts", got, want)
		back := e.export(dst)
		mustEqual(e.t, "the copy's row counts in its export", back.counts, want)
		mustEqual(e.t, "the copy's live leases", back.leases, provider.LiveLeases{})
		if len(back.records) != len(snap.records) {
			e.t.Fatalf("the copy exports %d records, want %d", len(back.records), len(snap.records))
		}
		for i := range snap.records {
			if a, b := describe(back.records[i]), describe(snap.records[i]); a != b {
				e.t.Fatalf("record %d of the copy:\n got %s\nwant %s", i, a, b)
			}
		}

		// What reads see is the same.
		for _, id := range []string{"run", "done", "parked", "run-child"} {
			a, err := e.p.GetInstance(e.ctx, id)
			e.noErr(err, "GetInstance on the source")
			b, err := dst.GetInstance(e.ctx, id)
			e.noErr(err, "GetInstance on the copy")
			mustEqual(e.t, "instance "+id+" in the copy", b, a)
			ha, err := e.p.ReadHistory(e.ctx, id, 0)
			e.noErr(err, "ReadHistory on the source")
			hb, err := dst.ReadHistory(e.ctx, id, 0)
			e.noErr(err, "ReadHistory on the copy")
			mustEqual(e.t, "history of "+id+" in the copy", hb, ha)
		}
		// The parked instance's run of errors is dated in the copy too, so
		// stall reports (ListStalled) see it.
		qa := e.queue("parked")
		qb, err := dst.(provider.Admin).InstanceQueue(e.ctx, "parked")
		e.noErr(err, "InstanceQueue on the copy")
		if qa.LastErrorSince.IsZero() {
			e.t.Fatal("the source's parked instance has no LastErrorSince: the case does not cover it")
		}
		e.sameTime("LastErrorSince of parked in the copy", qb.LastErrorSince, qa.LastErrorSince)
		// Values, pauses and schedules came along.
		va, err := e.admin().ListValues(e.ctx, "run")
		e.noErr(err, "ListValues on the source")
		vb, err := dst.(provider.Admin).ListValues(e.ctx, "run")
		e.noErr(err, "ListValues on the copy")
		if len(va) != 2 {
			e.t.Fatalf("the source's run has %d values, want 2", len(va))
		}
		mustEqual(e.t, "values of run in the copy", vb, va)
		pa, err := e.p.(provider.Pauser).GetPause(e.ctx, "run-child")
		e.noErr(err, "GetPause on the source")
		pb, err := dst.(provider.Pauser).GetPause(e.ctx, "run-child")
		e.noErr(err, "GetPause on the copy")
		if pa == nil || pb == nil || *pa != *pb {
			e.t.Fatalf("pause of run-child in the copy: %+v, want %+v", pb, pa)
		}
		for _, id := range []string{"every-5m", "held"} {
			sa, err := e.p.(provider.ScheduleStore).GetSchedule(e.ctx, id)
			e.noErr(err, "GetSchedule on the source")
			sb, err := dst.(provider.ScheduleStore).GetSchedule(e.ctx, id)
			e.noErr(err, "GetSchedule on the copy")
			mustEqual(e.t, "schedule "+id+" in the copy", describe(sb), describe(sa))
		}
		la, err := e.p.GetExecutionLock(e.ctx, "w")
		e.noErr(err, "GetExecutionLock on the source")
		lb, err := dst.GetExecutionLock(e.ctx, "w")
		e.noErr(err, "GetExecutionLock on the copy")
		mustEqual(e.t, "execution lock w in the copy", lb, la)
		_, err = dst.Enqueue(e.ctx, withIdem(startMsg("again"), "k-purged"))
		var dup *provider.DuplicateStartError
		if !errors.As(err, &dup) || dup.InstanceID != "purged" || dup.PurgedAt.IsZero() {
			e.t.Fatalf("a repeat of the purged instance's key on the copy: %v, want a duplicate of purged, purged", err)
		}

		// The leases were not copied: the locked turn and the leased
		// activities are fetchable at once, at their next attempt.
		it, err := provider.FetchOrchestrationItem(e.ctx, dst, fetchOpts())
		e.noErr(err, "FetchOrchestrationItem on the copy")
		if it == nil || it.InstanceID != "locked" || it.AttemptCount != 2 {
			e.t.Fatalf("fetch on the copy: %s, want instance locked at attempt 2", describe(it))
		}
		w, err := provider.FetchWorkItem(e.ctx, dst, workOpts())
		e.noErr(err, "FetchWorkItem on the copy")
		if w == nil || w.InstanceID != "run" || w.AttemptCount != 2 {
			e.t.Fatalf("work fetch on the copy: %s, want run's activity at attempt 2", describe(w))
		}
		s, err := provider.FetchWorkItem(e.ctx, dst, sessionOpts(ownerB))
		e.noErr(err, "FetchWorkItem(session) on the copy")
		if s == nil || s.SessionID != "sess" {
			e.t.Fatalf("a new owner's session fetch on the copy: %s, want the session's activity", describe(s))
		}
	}},
	{"ImportIsAllOrNothing", func(e *env) {
		e.copyable()
		e.enqueue(startMsg("x"))
		snap := e.export(e.p)
		dst := e.newStore()
		imp := dst.(provider.Importer)
		batch := append(append([]provider.Record{}, snap.records...), snap.records[0])
		e.wantErr(imp.Import(e.ctx, batch), provider.ErrInstanceExists, "Import with an instance twice")
		got, err := imp.CopyCounts(e.ctx)
		e.noErr(err, "CopyCounts")
		mustEqual(e.t, "rows after a failed import", got, provider.TableCounts{})
		e.noErr(imp.Import(e.ctx, snap.records), "Import")
		e.wantErr(imp.Import(e.ctx, snap.records[:1]), provider.ErrInstanceExists, "Import of an instance the store has")
	}},
	{"ImportRejectsUnknownRecords", func(e *env) {
		e.copyable()
		imp := e.p.(provider.Importer)
		e.wantErr(imp.Import(e.ctx, []provider.Record{nil}), provider.ErrInvalidArgument, "Import(nil record)")
		e.wantErr(imp.Import(e.ctx, []provider.Record{foreignRecord{}}), provider.ErrInvalidArgument, "Import(unknown record)")
		e.noErr(imp.Import(e.ctx, nil), "Import(nothing)")
	}},
	{"ExportCanStopEarly", func(e *env) {
		e.copyable()
		for i := range 3 {
			e.enqueue(startMsg(fmt.Sprintf("i%d", i)))
		}
		snap, err := e.p.(provider.Exporter).BeginExport(e.ctx)
		e.noErr(err, "BeginExport")
		n := 0
		for rec, err := range snap.Records(e.ctx) {
			e.noErr(err, "Records")
			if rec.Table() != provider.TableInstances {
				e.t.Fatalf("the first record is a %s, want an instance", rec.Table())
			}
			n++
			break
		}
		e.noErr(snap.Close(), "Close")
		e.wantCount("records read before stopping", n, 1)
		// The store is usable, and exports again.
		e.enqueue(startMsg("after"))
		mustEqual(e.t, "instances in a new export", e.export(e.p).counts.Instances, int64(4))
	}},
}

// foreignRecord is a Record type no store knows.
type foreignRecord struct{}

func (foreignRecord) Table() provider.Table { return "foreign" }

// copyable skips the case unless the store can be exported and imported.
func (e *env) copyable() {
	e.t.Helper()
	_, exp := e.p.(provider.Exporter)
	_, imp := e.p.(provider.Importer)
	if !exp || !imp {
		e.t.Skip("the store does not implement provider.Exporter and provider.Importer")
	}
}

// newStore returns another fresh store on the case's clock, closed when
// the case ends.
func (e *env) newStore() provider.Provider {
	e.t.Helper()
	p := e.h.New(e.t, e.clock)
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

// exported is one whole export.
type exported struct {
	counts  provider.TableCounts
	leases  provider.LiveLeases
	records []provider.Record
}

// export reads the whole of p and checks the records match the counts.
func (e *env) export(p provider.Provider) exported {
	e.t.Helper()
	snap, err := p.(provider.Exporter).BeginExport(e.ctx)
	e.noErr(err, "BeginExport")
	defer func() { e.noErr(snap.Close(), "closing the export") }()
	x := exported{counts: snap.Counts(), leases: snap.Leases()}
	var seen provider.TableCounts
	last := 0
	for rec, err := range snap.Records(e.ctx) {
		e.noErr(err, "Records")
		x.records = append(x.records, rec)
		order := tableOrder(rec.Table())
		if order < last {
			e.t.Fatalf("a %s record after a record of a later table", rec.Table())
		}
		last = order
		bump(&seen, rec.Table())
	}
	mustEqual(e.t, "records per table against the snapshot's counts", seen, x.counts)
	return x
}

func tableOrder(t provider.Table) int {
	for i, tt := range provider.Tables {
		if tt == t {
			return i
		}
	}
	return -1
}

func bump(c *provider.TableCounts, t provider.Table) {
	switch t {
	case provider.TableInstances:
		c.Instances++
	case provider.TableExecutions:
		c.Executions++
	case provider.TableHistory:
		c.HistoryEvents++
	case provider.TableOrchestratorQ:
		c.OrchestratorQ++
	case provider.TableWorkerQ:
		c.WorkerQ++
	case provider.TableExecutionLocks:
		c.ExecutionLocks++
	case provider.TableQueuedStarts:
		c.QueuedStarts++
	case provider.TableIdempotencyKeys:
		c.IdempotencyKeys++
	case provider.TableDeadLetters:
		c.DeadLetters++
	case provider.TableValues:
		c.Values++
	case provider.TablePauses:
		c.Pauses++
	case provider.TableSchedules:
		c.Schedules++
	}
}

// describe prints a value with its type, for comparisons and messages.
func describe(v any) string { return fmt.Sprintf("%T %s", v, js(v)) }

// withIdem gives a start message an idempotency key kept for a day.
func withIdem(m *provider.OrchestratorMessage, key string) *provider.OrchestratorMessage {
	m.Create.IdempotencyKey, m.Create.IdempotencyTTL = key, 24*time.Hour
	return m
}

// fillForCopy puts a row in every copied table and a live lease of every
// kind: a running instance holding an execution lock with a start queued
// behind it, an activity it scheduled (leased), a pending timer and a
// child (paused); instance values; a schedule that fired and a paused
// one; a completed instance; one parked with a LastError; a purged one
// whose idempotency key is kept; a turn in progress; a session activity
// (leased); and a dead letter when the harness can corrupt messages.
func (e *env) fillForCopy() {
	e.t.Helper()
	if e.h.CorruptOrchestratorMessages != nil {
		e.enqueue(eventMsg("dead", "x", 1))
		e.h.CorruptOrchestratorMessages(e.t, e.p, "dead")
		e.fetchNone() // moves the message to the dead letters
	}

	run := withIdem(startMsg("run"), "k-run")
	run.Create.Lock = &provider.LockRequest{Key: "w", TTL: time.Hour}
	queued := startMsg("queued")
	queued.Create.Lock = &provider.LockRequest{Key: "w", TTL: time.Hour, Queue: true}
	e.enqueue(run, queued)
	it := e.fetchFor("run")
	fireAt := e.clock.Now().Add(time.Hour)
	meta := runningMeta()
	meta.CustomStatus = &provider.CustomStatusUpdate{Value: js("half-way")}
	e.ack(&provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: 1, Metadata: meta,
		History: []history.Event{e.startedEvent("in"), e.scheduledEvent(2), e.timerCreatedEvent(3, fireAt), e.subOrchScheduledEvent(4, "run-child"),
			e.valueEvent(5, "stage", js("copying")), e.valueEvent(6, "count", js(2))},
		WorkerItems:       []*provider.WorkerMessage{activityMsg("run", 2, "")},
		OrchestratorItems: []*provider.OrchestratorMessage{timerMsg("run", 3, fireAt), childStartMsg("run", 1, 4, "run-child")},
		Values:            []provider.ValueUpdate{{Key: "stage", Value: js("copying")}, {Key: "count", Value: js(2)}},
	})
	e.ackStart(e.fetchFor("run-child"))
	e.noErr(e.p.(provider.Pauser).PauseInstance(e.ctx, "run-child", provider.PauseInfo{Reason: "held for the copy", By: "tester"}), "PauseInstance")

	// A schedule that fired once, and a paused one.
	sched := e.p.(provider.ScheduleStore)
	due := e.clock.Now()
	e.noErr(sched.CreateSchedule(e.ctx, &provider.Schedule{ID: "every-5m", Spec: []byte(`{"interval":300000000000}`), NextFireAt: due}), "CreateSchedule")
	ok, err := sched.ClaimScheduleFire(e.ctx, "every-5m", due, due.Add(5*time.Minute),
		provider.ScheduleFire{FireAt: due, InstanceID: "every-5m-1", Outcome: "started"})
	e.noErr(err, "ClaimScheduleFire")
	mustEqual(e.t, "claimed the schedule's fire", ok, true)
	e.noErr(sched.CreateSchedule(e.ctx, &provider.Schedule{ID: "held", Spec: []byte(`{}`), Paused: true}), "CreateSchedule(paused)")

	e.enqueue(startMsg("done"))
	it = e.fetchFor("done")
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		History:  []history.Event{e.startedEvent("in"), e.completedEvent(2, "out")},
		Metadata: provider.ExecutionMetadata{OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusCompleted, Input: js("in"), Output: js("out")}})

	e.enqueue(startMsg("parked"))
	e.noErr(e.p.AbandonOrchestrationItem(e.ctx, e.fetchFor("parked").LockToken, provider.AbandonOptions{
		Delay: 24 * time.Hour, Error: errDetails(history.ErrorInfrastructure, "not registered")}), "abandon parked")

	e.enqueue(withIdem(startMsg("purged"), "k-purged"))
	it = e.fetchFor("purged")
	e.ack(&provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: []history.Event{e.startedEvent("in")},
		Metadata: provider.ExecutionMetadata{OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusCompleted, Output: js("p")}})
	_, err = e.admin().PurgeInstances(e.ctx, []string{"purged"}, provider.PurgeOptions{})
	e.noErr(err, "PurgeInstances")

	if w := e.fetchWork(); w.InstanceID != "run" {
		e.t.Fatalf("fetched %s, want run's activity", describe(w))
	}
	e.enqueueWork(activityMsg("sess-owner", 1, "sess"))
	if w := e.fetchWorkWith(sessionOpts(ownerA)); w.SessionID != "sess" {
		e.t.Fatalf("fetched %s, want the session's activity", describe(w))
	}
	e.enqueue(startMsg("locked"))
	e.fetchFor("locked") // a turn left in progress
}
