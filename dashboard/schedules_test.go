package dashboard_test

import (
	"context"
	"net/http"
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
