package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

var locksCommand = &command{
	name:     "locks",
	synopsis: "[list | status W | release W | cleanup] [--json]",
	summary:  "show, release and clean up execution locks (start --lock-key)",
	details: `An execution lock lets one instance at a time run under a workflow ID W
(start --lock-key W, or a webhook trigger with "concurrency": "exclusive").
It is taken with the instance and freed when the instance ends; each turn
extends its TTL, so an instance that stops progressing loses it. A stale lock
(holder ended or gone, or TTL passed) is taken over by the next start.

  locks [list]      every lock: holder, its status, times, stale, queued starts
  locks status W    the lock of W ("not locked" when there is none)
  locks release W   force-release W's lock (the oldest queued start takes it);
                    exits 1 with "no lock on W" when W had no lock. The holder,
                    if alive, keeps running without the lock: for emergencies.
  locks cleanup     delete every expired or stale lock now (runtimes do this
                    periodically) and print how many

--json applies to list ({"locks": [...]}) and status (the lock as the HTTP
API shows it).`,
	run: runLocks,
}

func runLocks(ctx context.Context, inv *invocation, args []string) error {
	inv.jsonFlag("the locks (list) or the lock (status)")
	inv.serverFlags()
	if err := inv.parse(args, 0, "subcommand", "workflow ID"); err != nil {
		return err
	}
	sub := inv.arg(0)
	if sub == "" {
		sub = "list"
	}
	var needID bool
	switch sub {
	case "list", "cleanup":
	case "status", "release":
		needID = true
	default:
		return usageErrorf("locks: unknown subcommand %q: use list, status W, release W or cleanup", sub)
	}
	if needID && len(inv.args) < 2 {
		return usageErrorf("locks %s: missing workflow ID (usage: duroxide locks %s W)", sub, sub)
	}
	if !needID && len(inv.args) > 1 {
		return usageErrorf("locks %s: unexpected argument %q (usage: duroxide locks %s)", sub, inv.arg(1), sub)
	}
	if inv.jsonOut && (sub == "release" || sub == "cleanup") {
		return usageErrorf("locks %s: --json applies to 'locks list' and 'locks status' only", sub)
	}
	client, done, err := inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "status":
		return lockStatus(ctx, inv, client, inv.arg(1))
	case "release":
		return lockRelease(ctx, inv, client, inv.arg(1))
	case "cleanup":
		n, err := client.CleanupExpiredLocks(ctx)
		if err != nil {
			return interrupted(err)
		}
		_, err = fmt.Fprintf(inv.stdout, "cleaned %d expired or stale %s\n", n, plural(n, "lock", "locks"))
		return err
	}
	locks, err := client.ListLocks(ctx)
	if err != nil {
		return interrupted(err)
	}
	if inv.jsonOut {
		if locks == nil {
			locks = []duroxide.LockStatus{}
		}
		return inv.printJSON(map[string]any{"locks": locks})
	}
	if len(locks) == 0 {
		_, err := fmt.Fprintln(inv.stdout, "no locks")
		return err
	}
	return printLocks(inv.stdout, locks)
}

func lockStatus(ctx context.Context, inv *invocation, client backend, w string) error {
	l, err := client.GetLock(ctx, w)
	if err != nil {
		return interrupted(err)
	}
	if inv.jsonOut {
		return inv.printJSON(l)
	}
	if !l.IsLocked {
		_, err := fmt.Fprintf(inv.stdout, "workflow %s is not locked\n", safe(w))
		return err
	}
	return printLock(inv.stdout, l)
}

func lockRelease(ctx context.Context, inv *invocation, client backend, w string) error {
	// Read the lock first, only to name its holder in the message.
	var holder string
	if l, err := client.GetLock(ctx, w); err == nil && l.InstanceID != nil {
		holder = *l.InstanceID
	}
	ok, err := client.ReleaseLock(ctx, w)
	if err != nil {
		return interrupted(err)
	}
	if !ok {
		return fmt.Errorf("no lock on %s: nothing to release (see 'duroxide locks list')", w)
	}
	msg := "released the lock on " + safe(w)
	if holder != "" {
		msg += fmt.Sprintf(" (held by %s, which keeps running if alive)", safe(holder))
	}
	_, err = fmt.Fprintln(inv.stdout, msg)
	return err
}

// interrupted says "interrupted" for a canceled command.
func interrupted(err error) error {
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// lockTime formats an optional lock time.
func lockTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// holderState is the holder's status for display: "gone" when the holder
// no longer exists.
func holderState(l *duroxide.LockStatus) string {
	if l.HolderStatus == "" {
		return "gone"
	}
	return string(l.HolderStatus)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printLocks prints locks as a table.
func printLocks(w io.Writer, locks []duroxide.LockStatus) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "WORKFLOW\tHOLDER\tHOLDER STATUS\tLOCKED SINCE\tEXPIRES AT\tSTALE\tQUEUED")
	for i := range locks {
		l := &locks[i]
		holder := "-"
		if l.InstanceID != nil {
			holder = *l.InstanceID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", safe(l.WorkflowID), safe(holder), safe(holderState(l)),
			lockTime(l.LockedSince), lockTime(l.ExpiresAt), yesNo(l.IsStale), l.Queued)
	}
	return tw.Flush()
}

// printLock prints one held lock as aligned "key: value" lines.
func printLock(w io.Writer, l *duroxide.LockStatus) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, safe(v)) }
	row("Workflow", l.WorkflowID)
	row("Locked", "yes")
	if l.InstanceID != nil {
		row("Holder", *l.InstanceID)
	}
	row("Holder status", holderState(l))
	row("Locked since", lockTime(l.LockedSince))
	row("Expires at", lockTime(l.ExpiresAt))
	stale := "no"
	if l.IsStale {
		stale = "yes (the next start or 'duroxide locks cleanup' removes it)"
	}
	row("Stale", stale)
	row("Queued", strconv.Itoa(l.Queued))
	return tw.Flush()
}

// lockedError explains a start refused by a held lock.
func lockedError(err error, lockKey string) error {
	var held *duroxide.WorkflowLockedError
	if errors.As(err, &held) {
		var since []string
		if !held.LockedSince.IsZero() {
			since = append(since, "since "+formatTime(held.LockedSince))
		}
		if !held.ExpiresAt.IsZero() {
			since = append(since, "expires "+formatTime(held.ExpiresAt))
		}
		when := ""
		if len(since) > 0 {
			when = " (" + strings.Join(since, ", ") + ")"
		}
		return fmt.Errorf("workflow %s is locked by instance %s%s: wait for it to end, start with --queue-if-locked to run after it, or see 'duroxide locks status %s'",
			held.WorkflowID, held.ExistingInstanceID, when, held.WorkflowID)
	}
	var race *duroxide.LockAcquisitionFailedError
	if errors.As(err, &race) {
		return fmt.Errorf("workflow %s: another start took its lock at the same moment: retry, or see 'duroxide locks status %s'", lockKey, lockKey)
	}
	return nil
}
