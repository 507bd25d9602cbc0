package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// notFound explains an unknown instance: where it was looked for and what
// to check.
func (inv *invocation) notFound(id string) error {
	if inv.serverBase != "" {
		return fmt.Errorf("instance %q not found on the server at %s: check the ID and --server (or $%s), or list instances with 'duroxide list --server %s'", id, inv.serverBase, envServer, inv.serverBase)
	}
	return fmt.Errorf("instance %q not found in this store: check the ID and --db, or list instances with 'duroxide list'", id)
}

// instanceError turns client errors about instance id into messages that
// say what to do.
func (inv *invocation) instanceError(id string, err error) error {
	switch {
	case errors.Is(err, duroxide.ErrNotFound):
		return inv.notFound(id)
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	}
	return err
}

// endedError is the error of raise and cancel on an instance that already
// ended: both fail (exit 1), as the HTTP API answers both with 409.
func endedError(ctx context.Context, client backend, id string, err error, consequence string) error {
	state := duroxide.State("")
	var te *duroxide.InstanceTerminalError
	if errors.As(err, &te) {
		state = te.State
	} else if st, serr := client.GetStatus(ctx, id); serr == nil {
		state = st.State
	}
	if state == "" {
		return fmt.Errorf("instance %s already ended: %s", safe(id), consequence)
	}
	return fmt.Errorf("instance %s already ended (%s): %s", safe(id), state, consequence)
}

var startCommand = &command{
	name:     "start",
	synopsis: "NAME [--id ID] [--input JSON] [--version V] [--idempotency-key K] [--lock-key W [--lock-ttl D] [--queue-if-locked | --replace-if-locked]] [--instance-timeout D] [--wait [--timeout D]] [--json]",
	summary:  "start an orchestration instance and print its ID",
	details: `Stores the start of orchestration NAME; a runtime on the same store (for
example 'duroxide serve --demo') runs it. --input is the orchestration's input
as JSON: quote strings for JSON and the shell, e.g. --input '"Ada"'.

With --wait, start waits until the instance ends and prints its final status
(or, with --json, the status as JSON); it exits 1 if the instance Failed or
was Canceled, or if --timeout passed first (the instance keeps running).

--idempotency-key K makes the start idempotent: repeating K within 24 hours
starts nothing, even if the instance was purged since; start then prints the ID of the instance K first started,
notes on standard error that the start was a duplicate, and exits 0. --wait
then waits for that instance; --json without --wait prints
{"instanceId": ..., "duplicate": true}.

--lock-key W takes the execution lock of workflow W: while another live
instance holds it, start fails (exit 1) naming the holder, unless
--queue-if-locked, which stores the instance Pending to begin when the
holder ends. --replace-if-locked instead cancels the holder (reason
"replaced by ID") and queues the instance to begin when it ends, in one
store transaction: a start that fails cancels nothing. start notes the
canceled holder on standard error ({"replacedInstanceId": ...} with --json).
The lock is freed when the instance ends; each turn extends it
by --lock-ttl, so an instance that stops progressing loses it. See
'duroxide locks'.

--instance-timeout D ends the instance Failed (kind "timeout") if it has not
finished D after it started; its code may clean up within the runtime's
cancel grace period first. (--timeout only bounds how long --wait waits.)

Example:
  duroxide start demo.Hello --input '"Ada"' --wait
  duroxide start demo.Approval --lock-key order-42 --idempotency-key req-7`,
	run: runStart,
}

func runStart(ctx context.Context, inv *invocation, args []string) error {
	id := inv.fs.String("id", "", "the instance ID (default: a random UUID)")
	input := inv.fs.String("input", "", "the input as JSON, e.g. '\"Ada\"', 42 or '{\"k\":1}' (default: none)")
	version := inv.fs.String("version", "", "pin the orchestration version (default: the latest registered)")
	wait := inv.fs.Bool("wait", false, "wait until the instance ends and print its final status")
	timeout := inv.fs.Duration("timeout", 0, "with --wait, stop waiting after this long, e.g. 30s (default: no limit)")
	idemKey := inv.fs.String("idempotency-key", "", "start nothing if this key started an instance in the last 24h; print that instance's ID")
	lockKey := inv.fs.String("lock-key", "", "take the execution lock of this workflow ID: fail if a live instance holds it")
	lockTTL := inv.fs.Duration("lock-ttl", 0, "with --lock-key, how long the lock outlives the instance's last turn (default 1h)")
	queue := inv.fs.Bool("queue-if-locked", false, "with --lock-key, when the lock is held, queue the instance to start after the holder ends")
	replace := inv.fs.Bool("replace-if-locked", false, "with --lock-key, when the lock is held, cancel the holder and start after it ends")
	instTimeout := inv.fs.Duration("instance-timeout", 0, "fail the instance (kind timeout) if it has not finished this long after it started (default: never)")
	inv.jsonFlag("the instance ID, or with --wait the final status,")
	inv.serverFlags()
	if err := inv.parse(args, 1, "orchestration NAME"); err != nil {
		return err
	}
	raw, err := jsonArg("start", "input", *input)
	if err != nil {
		return err
	}
	if *timeout < 0 {
		return usageErrorf("start: --timeout must not be negative")
	}
	if *timeout > 0 && !*wait {
		return usageErrorf("start: --timeout only applies with --wait")
	}
	if *lockTTL < 0 {
		return usageErrorf("start: --lock-ttl must not be negative")
	}
	if *instTimeout < 0 {
		return usageErrorf("start: --instance-timeout must not be negative")
	}
	if *lockKey == "" && (*lockTTL > 0 || *queue || *replace) {
		return usageErrorf("start: --lock-ttl, --queue-if-locked and --replace-if-locked only apply with --lock-key")
	}
	if *queue && *replace {
		return usageErrorf("start: give --queue-if-locked or --replace-if-locked, not both")
	}
	if *id == "" {
		*id = uuid.NewString()
	}
	client, done, err := inv.openBackend(ctx, storeurl.CreateFile)
	if err != nil {
		return err
	}
	defer done()
	name := inv.arg(0)
	var in any
	if raw != nil {
		in = raw
	}
	var replaced string
	opts := &duroxide.StartOptions{Version: *version, IdempotencyKey: *idemKey,
		LockKey: *lockKey, LockTTL: *lockTTL, QueueIfLocked: *queue, Timeout: *instTimeout,
		ReplaceIfLocked: *replace, Replaced: &replaced}
	duplicate := false
	var dup *duroxide.DuplicateStartError
	switch err := client.StartOrchestration(ctx, *id, name, in, opts); {
	case errors.As(err, &dup):
		// Not a failure: the key's instance is the answer.
		duplicate, *id = true, dup.InstanceID
		purged := ""
		if !dup.PurgedAt.IsZero() {
			purged = " (purged at " + formatTime(dup.PurgedAt) + ")"
		}
		fmt.Fprintf(inv.stderr, "duplicate start: idempotency key %q already started instance %s%s; nothing new was started\n", dup.IdempotencyKey, safe(dup.InstanceID), purged)
	case errors.Is(err, duroxide.ErrWorkflowLocked):
		if lerr := lockedError(err, *lockKey); lerr != nil {
			return lerr
		}
		return err
	case errors.Is(err, duroxide.ErrInstanceExists):
		return fmt.Errorf("instance %q already exists: choose another --id, or inspect it with 'duroxide status %s'", *id, *id)
	case err != nil:
		return interrupted(err) // the client names the orchestration
	case replaced != "":
		noteReplaced(inv, replaced, *lockKey, *id)
	case *queue:
		// Say whether the instance runs now or waits its turn.
		if l, lerr := client.GetLock(ctx, *lockKey); lerr == nil && l.InstanceID != nil && *l.InstanceID != *id {
			fmt.Fprintf(inv.stderr, "queued: workflow %s is locked by instance %s; %s starts when the lock is freed\n", safe(*lockKey), safe(*l.InstanceID), safe(*id))
		}
	}
	if !*wait {
		if inv.jsonOut {
			out := map[string]any{"instanceId": *id, "duplicate": duplicate}
			if replaced != "" {
				out["replacedInstanceId"] = replaced
			}
			return inv.printJSON(out)
		}
		_, err := fmt.Fprintln(inv.stdout, safe(*id))
		return err
	}
	if !inv.jsonOut {
		fmt.Fprintln(inv.stdout, safe(*id))
	}
	st, err := waitFor(ctx, inv, client, *id, *timeout)
	if err != nil {
		return err
	}
	if inv.jsonOut {
		err = inv.printJSON(st)
	} else {
		err = printStatus(inv.stdout, st)
	}
	if err != nil {
		return err
	}
	return endError(st)
}

// noteReplaced tells on standard error that the start of id canceled
// replaced, the holder of lock key (--replace-if-locked).
func noteReplaced(inv *invocation, replaced, key, id string) {
	fmt.Fprintf(inv.stderr, "replaced: canceled instance %s, the holder of workflow %s; %s starts when it ends\n", safe(replaced), safe(key), safe(id))
}

// pendingHint is how long start --wait watches an instance stay Pending
// before suggesting that no runtime is running.
const pendingHint = 5 * time.Second

// waitFor waits until instance id ends, the timeout (if > 0) passes or ctx
// is canceled.
func waitFor(ctx context.Context, inv *invocation, client backend, id string, timeout time.Duration) (*duroxide.Status, error) {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	hctx, cancel := context.WithTimeout(wctx, pendingHint)
	st, err := client.WaitForOrchestration(hctx, id)
	cancel()
	if err != nil && hctx.Err() != nil && wctx.Err() == nil {
		if cur, serr := client.GetStatus(wctx, id); serr == nil && cur.State == duroxide.StatePending {
			fmt.Fprintf(inv.stderr, "duroxide: %s is still Pending after %s: is a runtime hosting %s running on this store (e.g. 'duroxide serve --demo')?\n",
				safe(id), pendingHint, safe(cur.Orchestration))
		}
		st, err = client.WaitForOrchestration(wctx, id)
	}
	if err == nil {
		return st, nil
	}
	state := "running"
	if cur, serr := client.GetStatus(context.WithoutCancel(ctx), id); serr == nil {
		state = string(cur.State)
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted while waiting for %s (%s): it carries on; check it with 'duroxide status %s'", id, state, id)
	case wctx.Err() != nil:
		return nil, fmt.Errorf("timed out after %s waiting for %s (%s): it carries on; check it with 'duroxide status %s'", timeout, id, state, id)
	}
	return nil, inv.instanceError(id, err)
}

// endError is the error of an instance that ended Failed or Canceled.
func endError(st *duroxide.Status) error {
	var msg string
	if st.Error != nil {
		msg = ": " + st.Error.Message
	}
	switch st.State {
	case duroxide.StateFailed:
		return fmt.Errorf("instance %s failed%s", st.InstanceID, msg)
	case duroxide.StateCanceled:
		return fmt.Errorf("instance %s was canceled%s", st.InstanceID, msg)
	}
	return nil
}

var statusCommand = &command{
	name:     "status",
	synopsis: "ID [--stalled-after D] [--json]",
	summary:  "show an instance's status, deadline, input, output, error and what it waits for",
	run: func(ctx context.Context, inv *invocation, args []string) error {
		stalledAfter := inv.fs.Duration("stalled-after", duroxide.DefaultStalledAfter, "report a wait as stalled after this long without progress (with --server, the server's setting applies)")
		inv.jsonFlag("the status, with waitingFor")
		inv.serverFlags()
		if err := inv.parse(args, 1, "instance ID"); err != nil {
			return err
		}
		if *stalledAfter <= 0 {
			return usageErrorf("status: --stalled-after must be positive, got %s", *stalledAfter)
		}
		client, done, err := inv.openBackend(ctx, storeurl.Existing)
		if err != nil {
			return err
		}
		defer done()
		st, err := client.Inspect(ctx, inv.arg(0), &duroxide.WaitOptions{StalledAfter: *stalledAfter})
		if err != nil {
			return inv.instanceError(inv.arg(0), err)
		}
		if inv.jsonOut {
			return inv.printJSON(st)
		}
		return printStatus(inv.stdout, st)
	},
}

var historyCommand = &command{
	name:     "history",
	synopsis: "ID [--execution N] [--json]",
	summary:  "show the event history of an instance's execution",
	details: `Prints the events of the current execution (or of execution N; ContinueAsNew
starts a new execution). --json prints {"events": [...]} as the HTTP API does.`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		exec := inv.fs.Int64("execution", 0, "the execution to show (default: the current one)")
		inv.jsonFlag("the events")
		inv.serverFlags()
		if err := inv.parse(args, 1, "instance ID"); err != nil {
			return err
		}
		if *exec < 0 {
			return usageErrorf("history: --execution must be 1 or more")
		}
		client, done, err := inv.openBackend(ctx, storeurl.Existing)
		if err != nil {
			return err
		}
		defer done()
		id := inv.arg(0)
		evs, err := client.GetHistory(ctx, id, *exec)
		if errors.Is(err, duroxide.ErrNotFound) && *exec > 0 {
			if st, serr := client.GetStatus(ctx, id); serr == nil {
				return fmt.Errorf("instance %q has no execution %d: its executions are 1 to %d", id, *exec, st.ExecutionID)
			}
		}
		if err != nil {
			return inv.instanceError(id, err)
		}
		if inv.jsonOut {
			return inv.printJSON(map[string]any{"events": eventsJSON(evs)})
		}
		return printHistory(inv.stdout, evs)
	},
}

var listCommand = &command{
	name:     "list",
	synopsis: "[--status S] [--orchestration NAME] [filter flags] [--limit N] [--cursor C] [--stalled [--stalled-after D]] [--json]",
	summary:  "list instances, newest first",
	details: `--status takes one state or several separated by commas: Pending, Running,
Completed, Failed, Canceled. Results come in pages of --limit; when there are
more, the command prints the --cursor that continues the listing.

The other filters are those of bulk: --version, --prefix, --parent,
--created-after, --created-before, --finished-after, --finished-before (RFC
3339 times, or a duration meaning that long ago), --error-kind and
--wait-kind; a page filtered by error or wait kind may hold fewer than
--limit instances.

--stalled lists only stalled instances (no progress for --stalled-after, 5m by
default, while parked, unregistered, redelivered, or with due work nobody
takes), up to --limit, each with what it waits for and why it is stalled.`,
	run: runList,
}

func runList(ctx context.Context, inv *invocation, args []string) error {
	filter := filterFlags(inv)
	limit := inv.fs.Int("limit", 100, "page size, 1 to 1000")
	cursor := inv.fs.String("cursor", "", "continue a previous listing (printed after its last page)")
	stalledAfter := inv.fs.Duration("stalled-after", duroxide.DefaultStalledAfter, "with --stalled, the stall threshold (with --server, the server's setting applies)")
	inv.jsonFlag(`the page ({"instances": [...], "nextCursor": "..."}), summaries without input, output or custom status`)
	inv.serverFlags()
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usageErrorf("list: --limit must be between 1 and 1000, got %d", *limit)
	}
	f, err := filter(time.Now())
	if err != nil {
		return err
	}
	if f.Stalled && *cursor != "" {
		return usageErrorf("list: --stalled lists one page; it takes no --cursor")
	}
	if *stalledAfter <= 0 {
		return usageErrorf("list: --stalled-after must be positive, got %s", *stalledAfter)
	}
	opts := &f
	opts.Limit, opts.Cursor, opts.StalledAfter = *limit, *cursor, *stalledAfter
	client, done, err := inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	page, err := client.ListInstances(ctx, opts)
	if err != nil {
		if *cursor != "" && errors.Is(err, duroxide.ErrInvalidArgument) {
			return usageErrorf("list: --cursor %q is not a cursor printed by a previous 'duroxide list'", *cursor)
		}
		return err
	}
	if inv.jsonOut {
		// Summaries, as GET /api/instances answers them: inputs, outputs
		// and custom statuses can be large; 'duroxide status' shows them.
		for i := range page.Instances {
			in := &page.Instances[i]
			in.Input, in.Output, in.CustomStatus = nil, nil, nil
		}
		return inv.printJSON(page)
	}
	if len(page.Instances) == 0 {
		_, err := fmt.Fprintln(inv.stdout, "no instances")
		return err
	}
	if err := printInstances(inv.stdout, page); err != nil {
		return err
	}
	if opts.Stalled {
		for i := range page.Instances {
			st := &page.Instances[i]
			if _, err := fmt.Fprintf(inv.stdout, "\n%s ", safe(st.InstanceID)); err != nil {
				return err
			}
			if err := printWaits(inv.stdout, st); err != nil {
				return err
			}
		}
	}
	if page.NextCursor != "" {
		fmt.Fprintf(inv.stderr, "more instances: continue with --cursor %s\n", safe(page.NextCursor))
	}
	return nil
}

// parseState reads a state name, case-insensitively.
func parseState(s string) (duroxide.State, bool) {
	s = strings.TrimSpace(s)
	for _, st := range []duroxide.State{duroxide.StatePending, duroxide.StateRunning, duroxide.StateCompleted,
		duroxide.StateFailed, duroxide.StateCanceled} {
		if strings.EqualFold(s, string(st)) {
			return st, true
		}
	}
	if strings.EqualFold(s, "Cancelled") {
		return duroxide.StateCanceled, true
	}
	return "", false
}

var valuesCommand = &command{
	name:     "values",
	synopsis: "ID [KEY] [--json]",
	summary:  "print the values an instance set (OrchestrationContext.SetValue)",
	details: `Prints each value of instance ID, one per line as KEY = JSON, in key order;
with KEY, only that value's JSON (exit 1 if the instance does not hold it).
The values are read from the store as the instance's last committed turn left
them, without replaying its history.

Example:
  duroxide values order-42
  duroxide values order-42 stage --json`,
	run: runValues,
}

func runValues(ctx context.Context, inv *invocation, args []string) error {
	inv.jsonFlag(`the values ({"values": [{"key": ..., "value": ..., "updatedAt": ...}]}), or with KEY the one value`)
	inv.serverFlags()
	if err := inv.parse(args, 1, "instance ID", "KEY"); err != nil {
		return err
	}
	client, done, err := inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	id := inv.arg(0)
	vs, err := client.ListValues(ctx, id)
	if err != nil {
		return inv.instanceError(id, err)
	}
	if key := inv.arg(1); key != "" {
		for _, v := range vs {
			if v.Key != key {
				continue
			}
			if inv.jsonOut {
				return inv.printJSON(v)
			}
			_, err := fmt.Fprintf(inv.stdout, "%s\n", safe(string(v.Value)))
			return err
		}
		return fmt.Errorf("instance %s holds no value %s: 'duroxide values %s' lists them", safe(id), safe(key), safe(id))
	}
	if inv.jsonOut {
		if vs == nil {
			vs = []duroxide.Value{}
		}
		return inv.printJSON(map[string]any{"values": vs})
	}
	for _, v := range vs {
		if _, err := fmt.Fprintf(inv.stdout, "%s = %s\n", safe(v.Key), safe(string(v.Value))); err != nil {
			return err
		}
	}
	return nil
}

var raiseCommand = &command{
	name:     "raise",
	synopsis: "ID EVENT [--data JSON] [--idempotency-key K] [--start NAME [--input JSON] [--version V] [--lock-key W [--lock-ttl D] [--queue-if-locked | --replace-if-locked]]]",
	summary:  "deliver an external event to an instance (or start it with the event)",
	details: `The instance receives the event where it waits for EVENT (WaitForEvent).
--data is the event's payload as JSON, e.g. --data true.
--idempotency-key K makes the raise once-only for the instance: raising
again with K on the same instance (whatever EVENT and --data) delivers
nothing, notes on standard error that it was a duplicate, and exits 0. The
instance keeps its keys until it is purged.

With --start NAME, raise is a signal-with-start: when instance ID does not
exist, the orchestration NAME is started as ID with --input, and the event
is queued behind its start, in one transaction; when it exists, it gets the
event. raise prints which happened. --version, --lock-key, --lock-ttl,
--queue-if-locked and --replace-if-locked apply to the start only, as in
'duroxide start'.
With --start, --idempotency-key K names the whole delivery, as the
idempotency key of a start: repeating K within 24 hours, on any instance,
delivers nothing, notes on standard error that it was a duplicate, and
exits 0.

Examples:
  duroxide raise order-42 approval --data true
  duroxide raise order-42 paid --data '{"amount": 30}' --idempotency-key pay-7f3a
  duroxide raise order-42 paid --data '{"amount": 30}' --start orders.Order --input '{"id": 42}'`,
	run: runRaise,
}

func runRaise(ctx context.Context, inv *invocation, args []string) error {
	data := inv.fs.String("data", "", "the event payload as JSON (default: none)")
	start := inv.fs.String("start", "", "start this orchestration as ID, with the event queued, when ID does not exist")
	input := inv.fs.String("input", "", "with --start, the orchestration's input as JSON (default: none)")
	version := inv.fs.String("version", "", "with --start, pin the orchestration version")
	idemKey := inv.fs.String("idempotency-key", "", "deliver nothing if this key was raised on the instance before (with --start: delivered in the last 24h)")
	lockKey := inv.fs.String("lock-key", "", "with --start, the execution lock the start takes")
	lockTTL := inv.fs.Duration("lock-ttl", 0, "with --lock-key, how long the lock outlives the instance's last turn (default 1h)")
	queue := inv.fs.Bool("queue-if-locked", false, "with --lock-key, queue the start when the lock is held")
	replace := inv.fs.Bool("replace-if-locked", false, "with --lock-key, cancel the lock's holder and queue the start behind it")
	inv.serverFlags()
	if err := inv.parse(args, 2, "instance ID", "EVENT name"); err != nil {
		return err
	}
	raw, err := jsonArg("raise", "data", *data)
	if err != nil {
		return err
	}
	in, err := jsonArg("raise", "input", *input)
	if err != nil {
		return err
	}
	switch {
	case *start == "" && (in != nil || *version != "" || *lockKey != ""):
		return usageErrorf("raise: --input, --version and --lock-key only apply with --start")
	case *lockKey == "" && (*lockTTL != 0 || *queue || *replace):
		return usageErrorf("raise: --lock-ttl, --queue-if-locked and --replace-if-locked only apply with --lock-key")
	case *queue && *replace:
		return usageErrorf("raise: give --queue-if-locked or --replace-if-locked, not both")
	case *lockTTL < 0:
		return usageErrorf("raise: --lock-ttl must not be negative")
	}
	if *start == "" && *idemKey != "" {
		if err := duroxide.ValidateText("--idempotency-key", *idemKey, duroxide.MaxEventKeyLength); err != nil {
			return usageErrorf("raise: %s", safe(err.Error()))
		}
	}
	client, done, err := inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return err
	}
	defer done()
	id, event := inv.arg(0), inv.arg(1)
	var payload, startInput any
	if raw != nil {
		payload = raw
	}
	if in != nil {
		startInput = in
	}
	if *start == "" {
		dup, err := client.RaiseEventWithOptions(ctx, id, event, payload, &duroxide.RaiseEventOptions{IdempotencyKey: *idemKey})
		if err != nil {
			if errors.Is(err, duroxide.ErrInstanceTerminal) {
				return endedError(ctx, client, id, err, "an event would be ignored")
			}
			return inv.instanceError(id, err)
		}
		if dup {
			_, err = fmt.Fprintf(inv.stderr, "duplicate: idempotency key %s was raised on %s before; nothing delivered\n",
				safe(*idemKey), safe(id))
			return err
		}
		_, err = fmt.Fprintf(inv.stdout, "raised %s on %s\n", safe(event), safe(id))
		return err
	}
	var replaced string
	opts := &duroxide.StartOptions{Version: *version, IdempotencyKey: *idemKey, LockKey: *lockKey,
		LockTTL: *lockTTL, QueueIfLocked: *queue, ReplaceIfLocked: *replace, Replaced: &replaced}
	started, err := client.SignalWithStart(ctx, id, *start, startInput, event, payload, opts)
	var dup *duroxide.DuplicateStartError
	switch {
	case errors.As(err, &dup):
		_, err = fmt.Fprintf(inv.stderr, "duplicate: idempotency key %s was delivered to %s before; nothing delivered\n",
			safe(*idemKey), safe(dup.InstanceID))
		return err
	case errors.Is(err, duroxide.ErrInstanceTerminal):
		return endedError(ctx, client, id, err, "an event would be ignored")
	case err != nil:
		return err
	case started:
		if replaced != "" {
			noteReplaced(inv, replaced, *lockKey, id)
		}
		_, err = fmt.Fprintf(inv.stdout, "started %s as %s with %s\n", safe(*start), safe(id), safe(event))
	default:
		_, err = fmt.Fprintf(inv.stdout, "raised %s on %s\n", safe(event), safe(id))
	}
	return err
}

var cancelCommand = &command{
	name:     "cancel",
	synopsis: "ID [--reason R]",
	summary:  "cancel a running instance (and its activities and sub-orchestrations)",
	details: `The instance ends Canceled at its next turn. An instance that already
ended is left as it is and cancel exits 1, as raise does (the HTTP API
answers both with 409).`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		reason := inv.fs.String("reason", "", "why, recorded with the cancellation")
		client, id, done, err := inv.openInstance(ctx, args)
		if err != nil {
			return err
		}
		defer done()
		if err := client.CancelInstance(ctx, id, *reason); err != nil {
			if errors.Is(err, duroxide.ErrInstanceTerminal) {
				return endedError(ctx, client, id, err, "nothing to cancel")
			}
			return inv.instanceError(id, err)
		}
		_, err = fmt.Fprintf(inv.stdout, "cancellation of %s requested: it ends Canceled at its next turn ('duroxide status %s')\n", safe(id), safe(id))
		return err
	},
}

var purgeCommand = &command{
	name:     "purge",
	synopsis: "ID [--force]",
	summary:  "delete an ended instance with its history and sub-orchestrations",
	details: `A Pending or Running instance is only purged with --force; activities it
already started elsewhere still run, and their results are discarded.`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		force := inv.fs.Bool("force", false, "purge even if the instance is still Pending or Running")
		client, id, done, err := inv.openInstance(ctx, args)
		if err != nil {
			return err
		}
		defer done()
		err = client.PurgeInstance(ctx, id, *force)
		switch {
		case errors.Is(err, duroxide.ErrStillRunning):
			return fmt.Errorf("instance %s is still running: cancel it first ('duroxide cancel %s') or purge it with --force", id, id)
		case errors.Is(err, duroxide.ErrChildInstance):
			parent := "its root instance"
			if st, serr := client.GetStatus(ctx, id); serr == nil && st.ParentInstanceID != "" {
				parent = st.ParentInstanceID
			}
			return fmt.Errorf("instance %s is a sub-orchestration: purge %s instead, which purges its children too", id, parent)
		case err != nil:
			return inv.instanceError(id, err)
		}
		_, err = fmt.Fprintf(inv.stdout, "purged %s\n", safe(id))
		return err
	},
}
