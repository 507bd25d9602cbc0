package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/duroxide/duroxide-go"
)

// schedulesView is the schedules page's data.
type schedulesView struct {
	Schedules []scheduleRow
	// NextURL is the next page's URL ("" on the last page); FirstURL the
	// first page's ("" on the first page).
	NextURL, FirstURL string
	// Unsupported: the store keeps no schedules.
	Unsupported bool
}

// scheduleRow is one schedule.
type scheduleRow struct {
	duroxide.ScheduleInfo
	// When describes the fire times: the cron expression and its zone, or
	// the interval.
	When string
}

// schedulesPage serves GET /schedules: a page of schedules (?limit,
// ?cursor) with their next and last fire, pause, resume and trigger
// buttons, and a link to the next page.
func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v := &schedulesView{}
	opts := &duroxide.ScheduleListOptions{Limit: defaultPageSize, Cursor: q.Get("cursor")}
	for name, val := range map[string]string{"cursor": opts.Cursor, "limit": q.Get("limit")} {
		if err := checkText(name, val, maxFilterLength); err != nil {
			return err
		}
	}
	if s := q.Get("limit"); s != "" {
		// A limit above maxPageSize reads maxPageSize.
		n, err := strconv.ParseUint(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			n, err = maxPageSize, nil
		}
		if err != nil || n < 1 {
			return &pageError{code: http.StatusBadRequest, title: "Bad request", details: "limit must be a positive number (at most " + strconv.Itoa(maxPageSize) + " are shown)"}
		}
		opts.Limit = int(min(n, maxPageSize))
	}
	var list []duroxide.ScheduleInfo
	page, err := d.client.ListSchedulesPage(r.Context(), opts)
	switch {
	case errors.Is(err, duroxide.ErrNotSupported):
		v.Unsupported = true
	case errors.Is(err, duroxide.ErrInvalidArgument):
		return &pageError{code: http.StatusBadRequest, title: "Bad request", details: err.Error()}
	case err != nil:
		return err
	default:
		list = page.Schedules
		keep := url.Values{}
		if q.Get("limit") != "" {
			keep.Set("limit", strconv.Itoa(opts.Limit))
		}
		if page.NextCursor != "" {
			next := cloneValues(keep)
			next.Set("cursor", page.NextCursor)
			v.NextURL = "/schedules?" + next.Encode()
		}
		if opts.Cursor != "" {
			v.FirstURL = "/schedules"
			if len(keep) > 0 {
				v.FirstURL += "?" + keep.Encode()
			}
		}
	}
	for _, s := range list {
		row := scheduleRow{ScheduleInfo: s}
		if s.Cron != "" {
			zone := s.TimeZone
			if zone == "" {
				zone = "UTC"
			}
			row.When = s.Cron + " (" + zone + ")"
		} else {
			row.When = "every " + s.Interval.String()
		}
		v.Schedules = append(v.Schedules, row)
	}
	d.render(w, r, http.StatusOK, "schedules", v)
	return nil
}
