package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TestServeSurvivesSIGKILL is the acceptance test of the CLI: a real
// `duroxide serve --demo` process is killed with SIGKILL while it works
// through 200 fan-outs, restarted on the same store, and must finish every
// instance exactly once: right outputs, one completion per activity in
// each history, and empty queues.
func TestServeSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the duroxide binary and runs it in child processes")
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops the child process with SIGINT")
	}
	t.Parallel()
	const instances = 200
	width := func(i int) int { return 20 + i%30 }
	id := func(i int) string { return fmt.Sprintf("fan-%03d", i) }

	began := time.Now()
	bin := buildCLI(t)
	t.Logf("built the binary in %s", time.Since(began).Round(time.Millisecond))

	path := filepath.Join(t.TempDir(), "crash.db")
	db := "sqlite:" + path
	ctx := t.Context()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	client := duroxide.NewClient(store)

	// Start everything first, so the server has a backlog from its first
	// moment and the kill lands in the middle of it.
	for i := range instances {
		if err := client.StartOrchestration(ctx, id(i), demo.FanOut, width(i), nil); err != nil {
			t.Fatalf("StartOrchestration(%s): %v", id(i), err)
		}
	}

	first := startServe(t, bin, db)
	t0 := time.Now()
	// Kill once a quarter is done: completed, half-done and untouched
	// instances all meet the crash.
	done := waitCompleted(t, store, time.Minute, func(n int64) bool { return n >= instances/4 })
	first.kill(t)
	killedAfter := time.Since(t0)
	if done >= instances {
		t.Fatalf("all %d instances completed before the kill: the test observed no crash", done)
	}
	completedAtKill := countCompleted(t, store)
	depths, err := store.QueueDepths(ctx)
	if err != nil {
		t.Fatalf("QueueDepths: %v", err)
	}
	t.Logf("SIGKILL after %s with %d/%d completed; queues at the kill: %+v",
		killedAfter.Round(time.Millisecond), completedAtKill, instances, *depths)

	second := startServe(t, bin, db)
	t1 := time.Now()
	waitCompleted(t, store, 2*time.Minute, func(n int64) bool { return n == instances })
	t.Logf("restarted server completed the remaining %d in %s", instances-completedAtKill, time.Since(t1).Round(time.Millisecond))

	for i := range instances {
		st, err := client.GetStatus(ctx, id(i))
		if err != nil {
			t.Fatalf("GetStatus(%s): %v", id(i), err)
		}
		var sum int
		if err := st.Decode(&sum); err != nil {
			t.Fatalf("%s: %v", id(i), err)
		}
		n := width(i)
		if want := n * (n - 1) / 2; sum != want {
			t.Errorf("%s: FanOut(%d) = %d, want %d", id(i), n, sum, want)
		}
		evs, err := client.GetHistory(ctx, id(i), 0)
		if err != nil {
			t.Fatalf("GetHistory(%s): %v", id(i), err)
		}
		checkHistory(t, id(i), n, evs)
	}

	// Nothing left behind: no duplicate completions waiting, no locks.
	waitEmptyQueues(t, store)

	if code := second.interrupt(t); code != 0 {
		t.Fatalf("the restarted server exited %d after SIGINT; stderr:\n%s", code, second.stderr)
	}
	if out := second.stdout.String(); !strings.Contains(out, "runtime stopped") || !strings.Contains(out, "\nstopped\n") {
		t.Fatalf("the restarted server did not report a graceful shutdown:\n%s", out)
	}
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}

// checkHistory asserts that one fan-out's history has n activities, each
// completed exactly once, and exactly one OrchestrationCompleted.
func checkHistory(t *testing.T, id string, n int, evs []history.Event) {
	t.Helper()
	scheduled := map[int64]int{} // ActivityScheduled event ID → completions
	completed := 0
	for _, e := range evs {
		switch e.Kind {
		case history.ActivityScheduled:
			scheduled[e.EventID] = 0
		case history.OrchestrationCompleted:
			completed++
		}
	}
	for _, e := range evs {
		if e.Kind == history.ActivityCompleted || e.Kind == history.ActivityFailed {
			c, ok := scheduled[e.SourceEventID]
			if !ok {
				t.Errorf("%s: %s event %d completes unknown activity %d", id, e.Kind, e.EventID, e.SourceEventID)
			}
			scheduled[e.SourceEventID] = c + 1
		}
	}
	if completed != 1 {
		t.Errorf("%s: %d OrchestrationCompleted events, want 1", id, completed)
	}
	if len(scheduled) != n {
		t.Errorf("%s: %d activities scheduled, want %d", id, len(scheduled), n)
	}
	for src, c := range scheduled {
		if c != 1 {
			t.Errorf("%s: activity %d has %d completions, want exactly 1", id, src, c)
		}
	}
}

// buildCLI builds cmd/duroxide into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	// go test puts the go command that runs it first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the CLI with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "duroxide")
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/duroxide/duroxide-go/cmd/duroxide")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// child is a `duroxide serve` child process.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr *lineWriter
	exited         chan struct{} // closed when the process has exited
	err            error         // cmd.Wait's error, once exited
}

func startServe(t *testing.T, bin, db string) *child {
	t.Helper()
	c := &child{stdout: newLineWriter(), stderr: newLineWriter(), exited: make(chan struct{})}
	c.cmd = exec.Command(bin, "serve", "--demo", "--db", db, "--addr", "127.0.0.1:0")
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	url := c.stdout.waitLine(t, "listening on ", c.exited)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("serve printed the URL %q", url)
	}
	return c
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-c.exited
}

// interrupt sends SIGINT and returns the exit code.
func (c *child) interrupt(t *testing.T) int {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("SIGINT: %v", err)
	}
	select {
	case <-c.exited:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not stop within 30s of SIGINT; output:\n%s", c.stdout)
		return -1
	}
}

func countCompleted(t *testing.T, store *sqlite.Provider) int64 {
	t.Helper()
	c, err := store.Counts(t.Context())
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return c.ByStatus[provider.StatusCompleted]
}

// waitCompleted polls the store, which another process writes, until the
// number of Completed instances satisfies ok, and returns it.
func waitCompleted(t *testing.T, store *sqlite.Provider, limit time.Duration, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.After(limit)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if n := countCompleted(t, store); ok(n) {
			return n
		}
		select {
		case <-deadline:
			c, _ := store.Counts(context.WithoutCancel(t.Context()))
			t.Fatalf("instances did not complete within %s: counts %+v", limit, c)
		case <-tick.C:
		}
	}
}

// waitEmptyQueues polls until both queues are empty.
func waitEmptyQueues(t *testing.T, store *sqlite.Provider) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := store.QueueDepths(t.Context())
		if err != nil {
			t.Fatalf("QueueDepths: %v", err)
		}
		if *d == (provider.QueueDepths{}) {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("queues not empty 30s after every instance completed: %+v", *d)
		case <-tick.C:
		}
	}
}
