package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// PauseToken is the lock token of a paused instance's lock (the fixed
// prefix, then the instance ID, as every instance lock token). A fetch's
// prefix is hexadecimal, so no fetch ever makes this token.
const pausePrefix = "pausedpausedpausedpausedpausedpa."

// PauseToken returns the token of the lock that holds instanceID paused.
func PauseToken(instanceID string) string { return pausePrefix + instanceID }

// HeldUntil is the visible_at of the worker rows a pause holds back (and
// the locked_until of the pause's instance lock), in epoch milliseconds.
var HeldUntil = provider.PausedUntil.UnixMilli()

// PauseTx is a store's write transaction as the pause and rewind bodies run it:
// SQL text in the store's dialect, with the arguments in the order each
// statement of PauseSQL and RewindSQL lists.
type PauseTx interface {
	// Exec runs a statement and returns the rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	// QueryRow runs a statement and returns its first row (ErrNoRows from
	// Scan when there is none).
	QueryRow(ctx context.Context, sql string, args ...any) Row
	// Each runs a statement and calls scan for each row, stopping at the
	// first error.
	Each(ctx context.Context, sql string, scan func(Row) error, args ...any) error
	// LockInstance serializes the transaction with every other write of
	// the instance (PostgreSQL: its advisory lock; SQLite's single writer
	// needs nothing).
	LockInstance(ctx context.Context, instanceID string) error
}

// PauseSQL is a store's SQL text of the pause statements.
type PauseSQL struct {
	// Status (instance_id) returns status, current_execution_id.
	Status string
	// Paused (instance_id, token) returns the pause's locked_at,
	// pause_reason, paused_by; no row when the instance is not paused.
	Paused string
	// Holder (instance_id) returns the lock_token and locked_until of the
	// instance's lock row; no row when it has none.
	Holder string
	// Untag (instance_id, token) gives back the messages a turn holding
	// token fetched: untagged, their delivery not counted.
	Untag string
	// Lock (instance_id, token, locked_until, now, reason, by) inserts the
	// instance's lock row, or overwrites the one a turn holds.
	Lock string
	// HoldWork (instance_id, held, now) moves the visible_at of the
	// instance's worker rows no live lock holds to held.
	HoldWork string
	// Unlock (instance_id, token) deletes the pause's lock row.
	Unlock string
	// ReleaseWork (instance_id, held, now) makes the rows HoldWork held
	// visible at now.
	ReleaseWork string
}

// Pause is the body of provider.Pauser.PauseInstance in a write
// transaction at now (epoch ms).
func Pause(ctx context.Context, tx PauseTx, q *PauseSQL, instanceID string, info provider.PauseInfo, now int64) error {
	if err := checkID(instanceID); err != nil {
		return err
	}
	if err := tx.LockInstance(ctx, instanceID); err != nil {
		return err
	}
	status, _, err := instanceStatus(ctx, tx, q.Status, instanceID)
	if err != nil {
		return err
	}
	switch provider.Status(status) {
	case provider.StatusCompleted, provider.StatusFailed, provider.StatusCanceled:
		return fmt.Errorf("instance %q is %s: %w", instanceID, status, provider.ErrStateConflict)
	}
	p, err := getPause(ctx, tx, q.Paused, instanceID)
	if err != nil {
		return err
	}
	if p != nil {
		return fmt.Errorf("instance %q: %w", instanceID, provider.ErrAlreadyPaused)
	}
	// A turn in progress loses its lock: its messages go back as they
	// were, the delivery uncounted (a pause is not a crash: pausing again
	// and again must not poison the instance).
	var token string
	var until int64
	switch err := tx.QueryRow(ctx, q.Holder, instanceID).Scan(&token, &until); {
	case errors.Is(err, ErrNoRows):
	case err != nil:
		return err
	case until > now:
		if _, err := tx.Exec(ctx, q.Untag, instanceID, token); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, q.Lock, instanceID, PauseToken(instanceID), HeldUntil, now, info.Reason, info.By); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, q.HoldWork, instanceID, HeldUntil, now)
	return err
}

// Resume is the body of provider.Pauser.ResumeInstance in a write
// transaction at now (epoch ms).
func Resume(ctx context.Context, tx PauseTx, q *PauseSQL, instanceID string, now int64) error {
	if err := checkID(instanceID); err != nil {
		return err
	}
	if err := tx.LockInstance(ctx, instanceID); err != nil {
		return err
	}
	if _, _, err := instanceStatus(ctx, tx, q.Status, instanceID); err != nil {
		return err
	}
	n, err := tx.Exec(ctx, q.Unlock, instanceID, PauseToken(instanceID))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotPaused)
	}
	_, err = tx.Exec(ctx, q.ReleaseWork, instanceID, HeldUntil, now)
	return err
}

// GetPause is the body of provider.Pauser.GetPause over any transaction
// (its statement is PauseSQL.Paused).
func GetPause(ctx context.Context, tx PauseTx, q *PauseSQL, instanceID string) (*provider.PauseInfo, error) {
	if err := checkID(instanceID); err != nil {
		return nil, err
	}
	return getPause(ctx, tx, q.Paused, instanceID)
}

// MaxPauseList is how many instance IDs one ListPauses call takes.
const MaxPauseList = 1000

// CheckPauseList validates the IDs of a ListPauses call.
func CheckPauseList(ids []string) error {
	if len(ids) > MaxPauseList {
		return sqlenc.Invalid("ListPauses takes at most %d instance IDs, got %d", MaxPauseList, len(ids))
	}
	for _, id := range ids {
		if err := checkID(id); err != nil {
			return err
		}
	}
	return nil
}

// ListPauses is the body of provider.Pauser.ListPauses over any
// transaction. sql takes (ids, the pause token's prefix), ids being the
// instance IDs as the store passes a list (idsArg), and returns
// instance_id, locked_at, pause_reason, paused_by.
func ListPauses(ctx context.Context, tx PauseTx, sql string, ids []string, idsArg any) (map[string]provider.PauseInfo, error) {
	if err := CheckPauseList(ids); err != nil {
		return nil, err
	}
	out := map[string]provider.PauseInfo{}
	if len(ids) == 0 {
		return out, nil
	}
	err := tx.Each(ctx, sql, func(r Row) error {
		id, info, err := scanPause(r)
		out[id] = info
		return err
	}, idsArg, PauseToken(""))
	return out, err
}

// scanPause reads one row of a ListPauses statement.
func scanPause(r Row) (string, provider.PauseInfo, error) {
	var id string
	var at int64
	var reason, by *string
	if err := r.Scan(&id, &at, &reason, &by); err != nil {
		return "", provider.PauseInfo{}, err
	}
	return id, pauseInfo(at, reason, by), nil
}

func pauseInfo(at int64, reason, by *string) provider.PauseInfo {
	p := provider.PauseInfo{At: MsTime(at)}
	if reason != nil {
		p.Reason = *reason
	}
	if by != nil {
		p.By = *by
	}
	return p
}

func getPause(ctx context.Context, tx PauseTx, sql, instanceID string) (*provider.PauseInfo, error) {
	var at int64
	var reason, by *string
	err := tx.QueryRow(ctx, sql, instanceID, PauseToken(instanceID)).Scan(&at, &reason, &by)
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := pauseInfo(at, reason, by)
	return &p, nil
}

func instanceStatus(ctx context.Context, tx PauseTx, sql, instanceID string) (string, int64, error) {
	var status string
	var exec int64
	err := tx.QueryRow(ctx, sql, instanceID).Scan(&status, &exec)
	if errors.Is(err, ErrNoRows) {
		return "", 0, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	return status, exec, err
}

func checkID(instanceID string) error {
	if instanceID == "" || strings.ContainsRune(instanceID, 0) {
		return sqlenc.Invalid("instance ID must be non-empty text without NUL")
	}
	return nil
}

// RewindSQL is a store's SQL text of the rewind statements.
type RewindSQL struct {
	// Status (instance_id) returns status, current_execution_id.
	Status string
	// Execution (instance_id, execution_id, from_execution_id, now) inserts the new
	// execution, Running, with the input of the execution it rewinds.
	Execution string
	// Event (instance_id, execution_id, event_id, event_type, event_data,
	// now) appends one event.
	Event string
	// Reopen (instance_id, execution_id, now) makes the instance Running
	// at the new execution, its output, error and last error cleared.
	Reopen string
	// Message (instance_id, work_item, visible_at, now) queues one
	// orchestrator message.
	Message string
	// Work (instance_id, execution_id, activity_id, session_id, work_item,
	// visible_at, now) queues one worker row.
	Work string
	// Holder (instance_id) returns the lock_token and locked_until of the
	// instance's lock row; no row when it has none.
	Holder string
	// EndExecution (instance_id, execution_id, error, now) ends a Running
	// execution Canceled with error (JSON).
	EndExecution string
	// DropWork (instance_id, execution_id) deletes the execution's worker
	// rows, locked or not.
	DropWork string
	// LastEvent (instance_id, execution_id) returns the execution's
	// highest event_id (0 for none).
	LastEvent string
	// CancelRequested (instance_id, execution_id, event_type) returns a
	// row when the execution's history holds an event of event_type
	// (OrchestrationCancelRequested).
	CancelRequested string
	// CancelQueued (instance_id, prefix, now, kind) returns a row when
	// the instance's orchestrator queue holds a cancel request: a message
	// whose work item starts with prefix (CancelPrefix) that is visible at
	// now, or whose work item's error.kind is not kind ("timeout": an
	// instance timeout not yet due is no request yet). Only a work item
	// with the prefix may be read as JSON.
	CancelQueued string
	// DropTimeout (instance_id, prefix) deletes the instance's queued
	// orchestrator messages whose work item starts with prefix
	// (CancelPrefix): its instance timeout, and, for a Failed or Canceled
	// instance, cancels that came after its end (for a live one,
	// noPendingCancel leaves only a timeout not yet due).
	DropTimeout string
}

// CancelPrefix is how the stored work item of every CancelInstance
// message begins (history.EncodeWorkItem writes the kind first).
const CancelPrefix = `{"type":"` + string(history.WorkCancelInstance) + `"`

// EncodedRewind is a provider.RewindRequest validated and encoded before
// the transaction begins.
type EncodedRewind struct {
	req    *provider.RewindRequest
	end    *sqlenc.Event
	endErr string
	events []sqlenc.Event
	msgs   []*sqlenc.Msg
	work   []*sqlenc.Work
}

// EncodeRewind validates and encodes req.
func EncodeRewind(req *provider.RewindRequest) (*EncodedRewind, error) {
	if req == nil {
		return nil, sqlenc.Invalid("nil rewind request")
	}
	if err := checkID(req.InstanceID); err != nil {
		return nil, err
	}
	if req.FromExecutionID < 1 || req.ExecutionID != req.FromExecutionID+1 {
		return nil, sqlenc.Invalid("rewind of %q: execution %d cannot follow %d", req.InstanceID, req.ExecutionID, req.FromExecutionID)
	}
	if len(req.History) == 0 && len(req.Messages) == 0 && len(req.Activities) == 0 {
		return nil, sqlenc.Invalid("rewind of %q: nothing to resume from", req.InstanceID)
	}
	e := &EncodedRewind{req: req}
	if end := req.End; end != nil {
		if end.Kind != history.OrchestrationFailed || end.Error == nil || end.EventID < 2 {
			return nil, sqlenc.Invalid("rewind of %q: End must be an OrchestrationFailed with an error, after the start", req.InstanceID)
		}
		data, err := history.EncodeEvent(end)
		if err != nil {
			return nil, fmt.Errorf("%w: rewind of %q: End: %w", provider.ErrInvalidArgument, req.InstanceID, err)
		}
		errJSON, err := json.Marshal(end.Error)
		if err != nil {
			return nil, fmt.Errorf("%w: rewind of %q: End: %w", provider.ErrInvalidArgument, req.InstanceID, err)
		}
		e.end, e.endErr = &sqlenc.Event{ID: end.EventID, Kind: string(end.Kind), Data: data}, string(errJSON)
	}
	for i := range req.History {
		ev := &req.History[i]
		if ev.EventID != int64(i+1) {
			return nil, sqlenc.Invalid("rewind of %q: event %d has ID %d", req.InstanceID, i+1, ev.EventID)
		}
		data, err := history.EncodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("%w: rewind of %q: %w", provider.ErrInvalidArgument, req.InstanceID, err)
		}
		e.events = append(e.events, sqlenc.Event{ID: ev.EventID, Kind: string(ev.Kind), Data: data})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.InstanceID != req.InstanceID || m.Create != nil {
			return nil, sqlenc.Invalid("rewind of %q: a message for another instance or creating one", req.InstanceID)
		}
		x, err := sqlenc.EncodeMessage(m)
		if err != nil {
			return nil, err
		}
		e.msgs = append(e.msgs, x)
	}
	for i := range req.Activities {
		m := &req.Activities[i]
		if m.InstanceID != req.InstanceID || m.ExecutionID != req.ExecutionID || m.Lease {
			return nil, sqlenc.Invalid("rewind of %q: an activity of another execution, or leased", req.InstanceID)
		}
		x, err := sqlenc.EncodeWork(m)
		if err != nil {
			return nil, err
		}
		e.work = append(e.work, x)
	}
	return e, nil
}

// Rewind is the body of provider.Rewinder.RewindInstance in a write
// transaction at now (epoch ms).
func Rewind(ctx context.Context, tx PauseTx, q *RewindSQL, e *EncodedRewind, now int64) error {
	req := e.req
	if err := tx.LockInstance(ctx, req.InstanceID); err != nil {
		return err
	}
	status, exec, err := instanceStatus(ctx, tx, q.Status, req.InstanceID)
	if err != nil {
		return err
	}
	switch st := provider.Status(status); {
	case e.end != nil && st != provider.StatusRunning:
		return fmt.Errorf("instance %q is %s, not Running: %w", req.InstanceID, status, provider.ErrStateConflict)
	case e.end == nil && st != provider.StatusFailed && st != provider.StatusCanceled:
		return fmt.Errorf("instance %q is %s, not Failed or Canceled: %w", req.InstanceID, status, provider.ErrStateConflict)
	case exec != req.FromExecutionID:
		return fmt.Errorf("instance %q is at execution %d, not %d: %w", req.InstanceID, exec, req.FromExecutionID, provider.ErrStateConflict)
	}
	if e.end != nil {
		if err := endRunning(ctx, tx, q, e, now); err != nil {
			return err
		}
	}
	// A rewound instance holds no timeout (StartOptions.Timeout): its
	// deadline, queued as a delayed cancel, would end the new execution.
	// A Failed or Canceled instance keeps it queued when it ended before
	// the deadline; a cancel that came after its end would cancel the new
	// execution too. A forced rewind (once noPendingCancel passed) finds
	// only a timeout not yet due.
	if _, err := tx.Exec(ctx, q.DropTimeout, req.InstanceID, CancelPrefix); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q.Execution, req.InstanceID, req.ExecutionID, req.FromExecutionID, now); err != nil {
		return err
	}
	for _, ev := range e.events {
		if _, err := tx.Exec(ctx, q.Event, req.InstanceID, req.ExecutionID, ev.ID, ev.Kind, string(ev.Data), now); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, q.Reopen, req.InstanceID, req.ExecutionID, now); err != nil {
		return err
	}
	for _, m := range e.msgs {
		vis := m.VisibleAt
		if vis == 0 {
			vis = now
		}
		if _, err := tx.Exec(ctx, q.Message, m.InstanceID, string(m.Item), vis, now); err != nil {
			return err
		}
	}
	for _, w := range e.work {
		vis := w.VisibleAt
		if vis == 0 {
			vis = now
		}
		if _, err := tx.Exec(ctx, q.Work, w.InstanceID, w.ExecutionID, w.ActivityID, w.SessionID, string(w.Item), vis, now); err != nil {
			return err
		}
	}
	return nil
}

// endRunning ends the live execution a rewind takes over from: refused
// while the instance is paused, a turn holds its lock or its cancel is
// pending; the end event appended, the execution Canceled, its worker
// rows deleted (Rewind then drops its instance timeout not yet due).
func endRunning(ctx context.Context, tx PauseTx, q *RewindSQL, e *EncodedRewind, now int64) error {
	req := e.req
	var token string
	var until int64
	switch err := tx.QueryRow(ctx, q.Holder, req.InstanceID).Scan(&token, &until); {
	case errors.Is(err, ErrNoRows):
	case err != nil:
		return err
	case token == PauseToken(req.InstanceID):
		return fmt.Errorf("instance %q is paused; resume it first: %w", req.InstanceID, provider.ErrStateConflict)
	case until > now:
		return fmt.Errorf("instance %q is in a turn; retry when it ends: %w", req.InstanceID, provider.ErrStateConflict)
	}
	if err := noPendingCancel(ctx, tx, q, req.InstanceID, req.FromExecutionID, now); err != nil {
		return err
	}
	var last int64
	if err := tx.QueryRow(ctx, q.LastEvent, req.InstanceID, req.FromExecutionID).Scan(&last); err != nil {
		return err
	}
	if last != e.end.ID-1 {
		// A turn committed after the rewind read the history: its plan
		// resumes from a point that is no longer the last turn's start.
		return fmt.Errorf("instance %q took a turn while the rewind was planned (its history ends at event %d, not %d); retry: %w",
			req.InstanceID, last, e.end.ID-1, provider.ErrStateConflict)
	}
	if _, err := tx.Exec(ctx, q.Event, req.InstanceID, req.FromExecutionID, e.end.ID, e.end.Kind, string(e.end.Data), now); err != nil {
		return err
	}
	n, err := tx.Exec(ctx, q.EndExecution, req.InstanceID, req.FromExecutionID, e.endErr, now)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("instance %q: execution %d is not Running: %w", req.InstanceID, req.FromExecutionID, provider.ErrStateConflict)
	}
	_, err = tx.Exec(ctx, q.DropWork, req.InstanceID, req.FromExecutionID)
	return err
}

// noPendingCancel refuses a forced rewind of an instance whose cancel is
// pending: requested (in the execution's history, its grace period
// running) or queued (a CancelInstance message no turn has taken yet, an
// instance timeout that is due). A forced rewind resumes from the start of
// the last turn, before the request: it would drop the cancel silently,
// or have the new execution canceled at once. Checked in the rewind's
// transaction, so a cancel cannot slip in between the check and the
// rewind.
func noPendingCancel(ctx context.Context, tx PauseTx, q *RewindSQL, instanceID string, exec, now int64) error {
	var one int
	switch err := tx.QueryRow(ctx, q.CancelRequested, instanceID, exec, string(history.OrchestrationCancelRequested)).Scan(&one); {
	case err == nil:
		return fmt.Errorf("instance %q: its cancel was requested and its grace period is running; "+
			"let the cancel finish, then rewind the Canceled instance (it resumes from before the cancel request): %w",
			instanceID, provider.ErrStateConflict)
	case !errors.Is(err, ErrNoRows):
		return err
	}
	switch err := tx.QueryRow(ctx, q.CancelQueued, instanceID, CancelPrefix, now, string(history.ErrorTimeout)).Scan(&one); {
	case err == nil:
		return fmt.Errorf("instance %q: its cancel was requested and is queued; "+
			"let the cancel finish, then rewind the Canceled instance (it resumes from before the cancel request): %w",
			instanceID, provider.ErrStateConflict)
	case !errors.Is(err, ErrNoRows):
		return err
	}
	return nil
}

// HasWork reports whether e queues worker rows.
func (e *EncodedRewind) HasWork() bool { return len(e.work) > 0 }
