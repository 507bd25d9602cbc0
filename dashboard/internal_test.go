package dashboard

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// TestSamplerRing samples a store on a fake clock: the first sample comes
// at once, one more per interval, and the ring keeps the newest, oldest
// first.
func TestSamplerRing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := clockwork.NewFakeClock()
	sampled := make(chan struct{})
	s := startSamplerNotify(store, clock, 5*time.Second, 3, slog.New(slog.DiscardHandler), sampled)
	defer s.stop()
	wait := func() {
		t.Helper()
		select {
		case <-sampled:
		case <-time.After(10 * time.Second):
			t.Fatal("no sample")
		}
	}
	wait()
	if got := s.samples(); len(got) != 1 || !got[0].At.Equal(clock.Now()) {
		t.Fatalf("after start: %+v", got)
	}
	start := clock.Now()
	for i := 1; i <= 4; i++ {
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Second)
		wait()
	}
	got := s.samples()
	if len(got) != 3 {
		t.Fatalf("%d samples, want the ring's 3", len(got))
	}
	for i, x := range got {
		if want := start.Add(time.Duration(i+2) * 5 * time.Second); !x.At.Equal(want) {
			t.Fatalf("sample %d at %v, want %v", i, x.At, want)
		}
	}
	if l, ok := s.latest(); !ok || !l.At.Equal(got[2].At) {
		t.Fatalf("latest %v, want %v", l.At, got[2].At)
	}
}

func TestSampleCounts(t *testing.T) {
	t.Parallel()
	s := sample{ByStatus: map[provider.Status]int64{provider.StatusRunning: 2, provider.StatusContinuedAsNew: 1,
		provider.StatusCompleted: 5, provider.StatusFailed: 1, provider.StatusCanceled: 1}}
	if s.count("Running") != 3 || s.count("Completed") != 5 || s.finished() != 7 {
		t.Fatalf("counts: running %d, completed %d, finished %d", s.count("Running"), s.count("Completed"), s.finished())
	}
}

// TestTimeline lays out a history: an activity that failed and was
// retried, a fired timer, an event that arrived, a child still running.
func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	events := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, Name: "O", TimestampMs: ms(0)},
		{EventID: 2, Kind: history.ActivityScheduled, Name: "Charge", Input: json.RawMessage(`1`), TimestampMs: ms(0)},
		{EventID: 3, Kind: history.ActivityFailed, SourceEventID: 2, Error: &history.ErrorDetails{Message: "declined"}, TimestampMs: ms(time.Second)},
		{EventID: 4, Kind: history.ActivityScheduled, Name: "Charge", Input: json.RawMessage(`1`), TimestampMs: ms(2 * time.Second)},
		{EventID: 5, Kind: history.ActivityCompleted, SourceEventID: 4, TimestampMs: ms(3 * time.Second)},
		{EventID: 6, Kind: history.TimerCreated, FireAtMs: ms(5 * time.Second), TimestampMs: ms(3 * time.Second)},
		{EventID: 7, Kind: history.TimerFired, SourceEventID: 6, FireAtMs: ms(5 * time.Second), TimestampMs: ms(5 * time.Second)},
		{EventID: 8, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ms(5 * time.Second)},
		{EventID: 9, Kind: history.ExternalEvent, Name: "approval", TimestampMs: ms(6 * time.Second)},
		{EventID: 10, Kind: history.SubOrchestrationScheduled, Name: "Ship", ChildInstanceID: "c1", TimestampMs: ms(6 * time.Second)},
	}
	tl := buildTimeline(events, t0.Add(10*time.Second), true)
	if tl == nil || len(tl.Bars) != 5 {
		t.Fatalf("timeline %+v, want 5 bars", tl)
	}
	want := []struct {
		label, class string
		dur          time.Duration
		attempt      int
	}{
		{"Charge", "failed", time.Second, 1},
		{"Charge (attempt 2)", "ok", time.Second, 2},
		{"timer", "timer", 2 * time.Second, 0},
		{"event approval", "event", time.Second, 0},
		{"child Ship", "child pending", 4 * time.Second, 0},
	}
	for i, w := range want {
		b := tl.Bars[i]
		if b.Label != w.label || b.Class != w.class || b.Duration != w.dur || b.Attempt != w.attempt {
			t.Errorf("bar %d: %q %q %v attempt %d, want %q %q %v attempt %d", i, b.Label, b.Class, b.Duration, b.Attempt, w.label, w.class, w.dur, w.attempt)
		}
		if b.X < tlLabel || b.X+b.Width > tlWidth {
			t.Errorf("bar %d at %v width %v is outside the chart", i, b.X, b.Width)
		}
	}
	if tl.Span != 10*time.Second {
		t.Errorf("span %v, want 10s (until now)", tl.Span)
	}
	if !strings.Contains(tl.Bars[0].Tip, "declined") {
		t.Errorf("failed bar's tip %q lacks the error", tl.Bars[0].Tip)
	}
	if tl.NowX != 0 {
		t.Errorf("now is drawn at %v although nothing lies ahead", tl.NowX)
	}
	pending := append(events[:6:6], history.Event{EventID: 7, Kind: history.TimerCreated, FireAtMs: ms(time.Minute), TimestampMs: ms(3 * time.Second)})
	if tl := buildTimeline(pending, t0.Add(10*time.Second), true); tl.NowX <= tlLabel || tl.NowX >= tlWidth-10 {
		t.Errorf("now at %v, want inside the axis before the pending timer's end", tl.NowX)
	}
	if buildTimeline(events[:1], t0, false) != nil {
		t.Error("a history without spans has a timeline")
	}
}

func TestUnescapeHTMLEscapes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"\u003cscript\u003e"`: `"<script>"`,
		`"a \u0026 b"`:         `"a & b"`,
		`"\\u003c"`:            `"\\u003c"`,
		`"\\\u003c"`:           `"\\<"`,
		`{"k":"\u003C\u003E"}`: `{"k":"<>"}`,
		`"\u00e9"`:             `"\u00e9"`,
		`"trailing \`:          `"trailing \`,
		`"short \u00`:          `"short \u00`,
	} {
		if got := unescapeHTMLEscapes(in); got != want {
			t.Errorf("unescape(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/instances/a?x=1": "/instances/a?x=1", "": "/", "//evil": "/", "/\\evil": "/", "https://evil": "/",
		"/a\nb": "/", "/a\\b": "/", "evil": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		got, want string
	}{
		{humanDuration(1500 * time.Millisecond), "1.5s"},
		{humanDuration(90 * time.Second), "1m 30s"},
		{humanDuration(25 * time.Hour), "25h 0m"},
		{humanDuration(72 * time.Hour), "3d 0h"},
		{ago(now, now.Add(-3*time.Second)), "3.0s ago"},
		{ago(now, now.Add(5*time.Minute)), "in 5m 0s"},
		{ago(now, time.Time{}), "never"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestFinishRates spreads the rate between two fresh counts over the
// samples in between, and never reports a negative one.
func TestFinishRates(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	done := func(n int64) map[provider.Status]int64 { return map[provider.Status]int64{provider.StatusCompleted: n} }
	ss := []sample{
		{At: at(0), CountedAt: at(0), ByStatus: done(0)},
		{At: at(5), CountedAt: at(0), ByStatus: done(0)}, // reuses the count of 0
		{At: at(10), CountedAt: at(10), ByStatus: done(100)},
		{At: at(15), CountedAt: at(15), ByStatus: done(50)}, // a purge
		{At: at(20), CountedAt: at(20), ByStatus: done(100)},
	}
	got := finishRates(ss)
	want := []float64{10, 10, 0, 10}
	if len(got) != len(want) {
		t.Fatalf("rates %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rates %v, want %v", got, want)
		}
	}
	if finishRates(ss[:1]) != nil {
		t.Fatal("one sample has a rate")
	}
}

func TestVisible(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain-id":              "plain-id",
		"rtl-\u202Eexe.txt":     `rtl-\u202Eexe.txt`,
		"a\u2066b\u2069c\u200F": `a\u2066b\u2069c\u200F`,
		"line\nbreak\ttab":      `line\nbreak\ttab`,
		"nul\x00del\x7f\u0085":  `nul\u0000del\u007F\u0085`,
		"bad\xffutf8":           `bad\xFFutf8`,
		"日本語 ok \uFFFD":         "日本語 ok \uFFFD",
		"bom\uFEFFzw\u200B":     `bom\uFEFFzw\u200B`,
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got := visibleMultiline("a\nb\tc\u202E"); got != "a\nb\tc\\u202E" {
		t.Errorf("visibleMultiline: %q", got)
	}
}

// TestPagesIsolateIDs renders the list and an instance page for an
// instance whose ID holds a right-to-left override: the ID is shown
// escaped inside <bdi>, and only its links carry it, percent-encoded.
func TestPagesIsolateIDs(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := New(duroxide.NewClient(store), &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id := "rtl-\u202Eexe.txt"
	st := duroxide.Status{InstanceID: id, Orchestration: "o\u202Ex", State: duroxide.StateRunning, CreatedAt: time.Unix(1_700_000_000, 0)}
	for name, data := range map[string]any{
		"instances": &instancesView{Instances: []duroxide.Status{st}},
		"instance":  &instanceView{Status: &st},
	} {
		w := httptest.NewRecorder()
		d.render(w, httptest.NewRequest("GET", "/", nil), http.StatusOK, name, data)
		body := w.Body.String()
		if strings.Contains(body, "\u202E") {
			t.Fatalf("%s page holds U+202E:\n%s", name, body)
		}
		for _, want := range []string{`<bdi>rtl-\u202Eexe.txt</bdi>`, `<bdi>o\u202Ex</bdi>`} {
			if !strings.Contains(body, want) {
				t.Fatalf("%s page lacks %s:\n%s", name, want, body)
			}
		}
	}
}

// TestTimelineOfFinishedExecution draws the spans a finished execution
// left open (a timer that never fired because the event came first) as
// closed at the end, not as still open.
func TestTimelineOfFinishedExecution(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	events := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, Name: "Approval", TimestampMs: ms(0)},
		{EventID: 2, Kind: history.TimerCreated, FireAtMs: ms(time.Hour), TimestampMs: ms(0)},
		{EventID: 3, Kind: history.ExternalSubscribed, Name: "approval", TimestampMs: ms(0)},
		{EventID: 4, Kind: history.ExternalEvent, Name: "approval", TimestampMs: ms(3 * time.Second)},
		{EventID: 5, Kind: history.OrchestrationCompleted, TimestampMs: ms(3 * time.Second)},
	}
	tl := buildTimeline(events, t0.Add(3*time.Second), false)
	if tl == nil || len(tl.Bars) != 2 {
		t.Fatalf("timeline %+v, want 2 bars", tl)
	}
	timer := tl.Bars[0]
	if timer.Open || strings.Contains(timer.Class, "pending") || timer.Class != "timer unfinished" || timer.Duration != 3*time.Second {
		t.Fatalf("timer bar: class %q open %v duration %v", timer.Class, timer.Open, timer.Duration)
	}
	if !strings.Contains(timer.Tip, "never fired") {
		t.Fatalf("timer tip %q", timer.Tip)
	}
	if tl.Span != 3*time.Second || tl.NowX != 0 {
		t.Fatalf("span %v, now at %v: want 3s and no now line", tl.Span, tl.NowX)
	}
	// Live, the same timer is open until it fires.
	if live := buildTimeline(events[:3], t0.Add(3*time.Second), true); live.Bars[0].Class != "timer pending" || !live.Bars[0].Open {
		t.Fatalf("live timer bar: %q open %v", live.Bars[0].Class, live.Bars[0].Open)
	}
}

// TestTimelineCanceledTimer ends a timer's bar where the orchestration
// abandoned it (TimerCanceled), not at its fire time or at now.
func TestTimelineCanceledTimer(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	events := []history.Event{
		{EventID: 1, Kind: history.OrchestrationStarted, Name: "O", TimestampMs: ms(0)},
		{EventID: 2, Kind: history.TimerCreated, FireAtMs: ms(time.Hour), TimestampMs: ms(0)},
		{EventID: 3, Kind: history.TimerCanceled, SourceEventID: 2, TimestampMs: ms(2 * time.Second)},
	}
	for _, live := range []bool{true, false} {
		tl := buildTimeline(events, t0.Add(10*time.Second), live)
		if tl == nil || len(tl.Bars) != 1 {
			t.Fatalf("live %v: timeline %+v, want 1 bar", live, tl)
		}
		b := tl.Bars[0]
		if b.Open || b.Class != "canceled" || b.Duration != 2*time.Second || !strings.Contains(b.Tip, "canceled") {
			t.Fatalf("live %v: canceled timer bar: class %q open %v duration %v tip %q", live, b.Class, b.Open, b.Duration, b.Tip)
		}
	}
}

func TestErrorKindAndType(t *testing.T) {
	t.Parallel()
	if errorType("*errors.errorString") != "" || errorType("*fmt.wrapError") != "" || errorType("*app.DeclinedError") != "*app.DeclinedError" {
		t.Fatal("errorType shows a generic type or hides a specific one")
	}
	if errorKind("poison") == "poison" || errorKind("new-kind") != "new-kind" {
		t.Fatal("errorKind")
	}
}

// A running activity's wait shows its routing, timeouts and heartbeat on
// the instance page: queue, heartbeat, start-to-close and
// schedule-to-close timeouts, last heartbeat and details, and whether no
// runtime serves it.
func TestViewWaitShowsActivityOptions(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)
	v := viewWait(&duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Render", ActivityState: duroxide.ActivityQueued,
		Queue: "gpu", HeartbeatTimeoutMs: 60000, HeartbeatAt: at, HeartbeatDetails: []byte(`{"frame":12}`),
		StartToCloseTimeoutMs: 30000, ScheduleToCloseTimeoutMs: 3600000,
		Unserved: true, Message: `no runtime serves activity Render (queue "gpu")`})
	got := map[string]field{}
	for _, f := range v.Fields {
		got[f.Name] = f
	}
	for name, want := range map[string]string{"queue": "gpu", "heartbeat timeout ms": "60000",
		"start to close timeout ms": "30000", "schedule to close timeout ms": "3600000",
		"heartbeat details": `{"frame":12}`, "unserved": "true", "message": `no runtime serves activity Render (queue "gpu")`} {
		if got[name].Value != want {
			t.Errorf("field %q = %q, want %q (fields %+v)", name, got[name].Value, want, v.Fields)
		}
	}
	if !got["heartbeat at"].Time.Equal(at) {
		t.Errorf("heartbeat at = %+v, want %s", got["heartbeat at"], at)
	}
}

// The history table shows the queue and timeouts an activity was
// scheduled with, after its input.
func TestEventRowsShowActivityOptions(t *testing.T) {
	rows := eventRows([]history.Event{
		{EventID: 2, Kind: history.ActivityScheduled, Name: "Render", Input: json.RawMessage(`7`), Queue: "gpu",
			StartToCloseTimeoutMs: 60_000, ScheduleToCloseTimeoutMs: 3_600_000, HeartbeatTimeoutMs: 10_000},
		{EventID: 3, Kind: history.ActivityScheduled, Name: "Plain", Input: json.RawMessage(`8`)},
	})
	want := `7 (queue "gpu", start-to-close 1m0s, schedule-to-close 1h0m0s, heartbeat timeout 10s)`
	if rows[0].Detail != want || rows[1].Detail != "8" {
		t.Fatalf("details %q, %q; want %q, %q", rows[0].Detail, rows[1].Detail, want, "8")
	}
}
