package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
)

// printWaits prints what a live instance waits for, one line per wait, in
// words: "waiting for event `approval` since ...".
func printWaits(w io.Writer, st *duroxide.Status) error {
	if len(st.WaitingFor) == 0 {
		return nil
	}
	head := "Waiting for:"
	if st.Stalled {
		head = "Waiting for (STALLED):"
	}
	if _, err := fmt.Fprintln(w, head); err != nil {
		return err
	}
	for i := range st.WaitingFor {
		if _, err := fmt.Fprintf(w, "  - %s\n", describeWait(&st.WaitingFor[i])); err != nil {
			return err
		}
	}
	return nil
}

// quoted is a name in backquotes, made safe for a terminal.
func quoted(s string) string { return "`" + safe(s) + "`" }

// describeWait says one wait in words.
func describeWait(w *duroxide.Wait) string {
	var b strings.Builder
	at := formatTime
	switch w.Kind {
	case duroxide.WaitEvent:
		fmt.Fprintf(&b, "event %s since %s", quoted(w.Name), at(w.Since))
	case duroxide.WaitTimer:
		fmt.Fprintf(&b, "timer fires at %s", at(w.FiresAt))
		if w.Name != "" { // duroxide.CancelGraceWaitName: the instance ends then
			fmt.Fprintf(&b, " (%s)", safe(w.Name))
		}
	case duroxide.WaitActivity:
		fmt.Fprintf(&b, "activity %s attempt %d", quoted(w.Name), w.Attempt)
		switch w.ActivityState {
		case duroxide.ActivityRetrying:
			fmt.Fprintf(&b, ", retrying at %s", at(w.RetryAt))
		case duroxide.ActivityRunning:
			fmt.Fprintf(&b, ", running (worker lock until %s)", at(w.LockedUntil))
		case duroxide.ActivityDone:
			b.WriteString(", finished: its result waits for the next turn")
		default:
			if !w.RetryAt.IsZero() {
				fmt.Fprintf(&b, ", queued, next delivery at %s", at(w.RetryAt))
			} else {
				fmt.Fprintf(&b, ", queued since %s", at(w.Since))
			}
		}
		if w.Deliveries > 1 {
			fmt.Fprintf(&b, ", delivered %d times", w.Deliveries)
		}
		describeActivityOptions(&b, w)
	case duroxide.WaitChild:
		state := string(w.ChildState)
		if state == "" {
			state = "not created yet"
		}
		fmt.Fprintf(&b, "child %s (%s) since %s", quoted(w.InstanceID), safe(state), at(w.Since))
	case duroxide.WaitLock:
		holder := "nobody (handed over at the next start, release or cleanup)"
		if w.Holder != "" {
			holder = quoted(w.Holder)
		}
		fmt.Fprintf(&b, "execution lock %s held by %s, place %d in its queue, since %s", quoted(w.LockKey), holder, w.QueuePosition, at(w.Since))
	case duroxide.WaitDelayedStart:
		fmt.Fprintf(&b, "delayed start at %s", at(w.At))
	case duroxide.WaitUnregisteredOrchestration, duroxide.WaitUnregisteredActivity:
		what := "orchestration"
		if w.Kind == duroxide.WaitUnregisteredActivity {
			what = "activity"
		}
		name := w.Name
		if w.Version != "" {
			name += "@" + w.Version
		}
		if w.Unserved {
			fmt.Fprintf(&b, "%s %s, which no live runtime registers, since %s", what, quoted(name), at(w.Since))
			break
		}
		fmt.Fprintf(&b, "%s %s, which no runtime that fetched it has registered, since %s (attempt %d", what, quoted(name), at(w.Since), w.Attempt)
		if !w.RetryAt.IsZero() {
			fmt.Fprintf(&b, ", retrying at %s", at(w.RetryAt))
		}
		b.WriteString(")")
	case duroxide.WaitParked:
		fmt.Fprintf(&b, "a deploy that replays its history: parked after nondeterminism since %s", at(w.Since))
		if w.Expected != "" || w.Found != "" {
			fmt.Fprintf(&b, "; at event %d history has %s, but the code %s", w.EventID, safe(w.Expected), safe(w.Found))
		}
		if !w.RetryAt.IsZero() {
			fmt.Fprintf(&b, "; next replay at %s", at(w.RetryAt))
		}
	case duroxide.WaitPaused:
		fmt.Fprintf(&b, "a resume: paused since %s", at(w.Since))
		if w.By != "" {
			fmt.Fprintf(&b, " by %s", safe(w.By))
		}
		if w.Message != "" {
			fmt.Fprintf(&b, " (%s)", safe(oneLine(w.Message)))
		}
	case duroxide.WaitTurn:
		fmt.Fprintf(&b, "a runtime to take %d due message(s), due since %s", w.Messages, at(w.Since))
		if w.Message != "" {
			fmt.Fprintf(&b, " (last attempt: %s)", safe(oneLine(w.Message)))
		}
	default:
		fmt.Fprintf(&b, "%s", safe(string(w.Kind)))
	}
	if w.Stalled {
		fmt.Fprintf(&b, " -- STALLED: %s", safe(w.StalledReason))
	}
	return b.String()
}

// describeActivityOptions adds an activity's routing, timeouts and
// heartbeat to b: its queue, heartbeat, start-to-close and
// schedule-to-close timeouts, latest heartbeat, and whether no runtime
// serves it.
func describeActivityOptions(b *strings.Builder, w *duroxide.Wait) {
	if w.Queue != "" {
		fmt.Fprintf(b, ", queue %s", quoted(w.Queue))
	}
	if w.HeartbeatTimeoutMs > 0 {
		fmt.Fprintf(b, ", heartbeat timeout %s", time.Duration(w.HeartbeatTimeoutMs)*time.Millisecond)
	}
	if w.StartToCloseTimeoutMs > 0 {
		fmt.Fprintf(b, ", start-to-close timeout %s", time.Duration(w.StartToCloseTimeoutMs)*time.Millisecond)
	}
	if w.ScheduleToCloseTimeoutMs > 0 {
		fmt.Fprintf(b, ", schedule-to-close timeout %s", time.Duration(w.ScheduleToCloseTimeoutMs)*time.Millisecond)
	}
	if !w.HeartbeatAt.IsZero() {
		fmt.Fprintf(b, ", last heartbeat %s", formatTime(w.HeartbeatAt))
		if len(w.HeartbeatDetails) > 0 {
			fmt.Fprintf(b, " (%s)", safe(clip(string(w.HeartbeatDetails))))
		}
	}
	if w.Unserved {
		fmt.Fprintf(b, "; %s", safe(w.Message))
	}
}
