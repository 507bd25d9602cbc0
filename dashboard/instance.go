package dashboard

import (
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// maxChildrenShown bounds the children listed on an instance page.
const maxChildrenShown = 200

// instanceView is the instance page's data.
type instanceView struct {
	Status *duroxide.Status
	// WaitError says why WaitingFor could not be read ("" when it was).
	WaitError string
	Waits     []waitView
	// Executions, oldest first; Execution is the one shown.
	Executions []provider.ExecutionInfo
	Execution  int64
	Events     []eventRow
	Timeline   *timeline
	Children   []string
	// MoreChildren: the instance has more children than listed.
	MoreChildren bool
	Lock         *duroxide.LockStatus
	// FailedIn names the activity or child whose failure the orchestration
	// ended with, when the history shows one ("" otherwise).
	FailedIn string
	// Input, Output and CustomStatus are the payloads as shown.
	Input, Output, CustomStatus payloadView
	// Values are the instance's values (OrchestrationContext.SetValue), in
	// key order; ValuesError says why they could not be read.
	Values      []valueView
	ValuesError string
	// MoreEvents counts the events of the execution not listed (the page
	// lists the first maxEventsShown).
	MoreEvents int
	// HistoryURL reads the whole history from the API.
	HistoryURL string
	// MoreWaits counts the waits not listed.
	MoreWaits int
	// ShownExecutions are the executions listed (the newest
	// maxExecutionsShown, oldest first); MoreExecutions counts the others.
	ShownExecutions []provider.ExecutionInfo
	MoreExecutions  int
	// Rewound maps the executions a rewind started to the one each
	// resumes (which ended Failed or Canceled rather than continuing as
	// new).
	Rewound map[int64]int64
	// EventNames are the events the instance waits for, offered in the
	// raise form; the first is its default.
	EventNames []string
}

// valueView is one value of an instance as the page shows it.
type valueView struct {
	Key       string
	Value     payloadView
	UpdatedAt time.Time
}

// Bounds of what an instance page lists.
const (
	// maxEventsShown bounds the history rows.
	maxEventsShown = 1000
	// maxWaitsShown bounds the waits (a fan-out waits on each activity).
	maxWaitsShown = 200
	// maxExecutionsShown bounds the executions listed (the newest).
	maxExecutionsShown = 200
)

// waitView is one entry of waitingFor, drawn generically so that new kinds
// show without template changes: its kind and its other fields, times in
// words.
type waitView struct {
	Kind          string
	Fields        []field
	Stalled       bool
	StalledReason string
}

// field is one named value of a wait; Time is set when the value is a time.
type field struct {
	Name, Value string
	Time        time.Time
}

// instancePage serves GET /instances/{id}[?execution=N].
func (d *Dashboard) instancePage(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkLookupID(id); err != nil {
		return err
	}
	ctx := r.Context()
	v := &instanceView{}
	st, err := d.client.Inspect(ctx, id, &duroxide.WaitOptions{StalledAfter: d.stalled})
	if err != nil {
		// Inspect adds waitingFor to the status; show the status without
		// it rather than nothing.
		var gerr error
		if st, gerr = d.client.GetStatus(ctx, id); gerr != nil {
			return gerr
		}
		v.WaitError = err.Error()
	}
	v.Status = st
	for i := range st.WaitingFor {
		w := &st.WaitingFor[i]
		if w.Kind == duroxide.WaitEvent && !slices.Contains(v.EventNames, w.Name) && len(v.EventNames) < maxWaitsShown {
			v.EventNames = append(v.EventNames, w.Name)
		}
		if len(v.Waits) < maxWaitsShown {
			v.Waits = append(v.Waits, viewWait(w))
		} else {
			v.MoreWaits++
		}
	}
	raw := "/instances/" + pathEscape(id) + "/raw/"
	v.Input = viewPayload(st.Input, "input", raw+"input")
	v.Output = viewPayload(st.Output, "output", raw+"output")
	v.CustomStatus = viewPayload(st.CustomStatus, "custom status", raw+"customStatus")
	if vals, err := d.client.ListValues(ctx, id); err != nil {
		v.ValuesError = err.Error()
	} else {
		for _, val := range vals {
			v.Values = append(v.Values, valueView{Key: val.Key, UpdatedAt: val.UpdatedAt,
				Value: viewPayload(val.Value, "value "+val.Key, "/api/instances/"+pathEscape(id)+"/values/"+pathEscape(val.Key))})
		}
	}
	if v.Executions, err = d.client.ListExecutions(ctx, id); err != nil {
		return err
	}
	v.ShownExecutions = v.Executions
	v.Rewound = rewoundExecutions(v.Executions)
	if n := len(v.Executions); n > maxExecutionsShown {
		v.ShownExecutions, v.MoreExecutions = v.Executions[n-maxExecutionsShown:], n-maxExecutionsShown
	}
	v.Execution = st.ExecutionID
	if s := r.URL.Query().Get("execution"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || len(s) > 20 {
			return &pageError{code: http.StatusBadRequest, title: "Bad request", details: "execution must be a positive number"}
		}
		v.Execution = n
	}
	if v.Execution > 0 {
		events, err := d.client.GetHistory(ctx, id, v.Execution)
		if err != nil {
			return err
		}
		v.HistoryURL = "/api/instances/" + pathEscape(id) + "/history?execution=" + strconv.FormatInt(v.Execution, 10)
		if len(events) > maxEventsShown {
			v.Events, v.MoreEvents = eventRows(events[:maxEventsShown]), len(events)-maxEventsShown
		} else {
			v.Events = eventRows(events)
		}
		if st.State == duroxide.StateFailed {
			v.FailedIn = failedIn(events)
		}
		end, live := d.clock.Now(), true
		for _, e := range v.Executions {
			if e.ExecutionID == v.Execution && !e.CompletedAt.IsZero() {
				end, live = e.CompletedAt, false
			}
		}
		v.Timeline = buildTimeline(events, end, live)
	}
	children, err := d.client.Store().ListChildren(ctx, id)
	if err != nil {
		return err
	}
	slices.Sort(children)
	if len(children) > maxChildrenShown {
		children, v.MoreChildren = children[:maxChildrenShown], true
	}
	v.Children = children
	locks, err := d.client.ListLocks(ctx)
	if err != nil {
		return err
	}
	for i := range locks {
		if locks[i].InstanceID != nil && *locks[i].InstanceID == id {
			v.Lock = &locks[i]
			break
		}
	}
	d.render(w, r, http.StatusOK, "instance", v)
	return nil
}

// rewoundExecutions returns the executions started by a rewind: each
// one whose predecessor ended Failed or Canceled (a ContinueAsNew ends
// its execution ContinuedAsNew).
func rewoundExecutions(ex []provider.ExecutionInfo) map[int64]int64 {
	out := map[int64]int64{}
	for i := 1; i < len(ex); i++ {
		if s := ex[i-1].Status; s == provider.StatusFailed || s == provider.StatusCanceled {
			out[ex[i].ExecutionID] = ex[i-1].ExecutionID
		}
	}
	return out
}

// viewWait turns a Wait into its generic view through its JSON form, so
// every field the type has, now or later, is shown.
func viewWait(wt *duroxide.Wait) waitView {
	v := waitView{Kind: string(wt.Kind), Stalled: wt.Stalled, StalledReason: wt.StalledReason}
	raw, err := json.Marshal(wt)
	if err != nil {
		return v
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		switch k {
		case "kind", "stalled", "stalledReason":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := field{Name: words(k)}
		switch x := m[k].(type) {
		case string:
			if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
				f.Time = t
			} else {
				f.Value = x
			}
		case float64:
			f.Value = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			b, _ := json.Marshal(x)
			f.Value = string(b)
		}
		f.Value = visible(cut(f.Value, maxDetail))
		v.Fields = append(v.Fields, f)
	}
	return v
}

// words turns a camelCase JSON key into lower-case words: "firesAt" →
// "fires at".
func words(key string) string {
	var b strings.Builder
	for i, r := range key {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// eventRow is one history event in the event table.
type eventRow struct {
	ID     int64
	Type   string
	Time   time.Time
	Name   string
	Detail string
	// Failed marks failure events.
	Failed bool
	Source int64
	Child  string
}

// maxDetail bounds the detail text of an event row.
const maxDetail = 300

func eventRows(events []history.Event) []eventRow {
	rows := make([]eventRow, 0, len(events))
	for i := range events {
		e := &events[i]
		row := eventRow{ID: e.EventID, Type: string(e.Kind), Time: time.UnixMilli(e.TimestampMs), Name: e.Name,
			Source: e.SourceEventID, Child: e.ChildInstanceID}
		switch {
		case e.Error != nil:
			row.Failed = true
			row.Detail = e.Error.Message
		case len(e.Output) > 0:
			row.Detail = unescapeHTMLEscapes(string(e.Output))
		case len(e.Data) > 0:
			row.Detail = unescapeHTMLEscapes(string(e.Data))
		case len(e.Input) > 0:
			row.Detail = unescapeHTMLEscapes(string(e.Input))
		case len(e.CustomStatus) > 0:
			row.Detail = unescapeHTMLEscapes(string(e.CustomStatus))
		case e.Reason != "":
			row.Detail = e.Reason
		case e.FireAtMs > 0:
			row.Detail = "fires at " + absTime(time.UnixMilli(e.FireAtMs))
		case e.GUID != "":
			row.Detail = e.GUID
		}
		if opts := activityOptions(e); opts != "" {
			row.Detail = cut(row.Detail, maxDetail-len(opts)) + opts
		}
		row.Detail = visible(cut(row.Detail, maxDetail))
		rows = append(rows, row)
	}
	return rows
}

// activityOptions describes the routing and timeouts an activity was
// scheduled with (ActivityScheduled's Queue and timeouts), as a suffix of
// its row's detail: " (queue gpu, start-to-close 1m0s)"; "" for none.
func activityOptions(e *history.Event) string {
	var parts []string
	if e.Queue != "" {
		parts = append(parts, "queue "+strconv.Quote(e.Queue))
	}
	for _, t := range []struct {
		what string
		ms   int64
	}{{"start-to-close", e.StartToCloseTimeoutMs}, {"schedule-to-close", e.ScheduleToCloseTimeoutMs}, {"heartbeat timeout", e.HeartbeatTimeoutMs}} {
		if t.ms > 0 {
			parts = append(parts, t.what+" "+(time.Duration(t.ms)*time.Millisecond).String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// failedIn names the last failed activity or sub-orchestration of a failed
// execution, with the event numbers, so the page can say where the
// failure came from.
func failedIn(events []history.Event) string {
	scheduled := map[int64]*history.Event{}
	var last *history.Event
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case history.ActivityScheduled, history.SubOrchestrationScheduled:
			scheduled[e.EventID] = e
		case history.ActivityFailed, history.SubOrchestrationFailed:
			last = e
		}
	}
	if last == nil {
		return ""
	}
	s := scheduled[last.SourceEventID]
	if s == nil {
		return ""
	}
	what := "activity " + s.Name
	if s.Kind == history.SubOrchestrationScheduled {
		what = "sub-orchestration " + s.Name + " (" + s.ChildInstanceID + ")"
	}
	return what + ", history event #" + strconv.FormatInt(last.EventID, 10)
}

// rawPayload serves GET /instances/{id}/raw/{part}: the stored bytes of
// the instance's input, output or custom status, as a JSON download, for
// payloads a page shows truncated.
func (d *Dashboard) rawPayload(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkLookupID(id); err != nil {
		return err
	}
	st, err := d.client.GetStatus(r.Context(), id)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	switch part := r.PathValue("part"); part {
	case "input":
		raw = st.Input
	case "output":
		raw = st.Output
	case "customStatus":
		raw = st.CustomStatus
	default:
		return &pageError{code: http.StatusNotFound, title: "Not found", details: "part must be input, output or customStatus"}
	}
	if len(raw) == 0 {
		return &pageError{code: http.StatusNotFound, title: "Not found", details: "the instance has no " + r.PathValue("part")}
	}
	name := strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, cut(id, 100)) + "-" + r.PathValue("part") + ".json"
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(raw)
	return nil
}
