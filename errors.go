package duroxide

import (
	"errors"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/dispatch"
	"github.com/duroxide/duroxide-go/internal/replay"
	"github.com/duroxide/duroxide-go/provider"
)

// Sentinel errors. Test for them with errors.Is; errors carrying data are
// the struct types below, tested with errors.As.
var (
	// ErrNotFound: the instance (or execution) does not exist.
	ErrNotFound = provider.ErrNotFound
	// ErrInstanceExists: StartOrchestration named an instance ID that is
	// already taken. *DuplicateStartError matches it too.
	ErrInstanceExists = provider.ErrInstanceExists
	// ErrStillRunning: PurgeInstance without force met a running instance.
	ErrStillRunning = provider.ErrStillRunning
	// ErrChildInstance: PurgeInstance named a sub-orchestration; purge its root.
	ErrChildInstance = provider.ErrChildInstance
	// ErrLockLost: a lock expired or was taken over before it was used.
	ErrLockLost = provider.ErrLockLost
	// ErrInvalidArgument: a call's arguments are malformed (empty names,
	// values that cannot be encoded as JSON, bad options).
	ErrInvalidArgument = provider.ErrInvalidArgument
	// ErrWorkflowLocked: a start's LockKey is held by a live instance.
	// *WorkflowLockedError and *LockAcquisitionFailedError match it.
	ErrWorkflowLocked = provider.ErrLocked
	// ErrCanceled: the task or the orchestration was canceled.
	// *ActivityError and *SubOrchestrationError match it when their failure
	// was a cancellation.
	ErrCanceled = errors.New("canceled")
	// ErrTimeout: a deadline passed. *ActivityError matches it when the
	// activity timed out (ActivityOptions timeouts), *OrchestrationError
	// when StartOptions.Timeout ended the instance.
	ErrTimeout = errors.New("timed out")
	// ErrNotTerminal: Status.Decode on an instance that has not completed.
	ErrNotTerminal = errors.New("orchestration has not completed")
	// ErrRuntimeStopped: the runtime was shut down. It is the cause
	// (context.Cause) of the context of an activity that Runtime.Shutdown
	// interrupted because its deadline passed.
	ErrRuntimeStopped = dispatch.ErrRuntimeStopped
	// ErrNotSupported: a feature the store in use cannot honour (for
	// example ActivityContext.Heartbeat on a store that keeps no
	// heartbeats): the call fails with this error rather than silently
	// doing nothing.
	ErrNotSupported = dispatch.ErrNotSupported
)

// NondeterminismError reports that orchestration code no longer replays its
// own history: it scheduled something different from what the history
// records at EventID, or did not schedule what the history records. The
// runtime parks such an instance (it retries it with backoff, so a fixed
// deploy resumes it) unless RuntimeOptions.OnNondeterminism says to fail it.
type NondeterminismError = replay.NondeterminismError

// ErrorInfo describes a failure stored with an instance or delivered to an
// orchestration: Kind is one of "application", "canceled", "poison",
// "nondeterminism", "configuration", "infrastructure", "timeout"; Code
// names some failures precisely (see the field).
type ErrorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Type is the Go type of the original error, when known.
	Type string `json:"type,omitempty"`
	// Details holds extra text such as a panic's stack trace.
	Details string `json:"details,omitempty"`
	// Code names the failure precisely when the runtime recorded one:
	// "limit_exceeded" when the instance went over one of the runtime's
	// limits (see LimitError), "instance_exists" when a child's instance
	// ID was taken.
	Code string `json:"code,omitempty"`
}

func (e *ErrorInfo) Error() string { return fmt.Sprintf("%s: %s", e.Kind, e.Message) }

func errorInfo(d *history.ErrorDetails) *ErrorInfo {
	if d == nil {
		return nil
	}
	return &ErrorInfo{Kind: string(d.Kind), Message: d.Message, Type: d.Type, Details: d.Details, Code: string(d.Code)}
}

// ActivityError is the failure of an activity, as seen by the orchestration
// that awaited it.
type ActivityError struct {
	// Name is the activity's name and ActivityID its scheduling event.
	Name       string
	ActivityID int64
	// Kind is "application" for an error returned or a panic raised by the
	// activity, "poison" when it crashed its workers MaxAttempts times,
	// "configuration" when no worker knew the name by delivery MaxAttempts,
	// "canceled" when it was canceled.
	Kind    string
	Message string
	// Type is the Go type of the activity's error; Details holds a panic's stack.
	Type, Details string
	// Code names the failure precisely when the runtime recorded one:
	// "limit_exceeded" (kind "configuration") when the activity's result
	// was over RuntimeOptions.MaxPayloadBytes.
	Code string
}

func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %s (#%d) failed: %s", e.Name, e.ActivityID, e.Message)
}

// Is makes errors.Is(err, ErrCanceled) true for canceled activities and
// errors.Is(err, ErrTimeout) true for timed-out ones, and
// errors.Is(err, ErrLimitExceeded) true for those that went over a limit.
func (e *ActivityError) Is(target error) bool {
	switch target {
	case ErrCanceled:
		return e.Kind == string(history.ErrorCanceled)
	case ErrTimeout:
		return e.Kind == string(history.ErrorTimeout)
	case ErrLimitExceeded:
		return e.Code == string(history.CodeLimitExceeded)
	}
	return false
}

// SubOrchestrationError is the failure of a sub-orchestration, as seen by
// its parent.
type SubOrchestrationError struct {
	Name       string
	InstanceID string
	// Kind and Message are those of the child's failure ("canceled" if the
	// child was canceled; "configuration" if its instance ID was taken).
	Kind    string
	Message string
	Details string
	// Code names the failure precisely when the runtime recorded one:
	// "instance_exists" when the child's instance ID was taken,
	// "limit_exceeded" when the child went over one of the runtime's limits.
	Code string
}

func (e *SubOrchestrationError) Error() string {
	return fmt.Sprintf("sub-orchestration %s (%s) failed: %s", e.Name, e.InstanceID, e.Message)
}

// Is makes errors.Is(err, ErrCanceled) true for canceled children,
// errors.Is(err, ErrLimitExceeded) true for children that went over a
// limit, and errors.Is(err, ErrInstanceExists) true when the child ID was
// taken: Code
// is "instance_exists", or, for failures recorded by releases that wrote no
// code, Kind is "configuration" and Message is exactly "instance already
// exists" (that text is kept recognized forever, since it is stored in
// histories).
func (e *SubOrchestrationError) Is(target error) bool {
	switch target {
	case ErrCanceled:
		return e.Kind == string(history.ErrorCanceled)
	case ErrLimitExceeded:
		return e.Code == string(history.CodeLimitExceeded)
	case ErrInstanceExists:
		return e.Code == string(history.CodeInstanceExists) ||
			(e.Code == "" && e.Kind == string(history.ErrorConfiguration) && e.Message == legacyChildExistsMessage)
	}
	return false
}

// legacyChildExistsMessage is the message of a taken child ID as recorded,
// without a code, by earlier releases. It must never change.
const legacyChildExistsMessage = "instance already exists"

// DuplicateStartError reports a start whose IdempotencyKey was already used
// within its retention: nothing was started and InstanceID is the instance
// the key first started. Keys outlive the purge of their instance: PurgedAt
// is when it was purged, zero if it was not. It matches
// errors.Is(err, ErrInstanceExists).
type DuplicateStartError = provider.DuplicateStartError

// WorkflowLockedError reports a start refused because its LockKey is held
// by a live instance: ExistingInstanceID is running under WorkflowID. Retry
// after it ends, or poll it. It matches errors.Is(err, ErrWorkflowLocked).
type WorkflowLockedError struct {
	WorkflowID         string
	ExistingInstanceID string
	LockedSince        time.Time
	ExpiresAt          time.Time
}

func (e *WorkflowLockedError) Error() string {
	return fmt.Sprintf("workflow %q is currently locked by instance %s", e.WorkflowID, e.ExistingInstanceID)
}

// Is makes errors.Is(err, ErrWorkflowLocked) true.
func (e *WorkflowLockedError) Is(target error) bool { return target == ErrWorkflowLocked }

// LockAcquisitionFailedError reports a start that lost a race for its
// LockKey to another start at the same moment, before the winner was
// visible. Retry with backoff. It matches errors.Is(err, ErrWorkflowLocked).
type LockAcquisitionFailedError struct {
	WorkflowID string
	InstanceID string
	Reason     string
}

func (e *LockAcquisitionFailedError) Error() string {
	return fmt.Sprintf("acquiring lock %q for instance %s: concurrent acquisition: %s", e.WorkflowID, e.InstanceID, e.Reason)
}

// Is makes errors.Is(err, ErrWorkflowLocked) true.
func (e *LockAcquisitionFailedError) Is(target error) bool { return target == ErrWorkflowLocked }

// OrchestrationError is the failure of an orchestration, returned by
// Status.Decode for a Failed or Canceled instance.
type OrchestrationError struct {
	InstanceID string
	State      State
	Info       ErrorInfo
}

func (e *OrchestrationError) Error() string {
	return fmt.Sprintf("orchestration %s %s: %s", e.InstanceID, e.State, e.Info.Message)
}

// Is makes errors.Is(err, ErrCanceled) true for canceled instances and
// errors.Is(err, ErrTimeout) true for instances that StartOptions.Timeout
// ended (Failed, kind "timeout"), and errors.Is(err, ErrLimitExceeded) true
// for instances that failed because they went over one of the runtime's
// limits.
func (e *OrchestrationError) Is(target error) bool {
	switch target {
	case ErrCanceled:
		return e.State == StateCanceled
	case ErrTimeout:
		return e.Info.Kind == string(history.ErrorTimeout)
	case ErrLimitExceeded:
		return e.Info.Code == string(history.CodeLimitExceeded)
	}
	return false
}
