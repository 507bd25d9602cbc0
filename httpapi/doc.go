// Package httpapi serves the duroxide HTTP API: an http.Handler over a
// duroxide.Client that manages orchestration instances, for the CLI, the
// dashboard and any HTTP client.
//
//	client := duroxide.NewClient(store)
//	h, err := httpapi.NewHandler(client, &httpapi.Options{Registry: reg})
//	if err != nil { ... }
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h}
//
// The handler only talks to the store through the client: it runs no
// orchestrations. Run a duroxide.Runtime on the same store (in this process
// or another) to make started instances progress.
//
// # Routes
//
// Management of instances:
//
//	POST   /api/instances                       start: {"orchestration", "instanceId"?, "input"?, "version"?, "startAt"?}
//	                                            → 201 {"instanceId"} (a UUID when none is given); 409 if the ID is taken
//	GET    /api/instances?status=&orchestration=&parent=&limit=&cursor=
//	                                            → {"instances": [status...], "nextCursor"} newest first; status is a
//	                                              comma-separated list of Pending, Running, Completed, Failed, Canceled
//	GET    /api/instances/{id}[?wait=30s]       → status; ?wait long-polls until the instance is Completed, Failed or
//	                                              Canceled, at most MaxWait, then answers 200 with the live status
//	GET    /api/instances/{id}/history[?execution=N]
//	                                            → {"events": [{"eventId", "type", "timestamp", ...}]}
//	GET    /api/instances/{id}/executions       → {"executions": [...]}, oldest first
//	POST   /api/instances/{id}/events/{name}    body: the event data (any JSON, may be empty) → 202
//	POST   /api/instances/{id}/cancel           body (optional): {"reason"} → 202
//	DELETE /api/instances/{id}[?force=true]     purge → 200 {"purged": true}; 409 while running unless forced
//
// System:
//
//	GET    /api/orchestrations                  registered orchestrations (with versions) and activities (Options.Registry)
//	GET    /api/openapi.json                    the OpenAPI 3.1 description of these routes
//	GET    /healthz                             {"status": "ok"} once the store answers; 503 otherwise
//	GET    /metrics                             store gauges, Prometheus text format
//
// Status bodies are duroxide.Status in JSON: "status" holds the state. A
// history event is the storage JSON of history.Event with its timestampMs
// replaced by "timestamp", RFC 3339 in UTC with milliseconds.
//
// # Conventions
//
// Bodies are JSON with camelCase keys; every response is application/json
// except /metrics (Prometheus rejects other content types). Request bodies
// over Options.MaxBodyBytes get 413; unknown fields in request objects are
// rejected. Errors are {"error": "...", "details": "..."} with 400 for
// malformed requests (duroxide.ErrInvalidArgument), 404 for unknown
// instances or executions (duroxide.ErrNotFound), 409 for conflicts
// (duroxide.ErrInstanceExists, ErrStillRunning, ErrChildInstance), 413, 501
// when the store lacks provider.Admin, 503 (with Retry-After) for retryable
// store failures and for requests whose context ended (a long poll cut short
// by server shutdown), and 500 otherwise. Paths that match no route get a JSON 404, or 405 with an
// Allow header.
//
// Idempotent starts and execution locks (the idempotencyKey and lockKey
// fields of a start), webhooks, triggers and lock routes are not served yet:
// a start that asks for them is rejected with 400 rather than run without
// them. They are further route groups on the same handler.
package httpapi
