// Package logkey holds the attribute keys every log line of duroxide uses,
// so that one concept has one key whichever package logs it and log
// queries can rely on them. Keys are snake_case; identifiers end in _id.
//
// Work being run:
//
//	instance_id        the orchestration instance ID
//	execution_id       the execution number within the instance (1, 2, ...)
//	orchestration      the orchestration's name (and version, when known)
//	activity           the activity's name
//	activity_id        the activity's scheduling event ID in its history
//	attempt            the delivery count of a message (1 for the first)
//	worker_id          the runtime's worker (session owner) ID
//	queue              "orchestrator" or "worker"
//	kind               the kind of a failure ("application", "poison", ...)
//	messages           a number of queue messages
//
// Failures and retries:
//
//	error              the error
//	retry_in           the delay before the next try
//
// Maintenance:
//
//	locks              execution locks removed by a cleanup
//	promoted           queued starts given a freed lock
//	idempotency_keys   idempotency keys dropped by a cleanup
//	migration          a store schema migration
//	path               a file path (the store) or a URL path (HTTP)
//
// HTTP requests:
//
//	method, pattern, status, panic
//	trigger            the webhook trigger a request matched
//	request_id         the request's ID (X-Request-Id)
package logkey

// Keys of the work being run.
const (
	Instance      = "instance_id"
	Execution     = "execution_id"
	Orchestration = "orchestration"
	Activity      = "activity"
	ActivityID    = "activity_id"
	Attempt       = "attempt"
	Worker        = "worker_id"
	Queue         = "queue"
	Kind          = "kind"
	Messages      = "messages"
)

// Keys of failures and retries.
const (
	Error   = "error"
	RetryIn = "retry_in"
)

// Keys of maintenance.
const (
	Locks           = "locks"
	Promoted        = "promoted"
	IdempotencyKeys = "idempotency_keys"
	Migration       = "migration"
	Path            = "path"
)

// Keys of retention and bulk actions.
const (
	Instances  = "instances"
	Executions = "executions"
	Skipped    = "skipped"
	Job        = "job"
)

// Keys of schedules.
const (
	Schedule = "schedule"
	// From and Until bound a span of time, such as fire times missed.
	From  = "from"
	Until = "until"
)

// Keys of HTTP requests (Path is shared with the store).
const (
	Method  = "method"
	Pattern = "pattern"
	Status  = "status"
	Panic   = "panic"
	Trigger = "trigger"
	// Request is the ID of an HTTP request, sent to its client in the
	// X-Request-Id header and in the body of 5xx answers.
	Request = "request_id"
)
