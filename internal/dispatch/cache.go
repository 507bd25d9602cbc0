package dispatch

import (
	"container/list"
	"sync"

	"github.com/duroxide/duroxide-go/internal/replay"
)

// cache keeps the live executions of recently run instances, so the next
// turn of an instance resumes its suspended code instead of replaying the
// whole history. An entry is taken out for the duration of a turn and put
// back only after the turn's ack commits, so a failed or lost turn never
// leaves a cached state ahead of the store.
//
// While a turn's ack commits, the execution it leaves is held (hold): the
// next turn of the instance can be fetched as soon as the commit releases
// the instance's lock (in the same group commit even), before the ack's
// caller has settled it (settle). A fetch meanwhile is told the held
// position (position), so the store loads only the newer history, and
// the turn waits for the ack to settle before it takes the execution
// (take). A held position may be ahead of the store (the ack fails): the
// store then finds no event at that position and loads the whole
// history, as for any position it does not hold.
type cache struct {
	mu      sync.Mutex
	max     int
	ll      *list.List // of *replay.Execution, most recent first
	m       map[string]*list.Element
	pending map[string]*held
}

// held is an execution whose turn's ack is being committed.
type held struct {
	x    *replay.Execution
	done chan struct{} // closed by settle
}

func newCache(max int) *cache {
	return &cache{max: max, ll: list.New(), m: map[string]*list.Element{}, pending: map[string]*held{}}
}

// hold registers x, the execution a turn leaves, while its ack commits;
// settle must follow. nil without a cache or execution.
func (c *cache) hold(x *replay.Execution) *held {
	if c == nil || x == nil {
		return nil
	}
	h := &held{x: x, done: make(chan struct{})}
	c.mu.Lock()
	c.pending[x.InstanceID()] = h
	c.mu.Unlock()
	return h
}

// settle ends a hold: it caches x if its ack committed, else closes it
// (either way without a cache), and wakes the turns waiting in take.
func (c *cache) settle(h *held, x *replay.Execution, committed bool) {
	if h != nil {
		c.mu.Lock()
		if c.pending[x.InstanceID()] == h {
			delete(c.pending, x.InstanceID())
		}
		c.mu.Unlock()
	}
	if x != nil {
		if committed {
			c.put(x)
		} else {
			x.Close()
		}
	}
	if h != nil {
		close(h.done)
	}
}

// take removes and returns the cached execution of instanceID, if it is
// execution executionID. While one is held, it waits for its ack to settle
// or, unless wait, returns nil.
func (c *cache) take(instanceID string, executionID int64, wait bool) *replay.Execution {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	for h := c.pending[instanceID]; h != nil; h = c.pending[instanceID] {
		if !wait {
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		<-h.done
		c.mu.Lock()
	}
	el, ok := c.m[instanceID]
	if ok {
		c.ll.Remove(el)
		delete(c.m, instanceID)
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	x := el.Value.(*replay.Execution)
	if x.ExecutionID() != executionID {
		x.Close()
		return nil
	}
	return x
}

// position reports the execution and last event ID cached for instanceID,
// without taking it (provider.FetchOptions.Cached): the held one while its
// ack commits.
func (c *cache) position(instanceID string) (executionID, lastEventID int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.pending[instanceID]; h != nil {
		return h.x.ExecutionID(), h.x.LastEventID(), true
	}
	el, ok := c.m[instanceID]
	if !ok {
		return 0, 0, false
	}
	x := el.Value.(*replay.Execution)
	return x.ExecutionID(), x.LastEventID(), true
}

// put caches x, evicting the least recently used entry when full.
func (c *cache) put(x *replay.Execution) {
	if c == nil {
		x.Close()
		return
	}
	var evicted []*replay.Execution
	c.mu.Lock()
	if old, ok := c.m[x.InstanceID()]; ok {
		c.ll.Remove(old)
		evicted = append(evicted, old.Value.(*replay.Execution))
	}
	c.m[x.InstanceID()] = c.ll.PushFront(x)
	for c.ll.Len() > c.max {
		el := c.ll.Back()
		c.ll.Remove(el)
		e := el.Value.(*replay.Execution)
		delete(c.m, e.InstanceID())
		evicted = append(evicted, e)
	}
	c.mu.Unlock()
	for _, e := range evicted {
		e.Close()
	}
}

// clear closes every cached execution.
func (c *cache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	all := make([]*replay.Execution, 0, c.ll.Len())
	for el := c.ll.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*replay.Execution))
	}
	c.ll.Init()
	c.m = map[string]*list.Element{}
	c.mu.Unlock()
	for _, x := range all {
		x.Close()
	}
}
