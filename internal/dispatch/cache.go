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
type cache struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *replay.Execution, most recent first
	m   map[string]*list.Element
}

func newCache(max int) *cache {
	return &cache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

// take removes and returns the cached execution of instanceID, if it is
// execution executionID.
func (c *cache) take(instanceID string, executionID int64) *replay.Execution {
	if c == nil {
		return nil
	}
	c.mu.Lock()
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
// without taking it (provider.FetchOptions.Cached).
func (c *cache) position(instanceID string) (executionID, lastEventID int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
