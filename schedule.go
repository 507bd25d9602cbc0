package duroxide

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedules start an orchestration at the times of a cron expression or at
// a fixed interval. They live in the store (provider.ScheduleStore), are
// managed by Client (CreateSchedule, UpdateSchedule, PauseSchedule,
// ResumeSchedule, TriggerSchedule, DeleteSchedule) and fired by every
// Runtime on the store; runtimes sharing a store fire each fire time once:
// a fire claims its time and starts its instance in one store transaction,
// so a paused schedule never fires. ListSchedulesPage lists them a page at
// a time. See docs/schedules.md.

// ScheduleOverlap says what a fire does while an instance started by an
// earlier fire of the schedule still runs. It maps on the execution locks
// (StartOptions.LockKey): every policy but OverlapAllow starts under the
// schedule's lock key (ScheduleDefinition.LockKey).
type ScheduleOverlap string

// The overlap policies.
const (
	// OverlapSkip (the default) skips the fire while the lock is held: an
	// exclusive start, refused with *WorkflowLockedError.
	OverlapSkip ScheduleOverlap = "skip"
	// OverlapBufferOne keeps one fire waiting for the lock
	// (StartOptions.QueueIfLocked) and skips the fires that come while one
	// already waits.
	OverlapBufferOne ScheduleOverlap = "buffer_one"
	// OverlapAllow starts every fire at once, with no lock.
	OverlapAllow ScheduleOverlap = "allow"
	// OverlapReplace cancels the instance holding the lock and starts the
	// fire's instance queued behind it: it begins as soon as the canceled
	// one ends.
	OverlapReplace ScheduleOverlap = "replace"
)

// ScheduleCatchUp says which of the fire times that passed while no
// runtime ran (downtime, or a runtime held up) still start.
type ScheduleCatchUp string

// The catch-up policies.
const (
	// CatchUpLast (the default) starts the latest missed fire time within
	// the catch-up window, once, and skips the others.
	CatchUpLast ScheduleCatchUp = "last"
	// CatchUpNone starts only fires that are on time: less than
	// ScheduleGrace late. Missed ones are skipped.
	CatchUpNone ScheduleCatchUp = "none"
	// CatchUpAll starts every missed fire time within the catch-up window,
	// oldest first (at most MaxCatchUpFires, the latest ones).
	CatchUpAll ScheduleCatchUp = "all"
)

// Schedule limits and defaults.
const (
	// ScheduleGrace is how late a fire may start and still be on time
	// (CatchUpNone).
	ScheduleGrace = time.Minute
	// DefaultCatchUpWindow is how far back CatchUpLast and CatchUpAll
	// look by default.
	DefaultCatchUpWindow = 24 * time.Hour
	// MaxCatchUpFires bounds the fires one catch-up starts (CatchUpAll).
	MaxCatchUpFires = 1000
	// MinScheduleInterval is the shortest fixed interval.
	MinScheduleInterval = time.Second
	// MaxScheduleIDLength bounds schedule IDs.
	MaxScheduleIDLength = 128
)

// ScheduleDefinition is what a schedule starts and when.
type ScheduleDefinition struct {
	// Cron is a cron expression of five fields (minute, hour, day of
	// month, month, day of week) or a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly), read in TimeZone. Exactly one of Cron
	// and Interval is set.
	Cron string `json:"cron,omitempty"`
	// TimeZone is an IANA time zone name (default "UTC"), for Cron.
	TimeZone string `json:"timeZone,omitempty"`
	// Interval fires every Interval from Start (at least
	// MinScheduleInterval).
	Interval time.Duration `json:"interval,omitempty"`
	// Start is when the schedule begins: no fire before it. For Interval
	// it is also the first fire time (default: when the schedule is
	// created).
	Start time.Time `json:"start,omitzero"`

	// Orchestration (required), Version and Input are what each fire
	// starts. Input is the instance's JSON input (default null).
	Orchestration string          `json:"orchestration"`
	Version       string          `json:"version,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`

	// Overlap is the overlap policy (default OverlapSkip).
	Overlap ScheduleOverlap `json:"overlap,omitempty"`
	// LockKey is the execution lock key of the fires (default
	// "schedule:" + the schedule's ID). Give several schedules, or a
	// schedule and a webhook trigger, the same key to keep them from
	// running at once.
	LockKey string `json:"lockKey,omitempty"`
	// LockTTL is the lock's TTL (StartOptions.LockTTL; default
	// DefaultLockTTL).
	LockTTL time.Duration `json:"lockTtl,omitempty"`

	// CatchUp is the catch-up policy (default CatchUpLast) and
	// CatchUpWindow how far back it looks (default DefaultCatchUpWindow;
	// unused by CatchUpNone).
	CatchUp       ScheduleCatchUp `json:"catchUp,omitempty"`
	CatchUpWindow time.Duration   `json:"catchUpWindow,omitempty"`
}

// ScheduleInfo is a stored schedule. Its definition shows the defaults of
// the policy fields left empty (Overlap, CatchUp, CatchUpWindow, LockKey,
// LockTTL).
type ScheduleInfo struct {
	ID string
	ScheduleDefinition
	// Paused schedules do not fire (TriggerSchedule still starts one).
	Paused bool
	// NextFireAt is the next fire time (zero when paused or when it never
	// fires again).
	NextFireAt time.Time
	// LastFireAt is the fire time of the last fire (zero: none yet),
	// LastInstanceID the instance it started ("" when it was skipped) and
	// LastOutcome what happened: "started", "duplicate" (another runtime
	// had started it), "skipped: ..." (the overlap policy), "failed: ...",
	// "triggered" (TriggerSchedule).
	LastFireAt     time.Time
	LastInstanceID string
	LastOutcome    string
	// Revision counts the changes of the schedule.
	Revision             int64
	CreatedAt, UpdatedAt time.Time
}

// compiledSchedule is a checked ScheduleDefinition that computes fire times.
type compiledSchedule struct {
	def  ScheduleDefinition
	cron cron.Schedule
	loc  *time.Location
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// compileSchedule checks def (with Start already defaulted) and prepares
// its fire times.
func compileSchedule(def *ScheduleDefinition) (*compiledSchedule, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: schedule: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	c := &compiledSchedule{def: *def, loc: time.UTC}
	switch {
	case def.Cron == "" && def.Interval == 0:
		return nil, bad("set cron or interval")
	case def.Cron != "" && def.Interval != 0:
		return nil, bad("set cron or interval, not both")
	case def.Interval != 0 && def.Interval < MinScheduleInterval:
		return nil, bad("interval %v is shorter than %v", def.Interval, MinScheduleInterval)
	case def.Interval != 0 && def.TimeZone != "":
		return nil, bad("timeZone is for cron schedules; an interval counts from start")
	}
	if def.Cron != "" {
		if err := checkText("cron expression", def.Cron, 256); err != nil {
			return nil, err
		}
		expr := strings.TrimSpace(def.Cron)
		if strings.HasPrefix(expr, "@every") {
			return nil, bad("cron %q: use interval for a fixed interval", def.Cron)
		}
		if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
			return nil, bad("cron %q: give the time zone in timeZone", def.Cron)
		}
		sch, err := cronParser.Parse(expr)
		if err != nil {
			return nil, bad("cron %q: %v", def.Cron, err)
		}
		c.cron = sch
		if def.TimeZone != "" {
			if err := checkText("time zone", def.TimeZone, 64); err != nil {
				return nil, err
			}
			loc, err := time.LoadLocation(def.TimeZone)
			if err != nil || def.TimeZone == "Local" {
				return nil, bad("unknown time zone %q (use an IANA name such as Europe/Paris)", def.TimeZone)
			}
			c.loc = loc
		}
	}
	for _, err := range []error{
		checkText("orchestration name", def.Orchestration, MaxNameLength),
		checkOptionalText("version", def.Version, MaxNameLength),
		checkOptionalText("lock key", def.LockKey, MaxKeyLength),
	} {
		if err != nil {
			return nil, err
		}
	}
	if len(def.Input) > 0 && !json.Valid(def.Input) {
		return nil, bad("input is not valid JSON")
	}
	switch def.Overlap {
	case "", OverlapSkip, OverlapBufferOne, OverlapAllow, OverlapReplace:
	default:
		return nil, bad("unknown overlap policy %q (skip, buffer_one, allow, replace)", def.Overlap)
	}
	switch def.CatchUp {
	case "", CatchUpLast, CatchUpNone, CatchUpAll:
	default:
		return nil, bad("unknown catch-up policy %q (none, last, all)", def.CatchUp)
	}
	if def.CatchUpWindow < 0 || def.LockTTL < 0 {
		return nil, bad("catchUpWindow and lockTtl must not be negative")
	}
	if def.Overlap == OverlapAllow && (def.LockKey != "" || def.LockTTL != 0) {
		return nil, bad("overlap allow takes no lock; remove lockKey and lockTtl")
	}
	return c, nil
}

// after returns the first fire time after t (zero: none).
func (c *compiledSchedule) after(t time.Time) time.Time {
	if start := c.def.Start; !start.IsZero() && t.Before(start) {
		if c.def.Interval != 0 {
			return start
		}
		t = start.Add(-time.Nanosecond)
	}
	if c.def.Interval != 0 {
		n := t.Sub(c.def.Start)/c.def.Interval + 1
		return c.def.Start.Add(n * c.def.Interval).UTC()
	}
	next := c.cron.Next(t.In(c.loc))
	if next.IsZero() {
		return next
	}
	return next.UTC()
}

// due plans the fires of a schedule whose stored next fire time is next,
// at time now: the fire times to start, oldest first, and the next fire
// time after now. The catch-up policy picks among the fire times in
// [next, now].
func (c *compiledSchedule) due(next, now time.Time) (fires []time.Time, after time.Time) {
	if next.IsZero() || next.After(now) {
		return nil, next
	}
	window := c.def.CatchUpWindow
	if window == 0 {
		window = DefaultCatchUpWindow
	}
	if c.def.CatchUp == CatchUpNone {
		window = ScheduleGrace
	}
	t := next
	if low := now.Add(-window); t.Before(low) {
		t = c.after(low.Add(-time.Nanosecond))
	}
	for !t.IsZero() && !t.After(now) {
		fires = append(fires, t)
		if len(fires) > MaxCatchUpFires {
			fires = fires[1:]
		}
		t = c.after(t)
	}
	if c.def.CatchUp != CatchUpAll && len(fires) > 1 {
		fires = fires[len(fires)-1:]
	}
	if c.def.CatchUp == CatchUpNone && len(fires) == 1 && now.Sub(fires[0]) >= ScheduleGrace {
		fires = nil
	}
	return fires, t
}

// lockKey is the execution lock key of the schedule id's fires ("" for
// OverlapAllow).
func (c *compiledSchedule) lockKey(id string) string {
	switch {
	case c.def.Overlap == OverlapAllow:
		return ""
	case c.def.LockKey != "":
		return c.def.LockKey
	}
	return "schedule:" + id
}

// fireInstanceID is the ID of the instance the fire at t of schedule id
// starts.
func fireInstanceID(id string, t time.Time) string {
	return id + "-" + t.UTC().Format("20060102T150405.999Z")
}

// checkScheduleID checks the ID of a schedule: the rules of instance IDs
// (the IDs of its instances begin with it), at most MaxScheduleIDLength
// bytes.
func checkScheduleID(id string) error {
	if err := checkText("schedule ID", id, MaxScheduleIDLength); err != nil {
		return err
	}
	if id == "." || id == ".." || strings.Contains(id, "/") {
		return fmt.Errorf("%w: schedule ID %q must not be \".\" or \"..\" or contain \"/\"", ErrInvalidArgument, id)
	}
	return nil
}
