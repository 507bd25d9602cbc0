package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// Limits of the instance list's query.
const (
	defaultPageSize = 50
	maxPageSize     = 500
	// maxFilterLength bounds the text filters (orchestration, ID prefix)
	// and the cursor.
	maxFilterLength = 1024
)

// states are the instance states, in the order the list shows them.
var states = []duroxide.State{duroxide.StatePending, duroxide.StateRunning, duroxide.StateCompleted, duroxide.StateFailed, duroxide.StateCanceled}

// instancesView is the instance list's data.
type instancesView struct {
	// The filters, as given.
	State, Orchestration, Prefix string
	Stalled                      bool
	Limit                        int
	Instances                    []duroxide.Status
	// NextURL is the next page's URL ("" on the last page); FirstURL the
	// first page's when this is not it.
	NextURL, FirstURL string
	// Counts per state, from the last health sample (nil before the
	// first).
	Counts  []stateCount
	Total   int64
	Sampled bool
	// CountedAt is when the counts were read.
	CountedAt time.Time
	// Filtered: a filter other than the state is set; the counts then
	// count the instances that match it, each up to maxFilteredCount
	// (Capped: some count reached it and is shown as "N+").
	Filtered bool
	Capped   bool
	// AllURL lists every state with the other filters kept.
	AllURL string
	// Orchestrations offered in the start form.
	Orchestrations []string
	// Query is the current filter query, for the state links.
	Query url.Values
}

// stateCount is one state's instance count, with the link that filters it.
type stateCount struct {
	State duroxide.State
	Count int64
	// More: the count stopped at maxFilteredCount; there are more.
	More   bool
	URL    string
	Active bool
}

// checkText validates a text query parameter or path value by duroxide's
// text rules (duroxide.ValidateText).
func checkText(name, v string, max int) error {
	if err := duroxide.ValidateText(name, v, max); err != nil {
		return &pageError{code: http.StatusBadRequest, title: "Bad request", details: err.Error()}
	}
	return nil
}

// checkLookupID validates the instance ID of a page by the rules for
// looking one up (duroxide.ValidateLookupID): looser than those for a new
// ID, so an instance stored with bidirectional controls in its ID (by an
// earlier release, or by orchestration code naming a child) still has a
// page, where the ID is shown escaped.
func checkLookupID(id string) error {
	if err := duroxide.ValidateLookupID(id); err != nil {
		return &pageError{code: http.StatusBadRequest, title: "Bad request", details: err.Error()}
	}
	return nil
}

// instancesPage serves GET /: the instance list.
func (d *Dashboard) instancesPage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v := &instancesView{State: q.Get("state"), Orchestration: strings.TrimSpace(q.Get("orchestration")),
		Prefix: q.Get("prefix"), Stalled: q.Get("stalled") == "1" || q.Get("stalled") == "true", Limit: defaultPageSize}
	cursor := q.Get("cursor")
	for name, val := range map[string]string{"state": v.State, "orchestration": v.Orchestration, "prefix": v.Prefix, "cursor": cursor, "limit": q.Get("limit")} {
		if err := checkText(name, val, maxFilterLength); err != nil {
			return err
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageSize {
			return &pageError{code: http.StatusBadRequest, title: "Bad request", details: "limit must be a number from 1 to " + strconv.Itoa(maxPageSize)}
		}
		v.Limit = n
	}
	opts := &duroxide.ListOptions{Orchestration: v.Orchestration, IDPrefix: v.Prefix, Limit: v.Limit, Cursor: cursor, Stalled: v.Stalled}
	if v.Stalled {
		opts.StalledAfter = d.stalled
	}
	if v.State != "" {
		st := duroxide.State(v.State)
		if !validState(st) {
			return &pageError{code: http.StatusBadRequest, title: "Bad request", details: "state must be one of Pending, Running, Completed, Failed, Canceled"}
		}
		opts.States = []duroxide.State{st}
	}
	pageData, err := d.client.ListInstances(r.Context(), opts)
	if err != nil {
		if errors.Is(err, duroxide.ErrInvalidArgument) || errors.Is(err, provider.ErrInvalidArgument) {
			return &pageError{code: http.StatusBadRequest, title: "Bad request", details: err.Error()}
		}
		return err
	}
	v.Instances = pageData.Instances
	if v.Stalled && v.Prefix != "" {
		// The stalled list (one page, from the store's stall rules) does
		// not apply ListOptions.IDPrefix: apply it here.
		v.Instances = slices.DeleteFunc(v.Instances, func(st duroxide.Status) bool { return !strings.HasPrefix(st.InstanceID, v.Prefix) })
	}
	filters := url.Values{}
	for k, val := range map[string]string{"state": v.State, "orchestration": v.Orchestration, "prefix": v.Prefix} {
		if val != "" {
			filters.Set(k, val)
		}
	}
	if v.Stalled {
		filters.Set("stalled", "1")
	}
	if q.Get("limit") != "" {
		filters.Set("limit", strconv.Itoa(v.Limit))
	}
	v.Query = filters
	if pageData.NextCursor != "" {
		next := cloneValues(filters)
		next.Set("cursor", pageData.NextCursor)
		v.NextURL = "/?" + next.Encode()
	}
	if cursor != "" {
		v.FirstURL = "/?" + filters.Encode()
	}
	v.Filtered = v.Orchestration != "" || v.Prefix != "" || v.Stalled
	all := cloneValues(filters)
	all.Del("state")
	v.AllURL = "/"
	if len(all) > 0 {
		v.AllURL = "/?" + all.Encode()
	}
	if v.Filtered {
		// The store counts by state only; the counts of a filtered list
		// are read as one bounded page per state.
		if err := d.filteredCounts(r, v, filters); err != nil {
			return err
		}
	} else if s, ok := d.sampler.latest(); ok {
		v.Sampled, v.CountedAt = true, s.CountedAt
		for _, st := range states {
			link := cloneValues(filters)
			link.Set("state", string(st))
			c := stateCount{State: st, Count: s.count(st), URL: "/?" + link.Encode(), Active: v.State == string(st)}
			v.Counts = append(v.Counts, c)
			v.Total += c.Count
		}
	}
	if d.reg != nil {
		v.Orchestrations = d.reg.Orchestrations()
	}
	d.render(w, r, http.StatusOK, "instances", v)
	return nil
}

// maxFilteredCount caps each state's count on a filtered list: counting
// reads the matching instances, one page of at most this many per state.
const maxFilteredCount = 1000

// filteredCounts fills v's counts for a list filtered by orchestration, ID
// prefix or stalled: per state, the matching instances up to
// maxFilteredCount.
func (d *Dashboard) filteredCounts(r *http.Request, v *instancesView, filters url.Values) error {
	v.Sampled, v.CountedAt = true, time.Now()
	for _, st := range states {
		opts := &duroxide.ListOptions{States: []duroxide.State{st}, Orchestration: v.Orchestration, IDPrefix: v.Prefix,
			Limit: maxFilteredCount, Stalled: v.Stalled}
		if v.Stalled {
			opts.StalledAfter = d.stalled
		}
		page, err := d.client.ListInstances(r.Context(), opts)
		if err != nil {
			return err
		}
		n := len(page.Instances)
		if v.Stalled && v.Prefix != "" {
			// As in the list: the stalled query does not apply the prefix.
			n = 0
			for _, in := range page.Instances {
				if strings.HasPrefix(in.InstanceID, v.Prefix) {
					n++
				}
			}
		}
		link := cloneValues(filters)
		link.Set("state", string(st))
		c := stateCount{State: st, Count: int64(n), More: page.NextCursor != "" || (v.Stalled && len(page.Instances) == maxFilteredCount),
			URL: "/?" + link.Encode(), Active: v.State == string(st)}
		v.Capped = v.Capped || c.More
		v.Counts = append(v.Counts, c)
		v.Total += c.Count
	}
	return nil
}

func validState(s duroxide.State) bool {
	for _, st := range states {
		if s == st {
			return true
		}
	}
	return false
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
