package sqlite

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

// walBtrees runs f on the file store p at path and returns, for each page
// f's commits appended to the WAL, the table or index the page belongs to
// (dbstat), in WAL order. No checkpoint may restart the WAL meanwhile (a
// test makes far fewer commits than checkpointEvery).
func walBtrees(t *testing.T, p *Provider, path string, f func()) []string {
	t.Helper()
	const frame = 24 + 4096 // frame header and a page (the default page size)
	before, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	f()
	after, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	owner := map[uint32]string{}
	rows, err := p.readers.QueryContext(t.Context(), `SELECT name, pageno FROM dbstat`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var name string
		var page uint32
		if err := rows.Scan(&name, &page); err != nil {
			t.Fatal(err)
		}
		owner[page] = name
	}
	var written []string
	for off := max(len(before), 32); off+frame <= len(after); off += frame {
		written = append(written, owner[binary.BigEndian.Uint32(after[off:])])
	}
	return written
}

// The first turn of an instance started without a version resolves the
// version: its ack sets the version alone and leaves the name's index
// (instances_orchestration) unwritten, one WAL frame less per
// orchestration.
func TestFirstTurnVersionLeavesNameIndexAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v.db")
	p := openFile(t, path, &Options{ChangeCheckInterval: -1})
	start := benchStart("v")
	start.Item.Version, start.Create.OrchestrationVersion = "", ""
	if _, err := p.Enqueue(ctx, start); err != nil {
		t.Fatal(err)
	}
	it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	turn := benchTurn(it) // name Bench, version 1.0.0
	written := walBtrees(t, p, path, func() {
		if _, err := p.AckOrchestrationItem(ctx, turn); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.Contains(written, "instances") {
		t.Fatalf("the turn ack wrote %v, not the instance", written)
	}
	if slices.Contains(written, "instances_orchestration") {
		t.Fatalf("the turn ack that resolved the version wrote the name's index: %v", written)
	}
	st, err := p.GetInstance(ctx, "v")
	if err != nil || st.OrchestrationName != "Bench" || st.OrchestrationVersion != "1.0.0" {
		t.Fatalf("instance: %+v, %v; want Bench 1.0.0", st, err)
	}

	// A turn that changes the name sets both (a fresh instance of another
	// orchestration under the same ID is not possible here: rename it).
	if _, err := p.Enqueue(ctx, &provider.OrchestratorMessage{InstanceID: "v", Item: benchCompletion(&provider.WorkItemLease{InstanceID: "v", ExecutionID: 1, ActivityID: 3}).Completion.Item}); err != nil {
		t.Fatal(err)
	}
	it, err = provider.FetchOrchestrationItem(ctx, p, benchFetch)
	if err != nil || it == nil {
		t.Fatalf("second fetch: %v, %v", it, err)
	}
	name, version := "Renamed", "2.0.0"
	second := &provider.TurnAck{LockToken: it.LockToken, ExecutionID: 1,
		Metadata: provider.ExecutionMetadata{OrchestrationName: name, OrchestrationVersion: version, Status: provider.StatusRunning}}
	if _, err := p.AckOrchestrationItem(ctx, second); err != nil {
		t.Fatal(err)
	}
	st, err = p.GetInstance(ctx, "v")
	if err != nil || st.OrchestrationName != name || st.OrchestrationVersion != version {
		t.Fatalf("instance after the rename: %+v, %v; want %s %s", st, err, name, version)
	}
}
