package providertest

import (
	"reflect"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// notifyCases cover provider.Notifier: every commit that may make work
// fetchable or change an instance notifies this process's subscribers
// before the committing call returns, a call that fails notifies nobody, and
// channels coalesce.
var notifyCases = []testCase{
	{name: "enqueue_wakes_the_orchestrator_queue_and_the_new_instance", run: func(e *env) {
		orch := e.subscribe(provider.QueueOrchestrator)
		inst := e.watch("a")
		e.enqueue(startMsg("a"))
		e.notified(orch, "orchestrator subscriber after Enqueue")
		e.notified(inst, "watcher of a after its creation")
		e.enqueue(eventMsg("a", "go", 1))
		e.notified(orch, "orchestrator subscriber after a second Enqueue")
	}},

	{name: "ack_scheduling_activities_and_timers_wakes_both_queues", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		orch := e.subscribe(provider.QueueOrchestrator)
		work := e.subscribe(provider.QueueWorker)
		inst := e.watch("a")
		a := turnAck(it, 1, e.scheduledEvent(2), e.timerCreatedEvent(3, e.clock.Now().Add(time.Minute)))
		a.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		a.OrchestratorItems = []*provider.OrchestratorMessage{timerMsg("a", 3, e.clock.Now().Add(time.Minute))}
		e.ack(a)
		e.notified(work, "worker subscriber after an ack with worker items")
		e.notified(orch, "orchestrator subscriber after an ack with a timer")
		e.notified(inst, "watcher of a after its turn")
	}},

	{name: "ack_leaving_late_messages_wakes_the_orchestrator_queue", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.enqueue(eventMsg("a", "late", 2)) // arrives while the turn runs
		orch := e.subscribe(provider.QueueOrchestrator)
		e.ack(turnAck(it, 1, e.externalEvent(2, "go")))
		e.notified(orch, "orchestrator subscriber after an ack that unlocked an instance with waiting messages")
		mustEqual(e.t, "late message fetched", e.fetchFor("a").Messages[0].Name, "late")
	}},

	{name: "terminal_ack_wakes_the_instance_watchers", run: func(e *env) {
		e.createInstance("a")
		w1, w2 := e.watch("a"), e.watch("a")
		other := e.watch("b")
		e.finish("a", provider.StatusCompleted)
		e.notified(w1, "first watcher of a")
		e.notified(w2, "second watcher of a")
		e.notNotified(other, "watcher of another instance")
	}},

	{name: "end_watchers_wake_when_the_instance_may_have_ended", run: func(e *env) {
		ew, ok := e.p.(provider.EndWatcher)
		if !ok {
			return
		}
		e.createInstance("a")
		end, stop := ew.WatchInstanceEnd("a")
		e.t.Cleanup(stop)
		all := e.watch("a")
		// The enqueue may have signalled them.
		settle := func() { drain(end); drain(all) }
		// A turn that leaves the instance running may or may not signal
		// the end watcher; it signals the other.
		e.ack(turnAck(e.eventTurn("a", 1, settle), 1, e.externalEvent(2, "go")))
		e.notified(all, "watcher of a after a turn that left it running")
		e.ack(e.completingAck(e.eventTurn("a", 2, settle)))
		e.notified(end, "end watcher of a after the turn that completed it")
		e.notified(all, "watcher of a after the turn that completed it")
		e.mustPurge(false, "a")
		e.notified(end, "end watcher of a after its purge")
	}},

	{name: "end_status_watchers_get_the_ended_row_or_a_signal", run: func(e *env) {
		e.createInstance("a")
		ew, ok := e.p.(provider.EndStatusWatcher)
		if !ok {
			return
		}
		end, stop := ew.WatchInstanceEndStatus("a")
		e.t.Cleanup(stop)
		take := func(what string) (*provider.InstanceInfo, bool) {
			e.t.Helper()
			select {
			case in := <-end:
				if in != nil && (in.InstanceID != "a" || !in.Status.IsTerminal()) {
					e.t.Fatalf("%s: handed %+v, want a's ended row or nil", what, in)
				}
				return in, true
			default:
				return nil, false
			}
		}
		settle := func() { take("after an enqueue") } // it may have signalled
		// A turn that leaves the instance running hands over no row.
		e.ack(turnAck(e.eventTurn("a", 1, settle), 1, e.externalEvent(2, "go")))
		if in, _ := take("after a turn that left it running"); in != nil {
			e.t.Fatalf("a turn that left the instance running handed over %+v", in)
		}
		e.ack(e.completingAck(e.eventTurn("a", 2, settle)))
		in, ok := take("after the turn that completed it")
		if !ok {
			e.t.Fatal("end status watcher of a: no value after the turn that completed it")
		}
		if in != nil {
			// What it hands over is what a read finds.
			read, err := e.p.GetInstance(e.ctx, "a")
			if err != nil {
				e.t.Fatal(err)
			}
			if !reflect.DeepEqual(in, read) {
				e.t.Fatalf("handed over %+v, a read finds %+v", in, read)
			}
		}
		e.mustPurge(false, "a")
		if _, ok := take("after its purge"); !ok {
			e.t.Fatal("end status watcher of a: no value after its purge")
		}
	}},

	{name: "worker_ack_with_completion_wakes_the_orchestrator_queue", run: func(e *env) {
		e.createInstance("a")
		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		orch := e.subscribe(provider.QueueOrchestrator)
		e.ackWork(&provider.WorkAck{LockToken: l.LockToken, Completion: completionMsg("a", 2, "ok")})
		e.notified(orch, "orchestrator subscriber after a worker ack with its completion")
	}},

	{name: "abandons_wake_their_queue", run: func(e *env) {
		e.enqueue(startMsg("a"))
		it := e.fetchFor("a")
		orch := e.subscribe(provider.QueueOrchestrator)
		e.noErr(e.p.AbandonOrchestrationItem(e.ctx, it.LockToken, provider.AbandonOptions{Delay: time.Second}), "abandon turn")
		e.notified(orch, "orchestrator subscriber after an abandon")

		e.enqueueWork(activityMsg("a", 2, ""))
		l := e.fetchWork()
		work := e.subscribe(provider.QueueWorker)
		e.noErr(e.p.AbandonWorkItem(e.ctx, l.LockToken, provider.AbandonOptions{}), "abandon activity")
		e.notified(work, "worker subscriber after an abandon")
	}},

	{name: "purge_wakes_the_watchers_of_every_purged_instance", run: func(e *env) {
		e.createInstance("p")
		e.createChild("p", "c")
		e.finish("c", provider.StatusCompleted)
		e.finish("p", provider.StatusCompleted)
		wp, wc := e.watch("p"), e.watch("c")
		e.mustPurge(false, "p")
		e.notified(wp, "watcher of the purged root")
		e.notified(wc, "watcher of the purged child")
	}},

	{name: "lock_release_wakes_the_orchestrator_queue_for_the_promoted_start", run: func(e *env) {
		e.enqueue(lockedStart("holder", "k"))
		e.runStart("holder")
		queued := lockedStart("next", "k")
		queued.Create.Lock.Queue = true
		e.enqueue(queued)
		orch := e.subscribe(provider.QueueOrchestrator)
		if !e.releaseLock("k") {
			e.t.Fatal("ReleaseExecutionLock found no lock")
		}
		e.notified(orch, "orchestrator subscriber after a release promoted a queued start")
		e.fetchFor("next")
	}},

	{name: "failed_commit_notifies_nobody", run: func(e *env) {
		e.createInstance("a")
		e.enqueue(eventMsg("a", "go", 1))
		it := e.fetchFor("a")
		e.expireLocks()
		thief := e.fetchFor("a") // steals the expired lock
		work := e.subscribe(provider.QueueWorker)
		inst := e.watch("a")
		stale := turnAck(it, 1, e.scheduledEvent(2))
		stale.WorkerItems = []*provider.WorkerMessage{activityMsg("a", 2, "")}
		e.lockLost(e.ackErr(stale), "ack with a stolen lock")
		e.notNotified(work, "worker subscriber after a rejected ack")
		e.notNotified(inst, "watcher of a after a rejected ack")
		e.ack(turnAck(thief, 1, e.externalEvent(2, "go")))
	}},

	{name: "channels_coalesce_and_stop_when_unsubscribed", run: func(e *env) {
		ch, stop := e.p.Subscribe(provider.QueueOrchestrator)
		w, unwatch := e.p.WatchInstance("a")
		for i := range 5 {
			e.enqueue(eventMsg("a", "go", i))
		}
		e.wantCount("buffered wake-ups after 5 enqueues", len(ch), 1)
		<-ch
		stop()
		unwatch()
		e.enqueue(startMsg("a"))
		e.notNotified(ch, "a subscription that was stopped")
		e.notNotified(w, "a watch that was stopped")
		stop() // idempotent
		unwatch()
	}},

	{name: "commits_of_another_store_on_the_same_database_wake_this_one", run: func(e *env) {
		other := e.sharing()
		orch := e.subscribe(provider.QueueOrchestrator)
		inst := e.watch("a")
		e.noErr(errOf(other.Enqueue(e.ctx, startMsg("a"))), "Enqueue through the other store")
		// Other processes' commits are noticed by polling something cheap:
		// wait for it, in real time, boundedly.
		e.notifiedWithin(orch, 10*time.Second, "orchestrator subscriber after another store's enqueue")
		e.notifiedWithin(inst, 10*time.Second, "watcher of a after another store created it")
	}},
}

// subscribe subscribes to q for the rest of the case.
func (e *env) subscribe(q provider.Queue) <-chan struct{} {
	ch, stop := e.p.Subscribe(q)
	e.t.Cleanup(stop)
	return ch
}

// watch watches instanceID for the rest of the case.
func (e *env) watch(instanceID string) <-chan struct{} {
	ch, stop := e.p.WatchInstance(instanceID)
	e.t.Cleanup(stop)
	return ch
}

// notified asserts that ch holds a notification now (stores notify before
// the committing call returns) and drains it.
func (e *env) notified(ch <-chan struct{}, what string) {
	e.t.Helper()
	select {
	case <-ch:
	default:
		e.t.Fatalf("%s: no notification", what)
	}
}

// notNotified asserts that ch holds no notification.
func (e *env) notNotified(ch <-chan struct{}, what string) {
	e.t.Helper()
	select {
	case <-ch:
		e.t.Fatalf("%s: notified, want nothing", what)
	default:
	}
}

// notifiedWithin waits up to d of real time for a notification on ch.
func (e *env) notifiedWithin(ch <-chan struct{}, d time.Duration, what string) {
	e.t.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		e.t.Fatalf("%s: no notification within %v", what, d)
	}
}

// sharing opens a second store on e's database, skipping the case when the
// harness cannot.
func (e *env) sharing() provider.Provider {
	e.t.Helper()
	if e.h.NewSharing == nil {
		e.t.Skip("the harness cannot open a second store on the same database (Harness.NewSharing)")
	}
	p := e.h.NewSharing(e.t, e.p, e.clock)
	if p == nil {
		e.t.Skip("this store has no second handle (for example an in-memory database)")
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

// eventTurn enqueues event "go" number i for instance id, fetches the
// turn it makes, and calls settle (which drains what the enqueue may have
// signalled).
func (e *env) eventTurn(id string, i int, settle func()) *provider.OrchestrationItem {
	e.t.Helper()
	e.enqueue(eventMsg(id, "go", i))
	it := e.fetchFor(id)
	settle()
	return it
}

// completingAck is the ack of it (the instance's second turn) that
// completes the instance with output "out".
func (e *env) completingAck(it *provider.OrchestrationItem) *provider.TurnAck {
	a := turnAck(it, 1, e.completedEvent(3, "out"))
	a.Metadata = provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: js("out")}
	return a
}

// drain empties ch, if it holds a notification.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
