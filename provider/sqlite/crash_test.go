package sqlite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// The crash test runs a small workload in a child process (this test binary
// re-executed), kills it with SIGKILL at a random step, and checks that the
// store lost no accepted work and did nothing twice; after a few crashes the
// parent drains the rest and checks every instance completed exactly once
// with the right result.
//
// The workload: crashInstances orchestrations, each scheduling crashActs
// activities in its first turn; activity n returns n*10; the orchestration
// completes with their sum once every completion is in its history. The
// instances share crashKeys execution lock keys, all queued starts
// (LockRequest.Queue), so at most one instance per key runs at a time and
// each terminal ack hands the key to the next.

const (
	crashInstances = 40
	crashActs      = 5
	crashChildEnv  = "DUROXIDE_SQLITE_CRASH_CHILD"
	crashOffsetEnv = "DUROXIDE_SQLITE_CRASH_CLOCK_OFFSET"
	crashLock      = 30 * time.Second
	crashKeys      = 10
	crashLockTTL   = 24 * time.Hour // outlives every clock jump of the test
)

// crashKey is the execution lock key of instance i.
func crashKey(i int) string { return "key-" + strconv.Itoa(i%crashKeys) }

func TestCrashLosesNothingAndDoesNothingTwice(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	ctx := context.Background()

	setup := openFile(t, path, nil)
	for i := range crashInstances {
		id := "crash-" + strconv.Itoa(i)
		msg := providertest.HammerStart(id)
		msg.Create.Lock = &provider.LockRequest{Key: crashKey(i), TTL: crashLockTTL, Queue: true}
		if _, err := setup.Enqueue(ctx, msg); err != nil {
			t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
	if err := setup.Close(); err != nil {
		t.Fatal(err)
	}

	seed := rand.Uint64()
	t.Logf("kill points seeded with %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	// Each child runs on a clock an hour ahead of the previous one, so the
	// locks a killed child held have expired for the next.
	for round := 1; round <= 4; round++ {
		killAfter := 5 + rng.IntN(60)
		finished := runCrashChild(t, path, time.Duration(round)*time.Hour, killAfter)
		p := openFile(t, path, &Options{Clock: func() time.Time { return time.Now().Add(time.Duration(round) * time.Hour) }})
		checkCrashInvariants(t, p)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if finished {
			break
		}
	}

	// Drain what is left in this process, on a clock past every lock.
	offset := 10 * time.Hour
	p := openFile(t, path, &Options{Clock: func() time.Time { return time.Now().Add(offset) }})
	w := &crashWorkload{p: p}
	for !w.done(ctx) {
		progressed, err := w.step(ctx, 0)
		if err != nil {
			t.Fatalf("draining: %v", err)
		}
		if !progressed && !w.done(ctx) {
			t.Fatal("draining made no progress but instances are not all completed")
		}
	}
	checkCrashInvariants(t, p)
	checkCrashResults(t, p)
}

// runCrashChild runs one child until it has reported killAfter steps, then
// kills it. It reports whether the child finished the workload first.
func runCrashChild(t *testing.T, path string, offset time.Duration, killAfter int) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLosesNothingAndDoesNothingTwice$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashOffsetEnv+"="+offset.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	steps, finished := 0, false
	for sc.Scan() {
		switch sc.Text() {
		case "step":
			steps++
		case "done":
			finished = true
		}
		if finished || steps >= killAfter {
			break
		}
	}
	if !finished {
		_ = cmd.Process.Kill() // SIGKILL: no deferred cleanup runs in the child
	}
	_ = cmd.Wait()
	t.Logf("child on clock +%v: %d steps, finished=%v", offset, steps, finished)
	return finished
}

// crashChild is the child process: it works until killed or done.
func crashChild(path string) {
	offset, err := time.ParseDuration(os.Getenv(crashOffsetEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	p, err := Open(context.Background(), path, &Options{
		Clock:  func() time.Time { return time.Now().Add(offset) },
		Logger: quietLogger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	w := &crashWorkload{p: p}
	var mu sync.Mutex
	report := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(s)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 { // two orchestration and two activity loops, so writes group-commit
		wg.Go(func() {
			for !w.done(ctx) {
				progressed, err := w.step(ctx, g%2+1)
				if err != nil {
					fmt.Fprintln(os.Stderr, "crash child:", err)
					os.Exit(2)
				}
				if progressed {
					report("step")
				}
			}
		})
	}
	wg.Wait()
	report("done")
	os.Exit(0)
}

// crashWorkload drives the workload against a store.
type crashWorkload struct{ p *Provider }

// done reports whether every instance completed.
func (w *crashWorkload) done(ctx context.Context) bool {
	c, err := w.p.Counts(ctx)
	return err == nil && c.ByStatus[provider.StatusCompleted] == crashInstances
}

// step runs one orchestration turn (which 1), one activity (which 2), or
// one of each (which 0). It reports whether anything was done.
func (w *crashWorkload) step(ctx context.Context, which int) (bool, error) {
	progressed := false
	if which != 2 {
		it, err := provider.FetchOrchestrationItem(ctx, w.p, provider.FetchOptions{LockTimeout: crashLock})
		if err != nil {
			return false, err
		}
		if it != nil {
			if _, err := w.p.AckOrchestrationItem(ctx, crashTurn(it)); err != nil {
				return false, fmt.Errorf("acking %s: %w", it.InstanceID, err)
			}
			progressed = true
		}
	}
	if which != 1 {
		l, err := provider.FetchWorkItem(ctx, w.p, provider.WorkFetchOptions{LockTimeout: crashLock})
		if err != nil {
			return false, err
		}
		if l != nil {
			done := &provider.OrchestratorMessage{
				InstanceID: l.InstanceID,
				Item: history.WorkItem{
					Kind: history.WorkActivityCompleted, InstanceID: l.InstanceID, ExecutionID: l.ExecutionID,
					ID: l.ActivityID, Output: json.RawMessage(strconv.FormatInt(l.ActivityID*10, 10)),
				},
			}
			if _, err := w.p.AckWorkItem(ctx, &provider.WorkAck{LockToken: l.LockToken, Completion: done}); err != nil {
				return false, fmt.Errorf("acking activity %d of %s: %w", l.ActivityID, l.InstanceID, err)
			}
			progressed = true
		}
	}
	return progressed, nil
}

// crashTurn computes one turn of the workload's orchestration. Completions
// already in history are ignored, as a runtime does.
func crashTurn(it *provider.OrchestrationItem) *provider.TurnAck {
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}
	next := int64(len(it.History)) + 1
	add := func(ev history.Event) {
		ev.EventID = next
		ev.TimestampMs = 1
		ack.History = append(ack.History, ev)
		next++
	}
	if len(it.History) == 0 {
		add(history.Event{Kind: history.OrchestrationStarted, Name: "Sum", Input: json.RawMessage("null")})
		for range crashActs {
			id := next
			add(history.Event{Kind: history.ActivityScheduled, Name: "Times10"})
			ack.WorkerItems = append(ack.WorkerItems, &provider.WorkerMessage{
				InstanceID: it.InstanceID, ExecutionID: 1, ActivityID: id,
				Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: it.InstanceID, ExecutionID: 1, ID: id, Name: "Times10"},
			})
		}
		ack.Metadata = provider.ExecutionMetadata{OrchestrationName: "Sum", Status: provider.StatusRunning}
	}
	seen := map[int64]bool{}
	var sum int64
	for _, ev := range append(append([]history.Event(nil), it.History...), ack.History...) {
		if ev.Kind == history.ActivityCompleted {
			seen[ev.SourceEventID] = true
			n, _ := strconv.ParseInt(string(ev.Output), 10, 64)
			sum += n
		}
	}
	for _, m := range it.Messages {
		if m.Kind != history.WorkActivityCompleted || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		n, _ := strconv.ParseInt(string(m.Output), 10, 64)
		sum += n
		add(history.Event{Kind: history.ActivityCompleted, SourceEventID: m.ID, Output: m.Output})
	}
	if len(seen) == crashActs && !historyHas(it.History, history.OrchestrationCompleted) {
		add(history.Event{Kind: history.OrchestrationCompleted, Output: json.RawMessage(strconv.FormatInt(sum, 10))})
		ack.Metadata = provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: json.RawMessage(strconv.FormatInt(sum, 10))}
	}
	return ack
}

func historyHas(evs []history.Event, k history.EventKind) bool {
	return slices.ContainsFunc(evs, func(ev history.Event) bool { return ev.Kind == k })
}

// checkCrashInvariants checks, for every instance, that history is gap-free
// and that every scheduled activity is in exactly one place: still queued
// for a worker, completed and queued for its orchestration, or completed in
// history; and that nothing completed twice.
func checkCrashInvariants(t *testing.T, p *Provider) {
	t.Helper()
	checkReadyTable(t, p)
	checkCrashLocks(t, p)
	ctx := context.Background()
	for i := range crashInstances {
		id := "crash-" + strconv.Itoa(i)
		evs, err := p.ReadHistory(ctx, id, 0)
		if err != nil {
			t.Fatalf("ReadHistory(%s): %v", id, err)
		}
		var workerRows, queuedStarts int
		queryCount(t, p, `SELECT count(*) FROM worker_queue WHERE instance_id = ?1`, &workerRows, id)
		queryCount(t, p, `SELECT count(*) FROM orchestrator_queue WHERE instance_id = ?1 AND json_extract(work_item, '$.type') = 'StartOrchestration'`, &queuedStarts, id)
		var lockQueued int
		queryCount(t, p, `SELECT count(*) FROM lock_queue WHERE instance_id = ?1`, &lockQueued, id)
		if len(evs) == 0 {
			// Not started yet: the start message must still be queued, or
			// wait for the lock.
			if queuedStarts+lockQueued != 1 || workerRows != 0 {
				t.Fatalf("%s: no history, %d queued starts, %d starts waiting for the lock and %d worker rows; want one start and 0",
					id, queuedStarts, lockQueued, workerRows)
			}
			continue
		}
		if lockQueued != 0 {
			t.Fatalf("%s: started, but its start also waits for the lock", id)
		}
		if queuedStarts != 0 {
			t.Fatalf("%s: started, but its start message is still queued (%d)", id, queuedStarts)
		}
		completedIn := map[int64]int{}
		scheduled := map[int64]bool{}
		finished := 0
		for i, ev := range evs {
			if ev.EventID != int64(i+1) {
				t.Fatalf("%s: event %d has id %d: history has a gap or a duplicate", id, i+1, ev.EventID)
			}
			switch ev.Kind {
			case history.ActivityScheduled:
				scheduled[ev.EventID] = true
			case history.ActivityCompleted:
				completedIn[ev.SourceEventID]++
			case history.OrchestrationCompleted:
				finished++
			}
		}
		if len(scheduled) != crashActs || finished > 1 {
			t.Fatalf("%s: %d activities scheduled, %d completions of the orchestration", id, len(scheduled), finished)
		}
		for act := range scheduled {
			var rows, msgs int
			queryCount(t, p, `SELECT count(*) FROM worker_queue WHERE instance_id = ?1 AND activity_id = ?2`, &rows, id, act)
			queryCount(t, p, `SELECT count(*) FROM orchestrator_queue WHERE instance_id = ?1 AND json_extract(work_item, '$.type') = 'ActivityCompleted' AND json_extract(work_item, '$.id') = ?2`, &msgs, id, act)
			if places := rows + msgs + completedIn[act]; places != 1 {
				for _, ev := range evs {
					t.Logf("history: %+v", ev)
				}
				dump, _ := p.readers.QueryContext(context.Background(), `SELECT id, work_item, lock_token, attempt_count FROM orchestrator_queue WHERE instance_id = ?1`, id)
				for dump.Next() {
					var qid, att int
					var wi string
					var tok *string
					_ = dump.Scan(&qid, &wi, &tok, &att)
					t.Logf("queued: %d %s %v %d", qid, wi, tok, att)
				}
				dump.Close()
				t.Fatalf("%s activity %d: %d worker rows, %d queued completions, %d completions in history; want exactly one in all",
					id, act, rows, msgs, completedIn[act])
			}
		}
	}
}

// checkCrashResults checks every instance completed once with the right sum.
func checkCrashResults(t *testing.T, p *Provider) {
	t.Helper()
	want := int64(0)
	for n := int64(2); n < 2+crashActs; n++ {
		want += n * 10
	}
	for i := range crashInstances {
		id := "crash-" + strconv.Itoa(i)
		info, err := p.GetInstance(context.Background(), id)
		if err != nil {
			t.Fatalf("GetInstance(%s): %v", id, err)
		}
		if info.Status != provider.StatusCompleted || string(info.Output) != strconv.FormatInt(want, 10) {
			t.Fatalf("%s: status %s output %s, want Completed %d", id, info.Status, info.Output, want)
		}
	}
	var left int
	queryCount(t, p, `SELECT (SELECT count(*) FROM orchestrator_queue) + (SELECT count(*) FROM worker_queue)`, &left)
	if left != 0 {
		t.Fatalf("%d messages left in the queues after every instance completed", left)
	}
	queryCount(t, p, `SELECT (SELECT count(*) FROM execution_locks) + (SELECT count(*) FROM lock_queue)`, &left)
	if left != 0 {
		t.Fatalf("%d execution locks or queued starts left after every instance completed", left)
	}
}

// checkCrashLocks checks the execution locks: per key, the holder is the
// only started, unfinished instance (mutual exclusion), the lock is held
// exactly while an instance of the key is unfinished, and no start waits
// for a lock nobody holds.
func checkCrashLocks(t *testing.T, p *Provider) {
	t.Helper()
	for k := range crashKeys {
		key := crashKey(k)
		var members []string
		for i := k; i < crashInstances; i += crashKeys {
			members = append(members, "crash-"+strconv.Itoa(i))
		}
		list, _ := json.Marshal(members)
		var locks, running, unfinished, holderLive, holderStarted, orphans int
		queryCount(t, p, `SELECT count(*) FROM execution_locks WHERE lock_key = ?1`, &locks, key)
		queryCount(t, p, `SELECT count(*) FROM instances AS i WHERE i.instance_id IN (SELECT value FROM json_each(?1))
			AND i.status NOT IN ('Completed', 'Failed', 'Canceled')
			AND EXISTS (SELECT 1 FROM history AS h WHERE h.instance_id = i.instance_id)`, &running, string(list))
		queryCount(t, p, `SELECT count(*) FROM instances WHERE instance_id IN (SELECT value FROM json_each(?1))
			AND status NOT IN ('Completed', 'Failed', 'Canceled')`, &unfinished, string(list))
		queryCount(t, p, `SELECT count(*) FROM execution_locks AS l JOIN instances AS i ON i.instance_id = l.instance_id
			WHERE l.lock_key = ?1 AND i.status NOT IN ('Completed', 'Failed', 'Canceled')`, &holderLive, key)
		queryCount(t, p, `SELECT count(*) FROM execution_locks AS l WHERE l.lock_key = ?1
			AND EXISTS (SELECT 1 FROM history AS h WHERE h.instance_id = l.instance_id)`, &holderStarted, key)
		queryCount(t, p, `SELECT count(*) FROM lock_queue AS q WHERE q.lock_key = ?1
			AND NOT EXISTS (SELECT 1 FROM execution_locks AS l WHERE l.lock_key = q.lock_key)`, &orphans, key)
		switch {
		case running > 1:
			t.Fatalf("%s: %d instances started and unfinished at once; the lock allows one", key, running)
		case running == 1 && holderStarted != 1:
			t.Fatalf("%s: the running instance does not hold the lock", key)
		case unfinished > 0 && (locks != 1 || holderLive != 1):
			t.Fatalf("%s: %d unfinished instances but %d locks (%d with an unfinished holder)", key, unfinished, locks, holderLive)
		case unfinished == 0 && locks != 0:
			t.Fatalf("%s: every instance finished but the lock remains", key)
		case orphans != 0:
			t.Fatalf("%s: %d starts wait for a lock nobody holds", key, orphans)
		}
	}
}

func queryCount(t *testing.T, p *Provider, q string, dst *int, args ...any) {
	t.Helper()
	if err := p.readers.QueryRowContext(context.Background(), q, args...).Scan(dst); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("query %q: %v", q, err)
	}
}

// checkReadyTable checks that orchestrator_ready, which triggers maintain
// (with each instance's orchestration name and version: migration 0016),
// equals its definition recomputed from the queue and the locks.
func checkReadyTable(t *testing.T, p *Provider) {
	t.Helper()
	const recomputed = `SELECT q.instance_id,
       max(min(q.visible_at), coalesce((SELECT l.locked_until FROM instance_locks AS l WHERE l.instance_id = q.instance_id), 0)),
       min(q.id),
       coalesce((SELECT i.orchestration_name FROM instances AS i WHERE i.instance_id = q.instance_id), ''),
       coalesce((SELECT i.orchestration_version FROM instances AS i WHERE i.instance_id = q.instance_id), '')
FROM orchestrator_queue AS q GROUP BY q.instance_id`
	const stored = `SELECT instance_id, ready_at, first_id, orchestration_name, orchestration_version FROM orchestrator_ready`
	var diff int
	queryCount(t, p, `SELECT (SELECT count(*) FROM (`+stored+` EXCEPT `+recomputed+`))
     + (SELECT count(*) FROM (`+recomputed+` EXCEPT `+stored+`))`, &diff)
	if diff != 0 {
		t.Fatalf("orchestrator_ready differs from its recomputation in %d rows", diff)
	}
}
