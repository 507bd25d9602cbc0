package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go"
)

// headerIdempotencyKey is the request header carrying a webhook's
// idempotency key; it takes precedence over Trigger.IdempotencyKeyPath.
const headerIdempotencyKey = "Idempotency-Key"

// webhookKeyPrefix starts the idempotency keys of webhook starts, which
// are scoped per trigger: "webhook:<triggerId>:<key>". Trigger IDs cannot
// contain ':', so two triggers never share a key.
const webhookKeyPrefix = "webhook:"

// webhookRoutes are the webhook and trigger routes.
func (s *server) webhookRoutes() []route {
	return []route{
		{"POST /api/webhooks/{triggerId}", s.webhook},
		{"GET /api/triggers", s.listTriggers},
	}
}

// webhookError marks an error of the webhook route, so fail adds
// "success": false to its body.
type webhookError struct{ err error }

func (e *webhookError) Error() string { return e.err.Error() }
func (e *webhookError) Unwrap() error { return e.err }

// webhookResponse is the 200 answer of a webhook: a started instance, or
// (Duplicate) the instance a repeated idempotency key started.
type webhookResponse struct {
	Success     bool   `json:"success"`
	ExecutionID string `json:"executionId"`
	Duplicate   bool   `json:"duplicate"`
	// Purged and PurgedAt: a duplicate whose first instance was purged
	// since; the key outlives its instance for its whole retention.
	Purged   bool       `json:"purged,omitempty"`
	PurgedAt *time.Time `json:"purgedAt,omitempty"`
	// Queued and QueuePosition: the instance waits (Pending) for the
	// execution lock, at this place in its queue (1 = next).
	Queued        bool `json:"queued,omitempty"`
	QueuePosition int  `json:"queuePosition,omitempty"`
	// ReplacedExecutionID: a replace trigger canceled this instance, the
	// holder of the lock when the call arrived.
	ReplacedExecutionID string `json:"replacedExecutionId,omitempty"`
	// Event and Started: a deliver-event trigger delivered the event of
	// that name to ExecutionID, which this call started (true) or found
	// (false).
	Event   string `json:"event,omitempty"`
	Started *bool  `json:"started,omitempty"`
}

// queuedAt reports whether instanceID, just started with QueueIfLocked,
// waits in its lock's queue, and at which place (1 = next). It reads the
// instance after the start: an instance the lock let through at once, or
// that started since, is not queued. A failed read is logged and reported
// as not queued: the start itself succeeded.
func (s *server) queuedAt(w http.ResponseWriter, r *http.Request, instanceID string) (bool, int) {
	st, err := s.client.Inspect(r.Context(), instanceID, &duroxide.WaitOptions{StalledAfter: s.stalledAfter})
	if err != nil {
		s.log.Warn("reading the queue position of a started instance", logKeyInstance, instanceID,
			logKeyError, err, logKeyRequest, requestID(w))
		return false, 0
	}
	for _, wt := range st.WaitingFor {
		if wt.Kind == duroxide.WaitLock {
			return true, wt.QueuePosition
		}
	}
	return false, 0
}

// checkWebhookKey checks the length of a webhook's idempotency key as its
// sender wrote it: the key is stored with the prefix
// "webhook:<trigger id>:", which takes part of duroxide.MaxKeyLength.
func checkWebhookKey(key, stored string, triggerID string) error {
	if limit := duroxide.MaxKeyLength - (len(stored) - len(key)); len(key) > limit {
		return badRequest("invalid idempotency key",
			"the idempotency key is %d bytes long; the limit is %d bytes for trigger %s", len(key), limit, triggerID)
	}
	return nil
}

// duplicatePurge returns the purged and purgedAt fields of a duplicate
// start's answer: whether the instance the key started was purged, and
// when (UTC, milliseconds).
func duplicatePurge(dup *duroxide.DuplicateStartError) (bool, *time.Time) {
	if dup.PurgedAt.IsZero() {
		return false, nil
	}
	at := dup.PurgedAt.UTC().Truncate(time.Millisecond)
	return true, &at
}

func (s *server) webhook(w http.ResponseWriter, r *http.Request) error {
	if err := s.runWebhook(w, r); err != nil {
		return &webhookError{err}
	}
	return nil
}

func (s *server) runWebhook(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("triggerId")
	t := s.triggerByID[id]
	if t == nil {
		return &apiError{status: http.StatusNotFound, message: "trigger not found",
			details: "no trigger has the ID " + id + "; GET /api/triggers lists them"}
	}
	// The signature covers the raw body, before readBody trims it.
	var raw bytes.Buffer
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, &raw), r.Body}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if v := s.verifiers[t.ID]; v != nil {
		if f := v.verify(r.Header, raw.Bytes()); f != nil {
			return f.apiError()
		}
	}
	input, err := compactJSON(body)
	if err != nil {
		return err
	}
	keys, err := compileKeys(t)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", t.ID, err) // validated when loaded; not reached
	}
	call := &callRequest{header: r.Header, body: body}
	opts := &duroxide.StartOptions{Version: t.Version}
	key := r.Header.Get(headerIdempotencyKey)
	field := keyField{what: "idempotency key", option: "Idempotency-Key header"}
	if key == "" && keys.idempotencyKey != nil {
		field = fieldIdempotencyKey
		if t.IdempotencyKey == "" {
			field = fieldIdempotencyKeyPath
		}
		if key, err = keys.idempotencyKey.render(call, t.ID, field); err != nil {
			return err
		}
	}
	if key != "" {
		opts.IdempotencyKey = webhookKeyPrefix + t.ID + ":" + key
		if err := checkWebhookKey(key, opts.IdempotencyKey, t.ID); err != nil {
			return err
		}
		if err := checkKeyValue(field, t.ID, validateKey(field.what, key)); err != nil {
			return err
		}
	}
	if keys.lockKey != nil {
		if opts.LockKey, err = keys.lockKey.render(call, t.ID, fieldLockKey); err != nil {
			return err
		}
		if err := checkKeyValue(fieldLockKey, t.ID, validateKey(fieldLockKey.what, opts.LockKey)); err != nil {
			return err
		}
		opts.LockTTL = t.LockTTL.Duration
		opts.QueueIfLocked = t.Concurrency == ConcurrencyQueue || t.Concurrency == ConcurrencyReplace
	}
	var replaced string
	instanceID := t.ID + "-" + uuid.NewString()
	if keys.instanceID != nil {
		if instanceID, err = keys.instanceID.render(call, t.ID, fieldInstanceID); err != nil {
			return err
		}
		if err := checkKeyValue(fieldInstanceID, t.ID, duroxide.ValidateInstanceID(instanceID)); err != nil {
			return err
		}
	}
	if keys.lockKey != nil && t.Concurrency == ConcurrencyReplace {
		// The holder's cancel commits with the start, in one transaction.
		opts.ReplaceIfLocked, opts.Replaced = true, &replaced
		opts.ReplaceReason = fmt.Sprintf("replaced by %s (webhook %s, request %s)", instanceID, t.ID, requestID(w))
	}
	var event string
	started := true
	if keys.event != nil {
		if event, err = keys.event.render(call, t.ID, fieldEvent); err != nil {
			return err
		}
		if err := checkKeyValue(fieldEvent, t.ID, duroxide.ValidateName(event)); err != nil {
			return err
		}
		started, err = s.client.SignalWithStart(r.Context(), instanceID, t.Orchestration, input, event, input, opts)
	} else {
		err = s.client.StartOrchestration(r.Context(), instanceID, t.Orchestration, input, opts)
	}
	var dup *duroxide.DuplicateStartError
	switch {
	case errors.As(err, &dup):
		purged, purgedAt := duplicatePurge(dup)
		writeJSON(w, http.StatusOK, webhookResponse{Success: true, ExecutionID: dup.InstanceID, Duplicate: true,
			Purged: purged, PurgedAt: purgedAt})
		return nil
	case err != nil:
		return err
	}
	resp := webhookResponse{Success: true, ExecutionID: instanceID, ReplacedExecutionID: replaced}
	if event != "" {
		resp.Event, resp.Started = event, &started
	}
	if !started {
		writeJSON(w, http.StatusOK, resp) // delivered to a live instance: no start, no lock step
		return nil
	}
	if opts.QueueIfLocked {
		resp.Queued, resp.QueuePosition = s.queuedAt(w, r, instanceID)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// checkKeyValue turns the refusal err of a key built for a call (by
// duroxide.ValidateKey or ValidateInstanceID) into a 400 naming the field.
func checkKeyValue(f keyField, triggerID string, err error) error {
	if err == nil {
		return nil
	}
	return badRequest("invalid "+f.what, "trigger %s, %s: %v", triggerID, f.option, err)
}

type triggersResponse struct {
	Triggers []Trigger `json:"triggers"`
}

func (s *server) listTriggers(w http.ResponseWriter, _ *http.Request) error {
	out := triggersResponse{Triggers: s.triggers}
	if out.Triggers == nil {
		out.Triggers = []Trigger{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// validateKey checks a key taken from a webhook call by the root package's
// rules for lock and idempotency keys, naming what in the error.
func validateKey(what, key string) error {
	if key == "" {
		return fmt.Errorf("%w: %s is required", duroxide.ErrInvalidArgument, what)
	}
	return duroxide.ValidateText(what, key, duroxide.MaxKeyLength)
}
