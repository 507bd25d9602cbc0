package duroxidetest

import (
	"strings"
	"sync"
)

// testLog writes log lines to the test's log until the test ends; lines
// written later (by an activity that ignored its canceled context) are
// dropped, since testing forbids logging after a test completes.
type testLog struct {
	mu     sync.Mutex
	t      TB
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
