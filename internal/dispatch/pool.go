package dispatch

import (
	"slices"
	"sync"
)

// The goroutines of turns and activities.
//
// A turn or an activity runs on a goroutine of its own, and a goroutine
// that finished one waits, idle, for the next instead of ending: pool.run
// hands a function to an idle goroutine when there is one, and starts a
// new goroutine otherwise. A new goroutine starts with a small stack and
// grows it, copying it at every doubling, as a turn replays (decoding
// history, running the orchestration) and as a store call runs (an SQLite
// statement runs deep call stacks in Go); a reused goroutine has grown
// its stack already (the garbage collector shrinks an idle one by half at
// most per cycle). On the SQLite sequence benchmark, growing stacks was
// about 8% of the instructions with a new goroutine per turn and per
// activity, and under 1% with the pool.
//
// At most maxIdle goroutines wait idle; one that finishes while as many
// wait ends instead: every idle goroutine's stack is scanned (and may be
// shrunk) at every collection, and a fan-out of hundreds of activities
// would otherwise leave hundreds idle for good. The goroutines end once
// the runtime stops (Shutdown): the idle ones at once, the busy ones when
// their function returns.

// maxIdle caps the idle goroutines of a pool (see above).
const maxIdle = 64

// pool runs functions on reused goroutines (see above).
type pool struct {
	stop <-chan struct{}
	mu   sync.Mutex
	// free holds the channels of the idle goroutines, the one idle
	// longest first: run hands a function to the last, whose stack was
	// grown most recently (the collector may have shrunk the others').
	// Each channel has room for one function, sent under mu as its
	// goroutine is taken off free, so a send never blocks and a taken
	// goroutine always gets its function.
	free []chan func()
	// ended counts the goroutines that ended (for tests).
	ended int
}

// newPool returns a pool whose goroutines end once stop is closed.
func newPool(stop <-chan struct{}) *pool {
	return &pool{stop: stop}
}

// run runs fn on an idle goroutine of the pool, or on a new one.
func (p *pool) run(fn func()) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		c <- fn
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go p.serve(fn)
}

// serve runs fn, then each function handed to it while idle, until stop.
func (p *pool) serve(fn func()) {
	c := make(chan func(), 1)
	for fn != nil {
		fn()
		fn = p.next(c)
	}
}

// next waits, idle, for the next function handed to c; nil once stop is
// closed, or at once when maxIdle goroutines are idle already.
func (p *pool) next(c chan func()) func() {
	p.mu.Lock()
	if len(p.free) >= maxIdle {
		p.ended++
		p.mu.Unlock()
		return nil
	}
	p.free = append(p.free, c)
	p.mu.Unlock()
	select {
	case fn := <-c:
		return fn
	case <-p.stop:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.free, c); i >= 0 {
		p.free = slices.Delete(p.free, i, i+1)
		p.ended++
		return nil
	}
	return <-c // run took this goroutine and sent its function already
}
