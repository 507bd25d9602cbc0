package duroxide

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// ErrScheduleExists is returned by CreateSchedule for an ID that is taken.
var ErrScheduleExists = provider.ErrScheduleExists

// scheduleStore returns the client's store as a ScheduleStore, or
// ErrNotSupported.
func (c *Client) scheduleStore() (provider.ScheduleStore, error) {
	s, ok := c.p.(provider.ScheduleStore)
	if !ok {
		return nil, fmt.Errorf("schedules: the store does not keep schedules (provider.ScheduleStore): %w", ErrNotSupported)
	}
	return s, nil
}

// now is the store's time, as the stores read it.
func (c *Client) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// scheduleInfo decodes a stored schedule.
func scheduleInfo(s *provider.Schedule) (*ScheduleInfo, error) {
	info := &ScheduleInfo{ID: s.ID, Paused: s.Paused, NextFireAt: s.NextFireAt, LastFireAt: s.LastFireAt,
		LastInstanceID: s.LastInstanceID, LastOutcome: s.LastOutcome, Revision: s.Revision,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if err := json.Unmarshal(s.Spec, &info.ScheduleDefinition); err != nil {
		return nil, fmt.Errorf("schedule %q: decoding its definition: %w: %v", s.ID, provider.ErrCorruptData, err)
	}
	info.fillDefaults()
	return info, nil
}

// fillDefaults writes the defaults of the empty policy fields into s, as
// ScheduleInfo shows them.
func (s *ScheduleInfo) fillDefaults() {
	d := &s.ScheduleDefinition
	if d.Overlap == "" {
		d.Overlap = OverlapSkip
	}
	if d.CatchUp == "" {
		d.CatchUp = CatchUpLast
	}
	if d.CatchUpWindow == 0 && d.CatchUp != CatchUpNone {
		d.CatchUpWindow = DefaultCatchUpWindow
	}
	if d.Overlap != OverlapAllow {
		if d.LockKey == "" {
			d.LockKey = "schedule:" + s.ID
		}
		if d.LockTTL == 0 {
			d.LockTTL = DefaultLockTTL
		}
	}
}

// prepareSchedule checks def, defaults its Start to now and encodes it.
func prepareSchedule(def *ScheduleDefinition, now time.Time) (*compiledSchedule, []byte, error) {
	if def == nil {
		return nil, nil, fmt.Errorf("%w: schedule: nil definition", ErrInvalidArgument)
	}
	d := *def
	if d.Start.IsZero() && d.Interval != 0 {
		d.Start = now
	}
	if !d.Start.IsZero() {
		d.Start = d.Start.UTC().Truncate(time.Millisecond)
	}
	c, err := compileSchedule(&d)
	if err != nil {
		return nil, nil, err
	}
	spec, err := json.Marshal(&d)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: schedule: %v", ErrInvalidArgument, err)
	}
	return c, spec, nil
}

// CreateSchedule stores the schedule id, which fires from its first fire
// time after now (or Start) on, or paused (PauseSchedule) when paused is
// true. ErrScheduleExists if id is taken; ErrInvalidArgument for a bad
// definition; ErrNotSupported if the store keeps no schedules.
func (c *Client) CreateSchedule(ctx context.Context, id string, def *ScheduleDefinition, paused bool) (*ScheduleInfo, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	if err := checkScheduleID(id); err != nil {
		return nil, err
	}
	now := c.now()
	cs, spec, err := prepareSchedule(def, now)
	if err != nil {
		return nil, err
	}
	s := &provider.Schedule{ID: id, Spec: spec, Paused: paused}
	if !paused {
		s.NextFireAt = cs.after(now.Add(-time.Millisecond).Truncate(time.Millisecond))
	}
	if err := st.CreateSchedule(ctx, s); err != nil {
		return nil, fmt.Errorf("creating schedule %q: %w", id, err)
	}
	return c.GetSchedule(ctx, id)
}

// GetSchedule returns the schedule id; ErrNotFound if there is none.
func (c *Client) GetSchedule(ctx context.Context, id string) (*ScheduleInfo, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	if err := checkLookup("schedule ID", id, MaxScheduleIDLength); err != nil {
		return nil, err
	}
	s, err := st.GetSchedule(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading schedule %q: %w", id, err)
	}
	return scheduleInfo(s)
}

// ListSchedules returns every schedule, ordered by ID, in one read; for
// many schedules, ListSchedulesPage reads them a page at a time.
func (c *Client) ListSchedules(ctx context.Context) ([]ScheduleInfo, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	list, err := st.ListSchedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	out := make([]ScheduleInfo, 0, len(list))
	for i := range list {
		info, err := scheduleInfo(&list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	return out, nil
}

// Schedule list pages.
const (
	// DefaultScheduleListLimit is the page size of ListSchedulesPage
	// without a Limit.
	DefaultScheduleListLimit = 100
	// MaxScheduleListLimit caps the page size of ListSchedulesPage: a
	// larger Limit reads this many.
	MaxScheduleListLimit = 1000
)

// ScheduleListOptions selects a page of ListSchedulesPage.
type ScheduleListOptions struct {
	// Limit is the page size (default DefaultScheduleListLimit, capped at
	// MaxScheduleListLimit; negative is ErrInvalidArgument).
	Limit int
	// Cursor continues from a previous page's NextCursor ("": the first
	// page). A cursor not made by ListSchedulesPage is ErrInvalidArgument.
	Cursor string
}

// SchedulePage is one page of schedules, ordered by ID.
type SchedulePage struct {
	Schedules []ScheduleInfo
	// NextCursor reads the next page; "" on the last one.
	NextCursor string
}

// scheduleCursor is the cursor after the schedule id: its ID, encoded so
// that it reads as opaque.
func scheduleCursor(id string) string {
	return "s1." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// parseScheduleCursor returns the ID a cursor continues after.
func parseScheduleCursor(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(cursor, "s1.")
	id, err := base64.RawURLEncoding.DecodeString(rest)
	if !ok || err != nil || len(id) == 0 || len(id) > MaxScheduleIDLength {
		return "", fmt.Errorf("%w: invalid schedule list cursor %q", ErrInvalidArgument, cursor)
	}
	return string(id), nil
}

// ListSchedulesPage returns a page of schedules, ordered by ID; follow
// NextCursor for the next one.
func (c *Client) ListSchedulesPage(ctx context.Context, opts *ScheduleListOptions) (*SchedulePage, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ScheduleListOptions{}
	}
	if opts.Limit < 0 {
		return nil, fmt.Errorf("%w: schedule list limit %d is negative", ErrInvalidArgument, opts.Limit)
	}
	limit := min(cmp.Or(opts.Limit, DefaultScheduleListLimit), MaxScheduleListLimit)
	after, err := parseScheduleCursor(opts.Cursor)
	if err != nil {
		return nil, err
	}
	list, err := st.ListSchedulesPage(ctx, after, limit+1)
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	page := &SchedulePage{Schedules: make([]ScheduleInfo, 0, min(len(list), limit))}
	if len(list) > limit {
		list = list[:limit]
		page.NextCursor = scheduleCursor(list[limit-1].ID)
	}
	for i := range list {
		info, err := scheduleInfo(&list[i])
		if err != nil {
			return nil, err
		}
		page.Schedules = append(page.Schedules, *info)
	}
	return page, nil
}

// changeSchedule applies change to the stored schedule id and writes it
// back, again from a fresh read when another writer came between.
func (c *Client) changeSchedule(ctx context.Context, id string, change func(s *provider.Schedule, now time.Time) error) (*ScheduleInfo, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	if err := checkLookup("schedule ID", id, MaxScheduleIDLength); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := st.GetSchedule(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading schedule %q: %w", id, err)
		}
		if err := change(s, c.now()); err != nil {
			return nil, err
		}
		err = st.UpdateSchedule(ctx, s)
		if errors.Is(err, provider.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("updating schedule %q: %w", id, err)
		}
		return c.GetSchedule(ctx, id)
	}
}

// UpdateSchedule replaces the definition of the schedule id. Its next fire
// time is computed afresh from now; a paused schedule stays paused.
func (c *Client) UpdateSchedule(ctx context.Context, id string, def *ScheduleDefinition) (*ScheduleInfo, error) {
	return c.changeSchedule(ctx, id, func(s *provider.Schedule, now time.Time) error {
		cs, spec, err := prepareSchedule(def, now)
		if err != nil {
			return err
		}
		s.Spec = spec
		s.NextFireAt = time.Time{}
		if !s.Paused {
			s.NextFireAt = cs.after(now.Add(-time.Millisecond).Truncate(time.Millisecond))
		}
		return nil
	})
}

// PauseSchedule stops the schedule id from firing until ResumeSchedule.
func (c *Client) PauseSchedule(ctx context.Context, id string) (*ScheduleInfo, error) {
	return c.changeSchedule(ctx, id, func(s *provider.Schedule, _ time.Time) error {
		s.Paused, s.NextFireAt = true, time.Time{}
		return nil
	})
}

// ResumeSchedule lets the paused schedule id fire again, from its first
// fire time after now: fire times that passed while it was paused are not
// caught up.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (*ScheduleInfo, error) {
	return c.changeSchedule(ctx, id, func(s *provider.Schedule, now time.Time) error {
		info, err := scheduleInfo(s)
		if err != nil {
			return err
		}
		cs, err := compileSchedule(&info.ScheduleDefinition)
		if err != nil {
			return err
		}
		s.Paused = false
		s.NextFireAt = cs.after(now.Add(-time.Millisecond).Truncate(time.Millisecond))
		return nil
	})
}

// DeleteSchedule deletes the schedule id and reports whether it existed.
// Instances it started are not touched.
func (c *Client) DeleteSchedule(ctx context.Context, id string) (bool, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return false, err
	}
	if err := checkLookup("schedule ID", id, MaxScheduleIDLength); err != nil {
		return false, err
	}
	ok, err := st.DeleteSchedule(ctx, id)
	if err != nil {
		return false, fmt.Errorf("deleting schedule %q: %w", id, err)
	}
	return ok, nil
}

// ScheduleFire is what one fire of a schedule did.
type ScheduleFire struct {
	// FireAt is the fire time.
	FireAt time.Time
	// InstanceID is the instance the fire started ("" when it started
	// none: Outcome says why).
	InstanceID string
	// Outcome is as ScheduleInfo.LastOutcome.
	Outcome string
	// ReplacedInstanceID is the instance OverlapReplace canceled.
	ReplacedInstanceID string
}

// TriggerSchedule fires the schedule id now, out of turn, even when it is
// paused, under its overlap policy; its next fire time stays. A fire the
// overlap policy skips is reported in the returned Outcome, not as an
// error.
func (c *Client) TriggerSchedule(ctx context.Context, id string) (*ScheduleFire, error) {
	st, err := c.scheduleStore()
	if err != nil {
		return nil, err
	}
	info, err := c.GetSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	cs, err := compileSchedule(&info.ScheduleDefinition)
	if err != nil {
		return nil, err
	}
	now := c.now().UTC().Truncate(time.Millisecond)
	p, err := c.planFire(ctx, id, cs, now, true)
	if err != nil {
		return nil, err
	}
	// The start and its record on the schedule commit together: a crash
	// cannot leave an instance started that the schedule does not name.
	var f ScheduleFire
	found, err := st.TriggerSchedule(ctx, id, provider.ScheduleStart{FireAt: now, Start: p.msg, BufferOne: p.bufferOne,
		Settle: func(started provider.EnqueueResult, err error) (string, string, bool) {
			var ok bool
			f, ok = p.settle(started, err)
			return f.InstanceID, f.Outcome, ok
		}})
	if err != nil {
		if p.msg != nil && p.msg.Create != nil {
			err = startError(p.name, p.f.InstanceID, p.msg.Create.Lock, err)
		}
		return nil, fmt.Errorf("triggering schedule %q: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("schedule %q: %w", id, ErrNotFound)
	}
	return &f, nil
}

// firePlan is one fire of a schedule, prepared: the start it makes and
// how the start's outcome reads.
type firePlan struct {
	name string
	// f is the fire as it reads when the instance starts, or, when msg is
	// nil, as it reads without a start (a skip or a failure).
	f       ScheduleFire
	msg     *provider.OrchestratorMessage
	manual  bool
	replace bool // OverlapReplace: the start cancels the lock's holder
	// bufferOne (OverlapBufferOne): the store skips the start when a
	// start already waits for the held lock.
	bufferOne bool
	lockKey   string
}

// planFire prepares the fire at time at of schedule id under its overlap
// policy. The start is idempotent, keyed by the schedule and the fire
// time. Errors are the store's; a fire the policy skips, or whose start
// is invalid, is an outcome.
func (c *Client) planFire(ctx context.Context, id string, cs *compiledSchedule, at time.Time, manual bool) (*firePlan, error) {
	def := &cs.def
	p := &firePlan{name: def.Orchestration, manual: manual,
		f: ScheduleFire{FireAt: at, InstanceID: fireInstanceID(id, at), Outcome: "started"}}
	key := "schedule:" + id + ":" + strconv.FormatInt(at.UnixMilli(), 10)
	if manual {
		p.f.InstanceID += "-manual"
		p.f.Outcome = "triggered"
		key += ":manual"
	}
	opts := &StartOptions{Version: def.Version, IdempotencyKey: key, LockKey: cs.lockKey(id), LockTTL: def.LockTTL}
	p.lockKey = opts.LockKey
	switch def.Overlap {
	case OverlapBufferOne:
		// Whether a fire already waits for the lock is checked by the
		// store in the fire's transaction (ScheduleStart.BufferOne), so
		// two schedules sharing the key cannot both queue one.
		opts.QueueIfLocked = true
		p.bufferOne = true
	case OverlapReplace:
		opts.QueueIfLocked = true
		p.replace = true
	}
	input := def.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	msg, err := c.startMessage(p.f.InstanceID, def.Orchestration, input, opts)
	if err != nil {
		if !errors.Is(err, ErrInvalidArgument) {
			return nil, err
		}
		p.f.InstanceID, p.f.Outcome = "", "failed: "+err.Error()
		return p, nil
	}
	if p.replace {
		// The store cancels the lock's live holder in the fire's own
		// transaction: a crash cannot leave the holder running beside
		// the fire that replaced it.
		msg.Create.Lock.Replace = true
		msg.Create.Lock.ReplaceReason = "replaced by " + p.f.InstanceID + " (schedule " + id + ")"
	}
	p.msg = msg
	return p, nil
}

// settle returns the fire as it reads after its start returned started
// and err (nil: started), and false for an error that is not an outcome
// (the store's). Under OverlapReplace, a fire that started names the
// holder its transaction canceled.
func (p *firePlan) settle(started provider.EnqueueResult, err error) (ScheduleFire, bool) {
	f := p.f
	if p.msg == nil {
		return f, true
	}
	if err == nil {
		if p.replace {
			f.ReplacedInstanceID = started.Replaced
		}
		return f, true
	}
	var waiting *provider.StartWaitingError
	if errors.As(err, &waiting) {
		f.InstanceID, f.Outcome = "", "skipped: a fire already waits for lock "+waiting.Key
		return f, true
	}
	err = startError(p.name, f.InstanceID, p.msg.Create.Lock, err)
	var dup *DuplicateStartError
	var locked *WorkflowLockedError
	switch {
	case errors.As(err, &dup):
		f.InstanceID, f.Outcome = dup.InstanceID, "duplicate"
	case errors.Is(err, ErrInstanceExists):
		f.Outcome = "duplicate"
	case errors.As(err, &locked):
		f.InstanceID, f.Outcome = "", fmt.Sprintf("skipped: lock %s is held by instance %s", locked.WorkflowID, locked.ExistingInstanceID)
	case errors.Is(err, ErrInvalidArgument):
		f.InstanceID, f.Outcome = "", "failed: "+err.Error()
	default:
		return f, false
	}
	return f, true
}
