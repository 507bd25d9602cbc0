package dashboard

import (
	"net/http"
	"net/url"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
)

// maxLocksShown bounds the locks listed.
const maxLocksShown = 1000

// locksView is the locks page's data.
type locksView struct {
	Locks []lockRow
	// MoreLocks counts the locks not listed (beyond maxLocksShown).
	MoreLocks int
	Triggers  []triggerRow
}

// lockRow is one execution lock.
type lockRow struct {
	duroxide.LockStatus
	Holder string
	Age    time.Duration
}

// triggerRow is one webhook trigger with its URL.
type triggerRow struct {
	httpapi.Trigger
	URL    string
	Auth   string
	LockTo string
}

// locksPage serves GET /locks: execution locks and webhook triggers.
func (d *Dashboard) locksPage(w http.ResponseWriter, r *http.Request) error {
	locks, err := d.client.ListLocks(r.Context())
	if err != nil {
		return err
	}
	now := d.clock.Now()
	v := &locksView{}
	if len(locks) > maxLocksShown {
		locks, v.MoreLocks = locks[:maxLocksShown], len(locks)-maxLocksShown
	}
	for _, l := range locks {
		row := lockRow{LockStatus: l}
		if l.InstanceID != nil {
			row.Holder = *l.InstanceID
		}
		if l.LockedSince != nil {
			row.Age = now.Sub(*l.LockedSince)
		}
		v.Locks = append(v.Locks, row)
	}
	scheme := "http"
	if d.overTLS(r) {
		scheme = "https"
	}
	for _, t := range d.triggers {
		row := triggerRow{Trigger: t, URL: scheme + "://" + r.Host + "/api/webhooks/" + url.PathEscape(t.ID), Auth: "none"}
		if t.Auth != nil {
			row.Auth = string(t.Auth.Type)
		}
		if t.Concurrency != httpapi.ConcurrencyParallel {
			row.LockTo = t.WorkflowID
			if row.LockTo == "" {
				row.LockTo = t.ID
			}
		}
		v.Triggers = append(v.Triggers, row)
	}
	d.render(w, r, http.StatusOK, "locks", v)
	return nil
}
