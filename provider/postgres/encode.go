package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Calls are validated and encoded before their transaction begins, so a
// malformed argument costs no round trip and holds no lock.

// encMsg is an orchestrator message validated and encoded before the
// transaction.
type encMsg struct {
	instanceID string
	item       []byte
	visibleAt  int64 // 0: now
	create     *encCreate
}

type encCreate struct {
	name, version string
	input         any // string or nil
	parent        any // string or nil
	parentExec    int64
	onExists      *encMsg

	idemKey   string
	idemTTL   int64 // ms
	lockKey   string
	lockTTL   int64 // ms
	lockQueue bool
}

// encodeMessage validates and encodes m.
func encodeMessage(m *provider.OrchestratorMessage) (*encMsg, error) {
	if m == nil {
		return nil, invalid("nil orchestrator message")
	}
	if m.InstanceID == "" {
		return nil, invalid("orchestrator message has no InstanceID")
	}
	data, err := history.EncodeWorkItem(&m.Item)
	if err != nil {
		return nil, fmt.Errorf("%w: message for %q: %w", provider.ErrInvalidArgument, m.InstanceID, err)
	}
	e := &encMsg{instanceID: m.InstanceID, item: data}
	if !m.VisibleAt.IsZero() {
		e.visibleAt = m.VisibleAt.UnixMilli()
	}
	if c := m.Create; c != nil {
		input, err := optJSON(c.Input, "Create.Input")
		if err != nil {
			return nil, err
		}
		if c.ParentExecutionID < 0 {
			return nil, invalid("Create.ParentExecutionID %d is negative", c.ParentExecutionID)
		}
		e.create = &encCreate{
			name: c.OrchestrationName, version: c.OrchestrationVersion,
			input: input, parent: optString(c.ParentInstanceID), parentExec: c.ParentExecutionID,
		}
		if c.IdempotencyKey != "" {
			if c.IdempotencyTTL <= 0 {
				return nil, invalid("Create.IdempotencyTTL must be > 0 with an IdempotencyKey (instance %q)", m.InstanceID)
			}
			e.create.idemKey, e.create.idemTTL = c.IdempotencyKey, ttlMillis(c.IdempotencyTTL)
		}
		if l := c.Lock; l != nil {
			if l.Key == "" || l.TTL <= 0 {
				return nil, invalid("Create.Lock needs a Key and a TTL > 0 (instance %q)", m.InstanceID)
			}
			e.create.lockKey, e.create.lockTTL, e.create.lockQueue = l.Key, ttlMillis(l.TTL), l.Queue
		}
		if c.OnExists != nil {
			if e.create.onExists, err = encodeMessage(c.OnExists); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// optJSON returns raw as a string for storage, nil when empty; raw must be
// valid JSON.
func optJSON(raw json.RawMessage, what string) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, invalid("%s is not valid JSON", what)
	}
	return string(raw), nil
}

// optString returns s, or nil (SQL NULL) when empty.
func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// encEvent is a history event validated and encoded before the transaction.
type encEvent struct {
	id   int64
	kind string
	data []byte
}

// encAck is a turn ack validated and encoded before the transaction.
type encAck struct {
	token       string
	executionID int64

	// Metadata.
	name, version any // string or nil
	status        any // execution status or nil
	terminal      bool
	input, output any // JSON string or nil
	errJSON       any // JSON string or nil
	setCustom     int64
	custom        any // JSON string or nil
	parent        any
	parentExec    int64

	events   []encEvent
	work     []*encWork
	leaseMs  int64 // TurnAck.LeaseFor; 0: lease nothing
	canceled []provider.ActivityRef
	msgs     []*encMsg
}

func encodeAck(a *provider.TurnAck) (*encAck, error) {
	if a == nil {
		return nil, invalid("nil turn ack")
	}
	if a.LockToken == "" {
		return nil, invalid("turn ack has no LockToken")
	}
	return encodeTurn(a)
}

// encodeTurn encodes a turn ack, with or without a lock token (a
// WorkAck.Then has none).
func encodeTurn(a *provider.TurnAck) (*encAck, error) {
	if a.ExecutionID < 1 {
		return nil, invalid("turn ack ExecutionID %d, want >= 1", a.ExecutionID)
	}
	md := &a.Metadata
	e := &encAck{
		token: a.LockToken, executionID: a.ExecutionID,
		name: optString(md.OrchestrationName), version: optString(md.OrchestrationVersion),
		parent: optString(md.ParentInstanceID), parentExec: md.ParentExecutionID,
	}
	switch md.Status {
	case "":
	case provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled, provider.StatusContinuedAsNew:
		e.status = string(md.Status)
		e.terminal = md.Status != provider.StatusRunning
	default:
		return nil, invalid("Metadata.Status %q is not an execution status", md.Status)
	}
	if md.ParentExecutionID < 0 {
		return nil, invalid("Metadata.ParentExecutionID %d is negative", md.ParentExecutionID)
	}
	var err error
	if e.input, err = optJSON(md.Input, "Metadata.Input"); err != nil {
		return nil, err
	}
	if e.output, err = optJSON(md.Output, "Metadata.Output"); err != nil {
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
		e.errJSON = string(b)
	}
	if cs := md.CustomStatus; cs != nil {
		e.setCustom = 1
		if e.custom, err = optJSON(cs.Value, "Metadata.CustomStatus"); err != nil {
			return nil, err
		}
	}
	e.events = make([]encEvent, len(a.History))
	for i := range a.History {
		ev := &a.History[i]
		data, err := history.EncodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("%w: history: %w", provider.ErrInvalidArgument, err)
		}
		e.events[i] = encEvent{id: ev.EventID, kind: string(ev.Kind), data: data}
	}
	if a.LeaseFor < 0 {
		return nil, invalid("LeaseFor %v is negative", a.LeaseFor)
	}
	if a.LeaseFor > 0 {
		e.leaseMs = durMs(a.LeaseFor)
	}
	e.work = make([]*encWork, len(a.WorkerItems))
	for i, m := range a.WorkerItems {
		if e.work[i], err = encodeWork(m); err != nil {
			return nil, err
		}
	}
	for _, c := range a.CanceledActivities {
		if c.InstanceID == "" {
			return nil, invalid("canceled activity has no InstanceID")
		}
	}
	e.canceled = a.CanceledActivities
	e.msgs = make([]*encMsg, len(a.OrchestratorItems))
	for i, m := range a.OrchestratorItems {
		if e.msgs[i], err = encodeMessage(m); err != nil {
			return nil, err
		}
		for c := e.msgs[i].create; c != nil; c = onExistsCreate(c) {
			if c.lockKey != "" || c.idemKey != "" {
				return nil, invalid("turn ack creates instance %q with an execution lock or idempotency key: those are for Enqueue only", m.InstanceID)
			}
		}
	}
	return e, nil
}

func onExistsCreate(c *encCreate) *encCreate {
	if c.onExists == nil {
		return nil
	}
	return c.onExists.create
}

// encWork is a worker message validated and encoded before the transaction.
type encWork struct {
	instanceID  string
	executionID int64
	activityID  int64
	sessionID   any // string or nil
	item        []byte
	visibleAt   int64 // 0: now
	lease       bool  // leased to the acking caller (TurnAck.LeaseFor)
	msg         *provider.WorkerMessage
}

func encodeWork(m *provider.WorkerMessage) (*encWork, error) {
	if m == nil {
		return nil, invalid("nil worker message")
	}
	if m.InstanceID == "" {
		return nil, invalid("worker message has no InstanceID")
	}
	if m.ExecutionID < 0 || m.ActivityID < 0 {
		return nil, invalid("worker message for %q has a negative ExecutionID or ActivityID", m.InstanceID)
	}
	data, err := history.EncodeWorkItem(&m.Item)
	if err != nil {
		return nil, fmt.Errorf("%w: worker message for %q: %w", provider.ErrInvalidArgument, m.InstanceID, err)
	}
	if m.Lease && (m.SessionID != "" || !m.VisibleAt.IsZero()) {
		return nil, invalid("worker message for %q: a leased item has no SessionID or VisibleAt", m.InstanceID)
	}
	e := &encWork{
		instanceID: m.InstanceID, executionID: m.ExecutionID, activityID: m.ActivityID,
		sessionID: optString(m.SessionID), item: data, lease: m.Lease, msg: m,
	}
	if !m.VisibleAt.IsZero() {
		e.visibleAt = m.VisibleAt.UnixMilli()
	}
	return e, nil
}
