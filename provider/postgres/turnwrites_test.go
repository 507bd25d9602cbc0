package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

// rowVersion is the version of a row that a test reads: the transaction
// that wrote it and where. An UPDATE, even to the values the row holds,
// writes a new version (another ctid, this transaction's xmin).
func rowVersion(t *testing.T, p *Provider, table, instance string) string {
	t.Helper()
	var v string
	err := p.pool.QueryRow(t.Context(), `SELECT xmin::text || ' ' || ctid::text FROM `+table+` WHERE instance_id = $1`, instance).Scan(&v)
	if err != nil {
		t.Fatalf("reading the %s row of %q: %v", table, instance, err)
	}
	return v
}

// TestStayRunningTurnsLeaveTheExecutionRow: a turn that sets no metadata
// (sqlUpdateTurn) writes no new version of the execution's row, which it
// would leave as it is, and updates the instance's row in place: its
// update time, the last error it clears, the custom status it sets. The
// execution's first and last turns write both.
func TestStayRunningTurnsLeaveTheExecutionRow(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MaxConns: 4})
	ctx := t.Context()
	providertest.RunFirstTurn(t, p, "a")
	exec0, inst0 := rowVersion(t, p, "executions", "a"), rowVersion(t, p, "instances", "a")

	// A turn abandoned with an error records it on the instance.
	if _, err := p.Enqueue(ctx, providertest.HammerEvent("a")); err != nil {
		t.Fatal(err)
	}
	it := providertest.MustFetch(t, p)
	err := p.AbandonOrchestrationItem(ctx, it.LockToken, provider.AbandonOptions{
		Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "boom"}})
	if err != nil {
		t.Fatal(err)
	}
	// The turn that follows sets the custom status and nothing else.
	it = providertest.MustFetch(t, p)
	ack := providertest.HammerTurn(it, 1)
	if ack.Metadata.Status != "" {
		t.Fatalf("the hammer's second turn sets status %q, want none", ack.Metadata.Status)
	}
	ack.Metadata.CustomStatus = &provider.CustomStatusUpdate{Value: json.RawMessage(`"half"`)}
	if _, err := p.AckOrchestrationItem(ctx, ack); err != nil {
		t.Fatal(err)
	}
	if v := rowVersion(t, p, "executions", "a"); v != exec0 {
		t.Errorf("a turn that sets no metadata rewrote the execution's row (%s, was %s)", v, exec0)
	}
	if v := rowVersion(t, p, "instances", "a"); v == inst0 {
		t.Errorf("a turn that sets no metadata left the instance's row as it was (%s)", v)
	}
	info, err := p.GetInstance(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != provider.StatusRunning || info.CurrentExecutionID != 1 || info.LastError != nil ||
		string(info.CustomStatus) != `"half"` || info.CustomStatusVersion != 1 {
		t.Errorf("after the turn: status %s, execution %d, last error %v, custom status %s (version %d); "+
			"want Running, 1, none, \"half\" (1)", info.Status, info.CurrentExecutionID, info.LastError,
			info.CustomStatus, info.CustomStatusVersion)
	}

	// The last turn ends the execution: both rows are written.
	if _, err := p.Enqueue(ctx, providertest.HammerEvent("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AckOrchestrationItem(ctx, providertest.HammerTurn(providertest.MustFetch(t, p), 2)); err != nil {
		t.Fatal(err)
	}
	if v := rowVersion(t, p, "executions", "a"); v == exec0 {
		t.Errorf("the last turn left the execution's row as it was (%s)", v)
	}
	ex, err := p.GetExecution(ctx, "a", 1)
	if err != nil || ex.Status != provider.StatusCompleted {
		t.Fatalf("execution 1 after the last turn: %+v, %v; want Completed", ex, err)
	}
}

// TestStayRunningTurnCreatesAMissingExecution: a turn that sets no
// metadata for an execution without a row (one after the instance's
// current execution, which only a runtime that lost its history would
// ack) creates it as a turn that sets metadata would: Running, and the
// instance's current execution.
func TestStayRunningTurnCreatesAMissingExecution(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{MaxConns: 4})
	ctx := t.Context()
	providertest.RunFirstTurn(t, p, "a")
	if _, err := p.Enqueue(ctx, providertest.HammerEvent("a")); err != nil {
		t.Fatal(err)
	}
	it := providertest.MustFetch(t, p)
	ack := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 2, History: []history.Event{
		{EventID: 1, Kind: history.ExternalEvent, Name: "go", TimestampMs: 1}}}
	if _, err := p.AckOrchestrationItem(ctx, ack); err != nil {
		t.Fatal(err)
	}
	info, err := p.GetInstance(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != provider.StatusRunning || info.CurrentExecutionID != 2 || info.OrchestrationName != "T" {
		t.Errorf("instance: status %s, execution %d, name %q; want Running, 2, T",
			info.Status, info.CurrentExecutionID, info.OrchestrationName)
	}
	ex, err := p.GetExecution(ctx, "a", 2)
	if err != nil || ex.Status != provider.StatusRunning {
		t.Fatalf("execution 2: %+v, %v; want Running", ex, err)
	}
	h, err := p.ReadHistory(ctx, "a", 2)
	if err != nil || len(h) != 1 {
		t.Fatalf("history of execution 2: %v, %v; want the one event", h, err)
	}
}

// TestWorkInsertsTakeRoutesFromTheMessages: the worker rows' activity
// name and queue are passed with them, as the message they were encoded
// from holds them (sqlenc.Work.Route), not parsed out of their JSON by
// the server, and a leased row's ID is drawn from the identity's sequence
// by name, not looked up in the catalog at each insert. The columns hold
// what the JSON holds, a name that is not valid UTF-8 as the encoding
// replaced it.
func TestWorkInsertsTakeRoutesFromTheMessages(t *testing.T) {
	t.Parallel()
	for name, sql := range map[string]string{"sqlInsertWork": sqlInsertWork, "sqlInsertWorkLeased": sqlInsertWorkLeased} {
		if strings.Contains(sql, "jsonb") || strings.Contains(sql, "pg_get_serial_sequence") {
			t.Errorf("%s parses work items or looks the sequence up:\n%s", name, sql)
		}
	}
	p := openFresh(t, &Options{MaxConns: 4})
	ctx := t.Context()
	plain := providertest.HammerActivity("a", 1)
	named := providertest.HammerActivity("a", 2)
	named.Item.Name, named.Item.Queue = "B\xff", "q"
	if err := p.enqueueWork(ctx, plain, named); err != nil {
		t.Fatal(err)
	}
	rows, err := p.pool.Query(ctx, `SELECT activity_id, activity_name, queue,
    activity_name IS NOT DISTINCT FROM work_item::jsonb ->> 'name' AND queue = coalesce(work_item::jsonb ->> 'queue', '')
FROM worker_queue ORDER BY activity_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var act int64
		var name *string
		var queue string
		var same bool
		err := r.Scan(&act, &name, &queue, &same)
		n := "NULL"
		if name != nil {
			n = *name
		}
		return fmt.Sprintf("%d %s %q %v", act, n, queue, same), err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`1 A "" true`, `2 B` + "\ufffd" + ` "q" true`}
	if !slices.Equal(got, want) {
		t.Errorf("worker rows %q, want %q", got, want)
	}
}
