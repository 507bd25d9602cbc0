package duroxide

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Length limits of the identifiers a Client accepts, in bytes. Longer
// values are refused with ErrInvalidArgument. Every identifier must also be
// valid UTF-8 without control characters (Unicode category Cc: C0, DEL, C1).
const (
	// MaxInstanceIDLength bounds the instance IDs given to
	// StartOrchestration. Instance IDs are also refused when they are "."
	// or ".." or contain "/", so they fit in a URL path segment and a file
	// name.
	MaxInstanceIDLength = 256
	// MaxNameLength bounds orchestration names, versions and event names.
	MaxNameLength = 256
	// MaxKeyLength bounds lock keys (workflow IDs) and idempotency keys.
	MaxKeyLength = 512
	// maxLookupIDLength bounds the instance IDs of lookups (GetStatus,
	// RaiseEvent, CancelInstance, GetHistory, ListExecutions,
	// PurgeInstance): above MaxInstanceIDLength, because the IDs of
	// sub-orchestrations named by the runtime ("<parent>::sub::<n>") grow
	// with their depth.
	maxLookupIDLength = 4096
)

// ErrInstanceTerminal: RaiseEvent or CancelInstance named an instance that
// is already Completed, Failed or Canceled; nothing was changed.
// *InstanceTerminalError matches it.
var ErrInstanceTerminal = errors.New("instance has already ended")

// InstanceTerminalError reports that RaiseEvent or CancelInstance named an
// instance that is already Completed, Failed or Canceled (State): the call
// changed nothing. It matches errors.Is(err, ErrInstanceTerminal).
type InstanceTerminalError struct {
	InstanceID string
	State      State
}

func (e *InstanceTerminalError) Error() string {
	return fmt.Sprintf("instance %q is %s: %v", e.InstanceID, e.State, ErrInstanceTerminal)
}

// Is makes errors.Is(err, ErrInstanceTerminal) true.
func (e *InstanceTerminalError) Is(target error) bool { return target == ErrInstanceTerminal }

// checkText checks that the identifier v (what names it, for messages) is
// present, at most max bytes long, valid UTF-8 and free of control
// characters.
func checkText(what, v string, max int) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is required", ErrInvalidArgument, what)
	case len(v) > max:
		return fmt.Errorf("%w: %s is %d bytes long; the limit is %d", ErrInvalidArgument, what, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidArgument, what, v)
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%w: %s %q contains the control character %U at byte %d", ErrInvalidArgument, what, v, []rune(v[i:])[0], i)
	}
	return nil
}

// checkOptionalText is checkText for an identifier that may be empty.
func checkOptionalText(what, v string, max int) error {
	if v == "" {
		return nil
	}
	return checkText(what, v, max)
}

// checkNewInstanceID checks the ID of an instance to create.
func checkNewInstanceID(id string) error {
	if err := checkText("instance ID", id, MaxInstanceIDLength); err != nil {
		return err
	}
	if id == "." || id == ".." || strings.Contains(id, "/") {
		return fmt.Errorf("%w: instance ID %q must not be \".\" or \"..\" or contain \"/\"", ErrInvalidArgument, id)
	}
	return nil
}

// checkInstanceID checks the ID of an instance to look up. It is looser
// than checkNewInstanceID (longer, and "/" is allowed) so that instances
// named by the runtime or created by earlier versions stay reachable.
func checkInstanceID(id string) error {
	return checkText("instance ID", id, maxLookupIDLength)
}

// checkStart checks the arguments of StartOrchestration.
func checkStart(instanceID, name string, opts *StartOptions) error {
	for _, err := range []error{
		checkNewInstanceID(instanceID),
		checkText("orchestration name", name, MaxNameLength),
		checkOptionalText("version", opts.Version, MaxNameLength),
		checkOptionalText("lock key", opts.LockKey, MaxKeyLength),
		checkOptionalText("idempotency key", opts.IdempotencyKey, MaxKeyLength),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// ValidateInstanceID checks id as StartOrchestration checks the ID of a
// new instance (see MaxInstanceIDLength). The error matches
// ErrInvalidArgument. For callers that build IDs from outside input and
// want to refuse a bad one before starting anything.
func ValidateInstanceID(id string) error { return checkNewInstanceID(id) }

// ValidateKey checks key as StartOrchestration checks lock and idempotency
// keys (see MaxKeyLength); what names the key in the error, which matches
// ErrInvalidArgument.
func ValidateKey(what, key string) error { return checkText(what, key, MaxKeyLength) }
