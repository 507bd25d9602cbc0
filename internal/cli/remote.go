package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

const (
	// envServer names the server of the client mode when --server is absent.
	envServer = "DUROXIDE_SERVER"
	// envAuthToken is the bearer token when --auth-token is absent.
	envAuthToken = "DUROXIDE_AUTH_TOKEN"
)

// backend is what the instance and lock commands need: a *duroxide.Client
// on the store (--db), or the HTTP API of a server (--server).
type backend interface {
	StartOrchestration(ctx context.Context, instanceID, name string, input any, opts *duroxide.StartOptions) error
	GetStatus(ctx context.Context, instanceID string) (*duroxide.Status, error)
	Inspect(ctx context.Context, instanceID string, opts *duroxide.WaitOptions) (*duroxide.Status, error)
	WaitForOrchestration(ctx context.Context, instanceID string) (*duroxide.Status, error)
	GetHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error)
	ListInstances(ctx context.Context, opts *duroxide.ListOptions) (*duroxide.InstancePage, error)
	RaiseEventWithOptions(ctx context.Context, instanceID, name string, data any, opts *duroxide.RaiseEventOptions) (bool, error)
	ListValues(ctx context.Context, instanceID string) ([]duroxide.Value, error)
	SignalWithStart(ctx context.Context, instanceID, orchestrationName string, input any, eventName string, eventData any, opts *duroxide.StartOptions) (bool, error)
	CancelInstance(ctx context.Context, instanceID, reason string) error
	Pause(ctx context.Context, instanceID, reason string) error
	Resume(ctx context.Context, instanceID string) error
	RewindWithOptions(ctx context.Context, instanceID string, opts *duroxide.RewindOptions) error
	PurgeInstance(ctx context.Context, instanceID string, force bool) error
	GetLock(ctx context.Context, workflowID string) (*duroxide.LockStatus, error)
	ListLocks(ctx context.Context) ([]duroxide.LockStatus, error)
	ReleaseLock(ctx context.Context, workflowID string) (bool, error)
	CleanupExpiredLocks(ctx context.Context) (int, error)
}

var _ backend = (*duroxide.Client)(nil)

// serverFlags adds --server and --auth-token, for the commands that have
// an HTTP equivalent.
func (inv *invocation) serverFlags() {
	inv.fs.StringVar(&inv.server, "server", "", "talk to the HTTP API of a duroxide server at this URL instead of opening the store (default $"+envServer+"; --db then does not apply)")
	inv.fs.StringVar(&inv.authToken, "auth-token", "", "with --server, the server's bearer token (default $"+envAuthToken+")")
}

// remoteURL resolves --server, then $DUROXIDE_SERVER; "" means the store
// is opened directly. --db and --server together are a usage error.
func (inv *invocation) remoteURL() (string, error) {
	raw, source := inv.server, "--server"
	if raw == "" {
		if inv.db != "" {
			return "", nil // an explicit --db wins over $DUROXIDE_SERVER
		}
		raw, source = inv.getenv(envServer), "$"+envServer
	}
	if raw == "" {
		return "", nil
	}
	if inv.db != "" {
		return "", usageErrorf("%s: --db and --server exclude each other: the server opens its own store", inv.cmd.name)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", usageErrorf("%s: %s %q is not a server URL like http://127.0.0.1:8080", inv.cmd.name, source, raw)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// openInstance is the start of a command that acts on one instance: it
// adds the server flags to the command's own, parses the instance ID
// argument, and opens the existing store (or the server) for it.
func (inv *invocation) openInstance(ctx context.Context, args []string) (client backend, id string, done func(), err error) {
	inv.serverFlags()
	if err := inv.parse(args, 1, "instance ID"); err != nil {
		return nil, "", nil, err
	}
	client, done, err = inv.openBackend(ctx, storeurl.Existing)
	if err != nil {
		return nil, "", nil, err
	}
	return client, inv.arg(0), done, nil
}

// openBackend returns the client mode's HTTP backend when a server is
// named, else a client on the store, and a function that releases it.
func (inv *invocation) openBackend(ctx context.Context, mode storeurl.Mode) (backend, func(), error) {
	base, err := inv.remoteURL()
	if err != nil {
		return nil, nil, err
	}
	if base == "" {
		return inv.openClient(ctx, mode)
	}
	token := inv.authToken
	if token == "" {
		token = inv.getenv(envAuthToken)
	}
	inv.serverBase = base
	return &remote{base: base, token: token, http: &http.Client{}}, func() {}, nil
}

// remote is the backend of the client mode: the HTTP API's routes.
type remote struct {
	base  string // scheme://host[:port][/prefix], without a trailing slash
	token string
	http  *http.Client
}

// apiErrorBody is the HTTP API's error answer.
type apiErrorBody struct {
	Error               string `json:"error"`
	Details             string `json:"details"`
	ExistingExecutionID string `json:"existingExecutionId"`
	RequestID           string `json:"requestId"`
}

// Fixed error messages of the HTTP API (its "error" field), which tell
// the conflicts apart.
const (
	apiMsgWorkflowLocked = "Workflow currently executing"
	apiMsgLockContended  = "Concurrent execution attempted"
	apiMsgInstanceExists = "instance already exists"
	apiMsgInstanceEnded  = "instance has already ended"
	apiMsgAlreadyPaused  = "instance is already paused"
	apiMsgNotPaused      = "instance is not paused"
	apiMsgStateConflict  = "instance state does not allow this"
)

// do sends a request with a JSON body (nil: none) and decodes a 2xx answer
// into out (nil: discarded). Other answers become errors matching the
// duroxide sentinels, as the direct mode's would; their status and body
// are returned too, for the callers that tell conflicts apart.
func (r *remote) do(ctx context.Context, method, path string, body, out any) (int, []byte, error) {
	return r.doHeader(ctx, method, path, nil, body, out)
}

// doHeader is do with the request headers h (nil: none) besides the usual.
func (r *remote) doHeader(ctx context.Context, method, path string, h http.Header, body, out any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil || method != http.MethodGet {
		// The API refuses state-changing requests without it, bodyless
		// ones included (a browser form cannot send it).
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	res, err := r.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, nil, ctxErr
		}
		return 0, nil, fmt.Errorf("cannot reach the server at %s: %w", r.base, errors.Unwrap(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, nil, ctxErr
		}
		return 0, nil, fmt.Errorf("reading the answer of %s %s: %w", method, r.base+path, err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return res.StatusCode, nil, fmt.Errorf("the server at %s answered %s %s with unexpected JSON: %w", r.base, method, path, err)
			}
		}
		return res.StatusCode, nil, nil
	}
	return res.StatusCode, b, r.answerError(res, b)
}

// answerError turns an error answer into an error matching the duroxide
// sentinel of its status.
func (r *remote) answerError(res *http.Response, b []byte) error {
	var e apiErrorBody
	_ = json.Unmarshal(b, &e)
	msg := e.Error
	if e.Details != "" {
		msg += ": " + e.Details
	}
	if msg == "" {
		msg = strings.TrimSpace(string(b))
	}
	if e.RequestID != "" {
		// A 5xx answer names no cause, only the ID the server logged it
		// under: give the operator what to look for.
		msg += fmt.Sprintf(" (request ID %s: the server's log has the cause)", e.RequestID)
	}
	switch res.StatusCode {
	case http.StatusUnauthorized:
		if r.token == "" {
			return fmt.Errorf("the server at %s requires an auth token (401): pass it with --auth-token or $%s", r.base, envAuthToken)
		}
		return fmt.Errorf("the server at %s refused the auth token (401): check --auth-token or $%s", r.base, envAuthToken)
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w", msg, duroxide.ErrNotFound)
	case http.StatusBadRequest:
		return fmt.Errorf("%s: %w", msg, duroxide.ErrInvalidArgument)
	case http.StatusConflict:
		switch e.Error {
		case apiMsgInstanceEnded:
			return fmt.Errorf("%s: %w", msg, duroxide.ErrInstanceTerminal)
		case apiMsgAlreadyPaused:
			return fmt.Errorf("%s: %w", msg, duroxide.ErrAlreadyPaused)
		case apiMsgNotPaused:
			return fmt.Errorf("%s: %w", msg, duroxide.ErrNotPaused)
		case apiMsgStateConflict:
			return fmt.Errorf("%s: %w", e.Details, duroxide.ErrStateConflict)
		}
	}
	return fmt.Errorf("the server at %s answered %d: %s", r.base, res.StatusCode, msg)
}

// conflictError reads a 409 answer of a start: a held or contended lock, or
// a taken instance ID.
func conflictError(err error, status int, lockKey, instanceID string, body []byte) error {
	if status != http.StatusConflict {
		return err
	}
	var e apiErrorBody
	_ = json.Unmarshal(body, &e)
	switch e.Error {
	case apiMsgWorkflowLocked:
		return &duroxide.WorkflowLockedError{WorkflowID: lockKey, ExistingInstanceID: e.ExistingExecutionID}
	case apiMsgLockContended:
		return &duroxide.LockAcquisitionFailedError{WorkflowID: lockKey, InstanceID: instanceID, Reason: e.Details}
	case apiMsgInstanceExists:
		return fmt.Errorf("%s: %w", e.Details, duroxide.ErrInstanceExists)
	}
	return err
}

func pathID(id string) string { return url.PathEscape(id) }

func (r *remote) StartOrchestration(ctx context.Context, instanceID, name string, input any, opts *duroxide.StartOptions) error {
	req := httpapi.StartRequest{Orchestration: name, InstanceID: instanceID}
	if input != nil {
		b, err := json.Marshal(input)
		if err != nil {
			return fmt.Errorf("encoding the input: %w", err)
		}
		req.Input = b
	}
	if err := checkRemoteReplace(opts); err != nil {
		return err
	}
	if opts != nil {
		req.Version, req.IdempotencyKey, req.LockKey, req.QueueIfLocked = opts.Version, opts.IdempotencyKey, opts.LockKey, opts.QueueIfLocked
		req.ReplaceIfLocked = opts.ReplaceIfLocked
		if opts.LockTTL > 0 {
			req.LockTTL = &httpapi.Duration{Duration: opts.LockTTL}
		}
		if !opts.StartAt.IsZero() {
			req.StartAt = &opts.StartAt
		}
		if opts.Timeout > 0 {
			req.Timeout = &httpapi.Duration{Duration: opts.Timeout}
		}
	}
	var out httpapi.StartResponse
	status, body, err := r.do(ctx, "POST", "/api/instances", req, &out)
	if err != nil {
		err = conflictError(err, status, req.LockKey, instanceID, body)
		// The 409 names the holder; its lock tells since when, as the
		// direct mode says.
		var held *duroxide.WorkflowLockedError
		if errors.As(err, &held) {
			if l, lerr := r.GetLock(ctx, held.WorkflowID); lerr == nil && l.InstanceID != nil && *l.InstanceID == held.ExistingInstanceID {
				if l.LockedSince != nil {
					held.LockedSince = *l.LockedSince
				}
				if l.ExpiresAt != nil {
					held.ExpiresAt = *l.ExpiresAt
				}
			}
		}
		return err
	}
	if out.Duplicate {
		dup := &duroxide.DuplicateStartError{IdempotencyKey: req.IdempotencyKey, InstanceID: out.InstanceID}
		if out.PurgedAt != nil {
			dup.PurgedAt = *out.PurgedAt
		}
		return dup
	}
	if opts != nil && opts.Replaced != nil {
		*opts.Replaced = out.ReplacedInstanceID
	}
	return nil
}

// checkRemoteReplace refuses start options the HTTP API does not carry,
// and clears opts.Replaced as the direct client does.
func checkRemoteReplace(opts *duroxide.StartOptions) error {
	if opts == nil {
		return nil
	}
	if opts.Replaced != nil {
		*opts.Replaced = ""
	}
	if opts.ReplaceReason != "" {
		return fmt.Errorf("%w: ReplaceReason is not sent over the HTTP API", duroxide.ErrInvalidArgument)
	}
	return nil
}

func (r *remote) GetStatus(ctx context.Context, instanceID string) (*duroxide.Status, error) {
	var st duroxide.Status
	if _, _, err := r.do(ctx, "GET", "/api/instances/"+pathID(instanceID), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Inspect reads the status with what the instance waits for: the API's
// GET /api/instances/{id} has it, under the server's stall threshold
// (opts does not apply).
func (r *remote) Inspect(ctx context.Context, instanceID string, _ *duroxide.WaitOptions) (*duroxide.Status, error) {
	return r.GetStatus(ctx, instanceID)
}

// WaitForOrchestration long-polls the status until the instance ends or
// ctx is done.
func (r *remote) WaitForOrchestration(ctx context.Context, instanceID string) (*duroxide.Status, error) {
	for {
		var st duroxide.Status
		if _, _, err := r.do(ctx, "GET", "/api/instances/"+pathID(instanceID)+"?wait="+httpapi.MaxWait.String(), nil, &st); err != nil {
			return nil, err
		}
		if st.State.IsTerminal() {
			return &st, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (r *remote) GetHistory(ctx context.Context, instanceID string, executionID int64) ([]history.Event, error) {
	path := "/api/instances/" + pathID(instanceID) + "/history"
	if executionID > 0 {
		path += "?execution=" + strconv.FormatInt(executionID, 10)
	}
	var out struct {
		Events []json.RawMessage `json:"events"`
	}
	if _, _, err := r.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	evs := make([]history.Event, len(out.Events))
	for i, raw := range out.Events {
		// The API shows the timestamp as RFC 3339 instead of timestampMs.
		var ts struct {
			Timestamp time.Time `json:"timestamp"`
		}
		if err := json.Unmarshal(raw, &evs[i]); err != nil {
			return nil, fmt.Errorf("decoding event %d of %s: %w", i, instanceID, err)
		}
		if err := json.Unmarshal(raw, &ts); err != nil {
			return nil, fmt.Errorf("decoding the timestamp of event %d of %s: %w", i, instanceID, err)
		}
		evs[i].TimestampMs = ts.Timestamp.UnixMilli()
	}
	return evs, nil
}

func (r *remote) ListInstances(ctx context.Context, opts *duroxide.ListOptions) (*duroxide.InstancePage, error) {
	q := url.Values{}
	if opts != nil {
		if len(opts.States) > 0 {
			states := make([]string, len(opts.States))
			for i, s := range opts.States {
				states[i] = string(s)
			}
			q.Set("status", strings.Join(states, ","))
		}
		for k, v := range map[string]string{"orchestration": opts.Orchestration, "parent": opts.ParentInstanceID,
			"prefix": opts.IDPrefix, "version": opts.Version, "errorKind": opts.ErrorKind, "waitKind": string(opts.WaitKind)} {
			if v != "" {
				q.Set(k, v)
			}
		}
		for k, t := range map[string]time.Time{"createdAfter": opts.CreatedAfter, "createdBefore": opts.CreatedBefore,
			"finishedAfter": opts.FinishedAfter, "finishedBefore": opts.FinishedBefore} {
			if !t.IsZero() {
				q.Set(k, t.Format(time.RFC3339Nano))
			}
		}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
		if opts.Cursor != "" {
			q.Set("cursor", opts.Cursor)
		}
		if opts.Stalled {
			q.Set("stalled", "true") // under the server's threshold
		}
	}
	path := "/api/instances"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page duroxide.InstancePage
	if _, _, err := r.do(ctx, "GET", path, nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

func (r *remote) RaiseEventWithOptions(ctx context.Context, instanceID, name string, data any, opts *duroxide.RaiseEventOptions) (bool, error) {
	if data == nil {
		data = json.RawMessage("null")
	}
	var h http.Header
	if opts != nil && opts.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {opts.IdempotencyKey}}
	}
	var out struct {
		Duplicate bool `json:"duplicate"`
	}
	_, _, err := r.doHeader(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/events/"+pathID(name), h, data, &out)
	return out.Duplicate, err
}

func (r *remote) SignalWithStart(ctx context.Context, instanceID, name string, input any,
	event string, data any, opts *duroxide.StartOptions) (bool, error) {
	req := httpapi.SignalWithStartRequest{Orchestration: name, Event: event}
	for _, f := range []struct {
		v   any
		dst *json.RawMessage
	}{{input, &req.Input}, {data, &req.Data}} {
		if f.v == nil {
			continue
		}
		b, err := json.Marshal(f.v)
		if err != nil {
			return false, fmt.Errorf("encoding the request: %w", err)
		}
		*f.dst = b
	}
	if err := checkRemoteReplace(opts); err != nil {
		return false, err
	}
	if opts != nil {
		req.Version, req.IdempotencyKey, req.LockKey, req.QueueIfLocked = opts.Version, opts.IdempotencyKey, opts.LockKey, opts.QueueIfLocked
		req.ReplaceIfLocked = opts.ReplaceIfLocked
		if opts.LockTTL > 0 {
			req.LockTTL = &httpapi.Duration{Duration: opts.LockTTL}
		}
	}
	var out httpapi.SignalWithStartResponse
	status, body, err := r.do(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/signal-with-start", req, &out)
	if err != nil {
		return false, conflictError(err, status, req.LockKey, instanceID, body)
	}
	if out.Duplicate {
		return false, &duroxide.DuplicateStartError{IdempotencyKey: req.IdempotencyKey, InstanceID: out.InstanceID}
	}
	if opts != nil && opts.Replaced != nil {
		*opts.Replaced = out.ReplacedInstanceID
	}
	return out.Started, nil
}

func (r *remote) ListValues(ctx context.Context, instanceID string) ([]duroxide.Value, error) {
	var out struct {
		Values []duroxide.Value `json:"values"`
	}
	if _, _, err := r.do(ctx, "GET", "/api/instances/"+pathID(instanceID)+"/values", nil, &out); err != nil {
		return nil, err
	}
	return out.Values, nil
}

func (r *remote) CancelInstance(ctx context.Context, instanceID, reason string) error {
	_, _, err := r.do(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/cancel", map[string]string{"reason": reason}, nil)
	return err
}

func (r *remote) PurgeInstance(ctx context.Context, instanceID string, force bool) error {
	path := "/api/instances/" + pathID(instanceID)
	if force {
		path += "?force=true"
	}
	status, body, err := r.do(ctx, "DELETE", path, nil, nil)
	if err != nil && status == http.StatusConflict {
		var e apiErrorBody
		_ = json.Unmarshal(body, &e)
		switch {
		case strings.HasPrefix(e.Error, "instance is still running"):
			return fmt.Errorf("%s: %w", e.Details, duroxide.ErrStillRunning)
		case strings.HasPrefix(e.Error, "instance is a sub-orchestration"):
			return fmt.Errorf("%s: %w", e.Details, duroxide.ErrChildInstance)
		}
	}
	return err
}

func (r *remote) GetLock(ctx context.Context, workflowID string) (*duroxide.LockStatus, error) {
	var l duroxide.LockStatus
	if _, _, err := r.do(ctx, "GET", "/api/workflows/"+pathID(workflowID)+"/lock", nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

func (r *remote) ListLocks(ctx context.Context) ([]duroxide.LockStatus, error) {
	var out struct {
		Locks []duroxide.LockStatus `json:"locks"`
	}
	if _, _, err := r.do(ctx, "GET", "/api/locks", nil, &out); err != nil {
		return nil, err
	}
	return out.Locks, nil
}

func (r *remote) ReleaseLock(ctx context.Context, workflowID string) (bool, error) {
	var out struct {
		Released bool `json:"released"`
	}
	if _, _, err := r.do(ctx, "DELETE", "/api/workflows/"+pathID(workflowID)+"/lock", nil, &out); err != nil {
		return false, err
	}
	return out.Released, nil
}

func (r *remote) CleanupExpiredLocks(ctx context.Context) (int, error) {
	var out struct {
		Cleaned int `json:"cleaned"`
	}
	if _, _, err := r.do(ctx, "POST", "/api/locks/cleanup", nil, &out); err != nil {
		return 0, err
	}
	return out.Cleaned, nil
}
