package postgres

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestConnectionsUseKeepAlives: every connection probes a silent server
// with TCP keep-alives: Options.KeepAlive (or its default) as the idle time
// and the interval, and keepAliveCount probes.
func TestConnectionsUseKeepAlives(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	for _, c := range []struct {
		opt  time.Duration
		want int
	}{{0, int(DefaultKeepAlive / time.Second)}, {7 * time.Second, 7}} {
		p := openSchema(t, schema, &Options{KeepAlive: c.opt, NoListen: true})
		conn, err := p.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tcp, ok := conn.Conn().PgConn().Conn().(*net.TCPConn)
		if !ok {
			conn.Release()
			t.Skipf("the test server is not reached over TCP (%T)", conn.Conn().PgConn().Conn())
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var on, idle, intvl, cnt int
		var gerr error
		err = raw.Control(func(fd uintptr) {
			get := func(level, opt int) int {
				v, err := syscall.GetsockoptInt(int(fd), level, opt)
				if err != nil && gerr == nil {
					gerr = err
				}
				return v
			}
			on = get(syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
			idle = get(syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
			intvl = get(syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
			cnt = get(syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT)
		})
		conn.Release()
		if err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if on == 0 || idle != c.want || intvl != c.want || cnt != keepAliveCount {
			t.Fatalf("KeepAlive %v: keep-alive on=%d idle=%ds interval=%ds count=%d, want on, %ds, %ds, %d",
				c.opt, on, idle, intvl, cnt, c.want, c.want, keepAliveCount)
		}
	}
}
