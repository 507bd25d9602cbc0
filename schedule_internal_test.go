package duroxide

import (
	"errors"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestScheduleDuePlansEachCatchUpPolicy(t *testing.T) {
	t.Parallel()
	every5 := ScheduleDefinition{Interval: 5 * time.Minute, Start: at("2026-01-01T00:00:00Z"), Orchestration: "o"}
	cron5 := ScheduleDefinition{Cron: "*/5 * * * *", Orchestration: "o"}
	for _, base := range []ScheduleDefinition{every5, cron5} {
		for _, tc := range []struct {
			name      string
			catchUp   ScheduleCatchUp
			window    time.Duration
			next, now string
			want      []string
			after     string
		}{
			{"on time", CatchUpNone, 0, "2026-01-02T10:00:00Z", "2026-01-02T10:00:00Z", []string{"2026-01-02T10:00:00Z"}, "2026-01-02T10:05:00Z"},
			{"not yet", CatchUpAll, 0, "2026-01-02T10:05:00Z", "2026-01-02T10:04:59Z", nil, "2026-01-02T10:05:00Z"},
			{"late within grace", CatchUpNone, 0, "2026-01-02T10:00:00Z", "2026-01-02T10:00:59Z", []string{"2026-01-02T10:00:00Z"}, "2026-01-02T10:05:00Z"},
			{"outage none", CatchUpNone, 0, "2026-01-02T10:05:00Z", "2026-01-02T11:02:30Z", nil, "2026-01-02T11:05:00Z"},
			{"outage last", CatchUpLast, 0, "2026-01-02T10:05:00Z", "2026-01-02T11:02:30Z", []string{"2026-01-02T11:00:00Z"}, "2026-01-02T11:05:00Z"},
			{"outage all", CatchUpAll, 0, "2026-01-02T10:05:00Z", "2026-01-02T11:02:30Z", []string{
				"2026-01-02T10:05:00Z", "2026-01-02T10:10:00Z", "2026-01-02T10:15:00Z", "2026-01-02T10:20:00Z",
				"2026-01-02T10:25:00Z", "2026-01-02T10:30:00Z", "2026-01-02T10:35:00Z", "2026-01-02T10:40:00Z",
				"2026-01-02T10:45:00Z", "2026-01-02T10:50:00Z", "2026-01-02T10:55:00Z", "2026-01-02T11:00:00Z"}, "2026-01-02T11:05:00Z"},
			{"outage all in a window", CatchUpAll, 30 * time.Minute, "2026-01-02T10:05:00Z", "2026-01-02T11:02:30Z", []string{
				"2026-01-02T10:35:00Z", "2026-01-02T10:40:00Z", "2026-01-02T10:45:00Z", "2026-01-02T10:50:00Z",
				"2026-01-02T10:55:00Z", "2026-01-02T11:00:00Z"}, "2026-01-02T11:05:00Z"},
			{"outage last beyond the window", CatchUpLast, 10 * time.Minute, "2026-01-02T10:05:00Z", "2026-01-02T11:12:30Z", []string{"2026-01-02T11:10:00Z"}, "2026-01-02T11:15:00Z"},
		} {
			def := base
			def.CatchUp, def.CatchUpWindow = tc.catchUp, tc.window
			cs, err := compileSchedule(&def)
			if err != nil {
				t.Fatal(err)
			}
			fires, after := cs.due(at(tc.next), at(tc.now))
			var got []string
			for _, f := range fires {
				got = append(got, f.Format(time.RFC3339))
			}
			if len(got) != len(tc.want) || (len(got) > 0 && (got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1])) || !after.Equal(at(tc.after)) {
				t.Errorf("%s (cron %q): fires %v then %v, want %v then %s", tc.name, def.Cron, got, after, tc.want, tc.after)
			}
		}
	}
}

func TestScheduleCronTimeZone(t *testing.T) {
	t.Parallel()
	cs, err := compileSchedule(&ScheduleDefinition{Cron: "0 2 * * *", TimeZone: "Europe/Paris", Orchestration: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cs.after(at("2026-01-10T12:00:00Z")), at("2026-01-11T01:00:00Z"); !got.Equal(want) {
		t.Fatalf("02:00 Paris after noon UTC = %v, want %v", got, want)
	}
	if got, want := cs.after(at("2026-07-10T12:00:00Z")), at("2026-07-11T00:00:00Z"); !got.Equal(want) {
		t.Fatalf("02:00 Paris in summer = %v, want %v", got, want)
	}
	// Daylight saving in Paris (2026): 02:30 does not exist on March 29
	// and happens twice on October 25.
	dst, err := compileSchedule(&ScheduleDefinition{Cron: "30 2 * * *", TimeZone: "Europe/Paris", Orchestration: "o"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ after, want string }{
		{"2026-03-28T12:00:00Z", "2026-03-30T00:30:00Z"},
		{"2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
		{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z"},
	} {
		if got := dst.after(at(tc.after)); !got.Equal(at(tc.want)) {
			t.Errorf("02:30 Paris after %s = %v, want %s", tc.after, got, tc.want)
		}
	}
	day, err := compileSchedule(&ScheduleDefinition{Cron: "@daily", Orchestration: "o", Start: at("2026-02-01T00:00:00Z")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := day.after(at("2026-01-10T12:00:00Z")), at("2026-02-01T00:00:00Z"); !got.Equal(want) {
		t.Fatalf("@daily from a later start = %v, want %v", got, want)
	}
}

func TestScheduleDefinitionRejected(t *testing.T) {
	t.Parallel()
	for _, def := range []ScheduleDefinition{
		{Orchestration: "o"},
		{Cron: "* * * * *", Interval: time.Minute, Orchestration: "o"},
		{Cron: "@every 5m", Orchestration: "o"},
		{Cron: "CRON_TZ=Europe/Paris 0 2 * * *", Orchestration: "o"},
		{Cron: "61 * * * *", Orchestration: "o"},
		{Cron: "* * * * * *", Orchestration: "o"},
		{Cron: "* * * * *", TimeZone: "Mars/Olympus", Orchestration: "o"},
		{Cron: "* * * * *", TimeZone: "Local", Orchestration: "o"},
		{Interval: time.Millisecond, Orchestration: "o"},
		{Interval: time.Minute, TimeZone: "UTC", Orchestration: "o"},
		{Interval: time.Minute},
		{Interval: time.Minute, Orchestration: "o", Overlap: "sometimes"},
		{Interval: time.Minute, Orchestration: "o", CatchUp: "maybe"},
		{Interval: time.Minute, Orchestration: "o", CatchUpWindow: -time.Second},
		{Interval: time.Minute, Orchestration: "o", Overlap: OverlapAllow, LockKey: "k"},
		{Interval: time.Minute, Orchestration: "o", Input: []byte("{")},
		{Interval: time.Minute, Orchestration: "o\x00"},
	} {
		if _, err := compileSchedule(&def); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: err = %v, want ErrInvalidArgument", def, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a\nb", string(make([]byte, MaxScheduleIDLength+1))} {
		if err := checkScheduleID(id); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("schedule ID %q: err = %v, want ErrInvalidArgument", id, err)
		}
	}
}
