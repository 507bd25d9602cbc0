package notify

import (
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	var h Hub
	orch, stopOrch := h.Subscribe(provider.QueueOrchestrator)
	work, stopWork := h.Subscribe(provider.QueueWorker)
	a, stopA := h.WatchInstance("a")
	b, stopB := h.WatchInstance("b")

	h.Wake(provider.QueueOrchestrator)
	h.Wake(provider.QueueOrchestrator) // coalesces
	if !pending(orch) || pending(orch) || pending(work) {
		t.Fatal("Wake(orchestrator) must signal its subscribers once and nobody else")
	}
	h.Wake(provider.QueueWorker)
	if !pending(work) || pending(orch) {
		t.Fatal("Wake(worker) must signal only worker subscribers")
	}
	h.InstanceChanged("a", "zzz")
	if !pending(a) || pending(b) {
		t.Fatal("InstanceChanged(a) must signal only a's watchers")
	}
	h.WakeAll()
	for name, ch := range map[string]<-chan struct{}{"orch": orch, "work": work, "a": a, "b": b} {
		if !pending(ch) {
			t.Fatalf("WakeAll did not signal %s", name)
		}
	}
	if n := h.Watching(); n != 2 {
		t.Fatalf("Watching = %d, want 2", n)
	}
	stopOrch()
	stopWork()
	stopA()
	stopB()
	stopB() // idempotent
	h.WakeAll()
	if pending(orch) || pending(work) || pending(a) || pending(b) {
		t.Fatal("a stopped subscription was signalled")
	}
	if n := h.Watching(); n != 0 {
		t.Fatalf("Watching after stops = %d, want 0 (no leak per instance)", n)
	}
}

// TestHubEndWatchers: a watch of an instance's end (WatchInstanceEnd) is
// signalled by InstanceChanged and WakeAll, not by InstanceLive, which
// signals the instance's other watchers.
func TestHubEndWatchers(t *testing.T) {
	var h Hub
	end, stopEnd := h.WatchInstanceEnd("a")
	all, stopAll := h.WatchInstance("a")
	h.InstanceLive("a")
	if pending(end) || !pending(all) {
		t.Fatal("InstanceLive(a) must signal a's watchers, not those of its end")
	}
	h.InstanceChanged("a")
	if !pending(end) || !pending(all) {
		t.Fatal("InstanceChanged(a) must signal every watcher of a")
	}
	h.WakeAll()
	if !pending(end) || !pending(all) {
		t.Fatal("WakeAll must signal every watcher of a")
	}
	if n := h.Watching(); n != 2 {
		t.Fatalf("Watching = %d, want 2", n)
	}
	stopEnd()
	h.InstanceChanged("a")
	if pending(end) || !pending(all) {
		t.Fatal("a stopped end watch was signalled")
	}
	stopAll()
	if n := h.Watching(); n != 0 {
		t.Fatalf("Watching after stops = %d, want 0", n)
	}
}
