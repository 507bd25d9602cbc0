package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// queueTables are the tables whose rows pile up with the backlog: a hot
// statement must never read all of them.
var queueTables = map[string]bool{"worker_queue": true, "orchestrator_queue": true, "orchestrator_ready": true}

// planNode is a node of an EXPLAIN (FORMAT JSON) plan.
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Cond     string     `json:"Index Cond"`
	Plans    []planNode `json:"Plans"`
}

// unboundedReads returns what the plan reads whole of a queue table: a
// sequential scan of one, or a scan of one under a Sort with no Limit in
// between (the sort needs every row the scan finds, however many the
// statement keeps).
func unboundedReads(n planNode, sorted bool) []string {
	var bad []string
	if queueTables[n.Relation] {
		switch {
		case n.NodeType == "Seq Scan":
			bad = append(bad, "Seq Scan on "+n.Relation)
		case sorted:
			bad = append(bad, "Sort over "+n.NodeType+" on "+n.Relation+" "+n.Index)
		}
	}
	switch n.NodeType {
	case "Sort", "Incremental Sort":
		sorted = true
	case "Limit":
		sorted = false
	}
	for _, c := range n.Plans {
		bad = append(bad, unboundedReads(c, sorted)...)
	}
	return bad
}

// usesIndex reports whether the plan scans index.
func usesIndex(n planNode, index string) bool {
	if n.Index == index {
		return true
	}
	for _, c := range n.Plans {
		if usesIndex(c, index) {
			return true
		}
	}
	return false
}

// oldWorkCandidatesSession is the worker fetch's candidate statement
// before migration 0015: every visible row, sorted by id, then the limit.
const oldWorkCandidatesSession = `SELECT q.id, q.session_id FROM worker_queue AS q
WHERE q.visible_at <= $1 AND NOT (q.id = ANY ($4::bigint[]))
  AND ($5::text[] IS NULL OR q.activity_name IS NULL OR q.activity_name = ANY ($5::text[]))
  AND q.queue = ANY ($6::text[])
  AND (q.session_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM sessions AS s
        WHERE s.session_id = q.session_id AND s.locked_until > $1 AND s.owner_id <> $3))
ORDER BY q.id
LIMIT $2
FOR UPDATE OF q SKIP LOCKED`

// TestHotFetchPlansAreBounded: on queue tables holding thousands of
// visible rows (and as many deleted ones), never analyzed, each hot fetch
// statement is planned, with its arguments (a custom plan) and without
// (the generic plan a prepared statement switches to), as index scans
// that stop at the limit: no plan reads a queue table whole, sorts all
// its visible rows, and a fetch that serves some names only reads their
// rows from an index by name. The statements before migration 0015 are
// checked too, and must be refused: the worker candidates (a Bitmap Heap
// Scan of every visible row, sorted by id) and the turn candidates of some
// names (the ready instances of every name, filtered).
func TestHotFetchPlansAreBounded(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	for _, table := range []string{"worker_queue", "orchestrator_queue", "orchestrator_ready", "instance_locks", "sessions"} {
		mustExec(t, p, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
	}
	mustExec(t, p, `INSERT INTO worker_queue (instance_id, execution_id, activity_id, work_item, visible_at, created_at, activity_name, queue)
SELECT 'i' || (g / 100), 1, g, repeat('x', 200), 1000 + g, 1000, CASE WHEN g % 1000 = 1 THEN 'Rare' ELSE 'Common' END, ''
FROM generate_series(1, 20000) AS g`)
	mustExec(t, p, `DELETE FROM worker_queue WHERE id % 2 = 0`)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
SELECT 'i' || g, repeat('x', 200), 1000 + g, 1000 FROM generate_series(1, 6000) AS g`)
	mustExec(t, p, `DELETE FROM orchestrator_queue WHERE id % 2 = 0`)
	mustExec(t, p, `UPDATE orchestrator_ready SET orchestration_name = CASE WHEN first_id % 1000 = 1 THEN 'Rare' ELSE 'Common' END`)

	// Each statement with SQL literals for its parameters.
	const now, limit = "100000", "16"
	// index: a fetch that serves some names only must read their rows
	// from this index (by name), not step over the rows of other names.
	cases := []struct {
		name, sql, args, index string
	}{
		{"work fetch, any name", sqlFetchWork[0][0], now + `, 16, NULL, '{""}', 'p', 200000`, ""},
		{"work fetch, any name, session", sqlFetchWork[0][1], now + `, 16, NULL, '{""}', 'p', 200000, 'me', '{}'`, ""},
		{"work fetch, named", sqlFetchWork[1][0], now + `, 16, '{Rare}', '{""}', 'p', 200000`, "worker_queue_route"},
		{"work fetch, named, session", sqlFetchWork[1][1], now + `, 16, '{Common,Rare}', '{"",q}', 'p', 200000, 'me', '{}'`, "worker_queue_route"},
		{"work fetch, rare name, session", sqlFetchWork[1][1], now + `, 16, '{Rare}', '{""}', 'p', 200000, 'me', '{}'`, "worker_queue_route"},
		{"work fetch, named, session, lone", sqlFetchWorkLast[1], now + `, 16, '{Rare}', '{""}', 'p', 200000, 'me', '{}'`, "worker_queue_route"},
		{"lock work", sqlLockWork, `'p', '{1,3}', 200000`, ""},
		{"turn candidates, any", sqlOrchCandidates, now + `, '{}', 'k', ` + limit + `, NULL`, ""},
		{"turn candidates, named", sqlOrchCandidatesNamed, now + `, '{}', 'k', ` + limit + `, '{Common,Rare,"B` + "\x1f" + `1.0"}'`, "orchestrator_ready_name"},
		{"lock and tag", sqlLockAndTag, `'p', '{i1,i3}', 200000, ` + now + `, 1, ` + now, ""},
		{"fetch and lock, any", sqlFetchAndLock, now + `, '{}', 'k', ` + limit + `, NULL, 'p', 200000, ` + now, ""},
		{"fetch and lock, named", sqlFetchAndLockNamed, now + `, '{}', 'k', ` + limit + `, '{Common,Rare,"B` + "\x1f" + `1.0"}', 'p', 200000, ` + now, "orchestrator_ready_name"},
		{"fetched instance metas", sqlFetchedMetas, ``, ""},
		{"fetched pending starts", sqlFetchedStarts, now, ""},
		{"instance metas", sqlInstanceMetas, `'{i1,i3}'`, ""},
		{"pending starts", sqlPendingStarts, `'{i1,i3}', ` + now, ""},
		{"histories", sqlHistoriesOf, `'{i1,i3}', '{1,0}', '{2,0}'`, ""},
		{"release lock", sqlReleaseLock, `'i1', 'pi1'`, ""},
		{"redate tagged", sqlRedateTagged, `'{i1,i3}', 'p', 200000`, ""},
		{"finish turn", sqlFinishTurn, `'i1', 'pi1'`, ""},
		{"next visible work", sharedSQL[sqlstore.QNextVisibleWork], ``, ""},
		{"next visible turn", sharedSQL[sqlstore.QNextVisibleOrch], ``, ""},
	}
	ctx := t.Context()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	explain := func(mode, name, sql, args, index string) []string {
		t.Helper()
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE s`) }()
		if _, err := conn.Exec(ctx, `PREPARE s AS `+sql); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		exec := `EXECUTE s`
		if args != "" {
			exec += `(` + args + `)`
		}
		var out string
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+exec).Scan(&out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("%s: EXPLAIN output %s: %v", name, out, err)
		}
		bad := unboundedReads(plans[0].Plan, false)
		if index != "" && !usesIndex(plans[0].Plan, index) {
			bad = append(bad, "no scan of "+index)
		}
		if len(bad) > 0 {
			var text []string
			rows, err := conn.Query(ctx, `EXPLAIN `+exec)
			if err == nil {
				for rows.Next() {
					var line string
					_ = rows.Scan(&line)
					text = append(text, line)
				}
				rows.Close()
			}
			bad = append(bad, strings.Join(text, "\n"))
		}
		return bad
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, c := range cases {
			if bad := explain(mode, c.name, c.sql, c.args, c.index); len(bad) > 0 {
				t.Errorf("%s (%s) reads a queue table whole: %s", c.name, mode, strings.Join(bad, "; "))
			}
		}
		// The check refuses the statements before migration 0015: the
		// worker candidates, and the turn candidates of some names.
		for _, c := range []struct{ name, sql, args, index string }{
			{"old worker candidates", oldWorkCandidatesSession, now + `, 16, 'me', '{}', '{Common,Rare}', '{""}'`, "worker_queue_route"},
			{"old turn candidates", sqlOrchCandidates, now + `, '{}', 'k', ` + limit + `, '{Rare}'`, "orchestrator_ready_name"},
		} {
			if bad := explain(mode, c.name, c.sql, c.args, c.index); len(bad) == 0 {
				t.Errorf("the %s (%s) pass the check", c.name, mode)
			} else {
				t.Logf("%s (%s): %s", c.name, mode, strings.Join(bad[:len(bad)-1], "; "))
			}
		}
	}
}

// TestFetchesReadOnlyTheirRows: behind 10,000 visible worker rows and
// 5,000 ready instances of a name a node does not serve, never analyzed,
// its fetches of the name it serves read a few rows each, as do fetches
// of any name; the statements before migration 0015 (worker candidates
// of any name, turn candidates filtered by name) read every visible row.
func TestFetchesReadOnlyTheirRows(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	for _, table := range []string{"worker_queue", "orchestrator_queue", "orchestrator_ready"} {
		mustExec(t, p, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
	}
	mustExec(t, p, `INSERT INTO worker_queue (instance_id, execution_id, activity_id, work_item, visible_at, created_at, activity_name, queue)
SELECT 'i' || g, 1, g, repeat('x', 200), 1000 + g, 1000, CASE WHEN g > 10000 THEN 'Rare' ELSE 'Common' END, ''
FROM generate_series(1, 10003) AS g`)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
SELECT 'i' || g, repeat('x', 200), 1000 + g, 1000 FROM generate_series(1, 5003) AS g`)
	mustExec(t, p, `UPDATE orchestrator_ready SET orchestration_name = CASE WHEN first_id > 5000 THEN 'Rare' ELSE 'Common' END`)
	const now = int64(100000)
	read := func(table, sql string, args ...any) float64 {
		t.Helper()
		var n float64
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			var out []byte
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
				return err
			}
			var plans []struct {
				Plan map[string]any `json:"Plan"`
			}
			if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
				return fmt.Errorf("EXPLAIN output %s: %v", out, err)
			}
			n = planRows(plans[0].Plan, table)
			return errors.New("rolled back") // leave the rows as they were
		})
		if err != nil && err.Error() != "rolled back" {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name, table, sql string
		args             []any
	}{
		{"work fetch of a rare name", "worker_queue", sqlFetchWork[1][1], []any{now, 4, []string{"Rare"}, []string{""}, "p", now + 1000, "me", []int64{}}},
		{"work fetch of any name", "worker_queue", sqlFetchWork[0][0], []any{now, 4, nil, []string{""}, "p", now + 1000}},
		{"turn candidates of a rare name", "orchestrator_ready", sqlOrchCandidatesNamed, []any{now, []string{}, "k", 4, []string{"Rare"}}},
		{"turn candidates of any name", "orchestrator_ready", sqlOrchCandidates, []any{now, []string{}, "k", 4, nil}},
	} {
		// The limit's rows, found, then each locked by its primary key.
		if n := read(c.table, c.sql, c.args...); n > 8 {
			t.Errorf("%s read %v rows of %s, want at most 8", c.name, n, c.table)
		}
	}
	if n := read("worker_queue", oldWorkCandidatesSession, now, 4, "me", []int64{}, nil, []string{""}); n < 10000 {
		t.Errorf("the old worker candidates of any name read %v rows, want every visible one", n)
	}
	// The statement a fetch of some orchestrations ran before: the ready
	// instances of every name, filtered.
	if n := read("orchestrator_ready", sqlOrchCandidates, now, []string{}, "k", 4, []string{"Rare"}); n < 5000 {
		t.Errorf("the turn candidates of any name, filtered, read %v rows, want every ready one", n)
	}
}

// TestQueueIndexesAreWhatHotPathsRead: every index of the two queue
// tables is written for each row that enters it (a message, an activity),
// and again by each update that cannot stay in place (a worker fetch
// moves visible_at). So each index a fresh row enters is one a hot
// statement reads: orchestrator_queue's by ID (dead-letters, purge) and by
// instance (fetch, acks, quiet check), worker_queue's by ID, by route
// (fetch), by activity (cancel, busy and quiet checks) and by visibility
// (next visible time). The rest are partial indexes that rows enter only
// in the states their readers look for. Migration 0017 dropped
// orchestrator_queue_visible, which no hot statement reads since
// orchestrator_ready (0002) serves the turn candidates.
func TestQueueIndexesAreWhatHotPathsRead(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	rows, err := p.pool.Query(t.Context(), `SELECT c.relname, i.relname, x.indpred IS NOT NULL
FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid JOIN pg_class AS c ON c.oid = x.indrelid
WHERE x.indrelid IN ('orchestrator_queue'::regclass, 'worker_queue'::regclass)
ORDER BY 1, 3, 2`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var table, index string
		var partial bool
		if err := rows.Scan(&table, &index, &partial); err != nil {
			t.Fatal(err)
		}
		if partial {
			index += " (partial)"
		}
		got = append(got, table+": "+index)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"orchestrator_queue: orchestrator_queue_instance",
		"orchestrator_queue: orchestrator_queue_pkey",
		"worker_queue: worker_queue_activity",
		"worker_queue: worker_queue_pkey",
		"worker_queue: worker_queue_route",
		"worker_queue: worker_queue_visible",
		"worker_queue: worker_queue_last_error_at (partial)",
		"worker_queue: worker_queue_redelivered (partial)",
		"worker_queue: worker_queue_route_unnamed (partial)",
		"worker_queue: worker_queue_session (partial)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("queue indexes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWorkFetchIsPlannedOnce: a worker fetch's statement (with a session
// owner, as a runtime fetches) is planned once per connection (a generic
// plan), not at every call as the server chose to (its planning cost as
// much as running it), and that plan, made while the queue held a few
// rows and was never analyzed, still reads the queue by index once it
// holds 20,000 rows: no sequential scan of it for the rows the fetch
// locks (the plan the server made without sqlFetchPlan's second setting).
func TestWorkFetchIsPlannedOnce(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MaxConns: 1}) // one connection: one plan
	ctx := t.Context()
	fetch := func() {
		t.Helper()
		_, err := p.FetchWorkItems(ctx, provider.WorkFetchOptions{Max: 4, LockTimeout: time.Minute, Activities: []string{"A"},
			Session: &provider.SessionOptions{OwnerID: "me", LockTimeout: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Planned while the queue holds a few rows, as at a runtime's start.
	var few []*provider.WorkerMessage
	for a := range 3 {
		few = append(few, providertest.HammerActivity("few", int64(a+1)))
	}
	if err := p.enqueueWork(ctx, few...); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		fetch()
	}
	var msgs []*provider.WorkerMessage
	for a := range 20000 {
		msgs = append(msgs, providertest.HammerActivity(fmt.Sprintf("i%d", a/100), int64(a+1)))
	}
	if err := p.enqueueWork(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		fetch()
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	plan, out := preparedPlan(t, conn, "fetch", sqlFetchWorkLast[1], `1000, 4, '{A}', '{""}', 'p', 200000, 'me', '{}'`, 11)
	if bad := unboundedReads(plan, false); len(bad) > 0 {
		t.Errorf("the fetch's plan reads the queue whole: %v\n%s", bad, out)
	}
}

// preparedPlan returns, for the statement sql prepared on conn and run
// there calls times, its plan as a generic plan with arguments args (SQL
// literals) and that plan as JSON, failing t unless it was planned once.
func preparedPlan(t *testing.T, conn *pgxpool.Conn, what, sql, args string, calls int64) (planNode, string) {
	t.Helper()
	ctx := t.Context()
	var (
		name            string
		generic, custom int64
	)
	err := conn.QueryRow(ctx, `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
		sql).Scan(&name, &generic, &custom)
	if err != nil {
		t.Fatalf("%s: the prepared statement: %v", what, err)
	}
	if custom != 0 || generic != calls {
		t.Errorf("%s planned %d times for %d calls (%d generic plans), want once", what, custom, calls, generic)
	}
	var out string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		exec := `EXECUTE ` + pgx.Identifier{name}.Sanitize()
		if args != "" {
			exec += `(` + args + `)`
		}
		return tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+exec).Scan(&out)
	})
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", out, err)
	}
	return plans[0].Plan, out
}

// wholeReads returns what the plan reads whole of the tables: a
// sequential scan of one, or an index scan of one with no index
// condition (every entry of the index).
func wholeReads(n planNode, tables ...string) []string {
	var bad []string
	if slices.Contains(tables, n.Relation) {
		switch {
		case n.NodeType == "Seq Scan":
			bad = append(bad, "Seq Scan on "+n.Relation)
		case n.Index != "" && n.Cond == "":
			bad = append(bad, n.NodeType+" of all of "+n.Index)
		}
	}
	for _, c := range n.Plans {
		bad = append(bad, wholeReads(c, tables...)...)
	}
	return bad
}

// TestTurnFetchIsPlannedOnce: the reads of a turn fetch (the instances,
// their histories, their pending starts) are planned once per connection
// (generic plans), not at every call as the server chose to (a custom
// plan each time, whose planning cost more than the read), and those
// plans, made while the store held a few instances and was never
// analyzed, still read instances and history by index ranges once they
// hold 20,000 instances: no sequential scan and no scan of a whole index.
func TestTurnFetchIsPlannedOnce(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MaxConns: 1}) // one connection: one plan
	ctx := t.Context()
	// Planned while the store holds a few instances, as at a runtime's
	// start: three first turns, and three turns with a history each.
	for i := range 3 {
		providertest.RunFirstTurn(t, p, fmt.Sprintf("few-%d", i))
	}
	for i := range 3 {
		if _, err := p.Enqueue(ctx, providertest.HammerEvent(fmt.Sprintf("few-%d", i))); err != nil {
			t.Fatal(err)
		}
		it := providertest.MustFetch(t, p)
		if len(it.History) != 2 {
			t.Fatalf("%s: history of %d events, want 2", it.InstanceID, len(it.History))
		}
		if _, err := p.AckOrchestrationItem(ctx, providertest.HammerTurn(it, 1)); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, p, `INSERT INTO instances (instance_id, orchestration_name, status, current_execution_id, created_at, updated_at)
SELECT 'i' || g, 'T', 'Running', 1, 1000, 1000 FROM generate_series(1, 20000) AS g`)
	// Each with the history of few-0: three events.
	mustExec(t, p, `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
SELECT 'i' || g, 1, h.event_id, h.event_type, h.event_data, 1000
FROM generate_series(1, 20000) AS g CROSS JOIN history AS h WHERE h.instance_id = 'few-0'`)
	for i := range 5 {
		if _, err := p.Enqueue(ctx, providertest.HammerEvent(fmt.Sprintf("i%d", i+1))); err != nil {
			t.Fatal(err)
		}
		it := providertest.MustFetch(t, p)
		if len(it.History) != 3 {
			t.Fatalf("%s: history of %d events, want 3", it.InstanceID, len(it.History))
		}
		if err := p.AbandonOrchestrationItem(ctx, it.LockToken, provider.AbandonOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		name, sql, args string
		calls           int64
	}{
		{"instance metas", sqlFetchedMetas, ``, 11},
		{"histories", sqlHistoriesOf, `'{i1,i3}', '{1,0}', '{2,0}'`, 8}, // read only for instances that have one
		{"pending starts", sqlFetchedStarts, `100000`, 11},
	} {
		plan, out := preparedPlan(t, conn, c.name, c.sql, c.args, c.calls)
		if bad := wholeReads(plan, "instances", "history", "orchestrator_queue", "lock_queue", "execution_locks"); len(bad) > 0 {
			t.Errorf("%s: the plan reads tables whole: %v\n%s", c.name, bad, out)
		}
	}
}

// TestAckNotifyReadsOnlyTheAckedInstances: the notification of a group's
// turn acks asks whether messages still wait for the acked instances by
// probing orchestrator_queue_instance for each, also with the generic
// plan a connection makes while the queue is empty: behind 3,000 messages
// of other instances, it scans no queue table. Before, that plan read the
// whole queue whenever none of the acked instances had a message left.
func TestAckNotifyReadsOnlyTheAckedInstances(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	conn := acquireConn(t, p)
	notify := func(acked ...string) (scans int64, waiting bool) {
		t.Helper()
		scans = seqScansOf(t, conn, "orchestrator_queue", func(tx pgx.Tx) {
			if _, err := tx.Exec(ctx, sqlAckNotify, p.channel, "n", false, acked, acked, false); err != nil {
				t.Fatal(err)
			}
		})
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orchestrator_queue WHERE instance_id = ANY ($1))`, acked).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return scans, waiting
	}
	// The server plans a prepared statement for its arguments five times,
	// then settles on its generic plan: here, on an empty queue.
	for range 8 {
		notify("a", "b")
	}
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
SELECT 'o' || g, repeat('x', 200), 10, 1 FROM generate_series(1, 3000) AS g`)
	if scans, _ := notify("a", "b"); scans != 0 {
		t.Errorf("the acks' notification scanned orchestrator_queue %d times, want none", scans)
	}
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ('b', '{}', 10, 1)`)
	if scans, waiting := notify("a", "b"); scans != 0 || !waiting {
		t.Errorf("with a message for b: %d scans, waiting %v; want none and true", scans, waiting)
	}
}

// TestGroupWorkAcksReadTheirRowsByKey: the set-based activity acks of a
// group (queueAckWorks) find their worker rows by key, also with the
// generic plan a connection settles on while the queue is empty: behind
// 3,000 queued activities, the batch scans no worker_queue. Before, that
// plan hashed the whole queue at every group's acks.
func TestGroupWorkAcksReadTheirRowsByKey(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	conn := acquireConn(t, p)
	ack := func(ids ...int64) (scans int64, deleted int) {
		t.Helper()
		tokens, insts, items, vis := make([]string, len(ids)), make([]*string, len(ids)), make([]string, len(ids)), make([]int64, len(ids))
		for k, id := range ids {
			tokens[k] = fmt.Sprint("t", id)
		}
		scans = seqScansOf(t, conn, "worker_queue", func(tx pgx.Tx) {
			b := &pgx.Batch{}
			queueAckWorks(b, ids, tokens, insts, items, vis, 100, func(int64, string) { deleted++ })
			b.Queue(sqlSeqscanDefault)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
		})
		return scans, deleted
	}
	// The server plans a prepared statement for its arguments five times,
	// then settles on its generic plan: here, on an empty queue.
	for range 8 {
		ack(1, 2)
	}
	mustExec(t, p, `INSERT INTO worker_queue (id, instance_id, execution_id, activity_id, work_item, visible_at, created_at,
    lock_token, locked_until)
OVERRIDING SYSTEM VALUE
SELECT g, 'i' || g, 1, 1, repeat('x', 200), 1000, 1, 't' || g, 1000 FROM generate_series(1, 3000) AS g`)
	if scans, deleted := ack(7, 9); scans != 0 || deleted != 2 {
		t.Errorf("the group's acks scanned worker_queue %d times and deleted %d rows; want none and 2", scans, deleted)
	}
}

// acquireConn holds one of the store's connections until the test ends,
// so that its statements are prepared and planned on that one.
func acquireConn(t *testing.T, p *Provider) *pgxpool.Conn {
	t.Helper()
	conn, err := p.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// seqScansOf runs run in a transaction on conn, rolled back after, and
// returns how many sequential scans of table (in the store's schema) it
// made.
func seqScansOf(t *testing.T, conn *pgxpool.Conn, table string, run func(tx pgx.Tx)) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	scans := func() (n int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
WHERE schemaname = current_schema() AND relname = $1`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := scans()
	run(tx)
	return scans() - before
}
