package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/logkey"
)

// Trigger starts an orchestration when its webhook, POST
// /api/webhooks/{id}, is called. The request body is the orchestration's
// input.
type Trigger struct {
	// ID names the trigger in its webhook's path. Required: letters, digits,
	// '.', '_' and '-', at most MaxTriggerIDLength bytes.
	ID string `json:"id"`
	// WorkflowID is the execution lock key ("workflow id") of the
	// exclusive, queue and replace policies (default: the trigger's ID).
	// Triggers with the same key share one lock. It is a key template (see
	// below), so each call may take its own key from the request:
	// "customer-{/data/object/customer}" gives one lock per customer. A
	// value without braces is a fixed key. Unused by parallel triggers.
	//
	// A key template is text with placeholders: {/json/pointer} is the
	// string or number at that RFC 6901 pointer in the body (a number as
	// written), {header:Name} the value of a request header, and {{ and }}
	// are a literal { and }. A placeholder without a value, with an empty
	// value or with a value of another type answers the call 400 and
	// starts nothing, as does a result that breaks the rules of its
	// identifier (duroxide.ValidateInstanceID, duroxide.ValidateKey).
	WorkflowID string `json:"workflowId"`
	// InstanceID is a key template (see WorkflowID) for the ID of the
	// instance a call starts, such as "order-{/data/object/id}". Empty:
	// the trigger's ID, "-" and a random UUID. A call whose instance ID
	// exists already is answered 409 (instance already exists).
	InstanceID string `json:"instanceId,omitempty"`
	// Orchestration is the name of the orchestration to start. Required.
	Orchestration string `json:"orchestration"`
	// Version is the orchestration version to start (default: the latest
	// registered with the runtime that runs it).
	Version string `json:"version,omitempty"`
	// Concurrency is what a call does while an instance started under the
	// same lock key still runs (default ConcurrencyExclusive).
	Concurrency Concurrency `json:"concurrency,omitempty"`
	// LockTTL is how long the lock outlives its holder's last progress
	// (duroxide.StartOptions.LockTTL; 0 = duroxide.DefaultLockTTL, 1 h).
	// Only for the exclusive, queue and replace policies.
	LockTTL Duration `json:"lockTtl,omitzero"`
	// IdempotencyKeyPath is a JSON pointer (RFC 6901, such as "/id") to the
	// idempotency key in the request body, a string or a number. It is used
	// when the request has no Idempotency-Key header; a body without a
	// value there is answered 400. Empty: only the header gives a key.
	IdempotencyKeyPath string `json:"idempotencyKeyPath,omitempty"`
	// IdempotencyKey is a key template (see WorkflowID) for the
	// idempotency key, such as "{header:X-GitHub-Delivery}": the general
	// form of IdempotencyKeyPath ("/id" is "{/id}"); set one or neither.
	// An Idempotency-Key header, when the call has one, takes precedence.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Deliver is what a call does: DeliverStart (the default, also when
	// empty) starts an
	// instance; DeliverEvent delivers the body as the external event named
	// Event to the instance InstanceID names, starting Orchestration there
	// first (with the body as its input) when that instance does not
	// exist, atomically: duroxide.Client.SignalWithStart. Concurrent calls
	// for a new instance start it once and deliver every event once.
	//
	// With DeliverEvent the policies apply to the start only: an instance
	// that exists takes the event whatever holds the lock (exclusive,
	// queue), and replace cancels the holder only when the call started a
	// new instance. An idempotency key names the whole delivery: a
	// repeated key delivers nothing and answers 200 with duplicate true.
	// An instance that ended answers 409 and takes nothing.
	Deliver Deliver `json:"deliver,omitempty"`
	// Event is a key template (see WorkflowID) for the event name of a
	// DeliverEvent trigger, such as "payment" or "{/type}". Required with
	// DeliverEvent, refused without.
	Event string `json:"event,omitempty"`
	// Auth is how a call proves that it comes from the trigger's sender: a
	// signature (hmac, stripe, github) or a shared token, whose secret is
	// read from an environment variable; a bad or missing one is answered
	// 401 and starts nothing. Nil: no check, which NewHandler allows only
	// when the server has no Options.AuthToken; with a token, an
	// unauthenticated trigger must say so with {"type": "none"}.
	Auth *TriggerAuth `json:"auth,omitempty"`
}

// Concurrency is a trigger's policy for calls that arrive while an
// instance it started still runs.
type Concurrency string

// Concurrency policies.
const (
	// ConcurrencyExclusive refuses a call with 409 while an instance
	// holding the trigger's WorkflowID lock runs. The default.
	ConcurrencyExclusive Concurrency = "exclusive"
	// ConcurrencyParallel starts an instance per call, with no lock.
	ConcurrencyParallel Concurrency = "parallel"
	// ConcurrencyQueue accepts every call; its instance waits (Pending)
	// until the lock is free and starts in arrival order
	// (duroxide.StartOptions.QueueIfLocked).
	ConcurrencyQueue Concurrency = "queue"
	// ConcurrencyReplace accepts every call and cancels the instance that
	// holds the lock when the call arrives, naming the new instance in
	// the cancel's reason; the new instance is queued
	// (duroxide.StartOptions.QueueIfLocked) and starts as soon as the
	// canceled holder ends. Replaces that arrive while an earlier replace
	// still waits for the lock queue behind it in arrival order: each
	// cancels only the holder it found.
	ConcurrencyReplace Concurrency = "replace"
)

// Deliver is what a trigger's call does.
type Deliver string

// Delivery modes.
const (
	// DeliverStart starts an instance per call. The default.
	DeliverStart Deliver = "start"
	// DeliverEvent delivers the call as an event to its instance, starting
	// the instance first when it does not exist (signal-with-start).
	DeliverEvent Deliver = "event"
)

// MaxTriggerIDLength bounds Trigger.ID.
const MaxTriggerIDLength = 128

// Duration is a time.Duration written in JSON as a Go duration string
// ("90s", "1h"). Decoding also accepts a number of seconds.
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration as a string, without zero units: "1h",
// "1m30s", "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(formatDuration(d.Duration))
}

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("duration must be like \"90s\" or \"1h\": %w", err)
		}
		d.Duration = p
	case float64:
		if math.IsNaN(v) || math.Abs(v*float64(time.Second)) > math.MaxInt64 {
			return fmt.Errorf("duration of %v seconds is out of range", v)
		}
		d.Duration = time.Duration(v * float64(time.Second))
	default:
		return fmt.Errorf("duration must be a string like \"90s\" or a number of seconds, got %s", b)
	}
	return nil
}

// formatDuration is time.Duration.String without the zero minutes and
// seconds that follow hours or minutes ("1h", not "1h0m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// triggersFile is the JSON document of LoadTriggers.
type triggersFile struct {
	Triggers []Trigger `json:"triggers"`
}

// LoadTriggers reads a triggers file (see ParseTriggers).
func LoadTriggers(path string) ([]Trigger, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading triggers: %w", err)
	}
	defer f.Close()
	ts, err := ParseTriggers(f)
	if err != nil {
		return nil, fmt.Errorf("loading triggers from %s: %w", path, err)
	}
	return ts, nil
}

// ParseTriggers reads {"triggers": [...]} and validates the triggers as
// NewHandler does. Unknown fields are errors. The triggers are returned
// with their defaults filled in: concurrency "exclusive" and, for the
// exclusive, queue and replace policies, workflowId = id.
func ParseTriggers(r io.Reader) ([]Trigger, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f triggersFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parsing triggers: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("parsing triggers: unexpected data after the JSON object")
	}
	return normalizeTriggers(f.Triggers)
}

// normalizeTriggers validates ts and returns a copy with the defaults
// filled in. Errors name the trigger's index and ID and the field.
func normalizeTriggers(ts []Trigger) ([]Trigger, error) {
	out := make([]Trigger, len(ts))
	seen := make(map[string]int, len(ts))
	for i, t := range ts {
		fail := func(field, format string, args ...any) error {
			name := ""
			if t.ID != "" {
				name = fmt.Sprintf(" (%q)", t.ID)
			}
			return fmt.Errorf("trigger %d%s: %s: %s", i, name, field, fmt.Sprintf(format, args...))
		}
		switch {
		case t.ID == "":
			return nil, fail("id", "required")
		case len(t.ID) > MaxTriggerIDLength:
			return nil, fail("id", "longer than %d bytes", MaxTriggerIDLength)
		case !validTriggerID(t.ID):
			return nil, fail("id", "may only contain letters, digits, '.', '_' and '-'")
		}
		if j, dup := seen[t.ID]; dup {
			return nil, fail("id", "duplicate of trigger %d", j)
		}
		seen[t.ID] = i
		if strings.TrimSpace(t.Orchestration) == "" {
			return nil, fail("orchestration", "required")
		}
		switch t.Concurrency {
		case "":
			t.Concurrency = ConcurrencyExclusive
		case ConcurrencyExclusive, ConcurrencyParallel, ConcurrencyQueue, ConcurrencyReplace:
		default:
			return nil, fail("concurrency", "must be %q, %q, %q or %q, got %q",
				ConcurrencyExclusive, ConcurrencyParallel, ConcurrencyQueue, ConcurrencyReplace, t.Concurrency)
		}
		switch t.Deliver {
		case "", DeliverStart, DeliverEvent:
		default:
			return nil, fail("deliver", "must be %q or %q, got %q", DeliverStart, DeliverEvent, t.Deliver)
		}
		switch {
		case t.Deliver == DeliverEvent && t.Event == "":
			return nil, fail("event", "required with deliver %q: the name (or a key template) of the event to deliver", DeliverEvent)
		case t.Deliver == DeliverEvent && t.InstanceID == "":
			return nil, fail("instanceId", "required with deliver %q: the instance each call's event goes to, such as \"order-{/data/object/id}\"", DeliverEvent)
		case t.Deliver != DeliverEvent && t.Event != "":
			return nil, fail("event", "only a trigger with deliver %q delivers an event", DeliverEvent)
		}
		if t.LockTTL.Duration < 0 {
			return nil, fail("lockTtl", "must not be negative, got %s", t.LockTTL.Duration)
		}
		if t.Concurrency == ConcurrencyParallel {
			if t.LockTTL.Duration != 0 {
				return nil, fail("lockTtl", "a parallel trigger takes no lock; remove lockTtl or use concurrency exclusive or queue")
			}
		} else if t.WorkflowID == "" {
			t.WorkflowID = t.ID
		}
		if t.IdempotencyKeyPath != "" && t.IdempotencyKey != "" {
			return nil, fail("idempotencyKey", "set idempotencyKey or idempotencyKeyPath, not both")
		}
		if _, err := compileKeys(&t); err != nil {
			var ke *keyFieldError
			if errors.As(err, &ke) {
				return nil, fail(ke.option, "%v", ke.err)
			}
			return nil, fail("keys", "%v", err)
		}
		if t.Auth != nil {
			a, err := normalizeAuth(*t.Auth)
			if err != nil {
				return nil, fail("auth", "%v", err)
			}
			t.Auth = &a // a copy: the caller's trigger is not changed
		}
		out[i] = t
	}
	return out, nil
}

func validTriggerID(id string) bool {
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// parsePointer splits an RFC 6901 JSON pointer into its unescaped
// reference tokens. The empty pointer (the whole document) is refused: an
// idempotency key is a field of the body.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer must start with \"/\" (like \"/id\"), got %q", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		for j := 0; j < len(part); j++ {
			if part[j] == '~' && (j+1 == len(part) || (part[j+1] != '0' && part[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q: \"~\" must be followed by 0 or 1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// errNoValue reports a JSON pointer that names nothing in a document.
var errNoValue = errors.New("no value")

// lookupPointer resolves tokens (from parsePointer) in doc, a JSON value
// decoded with UseNumber.
func lookupPointer(doc any, tokens []string) (any, error) {
	cur := doc
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, errNoValue
			}
			cur = next
		case []any:
			if tok == "" || (len(tok) > 1 && tok[0] == '0') {
				return nil, errNoValue
			}
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(v) {
				return nil, errNoValue
			}
			cur = v[n]
		default:
			return nil, errNoValue
		}
	}
	return cur, nil
}

// triggerKeys are a trigger's key templates, parsed.
type triggerKeys struct {
	// instanceID is nil for the default, "<trigger id>-<uuid>".
	instanceID *keyTemplate
	// lockKey is nil for parallel triggers.
	lockKey *keyTemplate
	// idempotencyKey is nil when only the Idempotency-Key header gives a
	// key.
	idempotencyKey *keyTemplate
	// event is nil unless the trigger delivers events.
	event *keyTemplate
}

// The fields of the key templates, as answers and errors name them.
var (
	fieldInstanceID         = keyField{what: "instance ID", option: "instanceId"}
	fieldLockKey            = keyField{what: "lock key", option: "workflowId"}
	fieldIdempotencyKey     = keyField{what: "idempotency key", option: "idempotencyKey"}
	fieldIdempotencyKeyPath = keyField{what: "idempotency key", option: "idempotencyKeyPath"}
	fieldEvent              = keyField{what: "event name", option: "event"}
)

// keyFieldError is an invalid key template of a trigger: option names
// its field.
type keyFieldError struct {
	option string
	err    error
}

func (e *keyFieldError) Error() string { return e.option + ": " + e.err.Error() }
func (e *keyFieldError) Unwrap() error { return e.err }

// compileKeys parses the key templates of t, whose defaults are filled in
// (normalizeTriggers). A template without placeholders is checked at once
// by the rules of its identifier.
func compileKeys(t *Trigger) (*triggerKeys, error) {
	var k triggerKeys
	parse := func(option, src string, check func(string) error) (*keyTemplate, error) {
		kt, err := parseTemplate(src)
		if err != nil {
			return nil, &keyFieldError{option, err}
		}
		if v, ok := kt.constant(); ok && check != nil {
			if err := check(v); err != nil {
				return nil, &keyFieldError{option, err}
			}
		}
		return kt, nil
	}
	var err error
	if t.InstanceID != "" {
		if k.instanceID, err = parse("instanceId", t.InstanceID, duroxide.ValidateInstanceID); err != nil {
			return nil, err
		}
	}
	if t.WorkflowID != "" {
		// Parsed for parallel triggers too, which do not use it, so that a
		// bad template is refused whatever the policy.
		lock, err := parse("workflowId", t.WorkflowID, nil)
		if err != nil {
			return nil, err
		}
		if t.Concurrency != ConcurrencyParallel {
			k.lockKey = lock
		}
	}
	if t.Event != "" {
		if k.event, err = parse("event", t.Event, duroxide.ValidateName); err != nil {
			return nil, err
		}
	}
	switch {
	case t.IdempotencyKey != "":
		if k.idempotencyKey, err = parse("idempotencyKey", t.IdempotencyKey, nil); err != nil {
			return nil, err
		}
	case t.IdempotencyKeyPath != "":
		tokens, err := parsePointer(t.IdempotencyKeyPath)
		if err != nil {
			return nil, &keyFieldError{"idempotencyKeyPath", err}
		}
		k.idempotencyKey = &keyTemplate{src: t.IdempotencyKeyPath,
			parts: []templatePart{{pointer: tokens, source: t.IdempotencyKeyPath + " in the body"}}}
	}
	return &k, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// checkRegistered checks that reg registers the orchestration (at its
// version, if set) of every trigger. A miss is an error when hostsRuntime
// (this process runs the orchestrations, so the webhook could only fail),
// and a warning otherwise (another process may run them). Without reg,
// the triggers cannot be checked: that is a warning too.
func checkRegistered(ts []Trigger, reg *duroxide.Registry, hostsRuntime bool, log *slog.Logger) error {
	if len(ts) == 0 {
		return nil
	}
	if reg == nil {
		names := make([]string, 0, len(ts))
		for _, t := range ts {
			names = append(names, triggerTarget(&t))
		}
		log.Warn("webhook triggers not checked: no registry; a runtime on the same store must register their orchestrations",
			logkey.Orchestration, strings.Join(slices.Compact(slices.Sorted(slices.Values(names))), ", "))
		return nil
	}
	for i := range ts {
		t := &ts[i]
		if reg.HasOrchestration(t.Orchestration, t.Version) {
			continue
		}
		known := reg.Versions(t.Orchestration)
		what := fmt.Sprintf("orchestration %q is not registered", t.Orchestration)
		if len(known) > 0 {
			what = fmt.Sprintf("orchestration %q has no version %q (registered: %s)", t.Orchestration, t.Version, strings.Join(known, ", "))
		}
		if hostsRuntime {
			return fmt.Errorf("trigger %q: %s with the runtime of this server; its webhooks could only fail", t.ID, what)
		}
		log.Warn("webhook trigger names an orchestration this process does not register; a runtime on the same store must",
			logkey.Trigger, t.ID, logkey.Error, what)
	}
	return nil
}

// triggerTarget is a trigger's orchestration, with its version if set.
func triggerTarget(t *Trigger) string {
	if t.Version == "" {
		return t.Orchestration
	}
	return t.Orchestration + " " + t.Version
}
