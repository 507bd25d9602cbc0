package dashboard

import (
	"errors"
	"net/http"

	"github.com/duroxide/duroxide-go"
)

// maxSchedulesShown bounds the schedules listed.
const maxSchedulesShown = 1000

// schedulesView is the schedules page's data.
type schedulesView struct {
	Schedules []scheduleRow
	// MoreSchedules counts the schedules not listed (beyond maxSchedulesShown).
	MoreSchedules int
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

// schedulesPage serves GET /schedules: every schedule with its next and
// last fire, and pause, resume and trigger buttons.
func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request) error {
	v := &schedulesView{}
	list, err := d.client.ListSchedules(r.Context())
	switch {
	case errors.Is(err, duroxide.ErrNotSupported):
		v.Unsupported = true
	case err != nil:
		return err
	}
	if len(list) > maxSchedulesShown {
		list, v.MoreSchedules = list[:maxSchedulesShown], len(list)-maxSchedulesShown
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
