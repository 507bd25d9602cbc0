package postgres

import (
	"strings"
	"testing"
)

// TestFusedStepsReuseTheWorkerRow: in a chain of activities, each
// activity's ack that carries the next turn (WorkAck.Then), which leases
// the next activity to the same node, turns the acked worker row into the
// next activity's (sqlAckWorkIfQuietReuse) instead of deleting it and
// inserting another: per orchestration of five chained activities, one
// worker row is inserted (by the first turn) and one deleted (by the last
// activity's ack), where each step inserted and deleted one before.
func TestFusedStepsReuseTheWorkerRow(t *testing.T) {
	t.Parallel()
	tr := &countingTracer{}
	p := openFresh(t, &Options{tracer: tr, MaxConns: 4})
	run := runSequences(t, p)
	run(0) // warm up
	const n = 5
	tr.snapshot()
	for i := range n {
		run(10 + i)
	}
	tr.mu.Lock()
	var inserts, deletes, reuses int
	for sql, k := range tr.full {
		switch {
		case strings.HasPrefix(sql, "INSERT INTO worker_queue"):
			inserts += k
		case strings.HasPrefix(sql, "WITH d AS ( DELETE FROM worker_queue"):
			deletes += k
		case strings.HasPrefix(sql, "WITH d AS ( UPDATE worker_queue"):
			reuses += k
		}
	}
	tr.mu.Unlock()
	if inserts != n || deletes != n || reuses != 4*n {
		t.Errorf("per %d orchestrations: %d worker row insertions, %d deletions, %d reuses; want %d, %d and %d",
			n, inserts, deletes, reuses, n, n, 4*n)
	}
	var rows int
	if err := p.pool.QueryRow(t.Context(), `SELECT count(*) FROM worker_queue`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d worker rows left, want 0", rows)
	}
}
