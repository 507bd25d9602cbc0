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
	// A finished job offers no cancel.
	mustNotContain(t, e.get(t, "/bulk"), `data-action="bulk-cancel"`)
}

// TestBulkPageCancelsAJob checks that an unfinished job is offered a
// cancel button, behind a confirmation, and that the API it calls
// cancels the job, which then offers none.
func TestBulkPageCancelsAJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRuntime: true})
	ctx := context.Background()
	res, err := e.client.BulkAction(ctx, &duroxide.BulkRequest{Action: duroxide.BulkPause})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, e.get(t, "/bulk"), `<span class="state">Pending</span>`,
		`data-action="bulk-cancel" data-job="`+res.Job.ID+`" data-confirm="Cancel this job?`,
		`class="bulk-cancel-submit">Cancel job…</button>`, `class="confirm-yes danger bulk-cancel-confirm">Confirm</button>`)
	if r := e.do(t, nil, "POST", "/api/bulk/"+res.Job.ID+"/cancel", ""); r.status != http.StatusOK {
		t.Fatalf("POST cancel: %d %s", r.status, r.body)
	}
	p := e.get(t, "/bulk")
	mustContain(t, p, `<span class="state">Canceled</span>`)
	mustNotContain(t, p, `data-action="bulk-cancel"`)
}
