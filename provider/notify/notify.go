// Package notify is the in-process half of provider.Notifier, for stores to
// embed: a Hub hands out coalescing channels per queue and per instance and
// signals them when the store says so. It knows nothing of databases; a
// store calls Wake and InstanceChanged (or InstanceLive) after its own
// commits, and WakeAll when it notices that another process changed the
// database.
//
// Every channel has a buffer of one and is signalled without blocking, so a
// slow subscriber never holds up a commit and a burst of changes reaches it
// as one value.
package notify

import (
	"sync"

	"github.com/duroxide/duroxide-go/provider"
)

// Hub is a set of subscriptions. The zero value is ready to use; a Hub must
// not be copied after first use.
type Hub struct {
	mu       sync.Mutex
	orch     []chan struct{}
	work     []chan struct{}
	watchers map[string][]watch
}

// watch is one instance watch; end: it is told only of changes that may
// have ended the instance (WatchInstanceEnd).
type watch struct {
	ch  chan struct{}
	end bool
}

func ping(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Subscribe implements provider.Notifier.
func (h *Hub) Subscribe(q provider.Queue) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.queue(q)
	*list = append(*list, ch)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		*list = remove(*list, ch)
	}
}

func (h *Hub) queue(q provider.Queue) *[]chan struct{} {
	if q == provider.QueueWorker {
		return &h.work
	}
	return &h.orch
}

// WatchInstance implements provider.Notifier.
func (h *Hub) WatchInstance(instanceID string) (<-chan struct{}, func()) {
	return h.watch(instanceID, false)
}

// WatchInstanceEnd implements provider.EndWatcher: its channel is not
// signalled by InstanceLive.
func (h *Hub) WatchInstanceEnd(instanceID string) (<-chan struct{}, func()) {
	return h.watch(instanceID, true)
}

func (h *Hub) watch(instanceID string, end bool) (<-chan struct{}, func()) {
	w := watch{ch: make(chan struct{}, 1), end: end}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers == nil {
		h.watchers = map[string][]watch{}
	}
	h.watchers[instanceID] = append(h.watchers[instanceID], w)
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.watchers[instanceID]
		for i, x := range list {
			if x.ch == w.ch {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) > 0 {
			h.watchers[instanceID] = list
		} else {
			delete(h.watchers, instanceID)
		}
	}
}

func pingWatches(list []watch, live bool) {
	for _, w := range list {
		if live && w.end {
			continue
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

func remove(list []chan struct{}, ch chan struct{}) []chan struct{} {
	for i, c := range list {
		if c == ch {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// Wake signals the subscribers of queue q.
func (h *Hub) Wake(q provider.Queue) {
	h.mu.Lock()
	ping(*h.queue(q))
	h.mu.Unlock()
}

// InstanceChanged signals the watchers of each of ids.
func (h *Hub) InstanceChanged(ids ...string) {
	h.mu.Lock()
	for _, id := range ids {
		pingWatches(h.watchers[id], false)
	}
	h.mu.Unlock()
}

// InstanceLive signals the watchers of each of ids, except those that
// wait for it to end (WatchInstanceEnd): for changes the store knows left
// the instances live (not Completed, Failed or Canceled).
func (h *Hub) InstanceLive(ids ...string) {
	h.mu.Lock()
	for _, id := range ids {
		pingWatches(h.watchers[id], true)
	}
	h.mu.Unlock()
}

// WakeAll signals every subscriber of both queues and every instance
// watcher: what a store does when another process changed the database
// and it cannot tell what changed.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	ping(h.orch)
	ping(h.work)
	for _, list := range h.watchers {
		pingWatches(list, false)
	}
	h.mu.Unlock()
}

// Watching reports how many instance watches are open (for tests and
// metrics).
func (h *Hub) Watching() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, list := range h.watchers {
		n += len(list)
	}
	return n
}
