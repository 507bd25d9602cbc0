package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider"
)

// The multi-node crash test runs three runtime processes (this test binary
// re-executed) on one store, SIGKILLs one of them while they work through
// multiNodeInstances orchestrations, and checks that the survivors finish
// everything exactly once: the right output for every instance, one
// completion per activity and one OrchestrationCompleted in every history,
// and every activity the dead node had in flight run again by a survivor
// once its lease expired. The node to be killed makes sure it has such
// activities: after its first 50, it holds on to every activity it
// fetches (renewing their leases) until it dies. Not only the next few:
// under load a renewal of the nodes' one-second leases can come late, the
// lease is lost, the held activity ends and runs again elsewhere, and a
// node holding a fixed number could run out of them before the kill (it
// did once in CI: node 0 ended all 592 activities it started, and the test
// waited in vain for one in flight).

const (
	multiNodeInstances = 500
	multiNodes         = 3
	multiNodeDBEnv     = "DUROXIDE_MULTINODE_DB"
	multiNodeIDEnv     = "DUROXIDE_MULTINODE_ID"
	// multiNodeStallEnv makes a node's activities hang after that many
	// (see mnRegistry); the test sets it for the node it kills.
	multiNodeStallEnv = "DUROXIDE_MULTINODE_STALL_AFTER"
	// multiNodeLock is the nodes' lock timeout (turns and activities):
	// short, so the dead node's work moves within the test's time.
	multiNodeLock = time.Second

	mnFan      = "mn.Fan"      // int n → sum of mnWork(k) for k < n
	mnTimerFan = "mn.TimerFan" // {ms, n}: a durable timer of ms, then as mn.Fan
	mnWork     = "mn.Work"     // {id, k} → 2k; prints "start ID K" and "end ID K"
)

type mnWorkInput struct {
	ID string `json:"id"`
	K  int    `json:"k"`
}

type mnTimerInput struct {
	Ms int `json:"ms"`
	N  int `json:"n"`
}

// mnExpect is instance i's orchestration, input, activity count and output.
func mnExpect(i int) (name string, input any, n, sum int) {
	n = 2 + i%7
	if i%2 == 0 {
		return mnFan, n, n, n * (n - 1)
	}
	return mnTimerFan, mnTimerInput{Ms: 50 + (i%5)*50, N: n}, n, n * (n - 1)
}

func mnID(i int) string { return fmt.Sprintf("mn-%03d", i) }

// mnRegistry is the nodes' registry; out receives the activities' lines.
// With stallAfter > 0, the activities after the first stallAfter hang
// until their context ends: the node that is to be killed keeps
// activities in flight, whose leases must expire before a survivor can run
// them.
func mnRegistry(out io.Writer, stallAfter int64) *duroxide.Registry {
	var (
		mu      sync.Mutex
		started atomic.Int64
	)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	reg := duroxide.NewRegistry()
	fan := func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		tasks := make([]*duroxide.Task, n)
		for k := range n {
			tasks[k] = ctx.ScheduleActivity(mnWork, mnWorkInput{ID: ctx.InstanceID(), K: k})
		}
		sum := 0
		for _, t := range tasks {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	duroxide.RegisterOrchestration(reg, mnFan, fan)
	duroxide.RegisterOrchestration(reg, mnTimerFan, func(ctx *duroxide.OrchestrationContext, in mnTimerInput) (int, error) {
		if err := ctx.ScheduleTimer(time.Duration(in.Ms) * time.Millisecond).Await(nil); err != nil {
			return 0, err
		}
		return fan(ctx, in.N)
	})
	duroxide.RegisterActivity(reg, mnWork, func(ctx context.Context, in mnWorkInput) (int, error) {
		say("start %s %d", in.ID, in.K)
		if n := started.Add(1); stallAfter > 0 && n > stallAfter {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		say("end %s %d", in.ID, in.K)
		return 2 * in.K, nil
	})
	return reg
}

// multiNodeChild is one node: it runs the registry on the store until its
// standard input closes, then shuts down gracefully.
func multiNodeChild(t *testing.T, db, id string) {
	stallAfter, _ := strconv.ParseInt(os.Getenv(multiNodeStallEnv), 10, 64)
	s := openTestDB(t, db)
	defer s.Close()
	rt, err := duroxide.StartRuntime(context.Background(), s, mnRegistry(os.Stdout, stallAfter), &duroxide.RuntimeOptions{
		OrchestratorLockTimeout: multiNodeLock,
		WorkerLockTimeout:       multiNodeLock,
		PollInterval:            100 * time.Millisecond,
		WorkerID:                "node-" + id,
		Logger:                  quietLogger(),
	})
	if err != nil {
		t.Fatalf("node %s: StartRuntime: %v", id, err)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatalf("node %s: Shutdown: %v", id, err)
	}
}

func TestMultiNodeCrashSQLite(t *testing.T) {
	if db := os.Getenv(multiNodeDBEnv); db != "" {
		multiNodeChild(t, db, os.Getenv(multiNodeIDEnv))
		return
	}
	if testing.Short() {
		t.Skip("runs three runtime processes")
	}
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGKILL")
	}
	testMultiNodeCrash(t, "^TestMultiNodeCrashSQLite$", "sqlite:"+filepath.Join(t.TempDir(), "shared.db"))
}

func TestMultiNodeCrashPostgres(t *testing.T) {
	if db := os.Getenv(multiNodeDBEnv); db != "" {
		multiNodeChild(t, db, os.Getenv(multiNodeIDEnv))
		return
	}
	if testing.Short() {
		t.Skip("runs three runtime processes")
	}
	testMultiNodeCrash(t, "^TestMultiNodeCrashPostgres$", postgresTestDB(t, "multinode"))
}

// postgresTestDB returns a --db URL of a fresh schema in the database
// $DUROXIDE_TEST_POSTGRES names, dropped when the test ends, or skips the
// test.
func postgresTestDB(t *testing.T, name string) string {
	t.Helper()
	dsn := os.Getenv("DUROXIDE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("DUROXIDE_TEST_POSTGRES is not set: set it to a PostgreSQL URL (postgres://user@host/db?sslmode=disable) to run the PostgreSQL tests")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DUROXIDE_TEST_POSTGRES: %v", err)
	}
	schema := fmt.Sprintf("test_%s_%d", name, time.Now().UnixNano())
	q := u.Query()
	q.Set(storeurl.SchemaParam, schema)
	u.RawQuery = q.Encode()
	base := *u
	bq := base.Query()
	bq.Del(storeurl.SchemaParam)
	base.RawQuery = bq.Encode()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := storeurl.DropPostgresSchema(ctx, base.String(), schema); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return u.String()
}

// node is one runtime child process.
type node struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *lineWriter
	exited chan struct{}
}

func startNode(t *testing.T, run, db string, id int) *node {
	t.Helper()
	n := &node{stdout: newLineWriter(), exited: make(chan struct{})}
	n.cmd = exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v=false")
	n.cmd.Env = append(os.Environ(), multiNodeDBEnv+"="+db, fmt.Sprintf("%s=%d", multiNodeIDEnv, id))
	if id == 0 {
		// The node to be killed: it runs 50 activities, then holds on to
		// every further one until it dies.
		n.cmd.Env = append(n.cmd.Env, multiNodeStallEnv+"=50")
	}
	n.cmd.Stdout = n.stdout
	n.cmd.Stderr = os.Stderr
	var err error
	if n.stdin, err = n.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting node %d: %v", id, err)
	}
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.exited
	})
	n.stdout.waitLine(t, "ready", n.exited)
	return n
}

// activities returns the activities (instance and index) the node
// started and those it finished.
func (n *node) activities() (started, ended map[string]bool) {
	started, ended = map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(n.stdout.String()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		switch f[0] {
		case "start":
			started[f[1]+" "+f[2]] = true
		case "end":
			ended[f[1]+" "+f[2]] = true
		}
	}
	return started, ended
}

func testMultiNodeCrash(t *testing.T, run, db string) {
	t.Parallel()
	ctx := t.Context()
	s := openTestDB(t, db)
	t.Cleanup(func() { _ = s.Close() })
	client := duroxide.NewClient(s)
	// The instances start once every node is up: started before, the
	// first nodes (node 0 stalls after 50 activities, the second does
	// not) could complete all of them while the last child process still
	// starts (slow under -race), before the kill below is even considered.
	began := time.Now()
	nodes := make([]*node, multiNodes)
	for i := range nodes {
		nodes[i] = startNode(t, run, db, i)
	}
	for i := range multiNodeInstances {
		name, input, _, _ := mnExpect(i)
		if err := client.StartOrchestration(ctx, mnID(i), name, input, nil); err != nil {
			t.Fatalf("StartOrchestration(%s): %v", mnID(i), err)
		}
	}
	completed := func() int64 {
		c, err := s.Counts(ctx)
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		return c.ByStatus[provider.StatusCompleted]
	}
	// Kill node 0 once a fifth is done and it holds activities in flight
	// (the ones it stalls after its first 50).
	victim := nodes[0]
	var done int64
	var vStarted, vEnded int
	defer func() {
		if t.Failed() {
			t.Logf("at the failure: %d of %d instances completed; node 0 started %d activities and ended %d",
				done, multiNodeInstances, vStarted, vEnded)
		}
	}()
	// The limit only guards against a hang: under CI's load (this runs
	// beside the stores' -race suites on two cores) the three child
	// processes took over 90 s once.
	pollUntil(t, "a fifth of the instances to complete", 5*time.Minute, func() bool {
		done = completed()
		started, ended := victim.activities()
		vStarted, vEnded = len(started), len(ended)
		return done >= multiNodeInstances/5 && vStarted > vEnded
	})
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	<-victim.exited
	atKill := completed()
	if atKill >= multiNodeInstances {
		t.Fatalf("all %d instances completed before the kill: the test observed no crash", multiNodeInstances)
	}
	started, ended := victim.activities()
	inFlight := []string{}
	for a := range started {
		if !ended[a] {
			inFlight = append(inFlight, a)
		}
	}
	t.Logf("SIGKILLed node 0 after %s with %d/%d completed; it had run %d activities, %d in flight",
		time.Since(began).Round(time.Millisecond), atKill, multiNodeInstances, len(started), len(inFlight))
	if len(inFlight) == 0 {
		t.Fatalf("node 0 had no activity in flight when it was killed: the kill tested nothing")
	}

	pollUntil(t, "every instance to complete on the survivors", 5*time.Minute, func() bool { return completed() == multiNodeInstances })
	t.Logf("the survivors completed the remaining %d; every instance done %s after the start", multiNodeInstances-atKill, time.Since(began).Round(time.Millisecond))

	for i := range multiNodeInstances {
		id := mnID(i)
		_, _, n, want := mnExpect(i)
		st, err := client.GetStatus(ctx, id)
		if err != nil {
			t.Fatalf("GetStatus(%s): %v", id, err)
		}
		var sum int
		if err := st.Decode(&sum); err != nil || sum != want {
			t.Errorf("%s: output %s (%v), want %d", id, st.Output, err, want)
		}
		evs, err := client.GetHistory(ctx, id, 0)
		if err != nil {
			t.Fatalf("GetHistory(%s): %v", id, err)
		}
		checkHistory(t, id, n, evs)
	}

	// Every activity the dead node had in flight was run again by a
	// survivor once its lease expired.
	rerun := map[string]bool{}
	for _, n := range nodes[1:] {
		st, _ := n.activities()
		for a := range st {
			rerun[a] = true
		}
	}
	for _, a := range inFlight {
		if !rerun[a] {
			t.Errorf("activity %s, in flight on the dead node, was not run by a survivor", a)
		}
	}

	// Nothing is left behind, and the survivors stop gracefully.
	pollUntil(t, "empty queues", 30*time.Second, func() bool {
		d, err := s.QueueDepths(ctx)
		if err != nil {
			t.Fatalf("QueueDepths: %v", err)
		}
		return *d == (provider.QueueDepths{})
	})
	for i, n := range nodes[1:] {
		_ = n.stdin.Close()
		select {
		case <-n.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d did not stop within 30s of its input closing", i+1)
		}
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("node %d exited %d", i+1, code)
		}
	}
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}
