package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/termtext"
)

// timeLayout is RFC 3339 with milliseconds, always in UTC.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// eventJSON is a history event as the HTTP API shows it: eventId, type and
// an RFC 3339 timestamp first, then the event's own fields.
type eventJSON struct {
	EventID   int64             `json:"eventId"`
	Kind      history.EventKind `json:"type"`
	Timestamp string            `json:"timestamp"`
	// TimestampMs shadows the embedded event's field; always zero, so it is
	// omitted and only the RFC 3339 timestamp is shown.
	TimestampMs int64 `json:"timestampMs,omitempty"`
	*history.Event
}

func eventsJSON(evs []history.Event) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i := range evs {
		e := &evs[i]
		out[i] = eventJSON{EventID: e.EventID, Kind: e.Kind, Event: e,
			Timestamp: time.UnixMilli(e.TimestampMs).UTC().Format(timeLayout)}
	}
	return out
}

// printStatus prints a status as aligned "key: value" lines.
func printStatus(w io.Writer, st *duroxide.Status) error {
	tw := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, safe(v))
		}
	}
	row("Instance", st.InstanceID)
	row("Orchestration", st.Orchestration)
	row("Version", st.Version)
	row("Status", string(st.State))
	if st.ExecutionID > 0 {
		row("Execution", strconv.FormatInt(st.ExecutionID, 10))
	}
	row("Parent", st.ParentInstanceID)
	row("Created", formatTime(st.CreatedAt))
	row("Updated", formatTime(st.UpdatedAt))
	if st.Deadline != nil {
		row("Deadline", deadlineText(*st.Deadline, time.Now()))
	}
	row("Input", string(st.Input))
	row("Output", string(st.Output))
	if st.Error != nil {
		row("Error", errorText(st.Error))
	}
	row("Custom status", string(st.CustomStatus))
	if st.HistoryEvents > 0 {
		// What the runtime's history limits measure (and the store keeps).
		row("History", fmt.Sprintf("%d events, %d bytes", st.HistoryEvents, st.HistoryBytes))
	}
	if p := st.Paused; p != nil {
		by := ""
		if p.By != "" {
			by = " by " + p.By
		}
		reason := ""
		if p.Reason != "" {
			reason = ": " + oneLine(p.Reason)
		}
		row("Paused", "since "+formatTime(p.At)+by+reason+" (resume with 'duroxide resume')")
	}
	row("Patches", strings.Join(st.Patches, ", "))
	if st.LastError != nil {
		row("Last error", errorText(st.LastError)+" (the instance is not progressing)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printWaits(w, st)
}

// deadlineText says when a live instance's timeout (Status.Deadline)
// comes, relative to now: "T (in 4m59s; …)", or, once it passed, that
// the instance is timing out (canceled, in its cancel grace period).
func deadlineText(d, now time.Time) string {
	if left := d.Sub(now).Round(time.Second); left > 0 {
		return fmt.Sprintf("%s (in %s; the instance times out then)", formatTime(d), left)
	}
	return fmt.Sprintf("%s (passed %s ago: the instance is timing out)", formatTime(d), now.Sub(d).Round(time.Second))
}

func errorText(e *duroxide.ErrorInfo) string {
	return oneLine(fmt.Sprintf("%s: %s", e.Kind, e.Message))
}

// printHistory prints events as a table.
func printHistory(w io.Writer, evs []history.Event) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tTYPE\tTIME\tDETAILS")
	for i := range evs {
		e := &evs[i]
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.EventID, safe(string(e.Kind)), formatTime(time.UnixMilli(e.TimestampMs)), eventDetails(e))
	}
	return tw.Flush()
}

// eventDetails summarizes the fields of an event on one line.
func eventDetails(e *history.Event) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+safe(v))
		}
	}
	add("name", e.Name)
	add("version", e.Version)
	if e.SourceEventID != 0 {
		add("source", strconv.FormatInt(e.SourceEventID, 10))
	}
	add("child", e.ChildInstanceID)
	if e.Parent != nil {
		add("parent", fmt.Sprintf("%s/%d#%d", e.Parent.InstanceID, e.Parent.ExecutionID, e.Parent.EventID))
	}
	add("session", e.SessionID)
	add("queue", e.Queue)
	for _, t := range []struct {
		k  string
		ms int64
	}{{"startToClose", e.StartToCloseTimeoutMs}, {"scheduleToClose", e.ScheduleToCloseTimeoutMs}, {"heartbeatTimeout", e.HeartbeatTimeoutMs}} {
		if t.ms > 0 {
			add(t.k, (time.Duration(t.ms) * time.Millisecond).String())
		}
	}
	add("input", clip(string(e.Input)))
	add("output", clip(string(e.Output)))
	add("data", clip(string(e.Data)))
	add("status", clip(string(e.CustomStatus)))
	if e.Error != nil {
		add("error", clip(strconv.Quote(string(e.Error.Kind)+": "+e.Error.Message)))
	}
	if e.Reason != "" {
		add("reason", clip(strconv.Quote(e.Reason)))
	}
	if e.FireAtMs != 0 {
		add("fireAt", formatTime(time.UnixMilli(e.FireAtMs)))
	}
	if e.TimeMs != 0 {
		add("time", formatTime(time.UnixMilli(e.TimeMs)))
	}
	add("guid", e.GUID)
	return strings.Join(parts, " ")
}

// clip shortens a value for a table cell.
func clip(s string) string {
	s = oneLine(s)
	const max = 60
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// printInstances prints a page of instances as a table.
func printInstances(w io.Writer, page *duroxide.InstancePage) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "INSTANCE\tORCHESTRATION\tSTATUS\tEXECUTION\tCREATED\tUPDATED")
	for i := range page.Instances {
		st := &page.Instances[i]
		name := st.Orchestration
		if st.Version != "" {
			name += "@" + st.Version
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", safe(st.InstanceID), safe(name), safe(string(st.State)), st.ExecutionID,
			formatTime(st.CreatedAt), formatTime(st.UpdatedAt))
	}
	return tw.Flush()
}

// safe returns a user-controlled value (an instance ID, a name, an error,
// a custom status) for a table cell or a line of text: unchanged when it is
// valid UTF-8 made of printable characters and spaces, else quoted as a Go
// string literal (strconv.Quote), so that control characters (ESC
// sequences, newlines, tabs, carriage returns), invisible formatting
// characters and invalid bytes cannot clear the terminal or forge rows.
func safe(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// printable reports whether s is valid UTF-8 made of printable characters
// and spaces.
func printable(s string) bool { return termtext.Printable(s) }

// escapeText escapes the characters of a free-text message that are not
// printable, for error lines.
func escapeText(s string) string { return termtext.Escape(s) }
