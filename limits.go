package duroxide

import (
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
)

// Defaults of the runtime's limits (RuntimeOptions.MaxActionsPerTurn,
// MaxHistoryEvents, MaxHistoryBytes, MaxPayloadBytes) and of the payload
// limit of a Client. They keep one orchestration from exhausting a small
// server (2 cores, a few GB of memory): the largest history they allow
// takes tens of MB to load and replay, and one turn commits at most
// DefaultMaxActionsPerTurn messages.
const (
	// DefaultMaxActionsPerTurn bounds what an orchestration records in one
	// turn: activities, timers, event waits, sub-orchestrations, custom
	// status updates, Now and NewGUID calls.
	DefaultMaxActionsPerTurn = 10_000
	// DefaultMaxHistoryEvents bounds the events of one execution's
	// history. ContinueAsNew starts an empty history.
	DefaultMaxHistoryEvents = 50_000
	// DefaultMaxHistoryBytes (32 MiB) bounds the size of one execution's
	// history, as Status.HistoryBytes measures it.
	DefaultMaxHistoryBytes = 32 << 20
	// DefaultMaxPayloadBytes (2 MiB) bounds one JSON payload: an
	// orchestration's input or output, an activity's input or result, a
	// sub-orchestration's input, an event's data, a custom status.
	DefaultMaxPayloadBytes = 2 << 20
	// DefaultMaxValues bounds the values one instance holds
	// (OrchestrationContext.SetValue); DefaultMaxValueBytes (64 KiB) the
	// size of one.
	DefaultMaxValues     = 100
	DefaultMaxValueBytes = 64 << 10
)

// ErrLimitExceeded: something went over one of the limits above. A
// *LimitError matches it, and so do the failures the runtime records for
// it: *ActivityError, *SubOrchestrationError and *OrchestrationError whose
// code is "limit_exceeded".
var ErrLimitExceeded = replay.ErrLimitExceeded

// LimitError reports what went over a limit: What (for example "input of
// activity Charge" or "actions recorded in one turn") reached Value, over
// the limit named Limit ("MaxActionsPerTurn", "MaxHistoryEvents",
// "MaxHistoryBytes", "MaxPayloadBytes", "MaxValues", "MaxValueBytes"),
// whose value is Max. A Client
// returns it for a start or an event whose payload is too large, before
// storing anything. An orchestration that goes over a limit fails with
// kind "configuration" and code "limit_exceeded", its message being the
// LimitError's; what its last turn recorded is not committed, so its code
// stops at the first action over the limit and the store keeps only the
// history before that turn. An activity whose result is too large fails
// the same way, and its orchestration sees the *ActivityError. It matches
// errors.Is(err, ErrLimitExceeded).
type LimitError = replay.LimitError

// limits resolves the limits of o: zero means the default, negative no
// limit.
func (o *RuntimeOptions) limits() replay.Limits {
	pick := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	return replay.Limits{
		MaxActions: int(pick(int64(o.MaxActionsPerTurn), DefaultMaxActionsPerTurn)),
		MaxEvents:  int(pick(int64(o.MaxHistoryEvents), DefaultMaxHistoryEvents)),
		MaxBytes:   pick(o.MaxHistoryBytes, DefaultMaxHistoryBytes),
		MaxPayload: int(pick(int64(o.MaxPayloadBytes), DefaultMaxPayloadBytes)),

		MaxValues:     int(pick(int64(o.MaxValues), DefaultMaxValues)),
		MaxValueBytes: int(pick(int64(o.MaxValueBytes), DefaultMaxValueBytes)),
	}
}

// historySize is the number of events of hist and its size, as the
// runtime's limits measure them.
func historySize(hist []history.Event) (events, bytes int64) {
	for i := range hist {
		bytes += replay.EventSize(&hist[i])
	}
	return int64(len(hist)), bytes
}

// checkPayload refuses a payload over max bytes (max <= 0: no limit).
func checkPayload(what string, raw []byte, max int) error {
	if max > 0 && len(raw) > max {
		return &LimitError{Limit: replay.LimitPayload, Max: int64(max), Value: int64(len(raw)), What: what}
	}
	return nil
}
