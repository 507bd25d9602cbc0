package provider

import (
	"context"
	"fmt"
	"time"
)

// Schedules.
//
// A schedule is a row that says what to start (Spec, which the store keeps
// as given: the runtime encodes and reads it) and when it fires next
// (NextFireAt, which the store reads). Runtimes that share a store fire a
// schedule once per fire time because they agree through the store: a
// runtime fires with FireSchedules (FireSchedule for one schedule), which
// in one transaction moves NextFireAt on, only while it still holds the
// fire time the runtime read and the schedule is not paused, and starts
// the fire's instances: of runtimes racing for one fire exactly one moves
// the schedule on and starts its instance, and a schedule paused before
// the fire committed starts nothing.
// ClaimScheduleFire is the same conditional update without a start (for
// fire times that were missed). The start a fire makes also carries an
// idempotency key named after the schedule and the fire time.

// ScheduleWatchKey is the key that Notifier.WatchInstance signals when a
// schedule is created, changed, fired or deleted, by this process or (as
// far as the store's notifications reach) another one. It holds a control
// character, which no instance ID may, so it never names an instance.
const ScheduleWatchKey = "\x1eschedules"

// Schedule is one stored schedule.
type Schedule struct {
	// ID names the schedule. Required.
	ID string
	// Spec is the schedule's definition, encoded by the caller (JSON); the
	// store keeps it as given.
	Spec []byte
	// Paused schedules do not fire; ClaimScheduleFire refuses them.
	Paused bool
	// NextFireAt is when the schedule fires next; zero when it never will.
	NextFireAt time.Time
	// LastFireAt is the fire time of the last fire recorded (zero: none),
	// LastInstanceID the instance it started ("" when it started none) and
	// LastOutcome what happened, in the caller's words.
	LastFireAt     time.Time
	LastInstanceID string
	LastOutcome    string
	// Revision counts the changes of the row: 1 once created, one more
	// for each update and each recorded fire.
	Revision int64
	// CreatedAt and UpdatedAt are store times.
	CreatedAt, UpdatedAt time.Time
}

// ScheduleFire is one fire recorded by ClaimScheduleFire.
type ScheduleFire struct {
	// FireAt is the fire time: recorded as LastFireAt.
	FireAt time.Time
	// InstanceID is the instance the fire started ("" for none).
	InstanceID string
	// Outcome says what happened (recorded as LastOutcome).
	Outcome string
}

// ScheduleStart is one fire of FireSchedule or TriggerSchedule: its time and the start it
// makes.
type ScheduleStart struct {
	// FireAt is the fire time.
	FireAt time.Time
	// Start starts the fire's instance; nil when the fire starts none.
	Start *OrchestratorMessage
	// BufferOne asks for the overlap policy buffer_one, checked in the
	// fire's transaction with the start: when the execution lock of Start
	// is held by a live instance and a start already waits for it, Start is
	// not made, and Settle gets a *StartWaitingError. Two fires sharing a
	// lock key (of one schedule or of two) thus never queue two waiting
	// starts.
	BufferOne bool
	// Settle says what the fire records, given what its Start did: its
	// result, as Enqueue would report it (EnqueueResult.Replaced names
	// the holder a Lock.Replace canceled; the zero value when Start is nil
	// or refused), and its error (nil when the instance was created, or
	// when Start is nil). It returns the instance and the outcome
	// (ScheduleFire.InstanceID and Outcome), and ok false for an error
	// that must fail the whole FireSchedule (then nothing is recorded nor
	// started). A refused start (a *DuplicateStartError, a *LockedError,
	// ErrInstanceExists) leaves the transaction usable: the fire is
	// recorded with the outcome Settle gives. Settle runs inside the
	// fire's transaction, and the store may call it more than once (a
	// transaction run again): it must have no side effects beyond keeping
	// what it was given, and what it was given last counts only once the
	// call reports the fire made. Required.
	Settle func(started EnqueueResult, startErr error) (instanceID, outcome string, ok bool)
}

// ScheduleDue is one schedule of FireSchedules: the fire time it is
// still due at (Due), the next fire time to record (Next, zero: never)
// and the fires to start.
type ScheduleDue struct {
	ID        string
	Due, Next time.Time
	Fires     []ScheduleStart
}

// StartWaitingError is the refusal a ScheduleStart with BufferOne gets
// when a start already waits for its held lock key. It matches
// errors.Is(err, ErrLocked).
type StartWaitingError struct {
	Key string
}

func (e *StartWaitingError) Error() string {
	return fmt.Sprintf("a start already waits for execution lock %q", e.Key)
}

// Unwrap returns ErrLocked.
func (e *StartWaitingError) Unwrap() error { return ErrLocked }

// ScheduleStore is the optional capability of a store that keeps
// schedules; both SQL stores implement it. Every change it makes signals
// the watchers of ScheduleWatchKey.
//
// Earlier releases also had NoteScheduleFire, which recorded a fire made
// out of turn without starting anything; TriggerSchedule replaced it (the
// start and its record in one transaction), and stores drop the method.
type ScheduleStore interface {
	// CreateSchedule stores s (ID, Spec, Paused, NextFireAt; the other
	// fields are ignored) with revision 1. An existing ID is
	// ErrScheduleExists; an empty ID or Spec is ErrInvalidArgument.
	CreateSchedule(ctx context.Context, s *Schedule) error

	// GetSchedule returns the schedule id, or ErrNotFound.
	GetSchedule(ctx context.Context, id string) (*Schedule, error)

	// ListSchedules returns every schedule, ordered by ID.
	ListSchedules(ctx context.Context) ([]Schedule, error)

	// ListSchedulesPage returns up to limit (at least 1) schedules whose
	// ID sorts after after ("": from the first), ordered by ID.
	ListSchedulesPage(ctx context.Context, after string, limit int) ([]Schedule, error)

	// UpdateSchedule replaces the Spec, Paused and NextFireAt of the
	// schedule s.ID if its revision is still s.Revision, and moves the
	// revision on. A missing schedule is ErrNotFound; a revision that moved
	// is ErrConflict, and changes nothing.
	UpdateSchedule(ctx context.Context, s *Schedule) error

	// DeleteSchedule deletes the schedule id and reports whether it existed.
	DeleteSchedule(ctx context.Context, id string) (bool, error)

	// FireSchedule fires the schedule id in one transaction: only if the
	// schedule exists, is not paused and its NextFireAt is still due, it
	// moves NextFireAt to next (zero: never), enqueues the Start of each
	// of fires in order (as Provider.Enqueue would) and records the last
	// of them (its Settle decides the instance and outcome recorded). It
	// reports whether it fired; false means another caller fired it (or
	// paused, changed or deleted the schedule) first, and nothing was
	// started. fires must not be empty.
	FireSchedule(ctx context.Context, id string, due, next time.Time, fires []ScheduleStart) (bool, error)

	// FireSchedules fires several schedules in one transaction, each as
	// FireSchedule would (its claim conditional on its own Due): a
	// schedule another caller fired (or paused, changed or deleted) first
	// is skipped, reported false, and starts nothing, while the others
	// fire. The store handles the schedules in the order of their IDs
	// (so two callers firing overlapping sets take their rows in one
	// order); fired[i] reports schedules[i]. An error (a store error, or
	// a Settle that refuses its start's error) fires none of them. IDs
	// must be distinct and each Fires non-empty. A runtime fires the
	// schedules due at once with one call: one commit instead of one per
	// schedule.
	FireSchedules(ctx context.Context, schedules []ScheduleDue) (fired []bool, err error)

	// ClaimScheduleFire records the fire f of schedule id and moves its
	// NextFireAt to next (zero: never), only if the schedule exists, is not
	// paused and its NextFireAt is still due. It reports whether it did;
	// false means another caller recorded that fire (or paused, changed or
	// deleted the schedule) first.
	ClaimScheduleFire(ctx context.Context, id string, due, next time.Time, f ScheduleFire) (bool, error)

	// TriggerSchedule fires the schedule id out of turn (a manual
	// trigger) in one transaction: only if the schedule exists, paused or
	// not, it records f.FireAt as its last fire time, enqueues f.Start (as
	// Provider.Enqueue would) and records the instance and outcome
	// f.Settle gives, leaving NextFireAt as it is. It reports whether the
	// schedule exists; false means nothing was started. Either the start
	// and its record both commit or neither does.
	TriggerSchedule(ctx context.Context, id string, f ScheduleStart) (bool, error)
}
