package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// TestSchedulesPage lists schedules with their next and last fire and the
// buttons that fit their state, escaping what users named.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if p := e.get(t, "/schedules"); p.status != http.StatusOK {
		t.Fatalf("GET /schedules: %d", p.status)
	} else {
		mustContain(t, p, `id="no-schedules"`, "No schedules.", `<a href="/schedules" class="active">Schedules</a>`)
	}
	if _, err := e.client.CreateSchedule(ctx, "nightly", &duroxide.ScheduleDefinition{Cron: "0 2 * * *", TimeZone: "Europe/Paris",
		Orchestration: demo.Hello, Input: []byte(`"Ada"`)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateSchedule(ctx, "<b>bold", &duroxide.ScheduleDefinition{Interval: time.Hour, Start: time.Now().Add(time.Hour),
		Orchestration: demo.Hello, Overlap: duroxide.OverlapAllow}, true); err != nil {
		t.Fatal(err)
	}
	p := e.get(t, "/schedules")
	mustContain(t, p, `id="schedule-table"`, "<bdi>nightly</bdi>", "<code>0 2 * * * (Europe/Paris)</code>", "overlap skip, catch-up last",
		`data-action="schedule-pause" data-schedule="nightly"`, `data-action="schedule-trigger" data-schedule="nightly"`,
		"<bdi>&lt;b&gt;bold</bdi>", `data-action="schedule-resume" data-schedule="&lt;b&gt;bold"`, "every 1h0m0s", "overlap allow",
		`<span class="muted">never</span>`, `<span class="muted">none</span>`)
	mustNotContain(t, p, "<b>bold")

	// The buttons' API calls, as app.js sends them.
	f, err := e.client.TriggerSchedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	p = e.get(t, "/schedules")
	mustContain(t, p, `<a href="/instances/`+f.InstanceID+`"><bdi>`+f.InstanceID+`</bdi></a>`, "triggered")
}

// TestSchedulesPagePages pages /schedules with ?limit and the next-page
// link, caps a huge limit and refuses a bad limit or cursor.
func TestSchedulesPagePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	for _, id := range []string{"sched-c", "sched-a", "sched-b"} {
		if _, err := e.client.CreateSchedule(ctx, id, &duroxide.ScheduleDefinition{Cron: "@daily", Orchestration: demo.Hello}, false); err != nil {
			t.Fatal(err)
		}
	}
	p := e.get(t, "/schedules?limit=2")
	mustContain(t, p, "<bdi>sched-a</bdi>", "<bdi>sched-b</bdi>", `id="next-page"`)
	mustNotContain(t, p, "<bdi>sched-c</bdi>", `id="first-page"`)
	m := regexp.MustCompile(`href="(/schedules\?[^"]*)" id="next-page"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no next-page link:\n%s", p.body)
	}
	p = e.get(t, html.UnescapeString(m[1]))
	mustContain(t, p, "<bdi>sched-c</bdi>", `id="first-page"`)
	mustNotContain(t, p, "<bdi>sched-a</bdi>", `id="next-page"`)
	p = e.get(t, "/schedules?limit=99999999999999999999999")
	mustContain(t, p, "<bdi>sched-a</bdi>", "<bdi>sched-c</bdi>")
	mustNotContain(t, p, `id="next-page"`)
	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "cursor=bad"} {
		if p := e.get(t, "/schedules?"+q); p.status != http.StatusBadRequest {
			t.Fatalf("GET /schedules?%s: %d, want 400", q, p.status)
		}
	}
}
