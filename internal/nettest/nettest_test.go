package nettest

import (
	"net"
	"testing"
	"time"
)

// TestSilentListenerAcceptsAndNeverAnswers: a client connects, the
// accept is reported, and a read sees no byte before its deadline.
func TestSilentListenerAcceptsAndNeverAnswers(t *testing.T) {
	addr, accepted := SilentListener(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-accepted
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [1]byte
	n, err := c.Read(b[:])
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, err %v: the listener answered", n, err)
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read error %v, want a timeout", err)
	}
}
