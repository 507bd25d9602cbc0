package providertest

import (
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// ReadyTableHooks is what ReadyTableExact needs from an SQL store's own
// tests: the scheduling table is each store's private index of which
// instances may be fetched, so its check is the store's.
type ReadyTableHooks struct {
	// Check fails the test unless the store's scheduling table equals its
	// recomputation from the queue, the instance locks and the instances.
	Check func(t *testing.T)
	// Exec runs one SQL statement on the store's schema (failing the test
	// if it fails): the scenario writes a few rows the way no API call
	// does (an undecodable message, a lock row written as a copy writes
	// it).
	Exec func(t *testing.T, sql string)
	// Count returns the rows of orchestrator_ready.
	Count func(t *testing.T) int
}

// ReadyTableExact drives the paths that change an instance's queued
// messages or its lock and checks the store's scheduling table after each
// step: a turn consuming many messages while more arrive (and a timer that
// stays), the lock renewed, expired and stolen, a dead-lettered message of
// a fetch that keeps its lock, a pause with an event arriving, a lock row
// that ends before the first message, and the purge of a locked instance.
// p must run on clock, and implement provider.Pauser and provider.Admin.
func ReadyTableExact(t *testing.T, p provider.Provider, clock *Clock, h ReadyTableHooks) {
	t.Helper()
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		h.Check(t)
	}
	raise := func(id string, n int) {
		t.Helper()
		msgs := make([]*provider.OrchestratorMessage, n)
		for i := range msgs {
			msgs[i] = HammerEvent(id)
		}
		check("raise", errOf(p.Enqueue(ctx, msgs...)))
	}
	fetch := func(want int) *provider.OrchestrationItem {
		t.Helper()
		it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
		if err != nil || it == nil || len(it.Messages) != want {
			t.Fatalf("fetch: %v, %v; want %d messages", it, err, want)
		}
		h.Check(t)
		return it
	}
	consume := func(it *provider.OrchestrationItem) {
		t.Helper()
		_, err := p.AckOrchestrationItem(ctx, &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1})
		check("ack", err)
	}
	pauser, ok := p.(provider.Pauser)
	if !ok {
		t.Fatalf("%T does not implement provider.Pauser", p)
	}
	admin, ok := p.(provider.Admin)
	if !ok {
		t.Fatalf("%T does not implement provider.Admin", p)
	}

	check("start", errOf(p.Enqueue(ctx, HammerStart("fan"))))
	_, err := p.AckOrchestrationItem(ctx, HammerTurn(fetch(1), 0))
	check("first turn", err)
	timer := HammerEvent("fan")
	timer.VisibleAt = clock.Now().Add(time.Hour)
	check("timer", errOf(p.Enqueue(ctx, timer)))
	raise("fan", 20)
	it := fetch(20)
	raise("fan", 3) // arrive during the turn: left for the next one
	check("renew", p.RenewOrchestrationItemLock(ctx, it.LockToken, 2*time.Minute))
	consume(it)
	fetch(3)
	clock.Advance(3 * time.Minute) // the lock expires: the instance is ready again
	h.Check(t)
	consume(fetch(3)) // steals the expired lock

	// A fetch dead-letters an undecodable message and keeps the lock for
	// the message after it.
	h.Exec(t, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ('fan', '{not json', 0, 0)`)
	raise("fan", 1)
	consume(fetch(1))

	// A pause takes the lock of an instance with only a timer queued; an
	// event arrives earlier than the timer while it is paused; a resume
	// releases the lock.
	check("pause", pauser.PauseInstance(ctx, "fan", provider.PauseInfo{Reason: "check"}))
	raise("fan", 2)
	check("resume", pauser.ResumeInstance(ctx, "fan"))

	// A lock row written directly (as a copy writes pauses) that ends
	// before the instance's first message, then moved and removed.
	consume(fetch(2))
	h.Exec(t, `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at) VALUES ('fan', 'tok', 1, 1)`)
	h.Check(t)
	h.Exec(t, `UPDATE instance_locks SET locked_until = 2 WHERE instance_id = 'fan'`)
	h.Check(t)
	h.Exec(t, `DELETE FROM instance_locks WHERE instance_id = 'fan'`)
	h.Check(t)
	raise("fan", 2)

	// A purge of a locked instance.
	fetch(2)
	_, err = admin.PurgeInstances(ctx, []string{"fan"}, provider.PurgeOptions{Force: true})
	check("purge", err)
	if n := h.Count(t); n != 0 {
		t.Fatalf("%d instances ready after purging everything, want 0", n)
	}
}
