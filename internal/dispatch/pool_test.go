package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// goid returns the calling goroutine's id, from its stack trace's header
// ("goroutine N [running]:").
func goid(t *testing.T) int64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, err := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		t.Error(err)
	}
	return id
}

// idleAfter yields until p has n idle goroutines.
func (p *pool) idleAfter(n int) {
	for {
		p.mu.Lock()
		k := len(p.free)
		p.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

// TestPoolReusesIdleGoroutine: a function handed to the pool while one of
// its goroutines is idle runs on that goroutine; while none is idle, on a
// new one; and the idle goroutines end once the pool stops.
func TestPoolReusesIdleGoroutine(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	p := newPool(stop)
	ids := make(chan int64, 1)
	p.run(func() { ids <- goid(t) })
	first := <-ids
	p.idleAfter(1)
	p.run(func() { ids <- goid(t) })
	if second := <-ids; second != first {
		t.Fatalf("ran on goroutine %d after %d had gone idle, want it reused", second, first)
	}

	// Both busy: the second runs on a goroutine of its own.
	p.idleAfter(1)
	release := make(chan struct{})
	p.run(func() { ids <- goid(t); <-release })
	busy := <-ids
	p.run(func() { ids <- goid(t) })
	if other := <-ids; other == busy {
		t.Fatal("ran on a busy goroutine")
	}
	close(release)
	p.idleAfter(2)

	close(stop)
	p.idleAfter(0) // the package's goroutine leak check sees them end
}

// TestPoolCapsIdleGoroutines: a goroutine that finishes while maxIdle
// others are idle ends.
func TestPoolCapsIdleGoroutines(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	p := newPool(stop)
	release := make(chan struct{})
	for range maxIdle + 1 {
		p.run(func() { <-release })
	}
	close(release)
	for {
		p.mu.Lock()
		idle, ended := len(p.free), p.ended
		p.mu.Unlock()
		if idle+ended == maxIdle+1 {
			if idle != maxIdle {
				t.Fatalf("%d goroutines idle, want %d", idle, maxIdle)
			}
			break
		}
		runtime.Gosched()
	}
	close(stop)
	p.idleAfter(0)
}

// TestActivitiesReuseGoroutines: activities that run one after another
// (one worker slot) run on the pool's goroutines, not each on a new one.
func TestActivitiesReuseGoroutines(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	due, _ := newDueStore(t)
	store := due.Provider
	const n = 10
	for i := range n {
		scheduleActivityOn(ctx, t, store, fmt.Sprint("i", i))
	}
	ids := make(chan int64, n)
	reg := activityRegistry{"A": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		ids <- goid(t)
		return nil, nil
	}}
	r, err := Start(store, reg, Options{Logger: slog.New(slog.DiscardHandler), WorkerConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for range n {
		select {
		case id := <-ids:
			seen[id] = true
		case <-ctx.Done():
			t.Fatal("the activities did not run")
		}
	}
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(seen) == n {
		t.Fatalf("%d activities ran on %d goroutines, want some reused", n, len(seen))
	}
}
