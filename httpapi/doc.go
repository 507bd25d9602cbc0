// Package httpapi serves the duroxide HTTP API: an http.Handler over a
// duroxide.Client that manages orchestration instances, for the CLI, the
// dashboard and any HTTP client.
//
//	client := duroxide.NewClient(store)
//	h, err := httpapi.NewHandler(client, &httpapi.Options{Registry: reg})
//	if err != nil { ... }
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h,
//		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
//
// The handler only talks to the store through the client: it runs no
// orchestrations. Run a duroxide.Runtime on the same store (in this process
// or another) to make started instances progress.
//
// # Routes
//
// Management of instances:
//
//	POST   /api/instances                       start: {"orchestration", "instanceId"?, "input"?, "version"?, "startAt"?,
//	                                            "idempotencyKey"?, "lockKey"?, "lockTtl"?, "queueIfLocked"?, "replaceIfLocked"?}
//	                                            → 201 {"instanceId"} (a UUID when none is given), with "queued": true and
//	                                              "queuePosition" (1 = next) when queueIfLocked or replaceIfLocked made it
//	                                              wait, and "replacedInstanceId" naming the holder replaceIfLocked canceled
//	                                              (in the start's transaction); 409 if the ID is taken;
//	                                              200 {"instanceId", "duplicate": true} for a repeated idempotencyKey;
//	                                              409 {"error", "details", "existingExecutionId"} while lockKey is held
//	GET    /api/instances?status=&orchestration=&parent=&prefix=&limit=&cursor=&include=
//	                                            → {"instances": [summary...], "nextCursor"} newest first; status is a
//	                                              comma-separated list of Pending, Running, Completed, Failed, Canceled;
//	                                              limit 1 to 1000 (default 100; at most 100 with include)
//	GET    /api/instances/{id}[?wait=30s]       → status; ?wait long-polls until the instance is Completed, Failed or
//	                                              Canceled, at most MaxWait, then answers 200 with the live status
//	GET    /api/instances/{id}?waitForChange=ETAG[&wait=30s]
//	                                            → status, once its "etag" (state, execution, custom status, values)
//	                                              differs from ETAG (at once if it already does), or when the wait
//	                                              (default 30s, at most MaxWait) runs out; ETag header too
//	GET    /api/instances/{id}/values           → {"values": [{"key", "value", "updatedAt"}]} in key order (SetValue)
//	GET    /api/instances/{id}/values/{key}     → {"key", "value", "updatedAt"}; 404 for a key the instance does not hold
//	GET    /api/instances/{id}/history[?execution=N]
//	                                            → {"events": [{"eventId", "type", "timestamp", ...}]}
//	GET    /api/instances/{id}/executions[?include=input,output]
//	                                            → {"executions": [...]}, oldest first, without input and output
//	                                              unless included (capped as in lists)
//	POST   /api/instances/{id}/events/{name}    body: the event data (any JSON, may be empty) → 202 {"instanceId", "event"};
//	                                              409 if ended. An Idempotency-Key header makes the raise once-only for
//	                                              the instance (duroxide.RaiseEventOptions): a repeat delivers nothing
//	                                              and answers 200 with "duplicate": true; a key over
//	                                              duroxide.MaxEventKeyLength bytes, empty, repeated or not text is 400
//	POST   /api/instances/{id}/signal-with-start
//	                                            body: {"orchestration", "input"?, "version"?, "event", "data"?,
//	                                              "idempotencyKey"?, "lockKey"?, "lockTtl"?, "queueIfLocked"?,
//	                                              "replaceIfLocked"?}
//	                                            → delivers the event, starting the instance first (one transaction)
//	                                              when it does not exist: 201 {"instanceId", "event", "started": true},
//	                                              202 ("started": false), 200 "duplicate": true for a repeated key;
//	                                              409 if ended, or if absent and lockKey is held
//	POST   /api/instances/{id}/cancel           body (optional): {"reason"} → 202; 409 if ended
//	POST   /api/instances/{id}/pause            body (optional): {"reason", "by"} → 200 status (with "paused");
//	                                              409 if ended or paused (docs/operations.md)
//	POST   /api/instances/{id}/resume           no body → 200 status; 409 if not paused
//	POST   /api/instances/{id}/rewind           body (optional): {"reason", "by", "force"} → 200 status, Running at a
//	                                              new execution; 409 unless Failed or Canceled, or Running with
//	                                              "force": true (not paused, not mid-turn, no cancel pending)
//	DELETE /api/instances/{id}[?force=true]     purge → 200 {"purged": true}; 409 while running unless forced
//
// Webhooks and execution locks:
//
//	POST   /api/webhooks/{triggerId}            body: the orchestration input → 200 {"success": true, "executionId", "duplicate"}
//	                                              (and "queued": true, "queuePosition" when a queue or replace trigger made it
//	                                              wait; "replacedExecutionId" when a replace trigger canceled the holder);
//	                                              401 for a bad or missing signature (Trigger.Auth); a trigger with
//	                                              "deliver": "event" delivers the body as an event instead, starting
//	                                              the instance first when absent, and adds "event" and "started"
//	GET    /api/triggers                        → {"triggers": [...]}, the configured triggers with defaults filled in
//	GET    /api/workflows/{workflowId}/lock     → {"workflowId", "isLocked", "executionId", "lockedSince", "expiresAt",
//	                                              "isStale", "holderStatus", "queued"} (duroxide.LockStatus)
//	DELETE /api/workflows/{workflowId}/lock     force release → 200 {"workflowId", "released": bool}
//	GET    /api/locks                           → {"locks": [lock status...]}, by workflow ID
//	POST   /api/locks/cleanup                   no body; delete expired and stale locks now → {"cleaned": n}
//
// Schedules (duroxide.Client's schedule calls; see docs/schedules.md):
//
//	GET    /api/schedules?limit=&cursor=        → {"schedules": [schedule...], "nextCursor"}, a page by ID, with "nextFireAt" and "lastFireAt"
//	POST   /api/schedules                       {"id", "cron" + "timeZone" | "interval", "orchestration", "input", "overlap",
//	                                              "lockKey", "catchUp", "catchUpWindow", "paused", ...} → 201 schedule;
//	                                              409 if the ID is taken
//	GET    /api/schedules/{scheduleId}          → the schedule (policy defaults filled in)
//	PUT    /api/schedules/{scheduleId}          the definition without "id" and "paused" → 200 schedule
//	DELETE /api/schedules/{scheduleId}          → {"id", "deleted": bool}
//	POST   /api/schedules/{scheduleId}/pause    no body → the schedule; /resume likewise
//	POST   /api/schedules/{scheduleId}/trigger  fire now, out of turn → {"fireAt", "instanceId", "outcome", "replacedInstanceId"}
//
// System:
//
//	GET    /api/orchestrations                  registered orchestrations (with versions) and activities (Options.Registry)
//	GET    /api/openapi.json                    the OpenAPI 3.0 description of these routes
//	GET    /healthz                             liveness: {"status": "ok"} while the process serves; the store is not checked
//	GET    /readyz                              readiness: {"status": "ok"} when the store answers, is migrated and
//	                                              takes writes (WritableChecker); 503 {"status": "unavailable"} otherwise
//	GET    /metrics                             store gauges, lock conflicts, turn and activity latencies (Prometheus)
//
// Status bodies are duroxide.Status in JSON: "status" holds the state.
// List items are summaries: a status without input, output and
// customStatus unless ?include= names them (input, output, customStatus,
// comma-separated), each then up to MaxIncludedFieldBytes (64 KiB): a larger
// one is left out and named in the item's "truncated" list. Error messages
// in lists are capped at 1 KiB ("truncated" names "error" or "lastError"
// when cut) and their details left out. GET /api/instances/{id} answers the
// full status. A stored row that cannot be decoded is listed with the
// fields that decoded and a lastError of kind "infrastructure". A
// history event is the storage JSON of history.Event with its timestampMs
// replaced by "timestamp", RFC 3339 in UTC with milliseconds.
//
// # Conventions
//
// Bodies are JSON with camelCase keys; every response is application/json
// except /metrics (the Prometheus text format, or protocol buffers when the
// Accept header asks for them). GET /api/openapi.json is an OpenAPI 3.0
// document of the routes, every answer included; a test validates real
// answers of every operation against it, and the repository's
// .ci/openapi-lint lints it with Redocly. Every response has an
// X-Request-Id header. Request bodies
// over Options.MaxBodyBytes get 413, bodies not received within
// Options.ReadTimeout 408 (and the connection is closed); unknown fields in
// request objects are rejected, and so are JSON bodies that are not valid
// UTF-8 and request objects holding an escape of half a UTF-16 surrogate
// pair ("\ud800", which encoding/json would turn into U+FFFD). Answers
// never escape <, > and &, so they grow linearly with what they carry, and
// error details quoting a request are cut at 4 KiB. Errors are
// {"error": "...", "details": "..."} with 400 for
// malformed requests (duroxide.ErrInvalidArgument: identifiers too long,
// not valid UTF-8 or holding control characters, see
// duroxide.MaxInstanceIDLength), 401 without the token, 403 for a Host or
// Origin that is not allowed, 404 for unknown instances or executions
// (duroxide.ErrNotFound), 409 for conflicts (duroxide.ErrInstanceExists,
// ErrStillRunning, ErrChildInstance, ErrInstanceTerminal with the state in
// the details, and lock conflicts, ErrWorkflowLocked, with the bodies
// described below), 413, 415 for a body without Content-Type:
// application/json, 503 (with Retry-After) for retryable
// store failures (provider.IsRetryable) and for requests whose context
// ended (a long poll cut short by server shutdown), and 500 otherwise:
// permanent store failures and internal errors, which a retry will not
// mend. Answers 5xx carry no details, whose text could name store
// internals (SQL, paths, addresses): they carry "requestId", the request's
// X-Request-Id, and the server logs the error (Options.Logger) under that
// ID as request_id. Paths that match no route get a JSON 404, or 405 with an Allow
// header.
//
// # Security
//
// The handler checks every request before routing it (docs/security.md in
// the repository has the whole picture, and how to deploy behind a proxy):
//
//   - Host: only localhost, loopback addresses and Options.AllowedHosts
//     (AnyHost for any) are served, else 403; this defeats DNS rebinding.
//     /healthz and /readyz answer any Host.
//   - Token: with Options.AuthToken, "Authorization: Bearer <token>" is
//     required (constant-time comparison; 401 with WWW-Authenticate: Bearer
//     otherwise) on every path, unknown ones included, except /healthz,
//     /readyz and the webhook routes, which their trigger authenticates.
//     The dashboard's session cookie (SessionCookieName, set by its login
//     page: HttpOnly, SameSite=Strict) is accepted in place of the header;
//     a state-changing request authenticated by it also needs an Origin
//     header naming an allowed host, which browsers send with every
//     fetch() POST and DELETE, so only same-origin pages can use it.
//     Access gives handlers mounted next to the API the same checks.
//   - Cross-site requests: a request with a body needs Content-Type:
//     application/json (415 otherwise: a web page can send a form or a
//     text/plain body to any server without a CORS preflight, never a JSON
//     one); a bodyless one needs none, so generated clients can call the
//     routes whose body is optional. A POST, PUT, PATCH or DELETE whose
//     Origin names a host other than the request's own, a loopback one or
//     an allowed one is answered 403: browsers send Origin with every
//     cross-site one, bodyless ones included. Webhook routes accept any
//     content type and origin.
//   - Resources: request bodies are bounded (Options.MaxBodyBytes) and
//     must arrive within Options.ReadTimeout; ?wait is capped at
//     Options.MaxWait; lists are summaries read from the store in chunks.
//
// # Triggers and webhooks
//
// A Trigger (Options.Triggers; LoadTriggers reads them from a file, as
// "duroxide serve --triggers FILE" does) binds a webhook to an
// orchestration:
//
//	{"triggers": [
//	  {"id": "stripe-payment", "workflowId": "workflow_123", "orchestration": "demo.Approval",
//	   "concurrency": "exclusive", "lockTtl": "1h", "idempotencyKeyPath": "/id"},
//	  {"id": "greet", "orchestration": "demo.Hello", "concurrency": "parallel"},
//	  {"id": "nightly-report", "workflowId": "reports", "orchestration": "demo.Approval", "concurrency": "queue"}
//	]}
//
// examples/triggers.json has one trigger of each policy, and a keyed one
// (stripe-customer, one lock per customer). With it, an
// exclusive conflict can be seen by hand (demo.Approval waits for its event
// up to timeoutSeconds):
//
//	duroxide serve --demo --triggers examples/triggers.json
//	curl -d '{"id": "evt_1", "timeoutSeconds": 300}' localhost:8080/api/webhooks/stripe-payment  # 200
//	curl -d '{"id": "evt_2", "timeoutSeconds": 300}' localhost:8080/api/webhooks/stripe-payment  # 409, names evt_1's instance
//	curl -d '{"id": "evt_1"}' localhost:8080/api/webhooks/stripe-payment                         # 200, duplicate
//	curl localhost:8080/api/workflows/workflow_123/lock
//
// # Webhook signatures
//
// Webhook routes are exempt from Options.AuthToken: their senders cannot
// send it. A trigger's Auth protects its route instead:
//
//	"auth": {"type": "github", "secretEnv": "GITHUB_WEBHOOK_SECRET"}
//	"auth": {"type": "stripe", "secretEnv": "STRIPE_WEBHOOK_SECRET", "tolerance": "5m"}
//	"auth": {"type": "hmac", "secretEnv": "ACME_SECRET", "header": "X-Acme-Signature", "encoding": "base64", "prefix": "sha256="}
//	"auth": {"type": "token", "secretEnv": "CRON_TOKEN", "header": "X-Cron-Token"}
//	"auth": {"type": "none"}
//
// Signatures are HMAC-SHA256 of the raw request body keyed with the secret,
// which NewHandler reads from the environment variable secretEnv
// (Options.LookupEnv): an unset or empty one fails NewHandler. The
// presets: github wants "X-Hub-Signature-256: sha256=<hex>"; stripe wants
// "Stripe-Signature: t=<unix>,v1=<hex>[,v1=...]" signing "<t>.<body>", with t
// within tolerance (default 5 min, Options.Clock) of now; token wants the
// header to carry prefix and the secret, compared in constant time. A call
// that fails is answered 401 {"success": false, "error": "missing
// signature" | "invalid signature" | "stale signature" | "missing token" |
// "invalid token", "details"} before its body is looked at: nothing starts,
// and no idempotency key is looked up. Refusals are counted in /metrics as
// duroxide_webhook_auth_failures_total{trigger, reason="missing" |
// "malformed" | "mismatch" | "stale"}.
//
// A trigger without auth is accepted only when Options.AuthToken is empty
// (loopback development); with a token, an unauthenticated trigger must say
// {"type": "none"}. With Options.Registry and Options.Runtime set, a trigger
// naming an orchestration or version the registry lacks fails NewHandler;
// with a Registry only, or none, it is logged as a warning.
//
// Only id and orchestration are required. Unknown fields, duplicate IDs,
// IDs with characters other than letters, digits, '.', '_' and '-', bad
// policies, negative TTLs, malformed JSON pointers and bad key templates
// are errors naming the trigger and the field, from ParseTriggers and
// NewHandler alike. lockTtl is a duration string ("90s",
// "1h") or a number of seconds.
//
// POST /api/webhooks/{id} starts the trigger's orchestration (at its
// version, if set) with the request body as input: any JSON value, an empty
// body being null. The instance ID is "<trigger id>-<UUID>", or the
// trigger's instanceId template (below). The answer is
// 200 {"success": true, "executionId": "<instance>", "duplicate": false}.
// A call that a queue trigger made wait adds "queued": true and
// "queuePosition" (1 = next); a started one has neither. An
// Idempotency-Key longer than duroxide.MaxKeyLength less the stored
// prefix "webhook:<trigger id>:" is answered 400, naming the key's length
// and that limit.
// Every error answer carries "success": false besides "error" and
// "details": 404 for an unknown trigger, 400 for malformed JSON, 413 for a
// body over Options.MaxBodyBytes, 500 for a system error.
//
// # Keyed triggers
//
// A trigger's instanceId, workflowId (the lock key) and idempotencyKey are
// key templates: text with placeholders, filled in from each call.
// {/json/pointer} is the string or number at that RFC 6901 pointer in the
// body (numbers as written in the body, never reformatted), {header:Name}
// the value of a request header, and {{ and }} a literal { and }. A
// template without braces is a constant, so a fixed workflowId works as it
// always did, and idempotencyKeyPath "/id" is the idempotencyKey "{/id}":
//
//	{"id": "stripe-customer", "orchestration": "billing.Invoice",
//	 "workflowId": "customer-{/data/object/customer}", "idempotencyKeyPath": "/id"}
//	{"id": "github-push", "orchestration": "ci.Build", "concurrency": "parallel",
//	 "instanceId": "gh-{header:X-GitHub-Delivery}", "idempotencyKey": "{header:X-GitHub-Delivery}"}
//
// Templates are parsed by ParseTriggers and NewHandler: an unclosed or
// stray brace, an unknown placeholder, a bad pointer or header name, more
// than 32 parts, or both idempotencyKey and idempotencyKeyPath is an error
// naming the trigger and the field. A call whose placeholder has no value
// (absent field or header), an empty one, one that is not a string or a
// number, or a header sent more than once, is answered 400 "missing ..."
// or "invalid ..." (instance ID, lock key, idempotency key), the details
// naming the trigger, the field and the placeholder; so is a result that
// breaks the rules of its identifier (duroxide.ValidateInstanceID,
// duroxide.ValidateKey: length, UTF-8, control characters, "/" in instance
// IDs). Such a call starts nothing. A call whose instance ID exists
// already is answered 409 "instance already exists".
//
// Concurrency policies work through the execution lock of the call's
// lock key, the trigger's workflowId filled in (duroxide.StartOptions.LockKey;
// default: the trigger's id, so each trigger has its own lock unless
// several name the same key):
//
//   - exclusive (the default): while an instance holding the lock runs, a
//     call is answered 409 {"success": false, "error": "Workflow currently
//     executing", "details": "Only one execution can run at a time.
//     Currently executing: <id>", "existingExecutionId": "<id>"}; retry
//     after it ends. A call that loses a race for the lock to a simultaneous
//     one is answered 409 {"success": false, "error": "Concurrent execution
//     attempted", "details": "Another concurrent request acquired the
//     execution lock"}; retry with backoff.
//   - queue: every call is accepted (200); its instance is created Pending
//     and starts when the lock is free, in arrival order
//     (duroxide.StartOptions.QueueIfLocked).
//   - replace: every call is accepted (200) and queued as with queue; the
//     instance holding the lock when the call arrives is canceled, with a
//     reason naming the new instance, and named in the answer
//     ("replacedExecutionId"). The new instance starts when the canceled
//     one ends. Replaces that arrive while an earlier one still waits for
//     the lock queue behind it, in arrival order: each cancels only the
//     holder it found. The cancel and the start are one store transaction
//     (duroxide.StartOptions.ReplaceIfLocked): a call that fails has
//     neither started nor canceled anything.
//   - parallel: no lock; every call starts an instance.
//
// The lock is released in the same transaction that makes its holder
// Completed, Failed or Canceled. It outlives a holder that makes no
// progress for lockTtl (default 1 h; every turn of the holder extends it):
// set it above the longest timer or event wait of the orchestration. A lock
// whose holder ended, or whose TTL passed, is taken over by the next start.
//
// Idempotency: the key is the Idempotency-Key header or, without one, the
// trigger's idempotencyKey template filled in, or the string or number at
// its idempotencyKeyPath (a JSON pointer, RFC 6901) in the body; a trigger
// with a path or template answers 400 to a call without a value there. A repeat of a key within 24 h starts
// nothing and answers 200 with "duplicate": true and the executionId of
// the instance the key first started, whatever the lock's state: keys are
// checked before the lock. Keys outlive their instance: after a purge, a
// repeat within the retention is still a duplicate, and the answer adds
// "purged": true and "purgedAt" (RFC 3339), as POST /api/instances does. Webhook keys are scoped per trigger: they are
// stored as "webhook:<trigger id>:<key>", so two triggers may receive the
// same key, and they never match the idempotencyKey of POST /api/instances
// (stored as given) unless that one is written in this form on purpose.
//
// POST /api/instances takes the same options as fields: "lockKey" (the
// workflow ID), "lockTtl", "queueIfLocked", "replaceIfLocked" (the replace
// policy: cancel the holder and queue, in one transaction; the answer
// names the holder in "replacedInstanceId") and "idempotencyKey". A lock
// conflict is answered 409 with the body of the webhook's, without
// "success"; a duplicate key 200 {"instanceId": "<first>", "duplicate": true}.
// A W3C traceparent header on POST /api/instances becomes the instance's
// trace context (duroxide.StartOptions.TraceParent); a malformed or repeated
// one is answered 400 and starts nothing.
//
// Lock conflicts (409s of both routes) are counted in /metrics as
// duroxide_lock_conflicts_total{kind="locked"|"concurrent"}, next to the
// gauge duroxide_execution_locks.
package httpapi
