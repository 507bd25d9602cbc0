package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

func openFile(t *testing.T, path string, opts *Options) *Provider {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	p, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestOpenRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts Options
	}{
		{"synchronous OFF", Options{Synchronous: "OFF"}},
		{"synchronous garbage", Options{Synchronous: "sometimes"}},
		{"negative busy timeout", Options{BusyTimeout: -time.Second}},
		{"sub-millisecond busy timeout", Options{BusyTimeout: time.Microsecond}},
		{"negative readers", Options{MaxReaders: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "x.db")
			p, err := Open(t.Context(), path, &c.opts)
			if err == nil {
				_ = p.Close()
				t.Fatalf("Open with %+v succeeded, want an error", c.opts)
			}
		})
	}
}

func TestOpenAcceptsValidOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		opts     *Options
		wantSync int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"nil options", nil, 1},
		{"zero options", &Options{}, 1},
		{"full, lower case", &Options{Synchronous: "full"}, 2},
		{"normal", &Options{Synchronous: "NORMAL", BusyTimeout: time.Second, MaxReaders: 1}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var opts *Options
			if c.opts != nil {
				o := *c.opts
				o.Logger = quietLogger
				opts = &o
			}
			p, err := Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer p.Close()
			var sync int
			if err := p.writer.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if sync != c.wantSync {
				t.Fatalf("PRAGMA synchronous = %d, want %d", sync, c.wantSync)
			}
		})
	}
}

func TestWALModeAndPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "wal.db"), &Options{BusyTimeout: 1234 * time.Millisecond, MaxReaders: 3})
	var mode string
	if err := p.writer.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode = %q, want wal", mode)
	}
	// Hold several reader connections at once so each is a distinct one.
	ctx := t.Context()
	var conns []*sql.Conn
	for range 3 {
		c, err := p.readers.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var busy, queryOnly int
		if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA query_only").Scan(&queryOnly); err != nil {
			t.Fatal(err)
		}
		if busy != 1234 || queryOnly != 1 {
			t.Fatalf("reader %d: busy_timeout %d, query_only %d; want 1234, 1", i, busy, queryOnly)
		}
		_ = c.Close()
	}
}

func migrationRows(t *testing.T, p *Provider) []int {
	t.Helper()
	rows, err := p.writer.QueryContext(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestMigrationsRecordedAndIdempotent(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}
	path := filepath.Join(t.TempDir(), "m.db")
	p := openFile(t, path, nil)
	if got := migrationRows(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("schema_migrations = %v, want %v", got, want)
	}
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate on a migrated store: %v", err)
	}
	_ = p.Close()
	p2 := openFile(t, path, nil)
	if got := migrationRows(t, p2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopen, schema_migrations = %v, want %v", got, want)
	}
}

func TestNoMigrateThenMigrate(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "n.db"), &Options{NoMigrate: true})
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("a")); err == nil {
		t.Fatal("Enqueue on an unmigrated store succeeded")
	}
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("a")); err != nil {
		t.Fatalf("Enqueue after Migrate: %v", err)
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "newer.db")
	p := openFile(t, path, nil)
	if _, err := p.writer.ExecContext(t.Context(), "INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 0)"); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	p2, err := Open(t.Context(), path, &Options{Logger: quietLogger})
	if err == nil {
		_ = p2.Close()
		t.Fatal("Open of a store migrated by a newer release succeeded")
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keep.db")
	p := openFile(t, path, nil)
	providertest.RunFirstTurn(t, p, "kept")
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.ReadHistory(t.Context(), "kept", 0); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("ReadHistory after Close: %v, want ErrClosed", err)
	}

	p2 := openFile(t, path, nil)
	evs, err := p2.ReadHistory(t.Context(), "kept", 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("ReadHistory after reopen = %d events, %v; want 2", len(evs), err)
	}
	in, err := p2.GetInstance(t.Context(), "kept")
	if err != nil || in.Status != provider.StatusRunning || in.CurrentExecutionID != 1 {
		t.Fatalf("GetInstance after reopen = %+v, %v", in, err)
	}
	w, err := provider.FetchWorkItem(t.Context(), p2, provider.WorkFetchOptions{LockTimeout: time.Minute})
	if err != nil || w == nil || w.ActivityID != 2 {
		t.Fatalf("FetchWorkItem after reopen = %+v, %v", w, err)
	}
}

// TestBusyFromAnotherProcessIsErrBusy holds the write lock from another
// connection (another "process") and checks the driver's SQLITE_BUSY is
// translated to the retryable provider.ErrBusy.
func TestBusyFromAnotherProcessIsErrBusy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "busy.db")
	p := openFile(t, path, &Options{BusyTimeout: time.Millisecond})
	other, err := sql.Open("sqlite", dsn(path, nil, map[string]string{"_txlock": "immediate"}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = p.Enqueue(t.Context(), providertest.HammerStart("a"))
	if !errors.Is(err, provider.ErrBusy) || !provider.IsRetryable(err) {
		t.Fatalf("Enqueue while another process writes: %v, want retryable ErrBusy", err)
	}
}

func TestInterpretErrorPassesThrough(t *testing.T) {
	t.Parallel()
	if err := interpretError(nil, nil); err != nil {
		t.Fatalf("nil -> %v", err)
	}
	for _, e := range []error{context.Canceled, provider.ErrLockLost, fmt.Errorf("x: %w", provider.ErrNotFound)} {
		if got := interpretError(e, nil); got != e {
			t.Fatalf("interpretError(%v) = %v, want it unchanged", e, got)
		}
	}
	if got := interpretError(sql.ErrConnDone, nil); !errors.Is(got, provider.ErrUnavailable) || !errors.Is(got, sql.ErrConnDone) {
		t.Fatalf("interpretError(ErrConnDone) = %v", got)
	}
}

// TestDuplicateEventIsErrDuplicateEvent checks the constraint-error mapping
// through the driver.
func TestDuplicateEventIsErrDuplicateEvent(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "dup.db"), nil)
	providertest.RunFirstTurn(t, p, "d")
	if _, err := p.Enqueue(t.Context(), providertest.HammerEvent("d")); err != nil {
		t.Fatal(err)
	}
	it := providertest.MustFetch(t, p)
	_, err := p.AckOrchestrationItem(t.Context(), &provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{{EventID: 2, Kind: history.NowRecorded, TimestampMs: 1, TimeMs: 1}},
	})
	if !errors.Is(err, provider.ErrDuplicateEvent) || provider.IsRetryable(err) {
		t.Fatalf("ack re-appending event 2: %v, want permanent ErrDuplicateEvent", err)
	}
}

// TestDuplicateEventInBatchNamesIt: a turn ack's events are appended
// several per statement; one that is already there fails the ack with
// ErrDuplicateEvent naming that event, and none of the ack's events is
// kept.
func TestDuplicateEventInBatchNamesIt(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "dup.db"), nil)
	providertest.RunFirstTurn(t, p, "d")
	if _, err := p.Enqueue(t.Context(), providertest.HammerEvent("d")); err != nil {
		t.Fatal(err)
	}
	before, err := p.ReadHistory(t.Context(), "d", 1)
	if err != nil {
		t.Fatal(err)
	}
	it := providertest.MustFetch(t, p)
	next := int64(len(before)) + 1
	var evs []history.Event
	for i := range 20 {
		id := next + int64(i)
		if i == 10 {
			id = 2 // already in the history
		}
		evs = append(evs, history.Event{EventID: id, Kind: history.NowRecorded, TimestampMs: 1, TimeMs: 1})
	}
	_, err = p.AckOrchestrationItem(t.Context(), &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, History: evs})
	if !errors.Is(err, provider.ErrDuplicateEvent) || !strings.Contains(err.Error(), "appending event 2 ") {
		t.Fatalf("ack re-appending event 2 among 20: %v, want ErrDuplicateEvent naming event 2", err)
	}
	after, err := p.ReadHistory(t.Context(), "d", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("history has %d events after the failed ack, want %d", len(after), len(before))
	}
}

// TestManyWorkItemsKeepOrder: a turn ack inserts its worker items several
// per statement; the rows still take IDs in the items' order, leased or
// not, each lease's token holds its own row, and a fetch finds the rest
// in order.
func TestManyWorkItemsKeepOrder(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "work.db"), nil)
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("w")); err != nil {
		t.Fatal(err)
	}
	it := providertest.MustFetch(t, p)
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1, LeaseFor: time.Minute,
		History:  []history.Event{{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: 1, Name: "T", Input: json.RawMessage(`1`)}},
		Metadata: provider.ExecutionMetadata{OrchestrationName: "T", Status: provider.StatusRunning, Input: json.RawMessage(`1`)}}
	// 5 not leased, 17 leased, 6 not leased: runs of 4+1, 16+1 and 4+1+1.
	for act := int64(1); act <= 28; act++ {
		m := providertest.HammerActivity("w", act)
		m.Lease = act >= 6 && act <= 22
		ack.WorkerItems = append(ack.WorkerItems, m)
	}
	res, err := p.AckOrchestrationItem(t.Context(), ack)
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := p.FetchWorkItems(t.Context(), provider.WorkFetchOptions{LockTimeout: time.Minute, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leased) != 17 || len(fetched) != 11 {
		t.Fatalf("%d leased, %d fetched, want 17 and 11", len(res.Leased), len(fetched))
	}
	all := append(append(append([]*provider.WorkItemLease{}, fetched[:5]...), res.Leased...), fetched[5:]...)
	var last int64
	for k, l := range all {
		row, ok := sqlstore.TokenRow(l.LockToken)
		if l.ActivityID != int64(k+1) || !ok || row <= last {
			t.Fatalf("item %d: activity %d, token %q (row %d after %d): want activity %d on a later row", k, l.ActivityID, l.LockToken, row, last, k+1)
		}
		last = row
	}
	for _, l := range res.Leased {
		if _, err := p.AckWorkItem(t.Context(), providertest.HammerCompletion(l)); err != nil {
			t.Fatalf("acking leased activity %d: %v", l.ActivityID, err)
		}
	}
}

// TestHotQueriesUseIndexes checks the plans of the fetch and ack paths and
// of the dispatchers' idle reads (NextVisible): no statement scans a table.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "plan.db"), nil)
	var hot []string
	for _, id := range []stmtID{
		sOrchCandidates, sLockInstances, sTagMessages, sInstanceMetas, sHistoriesOf, sPendingStarts, sInstanceHasMessages, sInstanceHasWork, sInstancesWithWork, sCheckLock,
		sInstanceQuiet, sXLockExtend, sXLockReleaseInstance, sXLockQueueDeleteInstance,
		sDeleteTagged, sDeleteLock, sAbandonLock, sUntagMessages, sSetLastError, sRenewLock, sCancelActivity,
		sUnservedTurnCandidates, sWorkCandidatesNoSession, sWorkCandidatesSession, sLockWork, sAckWork, sAbandonWork, sRenewWork,
		sTouchSession, sRenewSessions, sPurgeTree, sPurgeDeleteHistory, sPurgeDeleteOrch, sPurgeDeleteWork,
	} {
		hot = append(hot, writerSQL[id])
	}
	for _, id := range []sqlstore.Query{sqlstore.QNextVisibleOrch, sqlstore.QNextVisibleWork, sqlstore.QGetInstance,
		sqlstore.QQueueInstance, sqlstore.QQueueMessages, sqlstore.QQueueWork, sqlstore.QQueueLock,
		sqlstore.QQueueHeldLocks, sqlstore.QQueueStart, sqlstore.QStalled} {
		hot = append(hot, readerSQL[id])
	}
	param := regexp.MustCompile(`\?(\d+)`)
	// A SCAN is fine only over json_each (also aliased ids), a CTE, an
	// index, the constant row of a SELECT without FROM, or worker_routes
	// (aliased r): one row
	// per live runtime's announcement of what it serves, read by the
	// instance queue's unserved check.
	scan := regexp.MustCompile(`^SCAN (\w+)(.*)$`)
	for _, q := range hot {
		n := 0
		for _, m := range param.FindAllStringSubmatch(q, -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		rows, err := p.writer.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, make([]any, n)...)
		if err != nil {
			t.Fatalf("explain %q: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var a, b, c int
			var d string
			if err := rows.Scan(&a, &b, &c, &d); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, d)
		}
		rows.Close()
		for _, line := range plan {
			m := scan.FindStringSubmatch(line)
			if m == nil || m[1] == "json_each" || m[1] == "ids" || m[1] == "CONSTANT" || m[1] == "tree" || m[1] == "candidates" || m[1] == "c" || m[1] == "worker_routes" || m[1] == "r" || strings.Contains(m[2], "USING") {
				continue
			}
			t.Errorf("statement scans a table:\n%s\nplan:\n  %s", q, strings.Join(plan, "\n  "))
		}
	}
}

// TestConcurrentHammerNeverBusy runs 16 goroutines enqueueing, fetching and
// acking turns and activities on one store with the real clock: every call
// succeeds and every message is consumed exactly once.
func TestConcurrentHammerNeverBusy(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{false, true} {
		t.Run(fmt.Sprintf("memory=%v", memory), func(t *testing.T) {
			t.Parallel()
			path := ":memory:"
			if !memory {
				path = filepath.Join(t.TempDir(), "hammer.db")
			}
			p := openFile(t, path, nil)
			providertest.Hammer(t, []provider.Provider{p}, 16, 20)
		})
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "store 1.db")
	p := openFile(t, path, nil)
	providertest.RunFirstTurn(t, p, "x")
	_ = p.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("store file not at the given path: %v", err)
	}
	p2 := openFile(t, path, nil)
	if _, err := p2.GetInstance(t.Context(), "x"); err != nil {
		t.Fatalf("GetInstance after reopen: %v", err)
	}
}

// JSON is stored as TEXT, so operators can query it with SQLite's JSON
// functions (which read a BLOB as binary JSONB, not as JSON text).
func TestJSONColumnsAreText(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "text.db"), nil)
	ctx := context.Background()
	if err := p.enqueueWork(ctx, providertest.HammerActivity("txt", 7)); err != nil {
		t.Fatal(err)
	}
	providertest.RunFirstTurn(t, p, "txt")
	for _, q := range []string{
		`SELECT typeof(work_item) FROM worker_queue LIMIT 1`,
		`SELECT typeof(event_data) FROM history LIMIT 1`,
		`SELECT typeof(input) FROM instances LIMIT 1`,
	} {
		var typ string
		if err := p.readers.QueryRowContext(ctx, q).Scan(&typ); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if typ != "text" {
			t.Errorf("%s = %q, want text", q, typ)
		}
	}
	if _, err := p.Enqueue(ctx, providertest.HammerEvent("txt")); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := p.readers.QueryRowContext(ctx, `SELECT json_extract(work_item, '$.name') FROM orchestrator_queue LIMIT 1`).Scan(&name); err != nil || name != "go" {
		t.Fatalf("json_extract(work_item, '$.name') = %q, %v; want \"go\"", name, err)
	}
}

// A store created before migration 0002 gets its scheduling table filled
// from the queued messages and locks it already has.
func TestMigration0002BackfillsReadyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	p := openMigratedBefore(t, path, 2)
	// Data as release 0001 wrote it: messages for a free instance, a locked
	// one with a late arrival, and a delayed timer.
	for _, q := range []string{
		`INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES
			('free', '{}', 100, 100), ('free', '{}', 50, 100), ('busy', '{}', 10, 10), ('busy', '{}', 20, 20), ('later', '{}', 9000, 1)`,
		`INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at) VALUES ('busy', 'tok', 5000, 10)`,
	} {
		if _, err := p.writer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	checkReadyTable(t, p)
	rows, err := p.readers.QueryContext(ctx, `SELECT instance_id, ready_at FROM orchestrator_ready ORDER BY ready_at, first_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s@%d", id, at))
	}
	if want := "[free@50 busy@5000 later@9000]"; fmt.Sprint(got) != want {
		t.Fatalf("ready rows = %v, want %s", got, want)
	}
}

// A store created before migration 0016 gets the orchestration of each
// ready instance copied onto its scheduling row.
func TestMigration0016CopiesOrchestrationsToReadyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := openMigratedBefore(t, filepath.Join(t.TempDir(), "old.db"), 16)
	for _, q := range []string{
		`INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status, created_at, updated_at)
			VALUES ('named', 'V', '2.0.0', 'Running', 1, 1)`,
		`INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ('named', '{}', 10, 10), ('rowless', '{}', 20, 20)`,
	} {
		if _, err := p.writer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	rows, err := p.readers.QueryContext(ctx, `SELECT instance_id, orchestration_name, orchestration_version FROM orchestrator_ready ORDER BY ready_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, name, version string
		if err := rows.Scan(&id, &name, &version); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+"="+name+"@"+version)
	}
	if want := "[named=V@2.0.0 rowless=@]"; fmt.Sprint(got) != want {
		t.Fatalf("ready rows = %v, want %s", got, want)
	}
}

// TestReadyTableExactAroundTurns runs the shared scenario of the paths
// whose deletes of a locked instance's messages the delete trigger skips
// (migration 0017), checking orchestrator_ready after every step.
func TestReadyTableExactAroundTurns(t *testing.T) {
	t.Parallel()
	clock := providertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := openFile(t, filepath.Join(t.TempDir(), "ready.db"), &Options{Clock: clock.Now})
	providertest.ReadyTableExact(t, p, clock, providertest.ReadyTableHooks{
		Check: func(t *testing.T) { checkReadyTable(t, p) },
		Exec:  func(t *testing.T, q string) { mustExec(t, p, q) },
		Count: func(t *testing.T) int {
			var n int
			queryCount(t, p, `SELECT count(*) FROM orchestrator_ready`, &n)
			return n
		},
	})
}

// TestWorkRowRouteMatchesItem checks that the activity name and queue of
// worker rows inserted by a turn ack, leased or not, are those their
// stored work item holds (migration 0010 reads them from it), including a
// name and a queue that are not valid UTF-8, which the JSON encoding
// replaces.
func TestWorkRowRouteMatchesItem(t *testing.T) {
	t.Parallel()
	p := openFile(t, filepath.Join(t.TempDir(), "route.db"), nil)
	ctx := t.Context()
	if _, err := p.Enqueue(ctx, benchStart("r")); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	ack := benchTurn(it)
	ack.LeaseFor = time.Minute
	routes := [][2]string{{"Charge", ""}, {"Ship", "east"}, {"Bad\xff", "west\xfe"}, {"Refund", "q"}}
	ack.WorkerItems = nil
	for i, r := range routes {
		m := benchActivity("r", int64(i)+3)
		m.Item.Name, m.Item.Queue = r[0], r[1]
		m.Lease = i%2 == 1
		ack.WorkerItems = append(ack.WorkerItems, m)
	}
	res, err := p.AckOrchestrationItem(ctx, ack)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leased) != 2 {
		t.Fatalf("%d leased, want 2", len(res.Leased))
	}
	var rows, wrong int
	queryCount(t, p, `SELECT count(*) FROM worker_queue`, &rows)
	queryCount(t, p, `SELECT count(*) FROM worker_queue
WHERE activity_name IS NOT json_extract(work_item, '$.name') OR queue IS NOT coalesce(json_extract(work_item, '$.queue'), '')`, &wrong)
	if rows != len(routes) || wrong != 0 {
		t.Fatalf("%d worker rows, %d with a route other than their item's; want %d, 0", rows, wrong, len(routes))
	}
}

// openMigratedBefore opens a store file at path migrated only up to the
// migration before version, as an older release left it.
func openMigratedBefore(t *testing.T, path string, version int) *Provider {
	t.Helper()
	ctx := context.Background()
	p := openFile(t, path, &Options{NoMigrate: true})
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.writer.ExecContext(ctx, sqlCreateMigrationsTable); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		if err := p.applyMigration(ctx, m); err != nil {
			t.Fatalf("applying %s: %v", m.Name, err)
		}
	}
	return p
}
