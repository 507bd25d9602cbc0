// Package sqlenc validates and encodes the provider calls the SQL stores
// (provider/sqlite, provider/postgres) write, before their transactions
// begin: a malformed argument costs no round trip and holds no lock, and
// both stores read exactly the same values from a call.
package sqlenc

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Msg is an orchestrator message validated and encoded before the
// transaction.
type Msg struct {
	InstanceID string
	Item       []byte
	VisibleAt  int64 // 0: now
	Create     *Create
	// Existed, Duplicate and Replaced are what inserting the message
	// found (provider.EnqueueResult), set in its transaction.
	//
	// Existed: its Create had IfAbsent and found the ID taken, so nothing
	// was inserted for it.
	Existed bool
	// DedupKey is the message's provider.OrchestratorMessage.DedupKey.
	DedupKey string
	// Duplicate: its DedupKey was recorded already, so nothing was
	// inserted for it.
	Duplicate bool
	// Replaced: the instance whose cancel its Create's LockReplace
	// enqueued ("" for none).
	Replaced string
}

// Create is the instance a message creates (provider.NewInstance).
type Create struct {
	Name, Version string
	Input         any // string or nil
	Parent        any // string or nil
	ParentExec    int64
	OnExists      *Msg

	IdemKey   string
	IdemTTL   int64 // ms
	LockKey   string
	LockTTL   int64 // ms
	LockQueue bool
	IfAbsent  bool
	// LockReplace (provider.LockRequest.Replace) cancels the key's live
	// holder in the start's transaction, with the reason ReplaceReason.
	LockReplace   bool
	ReplaceReason string
}

// EncodeMessage validates and encodes m.
func EncodeMessage(m *provider.OrchestratorMessage) (*Msg, error) {
	if m == nil {
		return nil, Invalid("nil orchestrator message")
	}
	if m.InstanceID == "" {
		return nil, Invalid("orchestrator message has no InstanceID")
	}
	data, err := history.EncodeWorkItem(&m.Item)
	if err != nil {
		return nil, fmt.Errorf("%w: message for %q: %w", provider.ErrInvalidArgument, m.InstanceID, err)
	}
	e := &Msg{InstanceID: m.InstanceID, Item: data, DedupKey: m.DedupKey}
	switch {
	case m.DedupKey != "" && m.Create != nil:
		return nil, Invalid("message for %q has both a DedupKey and a Create", m.InstanceID)
	case len(m.DedupKey) > 512:
		return nil, Invalid("DedupKey of the message for %q is longer than 512 bytes", m.InstanceID)
	}
	if !m.VisibleAt.IsZero() {
		e.VisibleAt = m.VisibleAt.UnixMilli()
	}
	if c := m.Create; c != nil {
		input, err := OptJSON(c.Input, "Create.Input")
		if err != nil {
			return nil, err
		}
		if c.ParentExecutionID < 0 {
			return nil, Invalid("Create.ParentExecutionID %d is negative", c.ParentExecutionID)
		}
		e.Create = &Create{
			Name: c.OrchestrationName, Version: c.OrchestrationVersion,
			Input: input, Parent: OptString(c.ParentInstanceID), ParentExec: c.ParentExecutionID,
		}
		if c.IdempotencyKey != "" {
			if c.IdempotencyTTL <= 0 {
				return nil, Invalid("Create.IdempotencyTTL must be > 0 with an IdempotencyKey (instance %q)", m.InstanceID)
			}
			e.Create.IdemKey, e.Create.IdemTTL = c.IdempotencyKey, TTLMillis(c.IdempotencyTTL)
		}
		if l := c.Lock; l != nil {
			if l.Key == "" || l.TTL <= 0 {
				return nil, Invalid("Create.Lock needs a Key and a TTL > 0 (instance %q)", m.InstanceID)
			}
			e.Create.LockKey, e.Create.LockTTL, e.Create.LockQueue = l.Key, TTLMillis(l.TTL), l.Queue
			if l.Replace && !l.Queue {
				return nil, Invalid("Create.Lock.Replace needs Queue (instance %q)", m.InstanceID)
			}
			e.Create.LockReplace, e.Create.ReplaceReason = l.Replace, l.ReplaceReason
		}
		e.Create.IfAbsent = c.IfAbsent
		if c.IfAbsent && c.OnExists != nil {
			return nil, Invalid("Create.IfAbsent and Create.OnExists exclude each other (instance %q)", m.InstanceID)
		}
		if c.OnExists != nil {
			if e.Create.OnExists, err = EncodeMessage(c.OnExists); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// OptJSON returns raw as a string for storage, nil when empty; raw must be
// valid JSON.
func OptJSON(raw json.RawMessage, what string) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, Invalid("%s is not valid JSON", what)
	}
	return string(raw), nil
}

// OptString returns s, or nil (SQL NULL) when empty.
func OptString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Event is a history event validated and encoded before the transaction.
type Event struct {
	ID   int64
	Kind string
	Data []byte
}

// Ack is a turn ack validated and encoded before the transaction.
type Ack struct {
	Token       string
	ExecutionID int64

	// Metadata.
	Name, Version any // string or nil
	Status        any // execution status or nil
	Terminal      bool
	Input, Output any // JSON string or nil
	ErrJSON       any // JSON string or nil
	SetCustom     int64
	Custom        any // JSON string or nil
	Parent        any
	ParentExec    int64

	Events   []Event
	Work     []*Work
	LeaseMs  int64 // TurnAck.LeaseFor; 0: lease nothing
	Canceled []provider.ActivityRef
	Msgs     []*Msg

	// Values are TurnAck.Values, each key once (its last change): the keys
	// set with their values, and the keys cleared.
	SetKeys, SetValues, ClearKeys []string
}

// HasValues reports whether the ack changes the instance's values.
func (a *Ack) HasValues() bool { return len(a.SetKeys)+len(a.ClearKeys) > 0 }

// KeepsExecution reports whether the ack leaves a Running execution's row
// as it is: it neither ends the execution nor sets its input, output or
// error, and sets no status but Running.
func (a *Ack) KeepsExecution() bool {
	return !a.Terminal && a.Input == nil && a.Output == nil && a.ErrJSON == nil &&
		(a.Status == nil || a.Status == string(provider.StatusRunning))
}

// KeepsMetadata reports whether the ack sets none of its execution's
// columns and none of its instance's but the custom status: no status,
// input, output, error, name or version. So do the turns of a running
// execution that neither start nor end it. It leaves its execution's
// row, whatever its status, as it is, and the instance's status unless
// that differs from the execution's.
func (a *Ack) KeepsMetadata() bool {
	return a.KeepsExecution() && a.Status == nil && a.Name == nil && a.Version == nil
}

// EncodeAck validates and encodes a turn ack of a locked instance.
func EncodeAck(a *provider.TurnAck) (*Ack, error) {
	if a == nil {
		return nil, Invalid("nil turn ack")
	}
	if a.LockToken == "" {
		return nil, Invalid("turn ack has no LockToken")
	}
	return EncodeTurn(a)
}

// EncodeTurn encodes a turn ack, with or without a lock token (a
// WorkAck.Then has none).
func EncodeTurn(a *provider.TurnAck) (*Ack, error) {
	if a.ExecutionID < 1 {
		return nil, Invalid("turn ack ExecutionID %d, want >= 1", a.ExecutionID)
	}
	md := &a.Metadata
	e := &Ack{
		Token: a.LockToken, ExecutionID: a.ExecutionID,
		Name: OptString(md.OrchestrationName), Version: OptString(md.OrchestrationVersion),
		Parent: OptString(md.ParentInstanceID), ParentExec: md.ParentExecutionID,
	}
	switch md.Status {
	case "":
	case provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled, provider.StatusContinuedAsNew:
		e.Status = string(md.Status)
		e.Terminal = md.Status != provider.StatusRunning
	default:
		return nil, Invalid("Metadata.Status %q is not an execution status", md.Status)
	}
	if md.ParentExecutionID < 0 {
		return nil, Invalid("Metadata.ParentExecutionID %d is negative", md.ParentExecutionID)
	}
	var err error
	if e.Input, err = OptJSON(md.Input, "Metadata.Input"); err != nil {
		return nil, err
	}
	if e.Output, err = OptJSON(md.Output, "Metadata.Output"); err != nil {
		return nil, err
	}
	if md.Error != nil {
		if err := md.Error.Validate(); err != nil {
			return nil, fmt.Errorf("%w: Metadata.Error: %w", provider.ErrInvalidArgument, err)
		}
		b, err := json.Marshal(md.Error)
		if err != nil {
			return nil, fmt.Errorf("%w: Metadata.Error: %w", provider.ErrInvalidArgument, err)
		}
		e.ErrJSON = string(b)
	}
	if cs := md.CustomStatus; cs != nil {
		e.SetCustom = 1
		if e.Custom, err = OptJSON(cs.Value, "Metadata.CustomStatus"); err != nil {
			return nil, err
		}
	}
	e.Events = make([]Event, len(a.History))
	for i := range a.History {
		ev := &a.History[i]
		data, err := history.EncodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("%w: history: %w", provider.ErrInvalidArgument, err)
		}
		e.Events[i] = Event{ID: ev.EventID, Kind: string(ev.Kind), Data: data}
	}
	if a.LeaseFor < 0 {
		return nil, Invalid("LeaseFor %v is negative", a.LeaseFor)
	}
	if a.LeaseFor > 0 {
		e.LeaseMs = DurMs(a.LeaseFor)
	}
	e.Work = make([]*Work, len(a.WorkerItems))
	for i, m := range a.WorkerItems {
		if e.Work[i], err = EncodeWork(m); err != nil {
			return nil, err
		}
	}
	for _, c := range a.CanceledActivities {
		if c.InstanceID == "" {
			return nil, Invalid("canceled activity has no InstanceID")
		}
	}
	e.Canceled = a.CanceledActivities
	if err := e.encodeValues(a.Values); err != nil {
		return nil, err
	}
	e.Msgs = make([]*Msg, len(a.OrchestratorItems))
	for i, m := range a.OrchestratorItems {
		if e.Msgs[i], err = EncodeMessage(m); err != nil {
			return nil, err
		}
		for c := e.Msgs[i].Create; c != nil; c = OnExistsCreate(c) {
			if c.LockKey != "" || c.IdemKey != "" {
				return nil, Invalid("turn ack creates instance %q with an execution lock or idempotency key: those are for Enqueue only", m.InstanceID)
			}
		}
	}
	return e, nil
}

// OnExistsCreate is the instance c's OnExists message creates, or nil.
func OnExistsCreate(c *Create) *Create {
	if c.OnExists == nil {
		return nil
	}
	return c.OnExists.Create
}

// Work is a worker message validated and encoded before the transaction.
type Work struct {
	InstanceID  string
	ExecutionID int64
	ActivityID  int64
	SessionID   any // string or nil
	Item        []byte
	VisibleAt   int64 // 0: now
	Lease       bool  // leased to the acking caller (TurnAck.LeaseFor)
	Msg         *provider.WorkerMessage
}

// Route returns the activity name (nil when it has none) and the queue of
// a worker row, as its stored work item holds them (the stores' queue
// columns, which a migration filled from the JSON): taken from the message
// it was encoded from rather than parsed back out of the JSON, unless a
// field is not valid UTF-8, which the encoding replaced.
func (w *Work) Route() (name any, queue string) {
	it := &w.Msg.Item
	if !utf8.ValidString(it.Name) || !utf8.ValidString(it.Queue) {
		var route struct {
			Name  *string `json:"name"`
			Queue string  `json:"queue"`
		}
		_ = json.Unmarshal(w.Item, &route)
		if route.Name != nil {
			return *route.Name, route.Queue
		}
		return nil, route.Queue
	}
	if it.Name == "" {
		return nil, it.Queue
	}
	return it.Name, it.Queue
}

// EncodeWork validates and encodes a worker message.
func EncodeWork(m *provider.WorkerMessage) (*Work, error) {
	if m == nil {
		return nil, Invalid("nil worker message")
	}
	if m.InstanceID == "" {
		return nil, Invalid("worker message has no InstanceID")
	}
	if m.ExecutionID < 0 || m.ActivityID < 0 {
		return nil, Invalid("worker message for %q has a negative ExecutionID or ActivityID", m.InstanceID)
	}
	data, err := history.EncodeWorkItem(&m.Item)
	if err != nil {
		return nil, fmt.Errorf("%w: worker message for %q: %w", provider.ErrInvalidArgument, m.InstanceID, err)
	}
	if m.Lease && (m.SessionID != "" || !m.VisibleAt.IsZero()) {
		return nil, Invalid("worker message for %q: a leased item has no SessionID or VisibleAt", m.InstanceID)
	}
	e := &Work{
		InstanceID: m.InstanceID, ExecutionID: m.ExecutionID, ActivityID: m.ActivityID,
		SessionID: OptString(m.SessionID), Item: data, Lease: m.Lease, Msg: m,
	}
	if !m.VisibleAt.IsZero() {
		e.VisibleAt = m.VisibleAt.UnixMilli()
	}
	return e, nil
}

// ConsumeOnly reports whether the ack writes nothing but the consumption
// of its turn's messages.
func (e *Ack) ConsumeOnly() bool {
	return e.Version == nil && e.Status == nil && e.Input == nil && e.Output == nil && e.ErrJSON == nil &&
		e.SetCustom == 0 && e.Parent == nil && e.ParentExec == 0 &&
		len(e.Events) == 0 && len(e.Work) == 0 && len(e.Canceled) == 0 && len(e.Msgs) == 0
}

// Invalid is a provider.ErrInvalidArgument with a message.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", provider.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// DurMs is d in whole milliseconds, rounded up: a lease or delay is never
// shorter than asked.
func DurMs(d time.Duration) int64 {
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return ms
}

// TTLMillis is a lock's time to live in milliseconds, at least 1.
func TTLMillis(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// UnexpiredLeases returns the leases of ls still valid at now, in order. A
// commit that took longer than a lease (a stalled disk, a server that
// answered late) must not hand out a lease that has already lapsed: any
// fetch may take that row now, and the activity would run twice at once.
// A lapsed row stays queued and the next fetch takes it, as it takes any
// expired lock.
func UnexpiredLeases(ls []*provider.WorkItemLease, now time.Time) []*provider.WorkItemLease {
	live := ls[:0:0]
	for _, l := range ls {
		if l.LockedUntil.After(now) {
			live = append(live, l)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live
}

// WorkAck is a work ack validated and encoded before the transaction.
type WorkAck struct {
	Token      string
	Completion *Msg                              // nil: delete only
	TakeMs     int64                             // TakeTurn's lock timeout; 0: take no turn
	Cached     func(string) (int64, int64, bool) // TakeTurn.Cached
	TakeNames  []string                          // TakeTurn's routes (see OrchestrationRoutes)
	Then       *Ack                              // WorkAck.Then, or nil
	ThenAfter  int64
}

// EncodeWorkAck validates and encodes a.
func EncodeWorkAck(a *provider.WorkAck) (*WorkAck, error) {
	switch {
	case a == nil:
		return nil, Invalid("nil work ack")
	case a.LockToken == "":
		return nil, Invalid("work ack has no LockToken")
	}
	e := &WorkAck{Token: a.LockToken}
	if a.Completion != nil {
		m, err := EncodeMessage(a.Completion)
		if err != nil {
			return nil, err
		}
		e.Completion = m
	}
	if t := a.TakeTurn; t != nil {
		if t.LockTimeout <= 0 {
			return nil, Invalid("TakeTurn.LockTimeout %v must be positive", t.LockTimeout)
		}
		if a.Completion == nil {
			return nil, Invalid("TakeTurn needs a Completion")
		}
		e.TakeMs, e.Cached, e.TakeNames = DurMs(t.LockTimeout), t.Cached, OrchestrationRoutes(t.Orchestrations, t.OrchestrationVersions)
	}
	if t := a.Then; t != nil {
		switch {
		case a.Completion == nil:
			return nil, Invalid("Then needs a Completion")
		case t.LockToken != "":
			return nil, Invalid("Then has a LockToken: it is the turn of an unlocked instance")
		case a.ThenAfter < 1:
			return nil, Invalid("ThenAfter %d, want >= 1", a.ThenAfter)
		}
		then, err := EncodeTurn(t)
		if err != nil {
			return nil, err
		}
		e.Then, e.ThenAfter = then, a.ThenAfter
	}
	return e, nil
}

// FetchLimit validates a fetch's lock timeout and Max, and returns how
// many items it may take (Max, or 1 for 0).
func FetchLimit(lockTimeout time.Duration, max int) (int, error) {
	if lockTimeout <= 0 {
		return 0, Invalid("LockTimeout %v must be positive", lockTimeout)
	}
	switch {
	case max < 0:
		return 0, Invalid("Max %d must not be negative", max)
	case max == 0:
		return 1, nil
	}
	return max, nil
}

// RouteSep separates an orchestration's name from its version in the
// entries of OrchestrationRoutes (U+001F, which names and versions do not
// contain; the SQL is char(31) / chr(31)).
const RouteSep = "\x1f"

// OrchestrationRoutes returns the routes a fetch of turns serves
// (provider.FetchOptions.Orchestrations and OrchestrationVersions), sorted
// and without duplicates: for a name without versions, the name itself
// (any version); for a name with versions, name+RouteSep (an instance not
// pinned to a version yet) and name+RouteSep+version for each. An
// instance is served when its name, or its name+RouteSep+version, is in
// the list (or it has no name). nil (any name) for nil names, an empty
// list for an empty one.
func OrchestrationRoutes(names []string, versions map[string][]string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		vs, ok := versions[n]
		if !ok {
			out = append(out, n)
			continue
		}
		out = append(out, n+RouteSep)
		for _, v := range vs {
			out = append(out, n+RouteSep+v)
		}
	}
	if len(out) == 0 {
		return out
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// OrchestrationNames returns the orchestration names a fetch of turns
// serves (provider.FetchOptions.Orchestrations), sorted and without
// duplicates: nil (any name) for nil, an empty list for an empty one.
func OrchestrationNames(names []string) []string {
	if names == nil {
		return nil
	}
	out := slices.Compact(slices.Sorted(slices.Values(names)))
	if out == nil {
		out = []string{}
	}
	return out
}

// WorkFetchLimit validates a FetchWorkItems call as FetchLimit does, and
// its session options.
func WorkFetchLimit(opts provider.WorkFetchOptions) (int, error) {
	limit, err := FetchLimit(opts.LockTimeout, opts.Max)
	if err != nil {
		return 0, err
	}
	if s := opts.Session; s != nil {
		if s.OwnerID == "" {
			return 0, Invalid("Session.OwnerID is empty")
		}
		if s.LockTimeout <= 0 {
			return 0, Invalid("Session.LockTimeout %v must be positive", s.LockTimeout)
		}
	}
	return limit, nil
}

// EnqueueResults returns what a committed Enqueue reports about msgs,
// encoded as enc (provider.Provider.Enqueue): one result per message when
// one of them asks for it (a DedupKey, IfAbsent, or Lock.Replace), nil
// otherwise.
func EnqueueResults(msgs []*provider.OrchestratorMessage, enc []*Msg) []provider.EnqueueResult {
	if !slices.ContainsFunc(msgs, asksResult) {
		return nil
	}
	out := make([]provider.EnqueueResult, len(enc))
	for i, m := range enc {
		out[i] = m.Result()
	}
	return out
}

// asksResult reports whether m asks Enqueue for a result.
func asksResult(m *provider.OrchestratorMessage) bool {
	if m.DedupKey != "" {
		return true
	}
	c := m.Create
	return c != nil && (c.IfAbsent || c.Lock != nil && c.Lock.Replace)
}

// Result is what inserting m found (provider.EnqueueResult).
func (m *Msg) Result() provider.EnqueueResult {
	return provider.EnqueueResult{Duplicate: m.Duplicate, Existed: m.Existed, Replaced: m.Replaced}
}

// encodeValues validates an ack's value changes and keeps the last change
// of each key, in the order of the keys' first change.
func (e *Ack) encodeValues(vs []provider.ValueUpdate) error {
	last := make(map[string]json.RawMessage, len(vs))
	var order []string
	for _, v := range vs {
		if v.Key == "" {
			return Invalid("turn ack sets a value without a Key")
		}
		if v.Value != nil && !json.Valid(v.Value) {
			return Invalid("value %q is not valid JSON", v.Key)
		}
		if _, seen := last[v.Key]; !seen {
			order = append(order, v.Key)
		}
		last[v.Key] = v.Value
	}
	for _, k := range order {
		if v := last[k]; v != nil {
			e.SetKeys, e.SetValues = append(e.SetKeys, k), append(e.SetValues, string(v))
		} else {
			e.ClearKeys = append(e.ClearKeys, k)
		}
	}
	return nil
}
