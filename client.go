package duroxide

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// State is the lifecycle state of an instance.
type State string

// Instance states.
const (
	// StatePending: created, first turn not yet run (a delayed start, or an
	// orchestration no runtime has registered yet: see Status.LastError).
	StatePending State = "Pending"
	// StateRunning: the orchestration is live (waiting on tasks, or parked
	// after nondeterminism with LastError set).
	StateRunning State = "Running"
	// StateCompleted: returned an output.
	StateCompleted State = "Completed"
	// StateFailed: returned an error, panicked, or was poisoned.
	StateFailed State = "Failed"
	// StateCanceled: canceled by CancelInstance or by its parent.
	StateCanceled State = "Canceled"
)

// IsTerminal reports whether s is final (Completed, Failed, Canceled).
func (s State) IsTerminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled
}

// Status is a snapshot of an instance.
type Status struct {
	InstanceID    string          `json:"instanceId"`
	Orchestration string          `json:"orchestration"`
	Version       string          `json:"version,omitempty"`
	State         State           `json:"status"`
	ExecutionID   int64           `json:"executionId"`
	Input         json.RawMessage `json:"input,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	// Error is the failure of a Failed or Canceled instance.
	Error *ErrorInfo `json:"error,omitempty"`
	// CustomStatus is the value last set by SetCustomStatus.
	CustomStatus     json.RawMessage `json:"customStatus,omitempty"`
	CreatedAt        time.Time       `json:"createdAt"`
	UpdatedAt        time.Time       `json:"updatedAt"`
	ParentInstanceID string          `json:"parentInstanceId,omitempty"`
	// LastError is why a live instance is not progressing: it is parked
	// after a nondeterminism failure, or its orchestration is not
	// registered on any runtime that fetched it. The next committed turn
	// clears it.
	LastError *ErrorInfo `json:"lastError,omitempty"`
	// WaitingFor lists what a live instance waits for, with times (see
	// Wait). GetStatus and ListInstances leave it nil (they read one row
	// per instance); Client.Inspect, ListInstances with
	// ListOptions.Stalled, and the HTTP API's instance route fill it.
	WaitingFor []Wait `json:"waitingFor,omitempty"`
	// Stalled reports that at least one entry of WaitingFor is stalled.
	// Set only where WaitingFor is filled.
	Stalled bool `json:"stalled,omitempty"`
	// HistoryEvents and HistoryBytes measure the current execution's
	// history as the runtime's limits do (RuntimeOptions.MaxHistoryEvents
	// and MaxHistoryBytes): its events, and its size, counted as the bytes
	// of its payloads and texts plus 64 per event (close to what the store
	// holds). Client.Inspect (and so the HTTP API's instance route, the
	// dashboard's instance page and 'duroxide status') sets them for live
	// and finished instances, ListInstances with ListOptions.Stalled for
	// the stalled ones, from the history they read; zero elsewhere
	// (GetStatus and list pages read one row per instance).
	HistoryEvents int64 `json:"historyEvents,omitempty"`
	HistoryBytes  int64 `json:"historyBytes,omitempty"`
	// Patches are the patches (OrchestrationContext.Patched, Deprecated)
	// the current execution recorded, in the order it first checked them:
	// which code branches it takes. Set where HistoryEvents is.
	Patches []string `json:"patches,omitempty"`
	// Deadline is when the instance times out (StartOptions.Timeout): if
	// it has not finished by then, it is canceled, and it ends Failed with
	// kind "timeout" once its code returns or the cancel grace period
	// (RuntimeOptions.CancelGracePeriod) runs out. ContinueAsNew keeps it.
	// Client.Inspect (and so the HTTP API's instance route, the
	// dashboard's instance page and 'duroxide status') sets it for a live
	// instance whose timeout is queued, and keeps it, then in the past,
	// while the timeout's cancel runs its grace period. Nil when no
	// timeout was set, before the first turn (the deadline counts from
	// it), after a rewind (a rewound instance has no timeout), once the
	// instance has finished, and from GetStatus and list pages (they read
	// one row per instance).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Paused is set while the instance is paused (Client.Pause): who
	// paused it, why and when. GetStatus, Inspect and ListInstances fill
	// it.
	Paused *PauseInfo `json:"paused,omitempty"`
	// ValuesVersion counts the turns that changed the instance's values
	// (OrchestrationContext.SetValue; 0 = never).
	ValuesVersion int64 `json:"valuesVersion,omitempty"`
	// ETag identifies what a client can see of the instance: its state,
	// execution, custom status and values. It changes when any of them
	// does; WaitForStatusChange waits for it to.
	ETag string `json:"etag"`
}

// etag is the ETag of a status read from info.
func etag(info *provider.InstanceInfo) string {
	return fmt.Sprintf("%d.%s.%d.%d", info.CurrentExecutionID, info.Status, info.CustomStatusVersion, info.ValuesVersion)
}

// Decode decodes the output of a Completed instance into out. For a Failed
// or Canceled instance it returns *OrchestrationError (matching ErrCanceled
// when canceled); for a live one, ErrNotTerminal.
func (s *Status) Decode(out any) error {
	switch s.State {
	case StateCompleted:
		return decodePayload(s.Output, out)
	case StateFailed, StateCanceled:
		e := &OrchestrationError{InstanceID: s.InstanceID, State: s.State}
		if s.Error != nil {
			e.Info = *s.Error
		}
		return e
	}
	return fmt.Errorf("instance %s is %s: %w", s.InstanceID, s.State, ErrNotTerminal)
}

// StartOptions tunes StartOrchestration. Nil means defaults.
type StartOptions struct {
	// Version pins the orchestration version ("" = the registry's default
	// for new instances, resolved by the runtime that runs the first turn).
	// A pinned instance runs only on runtimes that register its version
	// (one started without a version is pinned by its first turn); while
	// none does, it waits (see RuntimeOptions.UnservedTimeout).
	Version string
	// StartAt delays the start until that time (zero = now).
	StartAt time.Time
	// IdempotencyKey makes the start idempotent: a repeat of the key within
	// IdempotencyRetention starts nothing and returns *DuplicateStartError
	// naming the instance the key first started. It is checked before the
	// lock. Default "": not idempotent.
	IdempotencyKey string
	// IdempotencyRetention is how long the key is remembered (0 = 24h).
	IdempotencyRetention time.Duration
	// LockKey takes an execution lock ("workflow id"): only one instance
	// holding a given key runs at a time. The lock is written with the
	// instance and released in the same transaction that makes it
	// Completed, Failed or Canceled; ContinueAsNew keeps it. If a live
	// instance holds the key, the start returns *WorkflowLockedError (or,
	// with QueueIfLocked, waits its turn). Default "": no lock.
	LockKey string
	// LockTTL is how long the lock outlives the holder's last committed
	// turn (0 = 1h): every turn extends it, so a live instance keeps it,
	// and an instance that makes no progress for LockTTL loses it. Set it
	// above the longest wait (timer, event) of the orchestration.
	LockTTL time.Duration
	// QueueIfLocked makes a start whose LockKey is held wait durably
	// instead of failing: the instance is created Pending and begins, in
	// arrival order, when the holder ends (or its lock is released or
	// expires). Survives restarts: the queue is in the store. Default
	// false: the start fails.
	QueueIfLocked bool
	// ReplaceIfLocked makes a start whose LockKey is held by another live
	// instance replace that holder: in the start's own store transaction
	// the holder is asked to stop, as by CancelInstance with the reason
	// ReplaceReason, and the new instance is queued as with QueueIfLocked
	// (which it implies), to begin as soon as the holder ends. The start
	// and the cancel commit together or not at all: a start that fails
	// cancels nothing, and no moment passes where the new instance is
	// stored but the holder was not told to stop. On a free key it starts
	// at once. Replacing starts that arrive while an earlier one still
	// waits queue behind it, in arrival order; each cancels only the
	// holder it found, so one instance runs at a time. The canceled
	// holder is reported through Replaced. Needs LockKey. Default false.
	ReplaceIfLocked bool
	// ReplaceReason is the reason of the holder's cancel, at most
	// MaxReasonLength bytes (default "replaced by <instance ID>"). Only
	// with ReplaceIfLocked.
	ReplaceReason string
	// Replaced, when not nil, receives the ID of the instance that
	// ReplaceIfLocked canceled, once the start is stored: "" when the
	// key was free (or held by the started instance itself), when the
	// call started nothing (a duplicate idempotency key, an instance
	// SignalWithStart found), or when the call failed. It is written by
	// every call that takes these options: give concurrent calls their
	// own StartOptions.
	Replaced *string
	// TraceParent is the W3C trace context (a traceparent header value)
	// to run the instance under when a Tracer is set: recorded in its
	// history, it makes the instance's turns and activities, in any
	// process, children of that span. "" starts none; the otel module's
	// TraceParent(ctx) gives the value of a context's span.
	TraceParent string
	// Timeout ends the instance if it has not finished that long after its
	// first turn (its start, or StartAt): the orchestration is canceled as
	// by CancelInstance, with the same grace period to clean up
	// (RuntimeOptions.CancelGracePeriod), and ends Failed with kind
	// "timeout" (errors.Is(err, ErrTimeout) on Status.Decode's error). The
	// deadline is durable (recorded in OrchestrationStarted and queued with
	// the first turn) and covers the whole instance: ContinueAsNew does not
	// restart it; a rewind drops it. Client.Inspect shows it
	// (Status.Deadline). Zero means no timeout; negative is invalid.
	Timeout time.Duration
}

// Defaults of StartOptions.
const (
	DefaultLockTTL              = time.Hour
	DefaultIdempotencyRetention = 24 * time.Hour
)

// ListOptions filters ListInstances; it is also the filter of a bulk
// action (BulkRequest.Filter), so one filter says what a listing shows and
// what a bulk action touches. Nil lists everything, newest first. Filters
// combine with AND.
type ListOptions struct {
	// States keeps instances in any of these states (empty = all).
	States []State `json:"states,omitempty"`
	// Orchestration keeps instances of this orchestration name.
	Orchestration string `json:"orchestration,omitempty"`
	// Version keeps instances of this orchestration version.
	Version string `json:"version,omitempty"`
	// ParentInstanceID keeps the children of this instance.
	ParentInstanceID string `json:"parentInstanceId,omitempty"`
	// IDPrefix keeps instances whose ID starts with this string
	// (case-sensitive, no wildcards).
	IDPrefix string `json:"idPrefix,omitempty"`
	// CreatedAfter and CreatedBefore keep instances created at or after,
	// and before, these times (zero: no bound).
	CreatedAfter  time.Time `json:"createdAfter,omitzero"`
	CreatedBefore time.Time `json:"createdBefore,omitzero"`
	// FinishedAfter and FinishedBefore keep Completed, Failed and
	// Canceled instances that finished at or after, and before, these
	// times (zero: no bound; either bound keeps finished instances only).
	FinishedAfter  time.Time `json:"finishedAfter,omitzero"`
	FinishedBefore time.Time `json:"finishedBefore,omitzero"`
	// ErrorKind keeps instances whose Error (a Failed or Canceled
	// instance) or LastError (a live one that is not progressing) has
	// this kind ("application", "nondeterminism", "timeout", ...).
	// Applied to the store's pages, so a page may hold fewer than Limit
	// instances (even none) while NextCursor is set.
	ErrorKind string `json:"errorKind,omitempty"`
	// WaitKind keeps live instances waiting for this kind of thing (see
	// Wait.Kind), with WaitingFor filled. Each live instance of a page is
	// inspected (Client.Inspect), and, as with ErrorKind, a page may hold
	// fewer than Limit instances.
	WaitKind WaitKind `json:"waitKind,omitempty"`
	// Limit is the page size (default 100, max 1000).
	Limit int `json:"limit,omitempty"`
	// Cursor continues from a previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// Stalled keeps only stalled instances (see Wait.Stalled), each with
	// WaitingFor filled, newest first. ListInstances returns at most Limit
	// of them, in one page (Cursor must be empty; NextCursor is empty);
	// a bulk action walks every live instance and inspects each. The
	// other filters still apply.
	Stalled bool `json:"stalled,omitempty"`
	// StalledAfter is the stall threshold when Stalled is set
	// (0 = DefaultStalledAfter).
	StalledAfter time.Duration `json:"stalledAfter,omitempty"`
}

// InstancePage is one page of ListInstances.
type InstancePage struct {
	Instances  []Status `json:"instances"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

// Client controls orchestrations: it starts them, raises events, cancels,
// reads status and history, and purges. It talks only to the store, so it
// works from any process; in the process of a runtime on the same store it
// also wakes that runtime at once.
type Client struct {
	p          provider.Provider
	maxPayload int              // 0: no limit
	clock      func() time.Time // nil: time.Now
}

// ClientOptions configures NewClientWithOptions. A nil pointer or a zero
// field means the documented default.
type ClientOptions struct {
	// MaxPayloadBytes bounds the input of a start and the data of an
	// event: larger ones are refused with a *LimitError before anything is
	// stored (default DefaultMaxPayloadBytes, 2 MiB; negative: no limit).
	// Keep it at most the runtime's RuntimeOptions.MaxPayloadBytes: an
	// instance whose input is over the runtime's limit fails at its first
	// turn.
	MaxPayloadBytes int
	// Clock is the time source of the schedule calls, which compute fire
	// times from now (default: the real clock). Give it the store's clock.
	Clock clockwork.Clock
}

// NewClient returns a client of store with the default options.
func NewClient(store provider.Provider) *Client {
	return NewClientWithOptions(store, nil)
}

// NewClientWithOptions returns a client of store configured by opts (nil:
// defaults).
func NewClientWithOptions(store provider.Provider, opts *ClientOptions) *Client {
	c := &Client{p: store, maxPayload: DefaultMaxPayloadBytes}
	if opts != nil {
		if opts.Clock != nil {
			c.clock = opts.Clock.Now
		}
		switch {
		case opts.MaxPayloadBytes < 0:
			c.maxPayload = 0
		case opts.MaxPayloadBytes > 0:
			c.maxPayload = opts.MaxPayloadBytes
		}
	}
	return c
}

// Store returns the client's provider.
func (c *Client) Store() provider.Provider { return c.p }

// StartOrchestration creates instanceID and starts the orchestration name
// with input (JSON-encoded). It returns once the start is stored; the
// runtime runs it. ErrInstanceExists if instanceID is taken. With
// opts.IdempotencyKey a repeated key returns *DuplicateStartError; with
// opts.LockKey a held lock returns *WorkflowLockedError (or
// *LockAcquisitionFailedError when another start took it at the same
// moment), unless opts.QueueIfLocked or opts.ReplaceIfLocked (which
// reports the holder it canceled in opts.Replaced). Malformed identifiers (see
// MaxInstanceIDLength) return ErrInvalidArgument; an input over the
// client's MaxPayloadBytes returns a *LimitError (matching both
// ErrLimitExceeded and ErrInvalidArgument).
func (c *Client) StartOrchestration(ctx context.Context, instanceID, name string, input any, opts *StartOptions) error {
	msg, err := c.startMessage(instanceID, name, input, opts)
	if err != nil {
		return err
	}
	res, err := c.p.Enqueue(ctx, msg)
	if err != nil {
		return startError(name, instanceID, msg.Create.Lock, err)
	}
	reportReplaced(opts, enqueued(res, 0))
	return nil
}

// reportReplaced writes the holder a committed start replaced (its
// result res) to opts.Replaced, when asked.
func reportReplaced(opts *StartOptions, res provider.EnqueueResult) {
	if opts != nil && opts.Replaced != nil {
		*opts.Replaced = res.Replaced
	}
}

// enqueued returns the result of the i-th message of a committed Enqueue
// whose results are res: the zero value (inserted as given) when the
// store reported none for it.
func enqueued(res []provider.EnqueueResult, i int) provider.EnqueueResult {
	if i < len(res) {
		return res[i]
	}
	return provider.EnqueueResult{}
}

// startMessage validates a start and builds its message.
func (c *Client) startMessage(instanceID, name string, input any, opts *StartOptions) (*provider.OrchestratorMessage, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	if opts.Replaced != nil {
		*opts.Replaced = ""
	}
	if err := checkStart(instanceID, name, opts); err != nil {
		return nil, err
	}
	if opts.LockTTL < 0 || opts.IdempotencyRetention < 0 {
		return nil, fmt.Errorf("%w: LockTTL and IdempotencyRetention must not be negative", ErrInvalidArgument)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout must not be negative", ErrInvalidArgument)
	}
	if (opts.QueueIfLocked || opts.ReplaceIfLocked) && opts.LockKey == "" {
		return nil, fmt.Errorf("%w: QueueIfLocked and ReplaceIfLocked need a LockKey", ErrInvalidArgument)
	}
	if opts.ReplaceReason != "" {
		if !opts.ReplaceIfLocked {
			return nil, fmt.Errorf("%w: ReplaceReason applies only with ReplaceIfLocked", ErrInvalidArgument)
		}
		if err := checkText("replace reason", opts.ReplaceReason, MaxReasonLength); err != nil {
			return nil, err
		}
	}
	if err := checkTraceParent(opts.TraceParent); err != nil {
		return nil, err
	}
	raw, err := encodePayload(input)
	if err != nil {
		return nil, fmt.Errorf("input of %s: %w", name, err)
	}
	if err := checkPayload("input of orchestration "+name, raw, c.maxPayload); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	create := &provider.NewInstance{OrchestrationName: name, OrchestrationVersion: opts.Version, Input: raw}
	if opts.IdempotencyKey != "" {
		create.IdempotencyKey = opts.IdempotencyKey
		create.IdempotencyTTL = cmp.Or(opts.IdempotencyRetention, DefaultIdempotencyRetention)
	}
	if opts.LockKey != "" {
		create.Lock = &provider.LockRequest{Key: opts.LockKey, TTL: cmp.Or(opts.LockTTL, DefaultLockTTL),
			Queue: opts.QueueIfLocked || opts.ReplaceIfLocked}
		if opts.ReplaceIfLocked {
			create.Lock.Replace = true
			create.Lock.ReplaceReason = cmp.Or(opts.ReplaceReason, "replaced by "+instanceID)
		}
	}
	return &provider.OrchestratorMessage{
		InstanceID: instanceID,
		VisibleAt:  opts.StartAt,
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: instanceID, ExecutionID: 1,
			Name: name, Version: opts.Version, Input: raw, TraceParent: opts.TraceParent, TimeoutMs: timeoutMs(opts.Timeout)},
		Create: create,
	}, nil
}

// timeoutMs is d in whole milliseconds, at least 1 for a positive d.
func timeoutMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// startError turns a store error of a start into the public error types.
func startError(name, instanceID string, lock *provider.LockRequest, err error) error {
	var locked *provider.LockedError
	lockKey := ""
	if lock != nil {
		lockKey = lock.Key
	}
	switch {
	case errors.As(err, new(*DuplicateStartError)):
		return err
	case errors.As(err, &locked):
		return &WorkflowLockedError{WorkflowID: locked.Key, ExistingInstanceID: locked.InstanceID,
			LockedSince: locked.LockedAt, ExpiresAt: locked.ExpiresAt}
	case errors.Is(err, provider.ErrLockContended):
		return &LockAcquisitionFailedError{WorkflowID: lockKey, InstanceID: instanceID, Reason: err.Error()}
	case errors.Is(err, provider.ErrInstanceExists):
		return fmt.Errorf("starting %s: instance %q: %w", name, instanceID, ErrInstanceExists)
	}
	return fmt.Errorf("starting %s: %w", name, err)
}

// RaiseEvent delivers the external event name with data (JSON-encoded) to
// instanceID, where WaitForEvent(name) receives it. ErrNotFound if the
// instance does not exist; *InstanceTerminalError (ErrInstanceTerminal),
// changing nothing, if it is already Completed, Failed or Canceled; a
// *LimitError (matching ErrLimitExceeded and ErrInvalidArgument) if data
// is over the client's MaxPayloadBytes. An event that arrives as the instance ends is dropped.
func (c *Client) RaiseEvent(ctx context.Context, instanceID, name string, data any) error {
	_, err := c.raiseEvent(ctx, instanceID, name, data, "")
	return err
}

// RaiseEventOptions tunes RaiseEventWithOptions. Nil means defaults.
type RaiseEventOptions struct {
	// IdempotencyKey makes the raise once-only for the instance: a later
	// raise on the same instance with the same key delivers nothing and
	// reports a duplicate, whatever its event name and data, so a sender
	// may retry a raise whose answer it lost. The key is recorded with
	// the event, in the same store transaction, and kept until the
	// instance is purged; other instances may use the same key. At most
	// MaxEventKeyLength bytes, valid UTF-8 without control characters;
	// "" for none.
	IdempotencyKey string
}

// MaxEventKeyLength bounds RaiseEventOptions.IdempotencyKey, in bytes:
// the store keeps the key behind a short prefix, within MaxKeyLength.
const MaxEventKeyLength = MaxKeyLength - len(eventKeyPrefix)

// eventKeyPrefix scopes the idempotency keys of RaiseEventWithOptions
// among an instance's deduplication keys (provider.OrchestratorMessage.
// DedupKey), apart from those of bulk jobs ("bulk:<job ID>").
const eventKeyPrefix = "raise:"

// RaiseEventWithOptions is RaiseEvent with options. With
// opts.IdempotencyKey it reports duplicate when the instance already
// took a raise with that key: nothing new is delivered, and the call
// succeeds. Concurrent raises with one key deliver once. The instance's
// state is checked first, as by RaiseEvent: once it has ended, a repeat
// returns *InstanceTerminalError like any raise. An invalid key matches
// ErrInvalidArgument; the other errors are RaiseEvent's.
func (c *Client) RaiseEventWithOptions(ctx context.Context, instanceID, name string, data any, opts *RaiseEventOptions) (duplicate bool, err error) {
	var key string
	if opts != nil && opts.IdempotencyKey != "" {
		if err := ValidateText("idempotency key", opts.IdempotencyKey, MaxEventKeyLength); err != nil {
			return false, err
		}
		key = eventKeyPrefix + opts.IdempotencyKey
	}
	return c.raiseEvent(ctx, instanceID, name, data, key)
}

// raiseEvent is RaiseEvent with a deduplication key (provider.
// OrchestratorMessage.DedupKey; "" for none): a second raise with the
// same key on the same instance is a no-op, reported as a duplicate.
func (c *Client) raiseEvent(ctx context.Context, instanceID, name string, data any, dedupKey string) (duplicate bool, err error) {
	raw, err := c.eventData(instanceID, name, data)
	if err != nil {
		return false, err
	}
	info, err := c.instance(ctx, instanceID)
	if err != nil {
		return false, err
	}
	if st := stateOf(info.Status); st.IsTerminal() {
		return false, &InstanceTerminalError{InstanceID: instanceID, State: st}
	}
	msg := &provider.OrchestratorMessage{InstanceID: instanceID, DedupKey: dedupKey,
		Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: instanceID, Name: name, Data: raw}}
	res, err := c.p.Enqueue(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("sending %s to %s: %w", msg.Item.Kind, instanceID, err)
	}
	return enqueued(res, 0).Duplicate, nil
}

// eventData validates an event for instanceID and encodes its data.
func (c *Client) eventData(instanceID, name string, data any) (json.RawMessage, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	if err := checkText("event name", name, MaxNameLength); err != nil {
		return nil, err
	}
	raw, err := encodePayload(data)
	if err != nil {
		return nil, fmt.Errorf("data of event %s: %w", name, err)
	}
	if err := checkPayload("data of event "+name, raw, c.maxPayload); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return raw, nil
}

// SignalWithStart delivers the external event eventName with eventData to
// instanceID, starting the orchestration orchestrationName with input
// first when the instance does not exist (signal-with-start). The start
// and the event are stored in one transaction: the store creates the
// instance with the event queued behind its start, or, when the ID is
// taken, queues only the event; so any number of concurrent calls for a
// new ID, from any process on one store, start it once and deliver every
// event once. It reports whether this call started the instance.
//
// opts applies to the start only, as in StartOrchestration, with two
// differences: an instance that exists takes the event without looking
// at opts.LockKey (a lock held by another instance still refuses, or
// queues, the start of an absent one), and opts.IdempotencyKey names the
// whole delivery: a repeated key delivers nothing and returns
// *DuplicateStartError naming the instance the first delivery went to
// (also once that instance has ended, so a sender's retry is answered as
// a duplicate). Otherwise an instance that exists and is Completed,
// Failed or Canceled returns *InstanceTerminalError
// (ErrInstanceTerminal), delivering nothing.
// Validation errors are those of StartOrchestration and RaiseEvent.
func (c *Client) SignalWithStart(ctx context.Context, instanceID, orchestrationName string, input any,
	eventName string, eventData any, opts *StartOptions) (started bool, err error) {
	raw, err := c.eventData(instanceID, eventName, eventData)
	if err != nil {
		return false, err
	}
	start, err := c.startMessage(instanceID, orchestrationName, input, opts)
	if err != nil {
		return false, err
	}
	start.Create.IfAbsent = true
	event := &provider.OrchestratorMessage{InstanceID: instanceID,
		Item: history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: instanceID, Name: eventName, Data: raw}}
	res, err := c.p.Enqueue(ctx, start, event)
	if errors.Is(err, provider.ErrInstanceEnded) {
		te := &InstanceTerminalError{InstanceID: instanceID, State: StateCompleted}
		if info, ierr := c.p.GetInstance(ctx, instanceID); ierr == nil {
			te.State = stateOf(info.Status)
		}
		return false, te
	}
	if err != nil {
		return false, startError(orchestrationName, instanceID, start.Create.Lock, err)
	}
	reportReplaced(opts, enqueued(res, 0))
	return !enqueued(res, 0).Existed, nil
}

// CancelInstance asks instanceID to stop. The orchestration sees the
// request (OrchestrationContext.Canceled): what it waits on fails with
// ErrCanceled, its running activities are canceled and its children
// canceled in turn, and it may run cleanup work within
// RuntimeOptions.CancelGracePeriod. The instance then ends Canceled with
// reason. ErrNotFound if unknown; *InstanceTerminalError
// (ErrInstanceTerminal), changing nothing, if it is already Completed,
// Failed or Canceled.
func (c *Client) CancelInstance(ctx context.Context, instanceID, reason string) error {
	info, err := c.instance(ctx, instanceID)
	if err != nil {
		return err
	}
	if st := stateOf(info.Status); st.IsTerminal() {
		return &InstanceTerminalError{InstanceID: instanceID, State: st}
	}
	return c.send(ctx, instanceID, history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: instanceID, Reason: reason})
}

func (c *Client) send(ctx context.Context, instanceID string, item history.WorkItem) error {
	if _, err := c.p.Enqueue(ctx, &provider.OrchestratorMessage{InstanceID: instanceID, Item: item}); err != nil {
		return fmt.Errorf("sending %s to %s: %w", item.Kind, instanceID, err)
	}
	return nil
}

func (c *Client) instance(ctx context.Context, instanceID string) (*provider.InstanceInfo, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	info, err := c.p.GetInstance(ctx, instanceID)
	if err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return nil, fmt.Errorf("instance %q: %w", instanceID, ErrNotFound)
		}
		return nil, err
	}
	return info, nil
}

// GetStatus returns a snapshot of instanceID, or ErrNotFound.
func (c *Client) GetStatus(ctx context.Context, instanceID string) (*Status, error) {
	info, err := c.instance(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	st := statusOf(info)
	if !st.State.IsTerminal() {
		if st.Paused, err = c.pauseOf(ctx, instanceID); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func statusOf(info *provider.InstanceInfo) *Status {
	s := &Status{
		InstanceID:       info.InstanceID,
		Orchestration:    info.OrchestrationName,
		Version:          info.OrchestrationVersion,
		ExecutionID:      info.CurrentExecutionID,
		Input:            info.Input,
		Output:           info.Output,
		Error:            errorInfo(info.Error),
		CustomStatus:     info.CustomStatus,
		CreatedAt:        info.CreatedAt,
		UpdatedAt:        info.UpdatedAt,
		ParentInstanceID: info.ParentInstanceID,
		LastError:        errorInfo(info.LastError),
		ValuesVersion:    info.ValuesVersion,
		ETag:             etag(info),
	}
	s.State = stateOf(info.Status)
	if s.State != StateCompleted {
		s.Output = nil
	}
	return s
}

// stateOf maps a store status to the instance state the API reports.
func stateOf(st provider.Status) State {
	switch st {
	case provider.StatusPending:
		return StatePending
	case provider.StatusCompleted:
		return StateCompleted
	case provider.StatusFailed:
		return StateFailed
	case provider.StatusCanceled:
		return StateCanceled
	}
	return StateRunning // Running, or between executions of a ContinueAsNew
}

// waitRecheck is how often WaitForOrchestration re-reads a status without
// a notification.
const waitRecheck = 5 * time.Second

// WaitForOrchestration blocks until instanceID is Completed, Failed or
// Canceled, and returns its status; or until ctx ends (ctx's error). It
// wakes when the store reports a change of the instance (at once for
// commits made in this process, and, with the SQLite store, within its
// ChangeCheckInterval for other processes'), but not for one the store
// knows left it running (provider.EndWatcher: the SQL stores' turns
// committed in this process), and reads its status then; it also re-reads
// the status every few seconds in case a notification was lost. When a
// commit of this process ended the instance and the store handed its row
// to the waiter (provider.EndStatusWatcher: the PostgreSQL store reads it
// in that commit's round trip), it returns that row's status without
// reading it again.
func (c *Client) WaitForOrchestration(ctx context.Context, instanceID string) (*Status, error) {
	var (
		wait  <-chan struct{}
		ended <-chan *provider.InstanceInfo
		stop  func()
	)
	switch w := c.p.(type) {
	case provider.EndStatusWatcher:
		ended, stop = w.WatchInstanceEndStatus(instanceID)
	case provider.EndWatcher:
		// Woken only by changes that may have ended the instance.
		wait, stop = w.WatchInstanceEnd(instanceID)
	default:
		wait, stop = c.p.WatchInstance(instanceID)
	}
	defer stop()
	for {
		info, err := c.instance(ctx, instanceID)
		if err != nil {
			return nil, err
		}
		if st := statusOf(info); st.State.IsTerminal() {
			return st, nil // a finished instance is never paused: no need to read it
		}
		t := time.NewTimer(waitRecheck)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wait:
		case in := <-ended:
			if in != nil && in.InstanceID == instanceID {
				if st := statusOf(in); st.State.IsTerminal() {
					t.Stop()
					return st, nil
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// WaitForStatusChange blocks until what a client sees of instanceID
// differs from the status whose ETag the caller holds (its state, its
// execution, its custom status or its values), and returns the new
// status; at once when etag is empty or already stale. It returns
// ctx's error when ctx ends first (bound it with a deadline), and
// ErrNotFound for an unknown instance. Like WaitForOrchestration it
// sleeps on the store's notifications (Notifier.WatchInstance), re-reading
// the status on each, and once per ChangeCheckInterval at the most for a
// notification lost between processes.
func (c *Client) WaitForStatusChange(ctx context.Context, instanceID, etag string) (*Status, error) {
	wait, stop := c.p.WatchInstance(instanceID)
	defer stop()
	for {
		st, err := c.GetStatus(ctx, instanceID)
		if err != nil {
			return nil, err
		}
		if st.ETag != etag {
			return st, nil
		}
		t := time.NewTimer(waitRecheck)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wait:
		case <-t.C:
		}
		t.Stop()
	}
}

// Value is one value of an instance (OrchestrationContext.SetValue).
type Value struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	// UpdatedAt is when the turn that set it committed (the store's clock).
	UpdatedAt time.Time `json:"updatedAt"`
}

// ListValues returns the values instanceID set (OrchestrationContext.SetValue)
// and has not cleared, in key order, as its last committed turn left them,
// read from the store without replaying history. ErrNotFound for an
// unknown instance.
func (c *Client) ListValues(ctx context.Context, instanceID string) ([]Value, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	vs, err := c.p.ListValues(ctx, instanceID)
	if err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return nil, fmt.Errorf("instance %q: %w", instanceID, ErrNotFound)
		}
		return nil, err
	}
	out := make([]Value, len(vs))
	for i, v := range vs {
		out[i] = Value{Key: v.Key, Value: v.Value, UpdatedAt: v.UpdatedAt}
	}
	return out, nil
}

// GetValue decodes the value key of instanceID into out (when out is not
// nil) and reports whether the instance holds it. ErrNotFound for an
// unknown instance; false, and out untouched, for a key it does not hold.
func (c *Client) GetValue(ctx context.Context, instanceID, key string, out any) (bool, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return false, err
	}
	if err := checkText("value key", key, MaxNameLength); err != nil {
		return false, err
	}
	v, err := c.p.GetValue(ctx, instanceID, key)
	if errors.Is(err, provider.ErrNotFound) {
		if _, ierr := c.instance(ctx, instanceID); ierr != nil {
			return false, ierr
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if out != nil {
		if err := json.Unmarshal(v.Value, out); err != nil {
			return true, fmt.Errorf("value %s of %s: %w", key, instanceID, err)
		}
	}
	return true, nil
}

// ListInstances lists instances, newest first, one page at a time.
func (c *Client) ListInstances(ctx context.Context, opts *ListOptions) (*InstancePage, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	if opts.Stalled {
		return c.listStalled(ctx, opts)
	}
	return c.listPage(ctx, opts)
}

// listPage reads one store page of opts and applies the filters the
// store does not answer (Stalled included: every live instance of the
// page is inspected).
func (c *Client) listPage(ctx context.Context, opts *ListOptions) (*InstancePage, error) {
	po, err := opts.storeOptions()
	if err != nil {
		return nil, err
	}
	if opts.noMatch(po) {
		return &InstancePage{Instances: []Status{}}, nil
	}
	page, err := c.p.ListInstances(ctx, po)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	out := &InstancePage{Instances: make([]Status, 0, len(page.Instances)), NextCursor: page.NextCursor}
	for i := range page.Instances {
		st, ok, err := c.matchPage(ctx, opts, statusOf(&page.Instances[i]))
		if err != nil {
			return nil, err
		}
		if ok {
			out.Instances = append(out.Instances, *st)
		}
	}
	if err := c.fillPauses(ctx, out.Instances); err != nil {
		return nil, err
	}
	return out, nil
}

// GetHistory returns the events of one execution of instanceID (0 = the
// current execution). ErrNotFound if the instance or execution is unknown.
func (c *Client) GetHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	if executionID < 0 {
		return nil, fmt.Errorf("%w: execution ID must be >= 0, got %d", ErrInvalidArgument, executionID)
	}
	evs, err := c.p.ReadHistory(ctx, instanceID, executionID)
	if err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return nil, fmt.Errorf("history of %q (execution %d): %w", instanceID, executionID, ErrNotFound)
		}
		return nil, err
	}
	return evs, nil
}

// ListExecutions describes every execution of instanceID, oldest first.
func (c *Client) ListExecutions(ctx context.Context, instanceID string) ([]provider.ExecutionInfo, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	ex, err := c.p.ListExecutions(ctx, instanceID)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, fmt.Errorf("instance %q: %w", instanceID, ErrNotFound)
	}
	return ex, err
}

// PurgeInstance deletes instanceID with its history, its queued messages
// and its sub-orchestrations. A live instance needs force (else
// ErrStillRunning); a force purge does not stop activities already running
// elsewhere, their results are discarded. A sub-orchestration cannot be
// purged on its own (ErrChildInstance): purge its root.
func (c *Client) PurgeInstance(ctx context.Context, instanceID string, force bool) error {
	if err := checkInstanceID(instanceID); err != nil {
		return err
	}
	res, err := c.p.PurgeInstances(ctx, []string{instanceID}, provider.PurgeOptions{Force: force})
	if err != nil {
		return fmt.Errorf("purging %q: %w", instanceID, err)
	}
	if res.Instances == 0 {
		return fmt.Errorf("purging %q: %w", instanceID, ErrNotFound)
	}
	return nil
}
