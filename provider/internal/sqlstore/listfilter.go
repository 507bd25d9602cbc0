package sqlstore

import (
	"github.com/duroxide/duroxide-go/provider"
)

// ListFilters returns the SQL conditions (each starting " AND ") of the
// provider.ListInstancesOptions filters written the same way in every
// dialect: version, creation and finish time ranges, roots only. arg adds
// one argument and returns its placeholder ("?" or "$n"). Times are
// compared in epoch milliseconds, as the stores keep them.
func ListFilters(opts provider.ListInstancesOptions, arg func(v any) string) string {
	var q string
	if opts.Version != "" {
		q += " AND orchestration_version = " + arg(opts.Version)
	}
	if !opts.CreatedAfter.IsZero() {
		q += " AND created_at >= " + arg(opts.CreatedAfter.UnixMilli())
	}
	if !opts.CreatedBefore.IsZero() {
		q += " AND created_at < " + arg(opts.CreatedBefore.UnixMilli())
	}
	if !opts.FinishedAfter.IsZero() || !opts.FinishedBefore.IsZero() {
		q += " AND status IN ('Completed', 'Failed', 'Canceled')"
		if !opts.FinishedAfter.IsZero() {
			q += " AND updated_at >= " + arg(opts.FinishedAfter.UnixMilli())
		}
		if !opts.FinishedBefore.IsZero() {
			q += " AND updated_at < " + arg(opts.FinishedBefore.UnixMilli())
		}
	}
	if opts.RootsOnly {
		q += " AND parent_instance_id IS NULL"
	}
	return q
}
