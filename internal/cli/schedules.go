package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

var scheduleCommand = &command{
	name:     "schedule",
	synopsis: "create ID ORCHESTRATION (--cron EXPR [--tz ZONE] | --every D) [flags] | list [--limit N] [--cursor C] | show ID | pause ID | resume ID | trigger ID | delete ID [--json]",
	summary:  "create and manage schedules (cron or fixed interval) that runtimes fire",
	details: `A schedule starts ORCHESTRATION at the times of a cron expression (five
fields, or @hourly, @daily, @weekly, @monthly, @yearly, read in --tz) or every
--every from --start. Every runtime on the store fires it; runtimes sharing a
store start each fire time once. The instance of a fire is named
ID-<fire time>, e.g. nightly-20260305T010000Z.

  schedule create ID ORCHESTRATION --cron '0 2 * * *' --tz Europe/Paris
  schedule create ID ORCHESTRATION --every 5m
      --input JSON           the input of every instance
      --overlap P            while a fire's instance still runs: skip (default),
                             buffer_one, allow (no lock) or replace
      --lock-key K           the lock of the fires (default schedule:ID)
      --catch-up P           fires missed while no runtime ran: none, last
                             (default) or all, within --catch-up-window (24h)
      --paused               create it paused
  schedule list              the schedules with their next and last fire, by ID,
                             in pages of --limit (default 100, at most 1000);
                             when there are more, it prints the --cursor that
                             continues the listing
  schedule show ID           one schedule
  schedule pause ID          stop firing; resume ID fires again from now on
  schedule trigger ID        fire now, out of turn (even when paused)
  schedule delete ID         delete it (its instances stay)

--json applies to list ({"schedules": [...], "nextCursor": "..."}), show, create, pause, resume
and trigger, in the HTTP API's form.`,
	run: runSchedule,
}

// scheduleBackend is what the schedule command needs; the store's client
// and the HTTP API both provide it.
type scheduleBackend interface {
	CreateSchedule(ctx context.Context, id string, def *duroxide.ScheduleDefinition, paused bool) (*duroxide.ScheduleInfo, error)
	GetSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error)
	ListSchedulesPage(ctx context.Context, opts *duroxide.ScheduleListOptions) (*duroxide.SchedulePage, error)
	PauseSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error)
	ResumeSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error)
	TriggerSchedule(ctx context.Context, id string) (*duroxide.ScheduleFire, error)
	DeleteSchedule(ctx context.Context, id string) (bool, error)
}

var (
	_ scheduleBackend = (*duroxide.Client)(nil)
	_ scheduleBackend = (*remote)(nil)
)

func runSchedule(ctx context.Context, inv *invocation, args []string) error {
	inv.jsonFlag("the schedule(s) or the fire, in the HTTP API's form")
	inv.serverFlags()
	cron := inv.fs.String("cron", "", "create: a cron expression, e.g. '0 2 * * *' or @daily")
	tz := inv.fs.String("tz", "", "create: the IANA time zone of --cron (default UTC)")
	every := inv.fs.Duration("every", 0, "create: a fixed interval, e.g. 5m (instead of --cron)")
	start := inv.fs.String("start", "", "create: no fire before this RFC 3339 time; the first fire of --every (default now)")
	input := inv.fs.String("input", "", "create: the input of each instance as JSON (default null)")
	version := inv.fs.String("version", "", "create: pin the orchestration version")
	overlap := inv.fs.String("overlap", "", "create: skip, buffer_one, allow or replace (default skip)")
	lockKey := inv.fs.String("lock-key", "", "create: the execution lock key of the fires (default schedule:ID)")
	lockTTL := inv.fs.Duration("lock-ttl", 0, "create: the lock's TTL (default 1h)")
	catchUp := inv.fs.String("catch-up", "", "create: none, last or all (default last)")
	window := inv.fs.Duration("catch-up-window", 0, "create: how far back catch-up looks (default 24h)")
	paused := inv.fs.Bool("paused", false, "create: create it paused")
	limit := inv.fs.Int("limit", duroxide.DefaultScheduleListLimit, "list: page size, 1 to 1000")
	cursor := inv.fs.String("cursor", "", "list: continue a previous listing (printed after its last page)")
	if err := inv.parse(args, 1, "subcommand", "schedule ID", "orchestration"); err != nil {
		return err
	}
	sub, id := inv.arg(0), inv.arg(1)
	want := 2
	switch sub {
	case "list":
		want = 1
	case "create":
		want = 3
	case "show", "pause", "resume", "trigger", "delete":
	default:
		return usageErrorf("schedule: unknown subcommand %q: use create, list, show, pause, resume, trigger or delete", sub)
	}
	if len(inv.args) != want {
		return usageErrorf("schedule %s: want %d argument(s) after the subcommand (see duroxide schedule -h)", sub, want-1)
	}
	if sub != "create" {
		var stray string
		inv.fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Usage, "create:") {
				stray = f.Name
			}
		})
		if stray != "" {
			return usageErrorf("schedule %s: --%s applies to 'schedule create' only", sub, stray)
		}
	}
	if sub != "list" {
		var stray string
		inv.fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Usage, "list:") {
				stray = f.Name
			}
		})
		if stray != "" {
			return usageErrorf("schedule %s: --%s applies to 'schedule list' only", sub, stray)
		}
	}
	if *limit < 1 || *limit > duroxide.MaxScheduleListLimit {
		return usageErrorf("schedule list: --limit must be between 1 and %d, got %d", duroxide.MaxScheduleListLimit, *limit)
	}
	if inv.jsonOut && sub == "delete" {
		return usageErrorf("schedule delete: --json does not apply")
	}
	var def duroxide.ScheduleDefinition
	if sub == "create" {
		def = duroxide.ScheduleDefinition{Cron: *cron, TimeZone: *tz, Interval: *every, Orchestration: inv.arg(2),
			Version: *version, Overlap: duroxide.ScheduleOverlap(*overlap), LockKey: *lockKey, LockTTL: *lockTTL,
			CatchUp: duroxide.ScheduleCatchUp(*catchUp), CatchUpWindow: *window}
		if *input != "" {
			if !json.Valid([]byte(*input)) {
				return usageErrorf("schedule create: --input is not valid JSON: %q", *input)
			}
			def.Input = json.RawMessage(*input)
		}
		if *start != "" {
			t, err := time.Parse(time.RFC3339, *start)
			if err != nil {
				return usageErrorf("schedule create: --start %q is not an RFC 3339 time like 2026-03-05T02:00:00Z", *start)
			}
			def.Start = t
		}
	}
	b, done, err := inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	client, ok := b.(scheduleBackend)
	if !ok {
		return fmt.Errorf("schedule: this backend cannot manage schedules")
	}
	var info *duroxide.ScheduleInfo
	switch sub {
	case "list":
		page, err := client.ListSchedulesPage(ctx, &duroxide.ScheduleListOptions{Limit: *limit, Cursor: *cursor})
		if err != nil {
			if *cursor != "" && errors.Is(err, duroxide.ErrInvalidArgument) {
				return usageErrorf("schedule list: --cursor %q is not a cursor printed by a previous 'duroxide schedule list'", *cursor)
			}
			return interrupted(err)
		}
		list := page.Schedules
		if inv.jsonOut {
			out := struct {
				Schedules  []scheduleJSON `json:"schedules"`
				NextCursor string         `json:"nextCursor,omitempty"`
			}{Schedules: make([]scheduleJSON, len(list)), NextCursor: page.NextCursor}
			for i := range list {
				out.Schedules[i] = toScheduleJSON(&list[i])
			}
			return inv.printJSON(out)
		}
		if len(list) == 0 {
			_, err := fmt.Fprintln(inv.stdout, "no schedules")
			return err
		}
		if err := printSchedules(inv.stdout, list); err != nil {
			return err
		}
		if page.NextCursor != "" {
			fmt.Fprintf(inv.stderr, "more schedules: continue with --cursor %s\n", safe(page.NextCursor))
		}
		return nil
	case "delete":
		ok, err := client.DeleteSchedule(ctx, id)
		if err != nil {
			return interrupted(err)
		}
		if !ok {
			return fmt.Errorf("no schedule %s: nothing to delete (see 'duroxide schedule list')", safe(id))
		}
		_, err = fmt.Fprintf(inv.stdout, "deleted schedule %s\n", safe(id))
		return err
	case "trigger":
		f, err := client.TriggerSchedule(ctx, id)
		if err != nil {
			return interrupted(err)
		}
		if inv.jsonOut {
			return inv.printJSON(fireJSON{FireAt: f.FireAt, InstanceID: f.InstanceID, Outcome: f.Outcome, ReplacedInstanceID: f.ReplacedInstanceID})
		}
		msg := fmt.Sprintf("schedule %s fired: %s", safe(id), safe(f.Outcome))
		if f.InstanceID != "" {
			msg += ", instance " + safe(f.InstanceID)
		}
		_, err = fmt.Fprintln(inv.stdout, msg)
		return err
	case "create":
		info, err = client.CreateSchedule(ctx, id, &def, *paused)
	case "show":
		info, err = client.GetSchedule(ctx, id)
	case "pause":
		info, err = client.PauseSchedule(ctx, id)
	case "resume":
		info, err = client.ResumeSchedule(ctx, id)
	}
	if err != nil {
		return interrupted(err)
	}
	if inv.jsonOut {
		return inv.printJSON(toScheduleJSON(info))
	}
	return printSchedule(inv.stdout, info)
}

// scheduleWhen describes when a schedule fires.
func scheduleWhen(s *duroxide.ScheduleInfo) string {
	if s.Cron != "" {
		tz := s.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		return s.Cron + " (" + tz + ")"
	}
	return "every " + s.Interval.String()
}

func scheduleState(s *duroxide.ScheduleInfo) string {
	if s.Paused {
		return "paused"
	}
	return "active"
}

func fireTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printSchedules(w io.Writer, list []duroxide.ScheduleInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SCHEDULE\tWHEN\tORCHESTRATION\tSTATE\tNEXT FIRE\tLAST FIRE\tLAST OUTCOME")
	for i := range list {
		s := &list[i]
		outcome := s.LastOutcome
		if outcome == "" {
			outcome = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(s.ID), safe(scheduleWhen(s)), safe(s.Orchestration),
			scheduleState(s), fireTime(s.NextFireAt), fireTime(s.LastFireAt), safe(outcome))
	}
	return tw.Flush()
}

func printSchedule(w io.Writer, s *duroxide.ScheduleInfo) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, safe(v)) }
	row("Schedule", s.ID)
	row("When", scheduleWhen(s))
	row("Orchestration", s.Orchestration)
	if len(s.Input) > 0 {
		row("Input", string(s.Input))
	}
	j := toScheduleJSON(s)
	row("Overlap", j.Overlap)
	if j.LockKey != "" {
		row("Lock key", j.LockKey)
	}
	row("Catch-up", j.CatchUp)
	row("State", scheduleState(s))
	row("Next fire", fireTime(s.NextFireAt))
	row("Last fire", fireTime(s.LastFireAt))
	if s.LastInstanceID != "" {
		row("Last instance", s.LastInstanceID)
	}
	if s.LastOutcome != "" {
		row("Last outcome", s.LastOutcome)
	}
	return tw.Flush()
}

// scheduleJSON is a schedule in the HTTP API's form (GET /api/schedules/{id}).
type scheduleJSON struct {
	ID             string          `json:"id"`
	Cron           string          `json:"cron,omitempty"`
	TimeZone       string          `json:"timeZone,omitempty"`
	Interval       string          `json:"interval,omitempty"`
	Start          *time.Time      `json:"start,omitempty"`
	Orchestration  string          `json:"orchestration"`
	Version        string          `json:"version,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Overlap        string          `json:"overlap"`
	LockKey        string          `json:"lockKey,omitempty"`
	LockTTL        string          `json:"lockTtl,omitempty"`
	CatchUp        string          `json:"catchUp"`
	CatchUpWindow  string          `json:"catchUpWindow,omitempty"`
	Paused         bool            `json:"paused"`
	NextFireAt     *time.Time      `json:"nextFireAt"`
	LastFireAt     *time.Time      `json:"lastFireAt"`
	LastInstanceID string          `json:"lastInstanceId,omitempty"`
	LastOutcome    string          `json:"lastOutcome,omitempty"`
	Revision       int64           `json:"revision"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
}

type fireJSON struct {
	FireAt             time.Time `json:"fireAt"`
	InstanceID         string    `json:"instanceId,omitempty"`
	Outcome            string    `json:"outcome"`
	ReplacedInstanceID string    `json:"replacedInstanceId,omitempty"`
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func toScheduleJSON(s *duroxide.ScheduleInfo) scheduleJSON {
	j := scheduleJSON{ID: s.ID, Cron: s.Cron, TimeZone: s.TimeZone, Interval: durString(s.Interval), Start: timePtr(s.Start),
		Orchestration: s.Orchestration, Version: s.Version, Input: s.Input, Overlap: string(s.Overlap), LockKey: s.LockKey,
		LockTTL: durString(s.LockTTL), CatchUp: string(s.CatchUp), CatchUpWindow: durString(s.CatchUpWindow), Paused: s.Paused,
		NextFireAt: timePtr(s.NextFireAt), LastFireAt: timePtr(s.LastFireAt), LastInstanceID: s.LastInstanceID,
		LastOutcome: s.LastOutcome, Revision: s.Revision, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	return j
}

// fromScheduleJSON reads the HTTP API's form back.
func fromScheduleJSON(j *scheduleJSON) (*duroxide.ScheduleInfo, error) {
	s := &duroxide.ScheduleInfo{ID: j.ID, Paused: j.Paused, LastInstanceID: j.LastInstanceID, LastOutcome: j.LastOutcome,
		Revision: j.Revision, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
	s.Cron, s.TimeZone, s.Orchestration, s.Version, s.Input = j.Cron, j.TimeZone, j.Orchestration, j.Version, j.Input
	s.Overlap, s.LockKey, s.CatchUp = duroxide.ScheduleOverlap(j.Overlap), j.LockKey, duroxide.ScheduleCatchUp(j.CatchUp)
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{j.Interval, &s.Interval}, {j.LockTTL, &s.LockTTL}, {j.CatchUpWindow, &s.CatchUpWindow}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return nil, fmt.Errorf("schedule %s: the server answered the duration %q: %w", j.ID, d.s, err)
		}
		*d.dst = v
	}
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{j.Start, &s.Start}, {j.NextFireAt, &s.NextFireAt}, {j.LastFireAt, &s.LastFireAt}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return s, nil
}

// The schedule calls of the client mode.

func (r *remote) scheduleCall(ctx context.Context, method, path string, body any) (*duroxide.ScheduleInfo, error) {
	var j scheduleJSON
	if _, _, err := r.do(ctx, method, path, body, &j); err != nil {
		return nil, err
	}
	return fromScheduleJSON(&j)
}

func (r *remote) CreateSchedule(ctx context.Context, id string, def *duroxide.ScheduleDefinition, paused bool) (*duroxide.ScheduleInfo, error) {
	body := map[string]any{"id": id, "orchestration": def.Orchestration}
	set := func(k, v string) {
		if v != "" {
			body[k] = v
		}
	}
	set("cron", def.Cron)
	set("timeZone", def.TimeZone)
	set("interval", durString(def.Interval))
	set("version", def.Version)
	set("overlap", string(def.Overlap))
	set("lockKey", def.LockKey)
	set("lockTtl", durString(def.LockTTL))
	set("catchUp", string(def.CatchUp))
	set("catchUpWindow", durString(def.CatchUpWindow))
	if !def.Start.IsZero() {
		body["start"] = def.Start
	}
	if len(def.Input) > 0 {
		body["input"] = def.Input
	}
	if paused {
		body["paused"] = true
	}
	return r.scheduleCall(ctx, "POST", "/api/schedules", body)
}

func (r *remote) GetSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error) {
	return r.scheduleCall(ctx, "GET", "/api/schedules/"+pathID(id), nil)
}

func (r *remote) ListSchedulesPage(ctx context.Context, opts *duroxide.ScheduleListOptions) (*duroxide.SchedulePage, error) {
	var out struct {
		Schedules  []scheduleJSON `json:"schedules"`
		NextCursor string         `json:"nextCursor"`
	}
	q := url.Values{}
	if opts != nil && opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts != nil && opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := "/api/schedules"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if _, _, err := r.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	page := &duroxide.SchedulePage{Schedules: make([]duroxide.ScheduleInfo, 0, len(out.Schedules)), NextCursor: out.NextCursor}
	for i := range out.Schedules {
		s, err := fromScheduleJSON(&out.Schedules[i])
		if err != nil {
			return nil, err
		}
		page.Schedules = append(page.Schedules, *s)
	}
	return page, nil
}

func (r *remote) PauseSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error) {
	return r.scheduleCall(ctx, "POST", "/api/schedules/"+pathID(id)+"/pause", nil)
}

func (r *remote) ResumeSchedule(ctx context.Context, id string) (*duroxide.ScheduleInfo, error) {
	return r.scheduleCall(ctx, "POST", "/api/schedules/"+pathID(id)+"/resume", nil)
}

func (r *remote) TriggerSchedule(ctx context.Context, id string) (*duroxide.ScheduleFire, error) {
	var f fireJSON
	if _, _, err := r.do(ctx, "POST", "/api/schedules/"+pathID(id)+"/trigger", nil, &f); err != nil {
		return nil, err
	}
	return &duroxide.ScheduleFire{FireAt: f.FireAt, InstanceID: f.InstanceID, Outcome: f.Outcome, ReplacedInstanceID: f.ReplacedInstanceID}, nil
}

func (r *remote) DeleteSchedule(ctx context.Context, id string) (bool, error) {
	var out struct {
		Deleted bool `json:"deleted"`
	}
	if _, _, err := r.do(ctx, "DELETE", "/api/schedules/"+pathID(id), nil, &out); err != nil {
		return false, err
	}
	return out.Deleted, nil
}
