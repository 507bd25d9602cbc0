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
// have ended the instance (WatchInstanceEnd). A watch of
// WatchInstanceEndStatus has info instead of ch.
type watch struct {
	ch   chan struct{}
	info chan *provider.InstanceInfo
	end  bool
}

// signal tells w of a change, handing it in when the change is known to
// have ended the instance (a WatchInstanceEndStatus watch): the row
// replaces what the watch's buffer holds, if anything; a bare signal
// (nil) never replaces a value.
func (w watch) signal(in *provider.InstanceInfo) {
	if w.info == nil {
		select {
		case w.ch <- struct{}{}:
		default:
		}
		return
	}
	select {
	case w.info <- in:
		return
	default:
	}
	if in == nil {
		return
	}
	// Senders hold the hub's lock: once the buffer is drained (here or
	// by the watcher) only this send can fill it.
	select {
	case <-w.info:
	default:
	}
	select {
	case w.info <- in:
	default:
	}
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

// WatchInstanceEndStatus implements provider.EndStatusWatcher: a
// WatchInstanceEnd watch whose channel carries nil for a change, or the
// instance's row when the store reports it ended (InstanceEnded).
func (h *Hub) WatchInstanceEndStatus(instanceID string) (<-chan *provider.InstanceInfo, func()) {
	w := watch{info: make(chan *provider.InstanceInfo, 1), end: true}
	return w.info, h.add(instanceID, w)
}

func (h *Hub) watch(instanceID string, end bool) (<-chan struct{}, func()) {
	w := watch{ch: make(chan struct{}, 1), end: end}
	return w.ch, h.add(instanceID, w)
}

// add registers w and returns the function that ends it.
func (h *Hub) add(instanceID string, w watch) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers == nil {
		h.watchers = map[string][]watch{}
	}
	h.watchers[instanceID] = append(h.watchers[instanceID], w)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.watchers[instanceID]
		for i, x := range list {
			if x.ch == w.ch && x.info == w.info {
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
		w.signal(nil)
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

// InstanceEnded signals the watchers of each instance of ins, which a
// commit of this process ended (Completed, Failed or Canceled, committed
// durably) and left as ins shows, handing the row to the
// WatchInstanceEndStatus watches.
func (h *Hub) InstanceEnded(ins ...*provider.InstanceInfo) {
	h.mu.Lock()
	for _, in := range ins {
		for _, w := range h.watchers[in.InstanceID] {
			w.signal(in)
		}
	}
	h.mu.Unlock()
}

// EndStatusWatched returns those of ids that a WatchInstanceEndStatus
// watch waits for: the instances whose rows a store should read once it
// ended them, to hand them over (InstanceEnded).
func (h *Hub) EndStatusWatched(ids []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, id := range ids {
		for _, w := range h.watchers[id] {
			if w.info != nil {
				out = append(out, id)
				break
			}
		}
	}
	return out
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
