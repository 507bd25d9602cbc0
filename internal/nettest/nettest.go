// Package nettest holds network fixtures shared by tests of several
// packages: servers that misbehave the way a cut-off or hung peer does.
package nettest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentListener accepts connections on loopback and never answers,
// like a server whose process is stopped while its kernel still accepts.
// It reads and discards what clients send. The listener and every
// accepted connection are closed when the test ends. accepted receives a
// value per connection (dropped when 64 are unread).
func SilentListener(t testing.TB) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), ch
}
