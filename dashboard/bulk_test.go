package dashboard_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// TestBulkPage checks the bulk actions page: the form with its preview
// step, and the jobs with their progress.
func TestBulkPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p := e.get(t, "/bulk")
	if p.status != http.StatusOK {
		t.Fatalf("GET /bulk: %d", p.status)
	}
	mustContain(t, p, `id="bulk-form" data-action="bulk"`, `id="bulk-preview">Preview…</button>`, `id="bulk-confirm"`,
		`<option value="rewind">`, `<option value="Failed">Failed</option>`, `<option value="event">event</option>`,
		`No bulk jobs yet.`, `<a href="/bulk" class="active">Bulk actions</a>`, `<option value="demo.Hello">`)
	mustNotContain(t, e.get(t, "/"), `<a href="/bulk" class="active">`)

	e.start(t, "fail-1", demo.Fail, "boom", true)
	ctx := context.Background()
	res, err := e.client.BulkAction(ctx, &duroxide.BulkRequest{Action: duroxide.BulkPurge,
		Filter: duroxide.ListOptions{States: []duroxide.State{duroxide.StateFailed}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job listed as done", func() bool {
		j, err := e.client.GetBulkJob(ctx, res.Job.ID)
		return err == nil && j.State == duroxide.BulkJobDone
	})
	mustContain(t, e.get(t, "/bulk"), `id="bulk-job-table"`, res.Job.ID, `<td>purge</td>`, `<span class="state">Done</span>`,
		`<progress max="1" value="1"`)
}
