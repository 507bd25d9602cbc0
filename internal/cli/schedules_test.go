package cli

import (
	"strings"
	"testing"
)

// TestSchedule drives 'duroxide schedule' against the store (--db) and
// through a server (--server): create, list, show, pause, resume, trigger
// and delete print the same, and usage mistakes exit 2.
func TestSchedule(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	srv, _ := apiServer(t, path)
	modes := map[string]func(args ...string) result{
		"direct": func(args ...string) result { return runCLI(t, append(args, "--db", db)...) },
		"server": func(args ...string) result {
			return runCLIEnv(t, map[string]string{envServer: srv.URL, envAuthToken: testToken}, args...)
		},
	}
	for name, run := range modes {
		id := "nightly-" + name
		r := run("schedule", "create", id, "demo.Hello", "--cron", "0 2 * * *", "--tz", "Europe/Paris", "--input", `"Ada"`, "--paused").wantCode(t, 0)
		for _, want := range []string{"Schedule:       " + id, "When:           0 2 * * * (Europe/Paris)", "Orchestration:  demo.Hello",
			`Input:          "Ada"`, "Overlap:        skip", "Lock key:       schedule:" + id, "State:          paused", "Next fire:      -"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("%s: schedule create lacks %q:\n%s", name, want, r.stdout)
			}
		}
		run("schedule", "create", id, "demo.Hello", "--every", "5m").wantErr(t, 1, "already exists")
		var s scheduleJSON
		run("schedule", "resume", id, "--json").wantCode(t, 0).decode(t, &s)
		if s.Paused || s.NextFireAt == nil || s.NextFireAt.UTC().Hour() != 1 {
			t.Fatalf("%s: resumed: %+v (02:00 Paris is 01:00 UTC in winter, 00:00 in summer)", name, s)
		}
		r = run("schedule", "list").wantCode(t, 0)
		if !strings.Contains(r.stdout, "SCHEDULE") || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "active") {
			t.Fatalf("%s: schedule list:\n%s", name, r.stdout)
		}
		r = run("schedule", "trigger", id).wantCode(t, 0)
		if !strings.Contains(r.stdout, "schedule "+id+" fired: triggered, instance "+id+"-") {
			t.Fatalf("%s: schedule trigger printed %q", name, r.stdout)
		}
		run("schedule", "show", id, "--json").wantCode(t, 0).decode(t, &s)
		if s.LastOutcome != "triggered" || !strings.HasSuffix(s.LastInstanceID, "-manual") {
			t.Fatalf("%s: after trigger: %+v", name, s)
		}
		run("schedule", "pause", id).wantCode(t, 0)
		run("schedule", "delete", id).wantCode(t, 0)
		run("schedule", "delete", id).wantErr(t, 1, "no schedule "+id)
		run("schedule", "show", id).wantErr(t, 1, "not found")
	}
	for _, args := range [][]string{
		{"schedule"},
		{"schedule", "bogus", "x"},
		{"schedule", "create", "x"},
		{"schedule", "show"},
		{"schedule", "list", "extra"},
		{"schedule", "pause", "x", "--every", "5m"},
		{"schedule", "delete", "x", "--json"},
		{"schedule", "create", "x", "demo.Hello", "--every", "5m", "--input", "{"},
		{"schedule", "create", "x", "demo.Hello", "--every", "5m", "--start", "tomorrow"},
	} {
		runCLI(t, append(args, "--db", db)...).wantCode(t, 2)
	}
	runCLI(t, "schedule", "create", "x", "demo.Hello", "--cron", "61 * * * *", "--db", db).wantErr(t, 1, "invalid argument")
	if r := runCLI(t, "schedule", "list", "--db", db).wantCode(t, 0); r.stdout != "no schedules\n" {
		t.Fatalf("schedule list of an empty store printed %q", r.stdout)
	}
}

// TestScheduleListPages pages 'duroxide schedule list' with --limit and
// --cursor, directly and through a server, and refuses a bad limit or
// cursor.
func TestScheduleListPages(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	runCLI(t, "migrate", "--db", db).wantCode(t, 0)
	srv, _ := apiServer(t, path)
	for _, id := range []string{"c", "a", "b"} {
		runCLI(t, "schedule", "create", id, "demo.Hello", "--cron", "@daily", "--db", db).wantCode(t, 0)
	}
	modes := map[string]func(args ...string) result{
		"direct": func(args ...string) result { return runCLI(t, append(args, "--db", db)...) },
		"server": func(args ...string) result {
			return runCLIEnv(t, map[string]string{envServer: srv.URL, envAuthToken: testToken}, args...)
		},
	}
	for name, run := range modes {
		var got []string
		args := []string{"schedule", "list", "--limit", "2", "--json"}
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatalf("%s: too many pages", name)
			}
			var page struct {
				Schedules  []scheduleJSON `json:"schedules"`
				NextCursor string         `json:"nextCursor"`
			}
			run(args...).wantCode(t, 0).decode(t, &page)
			for _, s := range page.Schedules {
				got = append(got, s.ID)
			}
			if page.NextCursor == "" {
				break
			}
			args = []string{"schedule", "list", "--limit", "2", "--json", "--cursor", page.NextCursor}
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("%s: paged %v, want a, b, c", name, got)
		}
		r := run("schedule", "list", "--limit", "1").wantCode(t, 0)
		if !strings.Contains(r.stdout, "a") || strings.Contains(r.stdout, " b ") || !strings.Contains(r.stderr, "more schedules: continue with --cursor ") {
			t.Fatalf("%s: a page of 1 printed %q, %q", name, r.stdout, r.stderr)
		}
		run("schedule", "list", "--cursor", "nonsense").wantErr(t, 2, "not a cursor")
	}
	for _, args := range [][]string{
		{"schedule", "list", "--limit", "0"},
		{"schedule", "list", "--limit", "1001"},
		{"schedule", "show", "a", "--limit", "5"},
	} {
		runCLI(t, append(args, "--db", db)...).wantCode(t, 2)
	}
}
