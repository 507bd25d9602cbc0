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

// TestEndStatusWatch: a WatchInstanceEndStatus watch gets nil for a
// change, nothing for a change that left its instance live, and the row
// InstanceEnded hands over, which replaces a pending nil and is never
// replaced by one; only such watches count for EndStatusWatched.
func TestEndStatusWatch(t *testing.T) {
	var h Hub
	ch, stop := h.WatchInstanceEndStatus("a")
	plain, stopPlain := h.WatchInstanceEnd("a")
	_, stopB := h.WatchInstanceEnd("b")
	take := func() (*provider.InstanceInfo, bool) {
		select {
		case in := <-ch:
			return in, true
		default:
			return nil, false
		}
	}
	if got := h.EndStatusWatched([]string{"a", "b", "c"}); len(got) != 1 || got[0] != "a" {
		t.Fatalf("EndStatusWatched = %v, want [a]", got)
	}
	h.InstanceLive("a")
	if _, ok := take(); ok {
		t.Fatal("InstanceLive signalled an end status watch")
	}
	h.InstanceChanged("a")
	if in, ok := take(); !ok || in != nil {
		t.Fatalf("InstanceChanged: got %v, %v; want nil", in, ok)
	}
	if !pending(plain) {
		t.Fatal("InstanceChanged did not signal a plain end watch")
	}
	done := &provider.InstanceInfo{InstanceID: "a", Status: provider.StatusCompleted}
	h.InstanceChanged("a") // a nil pending...
	h.InstanceEnded(done)  // ...replaced by the row
	h.InstanceChanged("a") // which a later nil does not replace
	if in, ok := take(); !ok || in != done {
		t.Fatalf("after InstanceEnded: got %v, %v; want the row", in, ok)
	}
	if _, ok := take(); ok {
		t.Fatal("more than one value pending")
	}
	if !pending(plain) {
		t.Fatal("InstanceEnded did not signal a plain end watch")
	}
	h.WakeAll()
	if in, ok := take(); !ok || in != nil {
		t.Fatalf("WakeAll: got %v, %v; want nil", in, ok)
	}
	stop()
	stopPlain()
	stopB()
	if n := h.Watching(); n != 0 || len(h.EndStatusWatched([]string{"a"})) != 0 {
		t.Fatalf("after stops: Watching = %d, EndStatusWatched(a) = %v", n, h.EndStatusWatched([]string{"a"}))
	}
}
