package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/duroxide/duroxide-go/provider"
)

// Hub connects the clients and runtimes of one process that share a store:
// an enqueue wakes the dispatchers at once, and a finished instance wakes
// its waiters, with no polling. Processes that share a store through the
// database alone fall back to polling (or to the store's own notifications).
type Hub struct {
	mu       sync.Mutex
	orch     []chan struct{}
	work     []chan struct{}
	watchers map[string][]chan struct{}
	// orchWakes counts WakeOrchestrator calls, so a turn can tell whether
	// messages were enqueued while it held its instance lock.
	orchWakes atomic.Uint64
	// turnsEnded counts turns that released their instance lock; stalled
	// counts orchestration fetch loops backing off from visible messages
	// they could not take (their instance was locked).
	turnsEnded atomic.Uint64
	stalled    atomic.Int32
}

var hubs sync.Map // provider.Provider -> *Hub

// HubFor returns the hub of store, creating it on first use.
func HubFor(store provider.Provider) *Hub {
	if h, ok := hubs.Load(store); ok {
		return h.(*Hub)
	}
	h, _ := hubs.LoadOrStore(store, &Hub{watchers: map[string][]chan struct{}{}})
	return h.(*Hub)
}

func ping(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// WakeOrchestrator tells orchestration dispatchers that messages may be ready.
func (h *Hub) WakeOrchestrator() {
	h.orchWakes.Add(1)
	h.mu.Lock()
	ping(h.orch)
	h.mu.Unlock()
}

// WakeWorker tells activity dispatchers that work may be ready.
func (h *Hub) WakeWorker() {
	h.mu.Lock()
	ping(h.work)
	h.mu.Unlock()
}

// subscribe returns a coalescing wake-up channel for one queue.
func (h *Hub) subscribe(q provider.Queue) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	list := &h.orch
	if q == provider.QueueWorker {
		list = &h.work
	}
	*list = append(*list, ch)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, c := range *list {
			if c == ch {
				*list = append((*list)[:i:i], (*list)[i+1:]...)
				return
			}
		}
	}
}

// WatchInstance returns a channel that receives a value whenever instanceID
// changes state in this process, and a function to stop watching.
func (h *Hub) WatchInstance(instanceID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.watchers[instanceID] = append(h.watchers[instanceID], ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.watchers[instanceID]
		for i, c := range list {
			if c == ch {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(h.watchers, instanceID)
		} else {
			h.watchers[instanceID] = list
		}
	}
}

// InstanceChanged wakes the watchers of instanceID.
func (h *Hub) InstanceChanged(instanceID string) {
	h.mu.Lock()
	ping(h.watchers[instanceID])
	h.mu.Unlock()
}
