package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider/providertest"
)

// TestStoreFunctionsSetNoConfiguration: no function of the store's schema
// carries a SET clause (migration 0018). A function with one cannot be
// called directly: each call, and the scheduling triggers fire at every
// start, turn fetch and turn ack, sets and restores search_path around
// its body. The trigger functions name the store's tables by schema
// instead.
func TestStoreFunctionsSetNoConfiguration(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	rows, err := p.pool.Query(t.Context(), `SELECT f.proname, f.proconfig IS NOT NULL
FROM pg_proc AS f WHERE f.pronamespace = current_schema()::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var all, set []string
	for rows.Next() {
		var name string
		var hasConfig bool
		if err := rows.Scan(&name, &hasConfig); err != nil {
			t.Fatal(err)
		}
		all = append(all, name)
		if hasConfig {
			set = append(set, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, "orchestrator_ready_on_insert") {
		t.Fatalf("the store's functions %v lack the scheduling triggers'", all)
	}
	if len(set) > 0 {
		t.Errorf("functions with a SET clause: %s", strings.Join(set, ", "))
	}
}

// TestSchedulingTriggersIgnoreTheCallersSearchPath: the scheduling
// triggers write the store's orchestrator_ready, not a table of that name
// the caller's search_path finds first, whatever it is: a message added,
// locked and consumed by a session whose search_path leads elsewhere
// keeps the store's table exact, and leaves the other alone.
func TestSchedulingTriggersIgnoreTheCallersSearchPath(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	store := pgx.Identifier{p.schema}.Sanitize()
	other := freshSchema(t)
	cfg, err := pgx.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	decoy := pgx.Identifier{other}.Sanitize()
	for _, q := range []string{
		`CREATE SCHEMA ` + decoy,
		`CREATE TABLE ` + decoy + `.orchestrator_ready (LIKE ` + store + `.orchestrator_ready INCLUDING ALL)`,
		`CREATE TABLE ` + decoy + `.orchestrator_queue (LIKE ` + store + `.orchestrator_queue INCLUDING ALL)`,
		`CREATE TABLE ` + decoy + `.instance_locks (LIKE ` + store + `.instance_locks INCLUDING ALL)`,
		`CREATE TABLE ` + decoy + `.instances (LIKE ` + store + `.instances INCLUDING ALL)`,
		`SET search_path = ` + decoy,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ready := func() (store, decoy int) {
		t.Helper()
		err := p.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orchestrator_ready WHERE instance_id = 'a' AND ready_at = 10),
       (SELECT count(*) FROM `+pgx.Identifier{other}.Sanitize()+`.orchestrator_ready)`).Scan(&store, &decoy)
		if err != nil {
			t.Fatal(err)
		}
		return store, decoy
	}
	steps := []struct {
		what, sql  string
		storeReady int
	}{
		{"a message added", `INSERT INTO ` + store + `.orchestrator_queue (instance_id, work_item, visible_at, created_at)
VALUES ('a', '{}', 10, 10)`, 1},
		{"the instance locked", `INSERT INTO ` + store + `.instance_locks (instance_id, lock_token, locked_until, locked_at)
VALUES ('a', 't', 500, 10)`, 0},
		{"the lock released", `DELETE FROM ` + store + `.instance_locks WHERE instance_id = 'a'`, 1},
		{"the instance created", `INSERT INTO ` + store + `.instances (instance_id, orchestration_name, status, created_at, updated_at)
VALUES ('a', 'T', 'Pending', 10, 10)`, 1},
		{"its message moved", `UPDATE ` + store + `.orchestrator_queue SET visible_at = 20 WHERE instance_id = 'a'`, 0},
		{"its message consumed", `DELETE FROM ` + store + `.orchestrator_queue WHERE instance_id = 'a'`, 0},
	}
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s.sql); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if n, d := ready(); n != s.storeReady || d != 0 {
			t.Fatalf("after %s: %d rows of the store ready at 10, %d rows in the other schema; want %d and 0",
				s.what, n, d, s.storeReady)
		}
	}
	var left int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator_ready`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("scheduling rows left: %d, %v; want none", left, err)
	}
}

// TestTurnUpdatedRowsHaveRoomOnTheirPages: the tables whose rows every
// turn updates without changing an indexed column (an instance's at each
// turn, a message's when a fetch tags it) keep a fifth of each page free
// (migration 0018), so that the update can be made in place: no new
// entry in each of the row's indexes, as when its page is full.
func TestTurnUpdatedRowsHaveRoomOnTheirPages(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	providertest.RunFirstTurn(t, p, "a")
	for _, table := range []string{"instances", "orchestrator_queue"} {
		var opts []string
		err := p.pool.QueryRow(t.Context(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, table).Scan(&opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(opts, "fillfactor=80") {
			t.Errorf("%s: storage options %v, want fillfactor=80", table, opts)
		}
	}
}

// TestReadyRecomputeReadsOnlyItsInstances: when messages of an instance
// are consumed or moved and others are left, the scheduling triggers
// recompute its orchestrator_ready row from its own rows, read by key:
// behind 2,000 other ready instances, none of orchestrator_ready,
// instance_locks and instances is scanned (migration 0019; before, each
// trigger's plan, made once per session, joined them by hashing, reading
// each whole, dead rows included, at each call), and the row comes out
// exact.
func TestReadyRecomputeReadsOnlyItsInstances(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	mustExec(t, p, `INSERT INTO instances (instance_id, orchestration_name, status, created_at, updated_at)
SELECT 'i' || k, 'T', 'Running', 1, 1 FROM generate_series(1, 2000) AS k`)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
SELECT 'i' || k, '{}', 10 + k, 1 FROM generate_series(1, 2000) AS k`)
	mustExec(t, p, `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at)
SELECT 'i' || k, 't', 5000, 1 FROM generate_series(1, 1000) AS k`)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
VALUES ('x', '{}', 7, 1), ('x', '{}', 8, 1), ('x', '{}', 9, 1)`)
	scanned := func(tx pgx.Tx) (rows int64) {
		t.Helper()
		err := tx.QueryRow(ctx, `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
WHERE schemaname = current_schema() AND relname IN ('orchestrator_ready', 'instance_locks', 'instances')`).Scan(&rows)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	for _, step := range []struct{ what, sql string }{
		{"one of its messages consumed", `DELETE FROM orchestrator_queue WHERE instance_id = 'x' AND visible_at = 7`},
		{"one of its messages moved", `UPDATE orchestrator_queue SET visible_at = 30 WHERE instance_id = 'x' AND visible_at = 8`},
		{"a message added", `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ('x', '{}', 40, 1)`},
	} {
		tx, err := p.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := scanned(tx)
		if _, err := tx.Exec(ctx, step.sql); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if n := scanned(tx) - before; n != 0 {
			t.Errorf("%s: %d sequential scans of orchestrator_ready, instance_locks or instances, want none", step.what, n)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var readyAt, firstVisible int64
		if err := p.pool.QueryRow(ctx, `SELECT ready_at, first_visible FROM orchestrator_ready WHERE instance_id = 'x'`).
			Scan(&readyAt, &firstVisible); err != nil {
			t.Fatalf("after %s: %v", step.what, err)
		}
		wantFirst := map[byte]int64{'D': 8, 'U': 9, 'I': 9}[step.sql[0]]
		if readyAt != wantFirst || firstVisible != wantFirst {
			t.Errorf("after %s: ready_at %d, first_visible %d; want %d", step.what, readyAt, firstVisible, wantFirst)
		}
	}
}
