package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

func TestOpenRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts Options
	}{
		{"schema too long", Options{Schema: strings.Repeat("s", 64)}},
		{"schema with NUL", Options{Schema: "a\x00b"}},
		{"negative pool", Options{MaxConns: -1}},
		{"negative retry", Options{ListenRetryMax: -time.Second}},
		{"group too big", Options{GroupCommitMax: 65}},
		{"negative group", Options{GroupCommitMax: -1}},
		{"lanes above the pool", Options{MaxConns: 3, GroupCommitLanes: 4}},
		{"negative lanes", Options{GroupCommitLanes: -1}},
		{"warm connections above the pool", Options{MaxConns: 3, MinConns: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Rejected before connecting: the DSN is never used.
			p, err := Open(t.Context(), "postgres://nobody@127.0.0.1:1/none", &c.opts)
			if err == nil {
				_ = p.Close()
				t.Fatalf("Open with %+v succeeded, want an error", c.opts)
			}
		})
	}
}

// TestGroupCommitOptions: the defaults of group commit, its lanes capped
// by a small pool, and the invalid values refused before connecting.
func TestGroupCommitOptions(t *testing.T) {
	t.Parallel()
	o, err := (*Options)(nil).withDefaults()
	if err != nil || o.GroupCommitMax != DefaultGroupCommitMax || o.GroupCommitLanes != DefaultGroupCommitLanes {
		t.Fatalf("defaults = max %d, lanes %d, %v", o.GroupCommitMax, o.GroupCommitLanes, err)
	}
	if o, err := (&Options{MaxConns: 1}).withDefaults(); err != nil || o.GroupCommitLanes != 1 {
		t.Fatalf("lanes with MaxConns 1 = %d, %v; want 1", o.GroupCommitLanes, err)
	}
	if o, err := (&Options{GroupCommitMax: 1, GroupCommitLanes: 1}).withDefaults(); err != nil || o.GroupCommitMax != 1 || o.GroupCommitLanes != 1 {
		t.Fatalf("explicit values = %d, %d, %v", o.GroupCommitMax, o.GroupCommitLanes, err)
	}
	for _, bad := range []Options{{GroupCommitMax: 65}, {GroupCommitMax: -1}, {MaxConns: 3, GroupCommitLanes: 4}, {GroupCommitLanes: -1}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Fatalf("withDefaults(%+v) succeeded, want an error", bad)
		}
	}
}

func TestOpenRejectsMalformedDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"postgres://x:y@[::1", "host=a port=notaport", "\x00"} {
		p, err := Open(t.Context(), dsn, &Options{Logger: quietLogger})
		if err == nil {
			_ = p.Close()
			t.Fatalf("Open(%q) succeeded, want an error", dsn)
		}
	}
}

func TestOpenUnreachableServerIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", &Options{Logger: quietLogger})
	if err == nil {
		_ = p.Close()
		t.Fatal("Open of an unreachable server succeeded")
	}
	if !errors.Is(err, provider.ErrUnavailable) || !provider.IsRetryable(err) {
		t.Fatalf("Open of an unreachable server: %v, want retryable ErrUnavailable", err)
	}
}

func migrationVersions(t *testing.T, p *Provider) []int {
	t.Helper()
	rows, err := p.pool.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func wantVersions(t *testing.T) []int {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, m := range ms {
		vs = append(vs, m.Version)
	}
	return vs
}

// TestMigrationsRaceSafely opens eight stores at once on a fresh schema:
// all come up, and every migration is applied exactly once.
func TestMigrationsRaceSafely(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Provider, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), testDSN(t), &Options{Schema: schema, Logger: quietLogger, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, p := range stores {
		if p != nil {
			t.Cleanup(func() { _ = p.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
	}
	if got, want := migrationVersions(t, stores[0]), wantVersions(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("schema_migrations = %v, want %v", got, want)
	}
	for i, p := range stores {
		if err := p.CheckWritable(t.Context()); err != nil {
			t.Fatalf("store %d CheckWritable: %v", i, err)
		}
	}
	if err := stores[0].Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate on a migrated schema: %v", err)
	}
}

func TestNoMigrateThenMigrate(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoMigrate: true})
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("a")); err == nil {
		t.Fatal("Enqueue on an unmigrated store succeeded")
	}
	err := p.CheckWritable(t.Context())
	if err == nil || !strings.Contains(err.Error(), "duroxide migrate") {
		t.Fatalf("CheckWritable on an unmigrated store: %v, want an error saying to run duroxide migrate", err)
	}
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := p.CheckWritable(t.Context()); err != nil {
		t.Fatalf("CheckWritable after Migrate: %v", err)
	}
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("a")); err != nil {
		t.Fatalf("Enqueue after Migrate: %v", err)
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	p := openSchema(t, schema, nil)
	mustExec(t, p, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future', 0)")
	err := p.CheckWritable(t.Context())
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("CheckWritable on a newer schema: %v, want an error naming a newer schema", err)
	}
	p2, err := Open(t.Context(), testDSN(t), &Options{Schema: schema, Logger: quietLogger})
	if err == nil {
		_ = p2.Close()
		t.Fatal("Open of a schema migrated by a newer release succeeded")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error naming a newer schema", err)
	}
	if err := p.Migrate(t.Context()); err == nil {
		t.Fatal("Migrate of a newer schema succeeded")
	}
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Enqueue":       errOf(p.Enqueue(t.Context(), providertest.HammerStart("x"))),
		"CheckWritable": p.CheckWritable(t.Context()),
		"Migrate":       p.Migrate(t.Context()),
	} {
		if !errors.Is(err, provider.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := p.ReadHistory(t.Context(), "x", 0); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("ReadHistory after Close: %v, want ErrClosed", err)
	}
}

// TestSchemasAreIsolated runs two deployments in two schemas of one
// database: neither sees the other's instances.
func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := openFresh(t, nil), openFresh(t, nil)
	if _, err := a.Enqueue(t.Context(), providertest.HammerStart("only-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetInstance(t.Context(), "only-a"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("GetInstance in the other schema: %v, want ErrNotFound", err)
	}
	if it, err := provider.FetchOrchestrationItem(t.Context(), b, provider.FetchOptions{LockTimeout: time.Minute}); err != nil || it != nil {
		t.Fatalf("fetch in the other schema = %v, %v; want nothing", it, err)
	}
}

func TestSchemaWithOddCharacters(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t) + ` "odd"; name`
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), testDSN(t))
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	p := openSchema(t, schema, nil)
	providertest.RunFirstTurn(t, p, "odd")
	if err := p.CheckWritable(t.Context()); err != nil {
		t.Fatalf("CheckWritable: %v", err)
	}
}

func TestInterpretError(t *testing.T) {
	t.Parallel()
	if err := interpretError(nil, nil); err != nil {
		t.Fatalf("nil -> %v", err)
	}
	for _, e := range []error{context.Canceled, provider.ErrLockLost, fmt.Errorf("x: %w", provider.ErrNotFound)} {
		if got := interpretError(e, nil); got != e {
			t.Fatalf("interpretError(%v) = %v, want it unchanged", e, got)
		}
	}
	cases := []struct {
		err       error
		want      error // nil: no sentinel
		retryable bool
	}{
		{&pgconn.PgError{Code: "40001"}, provider.ErrBusy, true},
		{&pgconn.PgError{Code: "40P01"}, provider.ErrBusy, true},
		{&pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}, provider.ErrBusy, true},
		{&pgconn.PgError{Code: "55P03"}, provider.ErrBusy, true},
		{&pgconn.PgError{Code: "53300"}, provider.ErrBusy, true},
		{&pgconn.PgError{Code: "57P01"}, provider.ErrUnavailable, true},
		{&pgconn.PgError{Code: "57P03"}, provider.ErrUnavailable, true},
		{&pgconn.PgError{Code: "08006"}, provider.ErrUnavailable, true},
		{&pgconn.PgError{Code: "25006"}, provider.ErrUnavailable, true},
		{&pgconn.PgError{Code: "23505", ConstraintName: "history_pkey"}, provider.ErrDuplicateEvent, false},
		{&pgconn.PgError{Code: "23505", ConstraintName: "execution_locks_pkey"}, provider.ErrLockContended, true},
		{&pgconn.PgError{Code: "23505", ConstraintName: "something_else"}, provider.ErrInvalidArgument, false},
		{&pgconn.PgError{Code: "23514"}, provider.ErrInvalidArgument, false},
		{&pgconn.PgError{Code: "22021"}, provider.ErrInvalidArgument, false},
		{&pgconn.PgError{Code: "42P01"}, nil, false},
		{&pgconn.PgError{Code: "42601"}, nil, false},
		{io.ErrUnexpectedEOF, provider.ErrUnavailable, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40P01"}), provider.ErrBusy, true},
	}
	for _, c := range cases {
		got := interpretError(c.err, nil)
		if c.want != nil && !errors.Is(got, c.want) {
			t.Errorf("interpretError(%v) = %v, want %v", c.err, got, c.want)
		}
		if c.want == nil && got != c.err {
			t.Errorf("interpretError(%v) = %v, want it unchanged", c.err, got)
		}
		if provider.IsRetryable(got) != c.retryable {
			t.Errorf("interpretError(%v) retryable = %v, want %v", c.err, provider.IsRetryable(got), c.retryable)
		}
		if !errors.Is(got, c.err) && got != c.err {
			var pe *pgconn.PgError
			if errors.As(c.err, &pe) && !errors.As(got, &pe) {
				t.Errorf("interpretError(%v) lost the driver error", c.err)
			}
		}
	}
	if got := interpretError(&pgconn.PgError{Code: "23505", ConstraintName: "x"}, provider.ErrInstanceExists); !errors.Is(got, provider.ErrInstanceExists) {
		t.Errorf("unique violation with a conflict meaning = %v, want ErrInstanceExists", got)
	}
}

// TestDeadlockIsRetryable provokes a real deadlock on the server and checks
// the victim's error translates to a retryable ErrBusy.
func TestDeadlockIsRetryable(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	mustExec(t, p, "CREATE TABLE dl (id int PRIMARY KEY)")
	mustExec(t, p, "INSERT INTO dl VALUES (1), (2)")
	ctx := t.Context()
	txs := make([]pgx.Tx, 2)
	for i := range txs {
		tx, err := p.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, "UPDATE dl SET id = id WHERE id = $1", i+1); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, tx := range txs {
		wg.Go(func() {
			_, errs[i] = tx.Exec(ctx, "UPDATE dl SET id = id WHERE id = $1", 2-i)
			if errs[i] != nil {
				_ = tx.Rollback(context.Background())
			}
		})
	}
	wg.Wait()
	var victim error
	for _, err := range errs {
		if err != nil {
			victim = err
		}
	}
	if victim == nil {
		t.Fatal("no transaction was chosen as the deadlock victim")
	}
	got := interpretError(victim, nil)
	if !errors.Is(got, provider.ErrBusy) || !provider.IsRetryable(got) {
		t.Fatalf("deadlock error %v translates to %v, want retryable ErrBusy", victim, got)
	}
}

// TestDuplicateEventIsErrDuplicateEvent checks the constraint-error mapping
// through the server.
func TestDuplicateEventIsErrDuplicateEvent(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
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
	// The failed ack left the lock as it was.
	if _, err := p.AckOrchestrationItem(t.Context(), &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1}); err != nil {
		t.Fatalf("ack after a rejected ack: %v", err)
	}
}

// TestNULByteIsInvalidArgument: PostgreSQL text cannot hold NUL bytes; an
// ID carrying one is the caller's error, not a store failure.
func TestNULByteIsInvalidArgument(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	for name, err := range map[string]error{
		"Enqueue":     errOf(p.Enqueue(t.Context(), providertest.HammerStart("a\x00b"))),
		"EnqueueWork": p.enqueueWork(t.Context(), providertest.HammerActivity("a\x00b", 1)),
		"GetInstance": func() error { _, err := p.GetInstance(t.Context(), "a\x00b"); return err }(),
	} {
		if !errors.Is(err, provider.ErrInvalidArgument) || provider.IsRetryable(err) {
			t.Errorf("%s with a NUL byte: %v, want permanent ErrInvalidArgument", name, err)
		}
	}
	if _, err := p.Enqueue(t.Context(), providertest.HammerStart("fine")); err != nil {
		t.Fatalf("Enqueue after rejected ones: %v", err)
	}
}

// waitFor waits for a value on ch, failing after d.
func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: no notification within %v", what, d)
	}
}

// drain empties a coalescing channel.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestNotifyAcrossStores: commits through store A wake the subscribers and
// watchers of store B (another node on the same schema) through
// LISTEN/NOTIFY, with no polling.
func TestNotifyAcrossStores(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := openSchema(t, schema, nil)
	b := openSchema(t, schema, nil)
	orch, stop := b.Subscribe(provider.QueueOrchestrator)
	defer stop()
	work, stopW := b.Subscribe(provider.QueueWorker)
	defer stopW()
	watch, stopWatch := b.WatchInstance("n1")
	defer stopWatch()

	if _, err := a.Enqueue(t.Context(), providertest.HammerStart("n1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, orch, 10*time.Second, "B's orchestrator subscriber after A's enqueue")
	waitFor(t, watch, 10*time.Second, "B's watcher of n1 after A created it")

	it := providertest.MustFetch(t, a)
	drain(watch)
	if _, err := a.AckOrchestrationItem(t.Context(), providertest.HammerTurn(it, 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, work, 10*time.Second, "B's worker subscriber after A's ack scheduled an activity")
	waitFor(t, watch, 10*time.Second, "B's watcher of n1 after A's turn")

	// A's own subscribers hear A's commit once, from A, not again through
	// the listener.
	if a.Stats().Commits == 0 || b.Stats().Commits != 0 {
		t.Fatalf("commits: A %d, B %d; want A > 0, B 0", a.Stats().Commits, b.Stats().Commits)
	}
}

// TestNotifyOnlyOnCommit: a transaction that rolls back notifies nobody,
// on any node.
func TestNotifyOnlyOnCommit(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := openSchema(t, schema, nil)
	b := openSchema(t, schema, nil)
	orch, stop := b.Subscribe(provider.QueueOrchestrator)
	defer stop()
	work, stopW := b.Subscribe(provider.QueueWorker)
	defer stopW()
	if _, err := a.Enqueue(t.Context(), providertest.HammerStart("dup")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, orch, 10*time.Second, "first enqueue")
	// Fails (the ID is taken) after inserting another message: rolled back.
	if _, err := a.Enqueue(t.Context(), providertest.HammerEvent("dup"), providertest.HammerStart("dup")); !errors.Is(err, provider.ErrInstanceExists) {
		t.Fatalf("Enqueue of a taken ID: %v, want ErrInstanceExists", err)
	}
	// A later commit on the other queue: notifications arrive in commit
	// order, so once it is here, a notification of the rollback would be too.
	if err := a.enqueueWork(t.Context(), providertest.HammerActivity("dup", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, work, 10*time.Second, "worker enqueue")
	select {
	case <-orch:
		t.Fatal("B's orchestrator subscriber was woken by a rolled-back enqueue")
	default:
	}
	d, err := b.QueueDepths(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d.OrchestratorReady != 1 {
		t.Fatalf("ready messages = %d, want 1 (the rolled-back enqueue wrote nothing)", d.OrchestratorReady)
	}
}

// TestListenerReconnects terminates B's listening connection on the server:
// B reconnects, wakes everyone (notifications may have been lost), and
// wake-ups from A reach it again.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := openSchema(t, schema, nil)
	b := openSchema(t, schema, &Options{ListenRetryMax: 100 * time.Millisecond})
	orch, stop := b.Subscribe(provider.QueueOrchestrator)
	defer stop()
	pid := b.listenConnPID.Load()
	if pid == 0 {
		t.Fatal("B has no listening connection")
	}
	var ok bool
	if err := a.pool.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	// The reconnect wakes every subscriber.
	waitFor(t, orch, 20*time.Second, "wake-up after the listener reconnected")
	if n := b.Stats().ListenerReconnects; n < 1 {
		t.Fatalf("ListenerReconnects = %d after a wake-up, want >= 1", n)
	}
	if newPID := b.listenConnPID.Load(); newPID == pid || newPID == 0 {
		t.Fatalf("listening backend %d after reconnect, was %d", newPID, pid)
	}
	drain(orch)
	if _, err := a.Enqueue(t.Context(), providertest.HammerStart("after")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, orch, 10*time.Second, "B's subscriber after A's enqueue, once reconnected")
}

// TestTwoStoresNeverDoubleLock runs the hammer on two stores sharing one
// schema: no instance is ever held by two fetchers, nothing is lost or
// repeated.
func TestTwoStoresNeverDoubleLock(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := openSchema(t, schema, nil)
	b := openSchema(t, schema, nil)
	providertest.Hammer(t, []provider.Provider{a, b}, 6, 10)
	if !t.Failed() {
		checkReadyTable(t, a)
	}
}

// TestNotifyWithManyInstances: a commit touching more instances than a
// notification can name (PostgreSQL caps payloads at 8000 bytes) still
// wakes the other node's watchers of each of them.
func TestNotifyWithManyInstances(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	a := openSchema(t, schema, nil)
	b := openSchema(t, schema, nil)
	var msgs []*provider.OrchestratorMessage
	for i := range 100 {
		msgs = append(msgs, providertest.HammerStart(fmt.Sprintf("%s-%03d", strings.Repeat("x", 150), i)))
	}
	last := msgs[len(msgs)-1].InstanceID
	watch, stop := b.WatchInstance(last)
	defer stop()
	if _, err := a.Enqueue(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, watch, 10*time.Second, "B's watcher of the last of 100 instances created by A")
}

// TestCheckWritableOnReadOnlyServer: a server that accepts only read-only
// transactions (a standby after a failover) fails the readiness probe
// with a retryable ErrUnavailable, and writes fail the same way.
func TestCheckWritableOnReadOnlyServer(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	openSchema(t, schema, nil) // migrates
	dsn := testDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	ro, err := Open(t.Context(), dsn+sep+"default_transaction_read_only=on",
		&Options{Schema: schema, NoMigrate: true, NoListen: true, Logger: quietLogger, MaxConns: 2})
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	defer ro.Close()
	for name, err := range map[string]error{
		"CheckWritable": ro.CheckWritable(t.Context()),
		"Enqueue":       errOf(ro.Enqueue(t.Context(), providertest.HammerStart("ro"))),
	} {
		if !errors.Is(err, provider.ErrUnavailable) || !provider.IsRetryable(err) {
			t.Errorf("%s on a read-only server: %v, want retryable ErrUnavailable", name, err)
		}
	}
	if _, err := ro.GetInstance(t.Context(), "ro"); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("GetInstance on a read-only server: %v, want ErrNotFound (reads work)", err)
	}
}

// checkReadyTable fails unless orchestrator_ready holds exactly one row per
// instance with queued messages, with the ready time, first message and
// earliest visibility (migration 0014) its messages and lock give, and the
// instance's orchestration name and version (migration 0013).
func checkReadyTable(t *testing.T, p *Provider) {
	t.Helper()
	const recomputed = `SELECT q.instance_id, greatest(min(q.visible_at), coalesce(max(l.locked_until), 0)), min(q.id),
         min(q.visible_at), coalesce(max(i.orchestration_name), ''), coalesce(max(i.orchestration_version), '')
     FROM orchestrator_queue AS q LEFT JOIN instance_locks AS l ON l.instance_id = q.instance_id
     LEFT JOIN instances AS i ON i.instance_id = q.instance_id
     GROUP BY q.instance_id`
	const stored = `SELECT instance_id, ready_at, first_id, first_visible, orchestration_name, orchestration_version
     FROM orchestrator_ready`
	var bad int
	err := p.pool.QueryRow(t.Context(), `SELECT count(*) FROM (
    (`+stored+` EXCEPT `+recomputed+`)
    UNION ALL
    (`+recomputed+` EXCEPT `+stored+`)) AS d`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("orchestrator_ready differs from the queue and locks in %d rows", bad)
	}
}

// TestReadyTableStaysExact drives every path that changes the queue or a
// lock (enqueue, fetch, abandon, renew, ack with late arrivals, timers,
// dead-lettering, purge) and checks the scheduling table after each.
func TestReadyTableStaysExact(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkReadyTable(t, p)
	}
	step("enqueue", errOf(p.Enqueue(ctx, providertest.HammerStart("r1"), providertest.HammerStart("r2"), providertest.HammerEvent("r1"))))
	it := providertest.MustFetch(t, p)
	checkReadyTable(t, p)
	step("renew", p.RenewOrchestrationItemLock(ctx, it.LockToken, 2*time.Minute))
	step("late arrival", errOf(p.Enqueue(ctx, providertest.HammerEvent(it.InstanceID))))
	step("abandon", p.AbandonOrchestrationItem(ctx, it.LockToken, provider.AbandonOptions{Delay: time.Second}))
	it = providertest.MustFetch(t, p)
	step("late arrival", errOf(p.Enqueue(ctx, providertest.HammerEvent(it.InstanceID))))
	_, err := p.AckOrchestrationItem(ctx, providertest.HammerTurn(it, 0))
	step("ack", err)
	timer := providertest.HammerEvent("r2")
	timer.VisibleAt = time.Now().Add(time.Hour)
	step("timer", errOf(p.Enqueue(ctx, timer)))
	mustExec(t, p, `UPDATE orchestrator_queue SET work_item = 'not json' WHERE id = (SELECT min(id) FROM orchestrator_queue)`)
	_, err = p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Minute, Max: 10})
	step("fetch with a dead letter", err)
	_, err = p.PurgeInstances(ctx, []string{"r1", "r2"}, provider.PurgeOptions{Force: true})
	step("purge", err)
	var n int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM orchestrator_ready`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("ready rows after purging everything = %d, %v; want 0", n, err)
	}
}

// TestReadyTableExactAroundTurns runs the shared scenario of the paths
// whose lock changes set the ready time from the scheduling row alone
// (migration 0014), checking orchestrator_ready after every step.
func TestReadyTableExactAroundTurns(t *testing.T) {
	t.Parallel()
	clock := providertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := openFresh(t, &Options{Clock: clock.Now})
	providertest.ReadyTableExact(t, p, clock, providertest.ReadyTableHooks{
		Check: func(t *testing.T) { checkReadyTable(t, p) },
		Exec:  func(t *testing.T, q string) { mustExec(t, p, q) },
		Count: func(t *testing.T) int {
			var n int
			if err := p.pool.QueryRow(t.Context(), `SELECT count(*) FROM orchestrator_ready`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

// A schema created before migration 0002 gets its scheduling table filled
// from the queued messages and locks it already has.
func TestMigration0002BackfillsReadyTable(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoMigrate: true})
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, p, sqlCreateMigrationsTable)
	mustExec(t, p, ms[0].SQL)
	mustExec(t, p, sqlInsertMigration, ms[0].Version, ms[0].Name, 0)
	// Data as release 0001 wrote it: messages for a free instance, a locked
	// one with a late arrival, and a delayed timer.
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES
		('free', '{}', 100, 100), ('free', '{}', 50, 100), ('busy', '{}', 10, 10), ('busy', '{}', 20, 20), ('later', '{}', 9000, 1)`)
	mustExec(t, p, `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at) VALUES ('busy', 'tok', 5000, 10)`)
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	checkReadyTable(t, p)
	rows, err := p.pool.Query(t.Context(), `SELECT instance_id || '@' || ready_at FROM orchestrator_ready ORDER BY ready_at, first_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "[free@50 busy@5000 later@9000]"; fmt.Sprint(got) != want {
		t.Fatalf("ready rows = %v, want %s", got, want)
	}
}

// A schema created before migration 0013 gets the orchestration of each
// ready instance copied onto its scheduling row.
func TestMigration0013CopiesOrchestrationsToReadyTable(t *testing.T) {
	t.Parallel()
	p := openMigratedBefore(t, 13)
	mustExec(t, p, `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status, created_at, updated_at)
		VALUES ('named', 'V', '2.0.0', 'Running', 1, 1)`)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ('named', '{}', 10, 10), ('rowless', '{}', 20, 20)`)
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	checkReadyTable(t, p)
	rows, err := p.pool.Query(t.Context(), `SELECT instance_id || '=' || orchestration_name || '@' || orchestration_version FROM orchestrator_ready ORDER BY ready_at`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "[named=V@2.0.0 rowless=@]"; fmt.Sprint(got) != want {
		t.Fatalf("ready rows = %v, want %s", got, want)
	}
}

// openMigratedBefore opens a fresh schema migrated only up to the
// migration before version, as an older release left it.
func openMigratedBefore(t *testing.T, version int) *Provider {
	t.Helper()
	p := openFresh(t, &Options{NoMigrate: true})
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, p, sqlCreateMigrationsTable)
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		mustExec(t, p, m.SQL)
		mustExec(t, p, sqlInsertMigration, m.Version, m.Name, 0)
	}
	return p
}

// A schema created before migration 0014 gets the earliest visibility of
// each ready instance's messages on its scheduling row, and its triggers
// keep the row exact from there.
func TestMigration0014BackfillsFirstVisible(t *testing.T) {
	t.Parallel()
	p := openMigratedBefore(t, 14)
	mustExec(t, p, `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES
		('free', '{}', 100, 100), ('free', '{}', 50, 100), ('busy', '{}', 10, 10), ('busy', '{}', 20, 20), ('later', '{}', 9000, 1)`)
	mustExec(t, p, `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at) VALUES ('busy', 'tok', 5000, 10)`)
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	checkReadyTable(t, p)
	mustExec(t, p, `DELETE FROM instance_locks WHERE instance_id = 'busy'`)
	checkReadyTable(t, p)
	rows, err := p.pool.Query(t.Context(), `SELECT instance_id || '@' || ready_at || '/' || first_visible FROM orchestrator_ready ORDER BY ready_at, first_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "[busy@10/10 free@50/50 later@9000/9000]"; fmt.Sprint(got) != want {
		t.Fatalf("ready rows = %v, want %s", got, want)
	}
}

// A fetch of turns limited to some orchestrations filters on the
// scheduling rows it scans (migration 0013): its plan reads no instance
// row.
func TestTurnCandidatesFilterOnTheReadyRows(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	rows, err := p.pool.Query(t.Context(), "EXPLAIN "+sqlOrchCandidatesNamed, int64(1000), []string{}, "k", 16, []string{"A", "B\x1f", "B\x1f1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "instances") {
		t.Fatalf("the candidates' plan reads instance rows:\n%s", text)
	}
}

// errOf is the error of a call that also returns Enqueue's results.
func errOf(_ []provider.EnqueueResult, err error) error { return err }
