package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// Geometry of the timeline's SVG, in user units.
const (
	tlWidth     = 1000.0
	tlLabel     = 280.0 // the label column
	tlRowHeight = 22.0
	tlBarHeight = 14.0
	tlAxis      = 24.0 // the axis row at the top
	// maxBars bounds the bars drawn; a longer history shows its first bars
	// and says how many were left out.
	maxBars = 400
)

// timeline is an execution's history drawn as bars on a time axis: each
// activity, timer, event wait and sub-orchestration from when it was
// scheduled to when it completed (or to now, still open).
type timeline struct {
	Bars    []bar
	Ticks   []tick
	Height  float64
	Omitted int
	Start   time.Time
	Span    time.Duration
	// NowX is where now is on the axis, for a live execution whose
	// timers lie ahead (0: not drawn).
	NowX float64
}

// bar is one drawn span.
type bar struct {
	Label string
	// Class styles the bar: ok, failed, open, timer, event, child.
	Class    string
	X, Width float64
	Y, TextY float64
	// DurX is where the duration label goes, after the bar.
	DurX     float64
	Start    time.Time
	End      time.Time
	Duration time.Duration
	Open     bool
	Attempt  int
	// Tip is the hover text.
	Tip   string
	Child string
}

// tick is one time label of the axis.
type tick struct {
	X     float64
	Label string
	// Last anchors the label at its end, inside the chart.
	Last bool
}

// span is a bar before layout.
type span struct {
	label, class, child string
	start, end          time.Time
	open                bool
	// unfinished: the execution ended with the span open (a timer that
	// never fired, an event that never came).
	unfinished bool
	attempt    int
	detail     string
}

// buildTimeline lays out the spans of events; open spans end at end (now,
// for a live execution).
func buildTimeline(events []history.Event, end time.Time, live bool) *timeline {
	var spans []*span
	bySource := map[int64]*span{}
	// Open event waits by name, oldest first: an ExternalEvent closes the
	// oldest open wait of its name.
	waits := map[string][]*span{}
	// failures counts failed attempts per activity name and input, to number
	// retries.
	failures := map[string]int{}
	attemptKey := map[*span]string{}
	ts := func(e *history.Event) time.Time { return time.UnixMilli(e.TimestampMs) }
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case history.ActivityScheduled:
			key := e.Name + "\x00" + string(e.Input)
			s := &span{label: e.Name, class: "open", start: ts(e), open: true, attempt: failures[key] + 1}
			attemptKey[s] = key
			spans = append(spans, s)
			bySource[e.EventID] = s
		case history.TimerCreated:
			s := &span{label: "timer", class: "timer", start: ts(e), end: time.UnixMilli(e.FireAtMs), open: true}
			spans = append(spans, s)
			bySource[e.EventID] = s
		case history.ExternalSubscribed:
			s := &span{label: "event " + e.Name, class: "event", start: ts(e), open: true}
			spans = append(spans, s)
			bySource[e.EventID] = s
			waits[e.Name] = append(waits[e.Name], s)
		case history.SubOrchestrationScheduled:
			s := &span{label: "child " + e.Name, class: "child", child: e.ChildInstanceID, start: ts(e), open: true}
			spans = append(spans, s)
			bySource[e.EventID] = s
		case history.ActivityCompleted, history.SubOrchestrationCompleted, history.TimerFired:
			if s := bySource[e.SourceEventID]; s != nil && s.open {
				s.end, s.open = ts(e), false
				if s.class == "open" {
					s.class = "ok"
				}
			}
		case history.ActivityFailed, history.SubOrchestrationFailed:
			if s := bySource[e.SourceEventID]; s != nil && s.open {
				s.end, s.open, s.class = ts(e), false, "failed"
				if e.Error != nil {
					s.detail = e.Error.Message
				}
				if k, ok := attemptKey[s]; ok {
					failures[k]++
				}
			}
		case history.ActivityCancelRequested, history.SubOrchestrationCancelRequested, history.ExternalSubscribedCanceled,
			history.TimerCanceled:
			if s := bySource[e.SourceEventID]; s != nil && s.open {
				s.end, s.open, s.class, s.detail = ts(e), false, "canceled", "canceled"
			}
		case history.ExternalEvent:
			if q := waits[e.Name]; len(q) > 0 {
				s := q[0]
				waits[e.Name] = q[1:]
				if s.open {
					s.end, s.open = ts(e), false
				}
			}
		}
	}
	if len(spans) == 0 {
		return nil
	}
	t := &timeline{}
	if len(spans) > maxBars {
		t.Omitted = len(spans) - maxBars
		spans = spans[:maxBars]
	}
	start := spans[0].start
	if len(events) > 0 {
		start = ts(&events[0])
	}
	last := start
	for _, s := range spans {
		switch {
		case s.open && !live:
			// The execution is over: nothing is open any more.
			if s.class != "timer" || s.end.After(end) {
				s.end = end
			}
			s.open, s.unfinished = false, true
			s.class += " unfinished"
		case s.open && s.class != "timer":
			s.end = end
		}
		if s.end.Before(s.start) {
			s.end = s.start
		}
		last = maxTime(last, s.end)
	}
	if len(events) > 0 {
		last = maxTime(last, ts(&events[len(events)-1]))
	}
	spanDur := max(last.Sub(start), time.Millisecond)
	t.Start, t.Span = start, spanDur
	scale := (tlWidth - tlLabel - 10) / float64(spanDur)
	for i := range 5 {
		off := time.Duration(float64(spanDur) * float64(i) / 4)
		label := "0"
		if off > 0 {
			label = "+" + humanDuration(off)
		}
		t.Ticks = append(t.Ticks, tick{X: tlLabel + float64(off)*scale, Label: label, Last: i == 4})
	}
	for i, s := range spans {
		x := tlLabel + float64(s.start.Sub(start))*scale
		w := max(float64(s.end.Sub(s.start))*scale, 2)
		y := tlAxis + float64(i)*tlRowHeight
		label := s.label
		if s.attempt > 1 {
			label += " (attempt " + strconv.Itoa(s.attempt) + ")"
		}
		b := bar{Label: visible(cut(label, 40)), Class: s.class, X: x, Width: w, Y: y + (tlRowHeight-tlBarHeight)/2, TextY: y + tlRowHeight/2 + 4,
			DurX: min(x+w+4, tlWidth-60), Start: s.start, End: s.end, Duration: s.end.Sub(s.start), Open: s.open, Attempt: s.attempt, Child: s.child}
		state := "took " + humanDuration(b.Duration)
		if s.unfinished {
			state = "never completed: the execution ended after " + humanDuration(b.Duration)
			if strings.HasPrefix(s.class, "timer") {
				state = "never fired: the execution ended after " + humanDuration(b.Duration)
			}
		}
		if s.open {
			state = "open for " + humanDuration(b.Duration)
			if s.class == "timer" {
				state = "fires after " + humanDuration(b.Duration)
			}
		}
		b.Tip = fmt.Sprintf("%s: %s, from +%s", label, state, humanDuration(s.start.Sub(start)))
		if s.detail != "" {
			b.Tip += ": " + cut(s.detail, 200)
		}
		b.Tip = visible(cut(b.Tip, 400))
		if s.open {
			b.Class += " pending"
		}
		t.Bars = append(t.Bars, b)
	}
	t.Height = tlAxis + float64(len(t.Bars))*tlRowHeight + 4
	if live && end.Before(last) {
		t.NowX = tlLabel + float64(end.Sub(start))*scale
	}
	return t
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
