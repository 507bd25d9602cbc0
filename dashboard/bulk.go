package dashboard

import (
	"errors"
	"net/http"

	"github.com/duroxide/duroxide-go"
)

// bulkView is the bulk actions page's data.
type bulkView struct {
	// Jobs are the newest bulk jobs; Unsupported says the store keeps
	// none.
	Jobs        []duroxide.BulkJob
	Unsupported bool
	// Orchestrations are offered in the filter (the registry's names).
	Orchestrations []string
	WaitKinds      []duroxide.WaitKind
}

// bulkPage serves GET /bulk: the bulk action form (its preview and
// confirmation run in the browser, through POST /api/bulk) and the jobs.
func (d *Dashboard) bulkPage(w http.ResponseWriter, r *http.Request) error {
	v := &bulkView{WaitKinds: duroxide.WaitKinds()}
	if d.reg != nil {
		v.Orchestrations = d.reg.Orchestrations()
	}
	jobs, err := d.client.ListBulkJobs(r.Context(), false)
	switch {
	case errors.Is(err, duroxide.ErrInvalidArgument):
		v.Unsupported = true
	case err != nil:
		return err
	}
	v.Jobs = jobs
	d.render(w, r, http.StatusOK, "bulk", v)
	return nil
}
