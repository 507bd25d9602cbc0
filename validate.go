package duroxide

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text rules. Every identifier that a Client, the HTTP API, the CLI and
// the dashboard accept (instance IDs, orchestration and event names,
// versions, lock keys and idempotency keys) follows one set of rules,
// checked here (ValidateInstanceID, ValidateName, ValidateKey,
// ValidateText): it is
//   - valid UTF-8;
//   - free of control characters (Unicode category Cc: C0, DEL, C1);
//   - free of bidirectional controls (U+061C, U+200E, U+200F,
//     U+202A–U+202E, U+2066–U+2069), which make text display in another
//     order than it is stored: "exe.txt" written with U+202E shows as
//     something else;
//   - free of U+FFFD, the replacement character, which is what invalid
//     text decodes to (the JSON escape "\ud800", an unpaired surrogate,
//     decodes to it), so invalid text is refused even after a decoder
//     replaced it;
//   - at most its limit long, in bytes.
//
// Lookups (GetStatus, RaiseEvent, CancelInstance, GetHistory,
// ListExecutions, PurgeInstance, the lock calls) are looser, so that what
// the runtime or an earlier release created stays reachable: see
// ValidateLookupID.
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
	// MaxLookupIDLength bounds the instance IDs of lookups: above
	// MaxInstanceIDLength, because the IDs of sub-orchestrations named by
	// the runtime ("<parent>::sub::<n>") grow with their depth.
	MaxLookupIDLength = 4096
)

// ValidateInstanceID checks the ID of an instance to create: the text
// rules, at most MaxInstanceIDLength bytes, not "." or "..", no "/". The
// error matches ErrInvalidArgument.
func ValidateInstanceID(id string) error {
	return checkNewInstanceID(id)
}

// ValidateLookupID checks an instance ID to look up: present, valid UTF-8
// without control characters, at most MaxLookupIDLength bytes. Unlike
// ValidateInstanceID it lets bidirectional controls, U+FFFD and "/"
// through, so instances named by the runtime or created before these rules
// can still be read, canceled and purged. The error matches
// ErrInvalidArgument.
func ValidateLookupID(id string) error {
	return checkLookup("instance ID", id, MaxLookupIDLength)
}

// ValidateName checks an orchestration name, a version or an event name:
// present, the text rules, at most MaxNameLength bytes. The error matches
// ErrInvalidArgument.
func ValidateName(name string) error {
	return checkText("name", name, MaxNameLength)
}

// ValidateKey checks a lock key (workflow ID) or an idempotency key:
// present, the text rules, at most MaxKeyLength bytes. The error matches
// ErrInvalidArgument.
func ValidateKey(key string) error {
	return checkText("key", key, MaxKeyLength)
}

// ValidateText checks other text by the text rules: v, which what names
// in the error, may be empty and is at most max bytes long (max <= 0: no
// limit). The API, the CLI and the dashboard use it for filters, cursors
// and tokens. The error matches ErrInvalidArgument.
func ValidateText(what, v string, max int) error {
	if max > 0 && len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes long; the limit is %d", ErrInvalidArgument, what, len(v), max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidArgument, what, v)
	}
	for i, r := range v {
		var why string
		switch {
		case unicode.IsControl(r):
			why = "the control character"
		case unicode.Is(unicode.Bidi_Control, r):
			why = "the bidirectional control"
		case r == utf8.RuneError:
			why = "U+FFFD, the replacement character of invalid text,"
		default:
			continue
		}
		if r == utf8.RuneError {
			return fmt.Errorf("%w: %s %q contains %s at byte %d", ErrInvalidArgument, what, v, why, i)
		}
		return fmt.Errorf("%w: %s %q contains %s %U at byte %d", ErrInvalidArgument, what, v, why, r, i)
	}
	return nil
}

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
// present, at most max bytes long and follows the text rules.
func checkText(what, v string, max int) error {
	if v == "" {
		return fmt.Errorf("%w: %s is required", ErrInvalidArgument, what)
	}
	return ValidateText(what, v, max)
}

// checkLookup checks an identifier that names something existing: present,
// at most max bytes long, valid UTF-8 without control characters.
func checkLookup(what, v string, max int) error {
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
	return ValidateLookupID(id)
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
