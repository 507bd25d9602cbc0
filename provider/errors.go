package provider

import "errors"

// Sentinel errors returned by providers. Providers wrap them with context
// (fmt.Errorf("acking turn: %w", ErrLockLost)); callers test them with
// errors.Is. Each is either retryable (the same call may succeed later) or
// permanent; see IsRetryable.
var (
	// ErrNotFound: the instance, execution or record does not exist.
	ErrNotFound = permanent("not found")
	// ErrInstanceExists: a message asked to create an instance whose ID is taken.
	ErrInstanceExists = permanent("instance already exists")
	// ErrLockLost: the lock token is unknown, expired, already used, or its
	// row was deleted or stolen. Nothing was written.
	ErrLockLost = permanent("lock lost: token unknown, expired or released")
	// ErrDuplicateEvent: an ack appended an event ID that the execution
	// already has. The ack was rolled back and the lock is still held.
	ErrDuplicateEvent = permanent("duplicate history event id")
	// ErrCorruptData: stored data cannot be decoded.
	ErrCorruptData = permanent("corrupt stored data")
	// ErrInstanceEnded: a start-if-absent (NewInstance.IfAbsent) found its
	// instance Completed, Failed or Canceled. Nothing was written.
	ErrInstanceEnded = permanent("instance has ended")
	// ErrStillRunning: a purge without force met a Pending or Running instance.
	ErrStillRunning = permanent("instance is still running")
	// ErrChildInstance: a purge named a sub-orchestration whose parent still
	// exists and is not purged with it. Purge the root instead.
	ErrChildInstance = permanent("instance is a sub-orchestration; purge its root")
	// ErrInvalidArgument: the call's arguments are malformed (empty IDs,
	// invalid events or work items, negative limits...). Nothing was written.
	ErrInvalidArgument = permanent("invalid argument")
	// ErrClosed: the provider was closed.
	ErrClosed = permanent("provider closed")
	// ErrLocked: a start's execution lock key is held by a live instance.
	// *LockedError, which names the holder, matches it.
	ErrLocked = permanent("execution lock is held")
	// ErrLockContended: another transaction acquired the same execution lock
	// key at the same moment, so the holder is not known yet. Retry with
	// backoff; the retry meets the winner's lock (ErrLocked).
	ErrLockContended = retryable("execution lock acquired concurrently")
	// ErrBusy: the store is temporarily unable to serve (lock contention,
	// connection limits, timeouts). Retry with backoff.
	ErrBusy = retryable("store busy")
	// ErrUnavailable: the store cannot be reached (network, I/O). Retry with backoff.
	ErrUnavailable = retryable("store unavailable")
	// ErrAlreadyPaused: PauseInstance named an instance that is paused.
	ErrAlreadyPaused = permanent("instance is already paused")
	// ErrNotPaused: ResumeInstance named an instance that is not paused.
	ErrNotPaused = permanent("instance is not paused")
	// ErrStateConflict: the instance is not in a state that allows the
	// call (pausing a finished instance, rewinding one that is not
	// Failed or Canceled, or that changed since the caller read it), or a
	// bulk job is not (canceling a finished one). Nothing was written.
	ErrStateConflict = permanent("instance state does not allow this")
	// ErrBulkJobCanceled: UpdateBulkJob met a bulk job that was canceled
	// (BulkJobStore.CancelBulkJob): its runner must stop.
	ErrBulkJobCanceled = permanent("bulk job was canceled")
	// ErrScheduleExists: a schedule with that ID already exists.
	ErrScheduleExists = permanent("schedule already exists")
	// ErrConflict: the record changed since the caller read it (its
	// revision moved). Read it again and retry.
	ErrConflict = permanent("changed concurrently")
)

type sentinel struct {
	msg       string
	retryable bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Retryable() bool { return e.retryable }

func permanent(msg string) error { return &sentinel{msg: msg} }
func retryable(msg string) error { return &sentinel{msg: msg, retryable: true} }

// IsRetryable reports whether err (or an error it wraps) is marked retryable.
// Unknown errors are permanent.
func IsRetryable(err error) bool {
	var r interface{ Retryable() bool }
	return errors.As(err, &r) && r.Retryable()
}
