package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider"
)

// contentTypeJSON is the Content-Type of every response but /metrics.
const contentTypeJSON = "application/json"

// errorBody is the body of every error response. Success is set (false)
// only by the webhook route, whose contract carries it in every answer;
// ExistingExecutionID only by lock conflicts. Answers 5xx have no details
// (the error's text names store internals): they carry the request's ID,
// under which the server logs the error.
type errorBody struct {
	Success             *bool  `json:"success,omitempty"`
	Error               string `json:"error"`
	Details             string `json:"details,omitempty"`
	ExistingExecutionID string `json:"existingExecutionId,omitempty"`
	RequestID           string `json:"requestId,omitempty"`
}

// headerRequestID is the response header carrying the request's ID, which
// the server's log lines about the request name too.
const headerRequestID = "X-Request-Id"

// newRequestID returns a fresh request ID: 16 random hex digits.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// apiError is an error with its HTTP status, raised by the handlers for
// request problems they detect themselves (bad query parameters, malformed
// bodies).
type apiError struct {
	status  int
	message string
	details string
}

func (e *apiError) Error() string {
	if e.details == "" {
		return e.message
	}
	return e.message + ": " + e.details
}

func badRequest(message, format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, message: message, details: fmt.Sprintf(format, args...)}
}

// Messages and details of lock conflicts: the exact wording of the 409
// answers to starts and webhook calls.
const (
	msgWorkflowLocked     = "Workflow currently executing"
	detailsWorkflowLocked = "Only one execution can run at a time. Currently executing: "
	msgLockContended      = "Concurrent execution attempted"
	detailsLockContended  = "Another concurrent request acquired the execution lock"
)

// errorResponse is the status and body of the error response for err.
// Details are err's text, except for lock conflicts, whose details are
// fixed by the contract and whose body names the holder.
func errorResponse(err error) (int, errorBody) {
	code, msg := classify(err)
	body := errorBody{Error: msg, Details: err.Error()}
	var locked *duroxide.WorkflowLockedError
	var contended *duroxide.LockAcquisitionFailedError
	switch {
	case errors.As(err, &locked):
		body.Details = detailsWorkflowLocked + locked.ExistingInstanceID
		body.ExistingExecutionID = locked.ExistingInstanceID
	case errors.As(err, &contended):
		body.Details = detailsLockContended
	}
	return code, body
}

// classify maps an error to its HTTP status and a short message. Errors of
// the duroxide API are recognized with errors.Is on its sentinels.
func classify(err error) (int, string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	var locked *duroxide.WorkflowLockedError
	var contended *duroxide.LockAcquisitionFailedError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.message
	case errors.As(err, &locked):
		return http.StatusConflict, msgWorkflowLocked
	case errors.As(err, &contended):
		return http.StatusConflict, msgLockContended
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "request body too large"
	case errors.Is(err, duroxide.ErrInvalidArgument):
		return http.StatusBadRequest, "invalid argument"
	case errors.Is(err, duroxide.ErrNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, duroxide.ErrInstanceExists):
		return http.StatusConflict, "instance already exists"
	case errors.Is(err, duroxide.ErrStillRunning):
		return http.StatusConflict, "instance is still running; purge with ?force=true to delete it anyway"
	case errors.Is(err, duroxide.ErrInstanceTerminal):
		return http.StatusConflict, "instance has already ended"
	case errors.Is(err, duroxide.ErrAlreadyPaused):
		return http.StatusConflict, "instance is already paused"
	case errors.Is(err, duroxide.ErrNotPaused):
		return http.StatusConflict, "instance is not paused"
	case errors.Is(err, duroxide.ErrStateConflict):
		return http.StatusConflict, "instance state does not allow this"
	case errors.Is(err, duroxide.ErrBulkJobEnded):
		return http.StatusConflict, "bulk job has already ended"
	case errors.Is(err, duroxide.ErrScheduleExists):
		return http.StatusConflict, "schedule already exists"
	case errors.Is(err, duroxide.ErrNotSupported):
		return http.StatusNotImplemented, "not supported by this store"
	case errors.Is(err, duroxide.ErrChildInstance):
		return http.StatusConflict, "instance is a sub-orchestration; purge its root instance"
	case provider.IsRetryable(err):
		return http.StatusServiceUnavailable, "store temporarily unavailable; retry"
	case errors.Is(err, provider.ErrCorruptData):
		return http.StatusInternalServerError, "corrupt stored data; retrying will not help"
	case errors.Is(err, provider.ErrClosed):
		return http.StatusInternalServerError, "the store is closed; retrying will not help"
	}
	return http.StatusInternalServerError, "internal error"
}

// writeJSON writes v as the JSON body of a response with the given status.
// It does not escape <, > and & (the answers are application/json with
// nosniff, never HTML), which would make stored payloads full of them up to
// six times longer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	h := w.Header()
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = marshalJSON(errorBody{Error: "internal error", RequestID: h.Get(headerRequestID)})
	}
	h.Set("Content-Type", contentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// marshalJSON is json.Marshal without HTML escaping, with a final newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDetailsBytes caps the details of error answers, which may quote what
// the request sent (an unknown field's name, a path, a Host): an answer
// stays small whatever the request.
const maxDetailsBytes = 4 << 10

// capDetails shortens b's details to maxDetailsBytes, marking the cut.
func (b *errorBody) capDetails() {
	if len(b.Details) > maxDetailsBytes {
		b.Details = truncateUTF8(b.Details, maxDetailsBytes) + " [truncated]"
	}
}

// writeError writes an error response.
func writeError(w http.ResponseWriter, status int, message, details string) {
	body := errorBody{Error: message, Details: details}
	body.capDetails()
	writeJSON(w, status, body)
}

// readBody reads the request body up to the handler's limit. A larger body
// yields an error that classify maps to 413.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.maxBody {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, message: "request body too large",
			details: fmt.Sprintf("the body has %d bytes; the limit is %d", r.ContentLength, s.maxBody)}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, message: "request body too large",
				details: fmt.Sprintf("the limit is %d bytes", mbe.Limit)}
		}
		if isReadTimeout(err) {
			// The connection cannot be reused: part of the body is unread.
			w.Header().Set("Connection", "close")
			return nil, &apiError{status: http.StatusRequestTimeout, message: "request body too slow",
				details: fmt.Sprintf("the body was not received within %s", s.guard.readTimeout)}
		}
		return nil, badRequest("cannot read request body", "%v", err)
	}
	return bytes.TrimSpace(b), nil
}

// decodeBody decodes a JSON object body into dst, rejecting unknown fields
// and trailing data. An empty body is an error unless optional, in which
// case dst is left as it is and decodeBody reports false.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, optional bool) (bool, error) {
	b, err := s.readBody(w, r)
	if err != nil {
		return false, err
	}
	if len(b) == 0 {
		if optional {
			return false, nil
		}
		return false, badRequest("malformed JSON", "the request body is empty; a JSON object is required")
	}
	if !utf8.Valid(b) {
		return false, errInvalidUTF8
	}
	if i := loneSurrogate(b); i >= 0 {
		return false, badRequest("malformed JSON",
			"the escape %s at byte %d is half of a UTF-16 surrogate pair: it is not text (encoding/json would turn it into U+FFFD)", b[i:i+6], i)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return false, badRequest("malformed JSON", "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, badRequest("malformed JSON", "unexpected data after the JSON object")
	}
	return true, nil
}

// errInvalidUTF8 refuses a JSON body that is not valid UTF-8 (which
// encoding/json would silently turn into U+FFFD).
var errInvalidUTF8 = &apiError{status: http.StatusBadRequest, message: "malformed JSON", details: "the body is not valid UTF-8"}

// loneSurrogate returns the offset of the first \uXXXX escape in the
// JSON text b that is a UTF-16 surrogate without its other half, or -1.
// Backslashes only occur in JSON strings, so b need not be parsed; invalid
// JSON is left to the decoder.
func loneSurrogate(b []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range b[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // another escape: skip its second character
		case 0xD800 <= r && r < 0xDC00:
			if lo, ok := hex4(i + 6); ok && 0xDC00 <= lo && lo < 0xE000 {
				i += 11
				continue
			}
			return i
		case 0xDC00 <= r && r < 0xE000:
			return i
		default:
			i += 5
		}
	}
	return -1
}

// compactJSON validates raw and returns it without insignificant
// whitespace; empty and null become nil (no payload).
func compactJSON(raw []byte) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !utf8.Valid(raw) {
		return nil, errInvalidUTF8
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, badRequest("malformed JSON", "%v", err)
	}
	return buf.Bytes(), nil
}
