package history

import "fmt"

// ErrorKind classifies a failure recorded in history.
type ErrorKind string

const (
	// ErrorApplication is an error returned (or a panic raised) by user code.
	// Orchestrations can catch it.
	ErrorApplication ErrorKind = "application"
	// ErrorCanceled means the instance or the task was canceled.
	ErrorCanceled ErrorKind = "canceled"
	// ErrorPoison means a message exceeded its maximum delivery attempts.
	ErrorPoison ErrorKind = "poison"
	// ErrorNondeterminism means the code no longer replays its own history.
	ErrorNondeterminism ErrorKind = "nondeterminism"
	// ErrorConfiguration means something is not registered or misconfigured.
	ErrorConfiguration ErrorKind = "configuration"
	// ErrorInfrastructure means the store or the runtime failed.
	ErrorInfrastructure ErrorKind = "infrastructure"
	// ErrorTimeout means a deadline passed.
	ErrorTimeout ErrorKind = "timeout"
)

var errorKinds = map[ErrorKind]bool{
	ErrorApplication: true, ErrorCanceled: true, ErrorPoison: true, ErrorNondeterminism: true,
	ErrorConfiguration: true, ErrorInfrastructure: true, ErrorTimeout: true,
}

// ErrorCode names a specific failure within its kind, so that code can
// recognize it without reading its message, which is free text. Codes are
// append-only like the rest of the encoding; a code this release does not
// know is kept as is.
type ErrorCode string

const (
	// CodeInstanceExists (kind ErrorConfiguration) means a sub-orchestration
	// could not start because its explicit instance ID is already taken.
	CodeInstanceExists ErrorCode = "instance_exists"
	// CodeNonRetryable (kind ErrorApplication) means the activity marked
	// its error final (duroxide.NonRetryable): a retry policy stops there.
	CodeNonRetryable ErrorCode = "non_retryable"
	// CodeLimitExceeded (kind ErrorConfiguration) means an orchestration or
	// an activity went over one of the runtime's limits (actions per turn,
	// history events or bytes, payload bytes); Message names the limit and
	// the value.
	CodeLimitExceeded ErrorCode = "limit_exceeded"
	// CodeRewound (kind ErrorCanceled) ends a Running execution that an
	// operator rewound (duroxide.RewindOptions.Force): the next execution
	// goes on from before its last step. Message carries the reason.
	CodeRewound ErrorCode = "rewound"
)

// ErrorDetails describes a failure stored in history and in queue messages.
type ErrorDetails struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
	// Type is the Go type of the original error, when known (for example
	// "*fs.PathError"); informational.
	Type string `json:"type,omitempty"`
	// Details holds extra text such as a panic's stack trace.
	Details string `json:"details,omitempty"`
	// Code, when set, names the failure precisely (see ErrorCode). Older
	// releases did not write it.
	Code ErrorCode `json:"code,omitempty"`
	// Divergence, for kind ErrorNondeterminism, says where replay
	// diverged, so tools can show it without parsing Message. Older
	// releases did not write it.
	Divergence *Divergence `json:"divergence,omitempty"`
}

// Divergence locates a replay mismatch.
type Divergence struct {
	// EventID is the history event where the code diverged (0: the code
	// did something beyond the end of the recorded history).
	EventID int64 `json:"eventId,omitempty"`
	// Expected describes what history records there.
	Expected string `json:"expected"`
	// Got describes what the code did instead.
	Got string `json:"got"`
}

// Error implements the error interface.
func (d *ErrorDetails) Error() string {
	return fmt.Sprintf("%s: %s", d.Kind, d.Message)
}

// Validate reports whether d has a known kind. The error wraps ErrInvalid.
func (d *ErrorDetails) Validate() error {
	if !errorKinds[d.Kind] {
		return fmt.Errorf("%w: unknown error kind %q", ErrInvalid, d.Kind)
	}
	return nil
}
