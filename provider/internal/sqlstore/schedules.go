package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// SchedQuery names one statement of the schedule store (the schedules
// table). Each store maps it to its own SQL text; the arguments are listed
// in each constant's comment. Times are epoch milliseconds; a time that is
// not set (NextFireAt zero) is NULL.
type SchedQuery int

// The schedule statements. The reads return the columns schedule_id,
// spec, paused, next_fire_at, last_fire_at, last_instance_id,
// last_outcome, revision, created_at, updated_at (ScanSchedule).
const (
	// SQInsert (id, spec, paused, next_fire_at, now) inserts a schedule
	// with revision 1 and does nothing (no row affected) when the ID is
	// taken.
	SQInsert SchedQuery = iota
	// SQGet (id) returns the schedule.
	SQGet
	// SQList () returns every schedule by ID.
	SQList
	// SQUpdate (id, spec, paused, next_fire_at, now, revision) replaces the
	// definition of the schedule whose revision is still the one given,
	// and adds one to the revision.
	SQUpdate
	// SQDelete (id) deletes the schedule.
	SQDelete
	// SQClaim (id, due, next_fire_at, fire_at, instance_id, outcome, now)
	// records a fire of the unpaused schedule whose next_fire_at is due:
	// next_fire_at, last_fire_at, last_instance_id, last_outcome,
	// updated_at and revision + 1.
	SQClaim
	// SQNote (id, fire_at, instance_id, outcome, now) records a fire
	// out of turn (last_*, updated_at, revision + 1) and leaves
	// next_fire_at (TriggerSchedule).
	SQNote
	// SQSetLast (id, instance_id, outcome) sets last_instance_id and
	// last_outcome, within the transaction of a fire that claimed the
	// schedule (SQClaim) first.
	SQSetLast
	// SQListPage (after, limit) returns up to limit schedules whose ID
	// sorts after the one given, by ID.
	SQListPage
	// SQLockQueued (lock_key) returns the number of starts waiting for
	// the execution lock lock_key (one row, one column).
	SQLockQueued
	// NumSchedQueries is the number of statements: the size of a store's table.
	NumSchedQueries
)

// ScheduleDB is how the shared schedule code reaches a store: statements
// in one write transaction (WriteTx), or a read (Read).
type ScheduleDB interface {
	// WriteTx runs fn in one write transaction (the store's group commit)
	// and commits what it did unless it returns an error; fn may run more
	// than once. When a statement affected rows, the store signals the
	// watchers of provider.ScheduleWatchKey once it committed (in every
	// process the store notifies). Errors come back translated to the
	// provider sentinels and wrapped with op.
	WriteTx(ctx context.Context, op string, fn func(ScheduleTx) error) error
	// Read runs q and calls scan for each row, translating errors as
	// WriteTx.
	Read(ctx context.Context, op string, q SchedQuery, scan func(Row) error, args ...any) error
}

// writeSchedule runs q alone in a write transaction and returns the rows
// it affected.
func writeSchedule(ctx context.Context, db ScheduleDB, op string, q SchedQuery, args ...any) (int64, error) {
	var n int64
	err := db.WriteTx(ctx, op, func(tx ScheduleTx) error {
		var err error
		n, err = tx.ExecSchedule(q, args...)
		return err
	})
	return n, err
}

// ScheduleTx is a store's write transaction as a fire sees it: the steps
// of enqueueing a start (MessageTx, for InsertMessage) and the schedule
// statements.
type ScheduleTx interface {
	MessageTx
	// ExecSchedule runs q and returns the rows it affected; when it
	// affected any, the watchers of provider.ScheduleWatchKey are
	// signalled once the transaction committed.
	ExecSchedule(q SchedQuery, args ...any) (int64, error)
	// CountSchedule runs q, which returns one integer, and returns it.
	CountSchedule(q SchedQuery, args ...any) (int64, error)
}

// nullMs is t in epoch milliseconds, or nil (NULL) for the zero time.
func nullMs(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// ScanSchedule reads one row of SQGet or SQList.
func ScanSchedule(r Row) (*provider.Schedule, error) {
	var s provider.Schedule
	var spec string
	var next, last *int64
	var created, updated int64
	if err := r.Scan(&s.ID, &spec, &s.Paused, &next, &last, &s.LastInstanceID, &s.LastOutcome,
		&s.Revision, &created, &updated); err != nil {
		return nil, err
	}
	s.Spec = []byte(spec)
	if next != nil {
		s.NextFireAt = MsTime(*next)
	}
	if last != nil {
		s.LastFireAt = MsTime(*last)
	}
	s.CreatedAt, s.UpdatedAt = MsTime(created), MsTime(updated)
	return &s, nil
}

func checkScheduleID(id string) error {
	if id == "" {
		return sqlenc.Invalid("empty schedule ID")
	}
	return nil
}

// CreateSchedule is the body of provider.ScheduleStore.CreateSchedule.
func CreateSchedule(ctx context.Context, db ScheduleDB, now int64, s *provider.Schedule) error {
	const op = "creating schedule"
	if err := checkScheduleID(s.ID); err != nil {
		return err
	}
	if len(s.Spec) == 0 {
		return sqlenc.Invalid("schedule %q: empty spec", s.ID)
	}
	n, err := writeSchedule(ctx, db, op, SQInsert, s.ID, string(s.Spec), s.Paused, nullMs(s.NextFireAt), now)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", op, s.ID, provider.ErrScheduleExists)
	}
	return nil
}

// GetSchedule is the body of provider.ScheduleStore.GetSchedule.
func GetSchedule(ctx context.Context, db ScheduleDB, id string) (*provider.Schedule, error) {
	const op = "getting schedule"
	if err := checkScheduleID(id); err != nil {
		return nil, err
	}
	var out *provider.Schedule
	err := db.Read(ctx, op, SQGet, func(r Row) error {
		var err error
		out, err = ScanSchedule(r)
		return err
	}, id)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("schedule %q: %w", id, provider.ErrNotFound)
	}
	return out, nil
}

// ListSchedules is the body of provider.ScheduleStore.ListSchedules.
func ListSchedules(ctx context.Context, db ScheduleDB) ([]provider.Schedule, error) {
	return readSchedules(ctx, db, SQList)
}

// ListSchedulesPage is the body of provider.ScheduleStore.ListSchedulesPage.
func ListSchedulesPage(ctx context.Context, db ScheduleDB, after string, limit int) ([]provider.Schedule, error) {
	if limit < 1 {
		return nil, sqlenc.Invalid("schedule page limit %d must be at least 1", limit)
	}
	return readSchedules(ctx, db, SQListPage, after, limit)
}

func readSchedules(ctx context.Context, db ScheduleDB, q SchedQuery, args ...any) ([]provider.Schedule, error) {
	out := []provider.Schedule{}
	err := db.Read(ctx, "listing schedules", q, func(r Row) error {
		s, err := ScanSchedule(r)
		if err != nil {
			return err
		}
		out = append(out, *s)
		return nil
	}, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateSchedule is the body of provider.ScheduleStore.UpdateSchedule.
func UpdateSchedule(ctx context.Context, db ScheduleDB, now int64, s *provider.Schedule) error {
	const op = "updating schedule"
	if err := checkScheduleID(s.ID); err != nil {
		return err
	}
	if len(s.Spec) == 0 {
		return sqlenc.Invalid("schedule %q: empty spec", s.ID)
	}
	n, err := writeSchedule(ctx, db, op, SQUpdate, s.ID, string(s.Spec), s.Paused, nullMs(s.NextFireAt), now, s.Revision)
	if err != nil || n > 0 {
		return err
	}
	if _, err := GetSchedule(ctx, db, s.ID); err != nil {
		return err
	}
	return fmt.Errorf("%s %q (revision %d): %w", op, s.ID, s.Revision, provider.ErrConflict)
}

// DeleteSchedule is the body of provider.ScheduleStore.DeleteSchedule.
func DeleteSchedule(ctx context.Context, db ScheduleDB, id string) (bool, error) {
	if err := checkScheduleID(id); err != nil {
		return false, err
	}
	n, err := writeSchedule(ctx, db, "deleting schedule", SQDelete, id)
	return n > 0, err
}

// ClaimScheduleFire is the body of provider.ScheduleStore.ClaimScheduleFire.
func ClaimScheduleFire(ctx context.Context, db ScheduleDB, now int64, id string, due, next time.Time, f provider.ScheduleFire) (bool, error) {
	if err := checkScheduleID(id); err != nil {
		return false, err
	}
	if due.IsZero() {
		return false, sqlenc.Invalid("schedule %q: claiming a fire without a due time", id)
	}
	n, err := writeSchedule(ctx, db, "claiming schedule fire", SQClaim, id, due.UnixMilli(), nullMs(next),
		nullMs(f.FireAt), f.InstanceID, f.Outcome, now)
	return n > 0, err
}

// FireSchedule is the body of provider.ScheduleStore.FireSchedule:
// FireSchedules with one schedule.
func FireSchedule(ctx context.Context, db ScheduleDB, id string, due, next time.Time, fires []provider.ScheduleStart) (bool, error) {
	fired, err := FireSchedules(ctx, db, []provider.ScheduleDue{{ID: id, Due: due, Next: next, Fires: fires}})
	if err != nil {
		return false, err
	}
	return fired[0], nil
}

// FireSchedules is the body of provider.ScheduleStore.FireSchedules: for
// each schedule, in the order of their IDs, the claim (SQClaim), then, if
// it claimed, each start (InsertMessage), then the last fire's outcome
// (SQSetLast), all in one transaction. A start the store refuses (a
// retained idempotency key, a held execution lock, a taken instance ID)
// is found by reading before anything of it is written, so the
// transaction goes on and records the refusal as Settle words it.
func FireSchedules(ctx context.Context, db ScheduleDB, schedules []provider.ScheduleDue) ([]bool, error) {
	const op = "firing schedules"
	order := make([]int, len(schedules))
	starts := make([]*scheduleStarts, len(schedules))
	seen := make(map[string]bool, len(schedules))
	for i, sd := range schedules {
		if err := checkScheduleID(sd.ID); err != nil {
			return nil, err
		}
		switch {
		case sd.Due.IsZero():
			return nil, sqlenc.Invalid("schedule %q: firing without a due time", sd.ID)
		case len(sd.Fires) == 0:
			return nil, sqlenc.Invalid("schedule %q: firing no fire", sd.ID)
		case seen[sd.ID]:
			return nil, sqlenc.Invalid("schedule %q: fired twice in one call", sd.ID)
		}
		seen[sd.ID] = true
		st, err := encodeStarts(sd.ID, sd.Fires)
		if err != nil {
			return nil, err
		}
		order[i], starts[i] = i, st
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(schedules[a].ID, schedules[b].ID) })
	fired := make([]bool, len(schedules))
	err := db.WriteTx(ctx, op, func(tx ScheduleTx) error {
		clear(fired)
		for _, i := range order {
			sd := &schedules[i]
			last := sd.Fires[len(sd.Fires)-1]
			n, err := tx.ExecSchedule(SQClaim, sd.ID, sd.Due.UnixMilli(), nullMs(sd.Next), nullMs(last.FireAt), "", "", tx.Now())
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			if err := starts[i].start(tx, sd.ID); err != nil {
				return err
			}
			fired[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fired, nil
}

// TriggerSchedule is the body of provider.ScheduleStore.TriggerSchedule:
// the record of the fire (SQNote, which leaves next_fire_at), then its
// start (InsertMessage), then its outcome (SQSetLast), in one
// transaction, as FireSchedule.
func TriggerSchedule(ctx context.Context, db ScheduleDB, id string, f provider.ScheduleStart) (bool, error) {
	const op = "triggering schedule"
	if err := checkScheduleID(id); err != nil {
		return false, err
	}
	if f.FireAt.IsZero() {
		return false, sqlenc.Invalid("schedule %q: triggering without a fire time", id)
	}
	st, err := encodeStarts(id, []provider.ScheduleStart{f})
	if err != nil {
		return false, err
	}
	var found bool
	err = db.WriteTx(ctx, op, func(tx ScheduleTx) error {
		found = false
		n, err := tx.ExecSchedule(SQNote, id, f.FireAt.UnixMilli(), "", "", tx.Now())
		if err != nil || n == 0 {
			return err
		}
		if err := st.start(tx, id); err != nil {
			return err
		}
		found = true
		return nil
	})
	return found, err
}

// scheduleStarts are the starts of one fire transaction, encoded before
// it: enc[i] is fires[i].Start (nil for none), early[i] the error that
// refused it before the transaction.
type scheduleStarts struct {
	fires []provider.ScheduleStart
	enc   []*sqlenc.Msg
	early []error
}

// encodeStarts checks and encodes fires. A start that cannot be encoded
// is settled as refused when its Settle takes the error, and fails the
// fire otherwise.
func encodeStarts(id string, fires []provider.ScheduleStart) (*scheduleStarts, error) {
	st := &scheduleStarts{fires: fires, enc: make([]*sqlenc.Msg, len(fires)), early: make([]error, len(fires))}
	for i, f := range fires {
		if f.Settle == nil {
			return nil, sqlenc.Invalid("schedule %q: fire %d has no Settle", id, i)
		}
		if f.Start == nil {
			continue
		}
		if f.Start.Create == nil {
			return nil, sqlenc.Invalid("schedule %q: fire %d: a start must create its instance", id, i)
		}
		m, err := sqlenc.EncodeMessage(f.Start)
		if err != nil {
			if _, _, ok := f.Settle(provider.EnqueueResult{}, err); !ok {
				return nil, err
			}
			st.early[i] = err
			continue
		}
		st.enc[i] = m
	}
	return st, nil
}

// startWaits returns the refusal of the buffer_one start m of fire f when
// its lock key is held by a live instance and a start already waits for
// it. The store's LiveLockHolder serializes the writers of the key (on
// PostgreSQL a transaction lock on it), so the count and the enqueue that
// follows are atomic: of two fires sharing the key, the second sees the
// first one's waiting start.
func startWaits(tx ScheduleTx, f provider.ScheduleStart, m *sqlenc.Msg) (*provider.StartWaitingError, error) {
	if !f.BufferOne || m.Create == nil || m.Create.LockKey == "" {
		return nil, nil
	}
	key := m.Create.LockKey
	holder, err := tx.LiveLockHolder(key)
	if err != nil || holder == nil {
		return nil, err
	}
	n, err := tx.CountSchedule(SQLockQueued, key)
	if err != nil || n == 0 {
		return nil, err
	}
	return &provider.StartWaitingError{Key: key}, nil
}

// start makes the starts in tx, in order, and records the last one's
// outcome on schedule id (SQSetLast).
func (st *scheduleStarts) start(tx ScheduleTx, id string) error {
	var inst, outcome string
	for i, f := range st.fires {
		startErr := st.early[i]
		var started provider.EnqueueResult
		if m := st.enc[i]; m != nil {
			waiting, err := startWaits(tx, f, m)
			switch {
			case err != nil:
				return err
			case waiting != nil:
				startErr = waiting
			default:
				if startErr = InsertMessage(tx, m); startErr == nil {
					started = m.Result()
				}
			}
		}
		var ok bool
		if inst, outcome, ok = f.Settle(started, startErr); !ok {
			return startErr
		}
	}
	_, err := tx.ExecSchedule(SQSetLast, id, inst, outcome)
	return err
}

// Schedules implements provider.ScheduleStore over a store's ScheduleDB;
// a store embeds it. Now returns the store time in epoch milliseconds.
type Schedules struct {
	DB  ScheduleDB
	Now func() int64
}

var _ provider.ScheduleStore = Schedules{}

// CreateSchedule stores a schedule; see provider.ScheduleStore.
func (s Schedules) CreateSchedule(ctx context.Context, sc *provider.Schedule) error {
	return CreateSchedule(ctx, s.DB, s.Now(), sc)
}

// GetSchedule returns a schedule; see provider.ScheduleStore.
func (s Schedules) GetSchedule(ctx context.Context, id string) (*provider.Schedule, error) {
	return GetSchedule(ctx, s.DB, id)
}

// ListSchedules returns every schedule; see provider.ScheduleStore.
func (s Schedules) ListSchedules(ctx context.Context) ([]provider.Schedule, error) {
	return ListSchedules(ctx, s.DB)
}

// ListSchedulesPage returns a page of schedules; see provider.ScheduleStore.
func (s Schedules) ListSchedulesPage(ctx context.Context, after string, limit int) ([]provider.Schedule, error) {
	return ListSchedulesPage(ctx, s.DB, after, limit)
}

// UpdateSchedule replaces a schedule's definition; see provider.ScheduleStore.
func (s Schedules) UpdateSchedule(ctx context.Context, sc *provider.Schedule) error {
	return UpdateSchedule(ctx, s.DB, s.Now(), sc)
}

// DeleteSchedule deletes a schedule; see provider.ScheduleStore.
func (s Schedules) DeleteSchedule(ctx context.Context, id string) (bool, error) {
	return DeleteSchedule(ctx, s.DB, id)
}

// ClaimScheduleFire records a due fire; see provider.ScheduleStore.
func (s Schedules) ClaimScheduleFire(ctx context.Context, id string, due, next time.Time, f provider.ScheduleFire) (bool, error) {
	return ClaimScheduleFire(ctx, s.DB, s.Now(), id, due, next, f)
}

// FireSchedule claims a due fire and starts its instances in one
// transaction; see provider.ScheduleStore.
func (s Schedules) FireSchedule(ctx context.Context, id string, due, next time.Time, fires []provider.ScheduleStart) (bool, error) {
	return FireSchedule(ctx, s.DB, id, due, next, fires)
}

// FireSchedules claims the due fires of several schedules and starts
// their instances in one transaction; see provider.ScheduleStore.
func (s Schedules) FireSchedules(ctx context.Context, schedules []provider.ScheduleDue) ([]bool, error) {
	return FireSchedules(ctx, s.DB, schedules)
}

// TriggerSchedule records a fire out of turn and starts its instance in
// one transaction; see provider.ScheduleStore.
func (s Schedules) TriggerSchedule(ctx context.Context, id string, f provider.ScheduleStart) (bool, error) {
	return TriggerSchedule(ctx, s.DB, id, f)
}
