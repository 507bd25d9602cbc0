package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

func openProbeStore(t *testing.T, opts *Options) *Provider {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	opts.Logger = quietLogger
	path := filepath.Join(t.TempDir(), "probe.db")
	p, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestCheckWritable(t *testing.T) {
	ctx := t.Context()
	t.Run("writable", func(t *testing.T) {
		p := openProbeStore(t, nil)
		if err := p.CheckWritable(ctx); err != nil {
			t.Fatalf("CheckWritable on a fresh store: %v", err)
		}
	})
	t.Run("in memory", func(t *testing.T) {
		p, err := Open(ctx, "", &Options{Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.CheckWritable(ctx); err != nil {
			t.Fatalf("CheckWritable in memory: %v", err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		p := openProbeStore(t, nil)
		// Reads still work; every write fails, as on a read-only file.
		if _, err := p.writer.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.GetInstance(ctx, "nobody"); !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("GetInstance on a read-only store: %v, want ErrNotFound", err)
		}
		err := p.CheckWritable(ctx)
		if err == nil || !strings.Contains(err.Error(), "writable") {
			t.Fatalf("CheckWritable on a read-only store: %v, want an error", err)
		}
		// Writes fail as permanent errors: retrying will not help.
		_, err = p.Enqueue(ctx, &provider.OrchestratorMessage{InstanceID: "x",
			Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: "x", Name: "e"}})
		if err == nil || provider.IsRetryable(err) || provider.IsRetryable(p.CheckWritable(ctx)) {
			t.Fatalf("a write to a read-only store: %v (retryable: %v), want a permanent error", err, provider.IsRetryable(err))
		}
	})
	t.Run("not migrated", func(t *testing.T) {
		p := openProbeStore(t, &Options{NoMigrate: true})
		err := p.CheckWritable(ctx)
		if err == nil || !strings.Contains(err.Error(), "duroxide migrate") {
			t.Fatalf("CheckWritable on an unmigrated store: %v, want an error saying to migrate", err)
		}
	})
	t.Run("not migrated only when it is not", func(t *testing.T) {
		p := openProbeStore(t, nil)
		// The reads fail for another reason than a missing table.
		if err := p.readers.Close(); err != nil {
			t.Fatal(err)
		}
		err := p.CheckWritable(ctx)
		if err == nil || strings.Contains(err.Error(), "migrate") {
			t.Fatalf("CheckWritable with its reads failing: %v, want an error that does not blame migrations", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		p := openProbeStore(t, nil)
		_ = p.Close()
		if err := p.CheckWritable(ctx); !errors.Is(err, provider.ErrClosed) {
			t.Fatalf("CheckWritable after Close: %v, want ErrClosed", err)
		}
	})
}

// TestListInstancesSurvivesCorruptRow checks that a row whose stored JSON
// cannot be decoded is listed with a marker instead of failing the page.
func TestListInstancesSurvivesCorruptRow(t *testing.T) {
	ctx := context.Background()
	p := openProbeStore(t, nil)
	for _, id := range []string{"a", "bad", "c"} {
		_, err := p.Enqueue(ctx, &provider.OrchestratorMessage{
			InstanceID: id,
			Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1,
				Name: "O", Input: json.RawMessage(`{"n":1}`)},
			Create: &provider.NewInstance{OrchestrationName: "O", Input: json.RawMessage(`{"n":1}`)},
		})
		if err != nil {
			t.Fatalf("creating %s: %v", id, err)
		}
	}
	if _, err := p.writer.ExecContext(ctx, `UPDATE instances SET input = '{"n":', error = 'not json' WHERE instance_id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	page, err := p.ListInstances(ctx, provider.ListInstancesOptions{})
	if err != nil {
		t.Fatalf("ListInstances with a corrupt row: %v", err)
	}
	if len(page.Instances) != 3 {
		t.Fatalf("listed %d instances, want 3", len(page.Instances))
	}
	for _, in := range page.Instances {
		switch in.InstanceID {
		case "bad":
			if in.LastError == nil || in.LastError.Kind != history.ErrorInfrastructure ||
				!strings.Contains(in.LastError.Message, "corrupt stored row") || !strings.Contains(in.LastError.Message, "input") {
				t.Fatalf("corrupt row listed with LastError %+v, want the corruption marker", in.LastError)
			}
			if in.Input != nil || in.Error != nil || in.OrchestrationName != "O" {
				t.Fatalf("corrupt row listed as %+v: want the undecodable fields empty and the others filled", in)
			}
		default:
			if in.LastError != nil || string(in.Input) != `{"n":1}` {
				t.Fatalf("healthy row %s listed as %+v", in.InstanceID, in)
			}
		}
	}
	if _, err := p.GetInstance(ctx, "bad"); !errors.Is(err, provider.ErrCorruptData) {
		t.Fatalf("GetInstance of the corrupt row: %v, want ErrCorruptData", err)
	}
}
