package sqlite

import (
	"fmt"
	"strings"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// All SQL of the store lives in this file and in migrations/. Parameters are
// numbered (?1, ?2...) so one value can be used several times. Lists of
// values are passed as one JSON array and expanded with json_each, so every
// statement has a fixed text and is prepared once per connection.
//
// Times are epoch milliseconds from the provider's clock, passed in; no
// statement reads SQLite's own clock.

// Migration bookkeeping.
const (
	sqlCreateMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)`
	sqlMigrationApplied = `SELECT count(*) FROM schema_migrations WHERE version = ?1`
	sqlInsertMigration  = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)`
	sqlMaxMigration     = `SELECT coalesce(max(version), 0) FROM schema_migrations`
	sqlJournalMode      = `PRAGMA journal_mode`
	sqlDataVersion      = `PRAGMA data_version`
)

// candidateLimit caps the rows a fetch's candidate query reads in one go.
// It is a constant, not a bound parameter: SQLite's planner reads a bound
// LIMIT's value, so a LIMIT bound to the number of free slots made it
// re-prepare the statement whenever that number changed. The fetch takes
// as many of the candidates as it needs and asks again if they were not
// enough, unless the query returned fewer than candidateRows: it then
// read every candidate there was, and asking again finds none.
const (
	candidateRows  = 16
	candidateLimit = "16" // candidateRows, for the SQL text
)

// workRoute is the activity name and queue of a worker row, read from its
// work item ?5 (NULL and ” when the item is not JSON).
const workRoute = `CASE WHEN json_valid(?5) THEN json_extract(?5, '$.name') END,
    CASE WHEN json_valid(?5) THEN coalesce(json_extract(?5, '$.queue'), '') ELSE '' END`

// unservedExpr reports that no route live at the time parameter now
// serves worker row q, while some route is live (with none, nothing is
// known of what is served: runtimes of earlier releases announce none).
func unservedExpr(now string) string {
	return `EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > ` + now + `)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > ` + now + `
    AND EXISTS (SELECT 1 FROM json_each(r.queues) WHERE value = q.queue)
    AND (q.activity_name IS NULL OR EXISTS (SELECT 1 FROM json_each(r.activities) WHERE value = q.activity_name)))`
}

var (
	unserved        = unservedExpr("?2")
	unservedAt1     = unservedExpr("?1")
	orchUnservedAt1 = orchUnservedExpr("?1")
	orchUnservedAt2 = orchUnservedExpr("?2")
)

// orchUnservedExpr reports that no route live at the time parameter now
// registers the orchestration of instance row i, in the version it is
// pinned to, while some route is live. A route without an orchestration
// list (NULL) registers every name; one without orchestration_routes (an
// earlier release) every version of its names (see migration 0015); an
// instance without a name is never unserved.
func orchUnservedExpr(now string) string {
	return `(i.orchestration_name <> '' AND EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > ` + now + `)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > ` + now + `
    AND (r.orchestrations IS NULL OR EXISTS (SELECT 1 FROM json_each(coalesce(r.orchestration_routes, r.orchestrations))
          WHERE value IN (i.orchestration_name, ` + orchRoute + `)))))`
}

// orchRoute is the route of instance row i: its name and version
// (sqlenc.OrchestrationRoutes).
const orchRoute = `i.orchestration_name || char(31) || i.orchestration_version`

// holdsXLocks is whether instance ?1 holds an execution lock or has a
// start queued for one: when not, a turn that enqueues nothing has no
// execution lock to settle (wtx.noXLocks).
const holdsXLocks = `(EXISTS (SELECT 1 FROM execution_locks WHERE instance_id = ?1)
    OR EXISTS (SELECT 1 FROM lock_queue WHERE instance_id = ?1))`

// instanceTurnSet is what a turn sets in its instance's row (sUpsertInstance).
const instanceTurnSet = `SET input = CASE WHEN ?5 >= current_execution_id THEN coalesce(?6, input) ELSE input END,
    output = CASE WHEN ?5 >= current_execution_id THEN coalesce(?7, output) ELSE output END,
    error = CASE WHEN ?5 >= current_execution_id THEN coalesce(?8, error) ELSE error END,
    custom_status = CASE WHEN ?10 THEN ?9 ELSE custom_status END,
    custom_status_version = custom_status_version + ?10,
    current_execution_id = max(current_execution_id, ?5),
    last_error = NULL,
    last_error_at = NULL,
    updated_at = ?13`

// stmtID names a statement of the writer connection, prepared once on it
// (the reader pool runs the shared statements, readerSQL).
type stmtID int

// Statements of the writer connection.
const (
	sGroupSavepoint stmtID = iota
	sGroupRelease
	sGroupRollbackTo

	// The transaction itself, on a file store's pinned writer connection
	// (see writer.go).
	sBegin
	sCommit
	sRollback

	// Fetching turns.
	sOrchCandidates
	sLockInstances
	sTagMessages
	sDeleteMessage
	sUntagMessage
	sReleaseLock
	sInstanceMetas
	sHistoriesOf
	sPendingStarts
	sInsertDeadLetter
	sRedateLocks
	sRedateTagged

	// Acking turns.
	sCheckLock
	sUpsertExecution
	sUpsertInstance
	sUpdateInstance
	sSetInstanceStatus
	sSetInstanceName
	sSetInstanceVersion
	sInsertEvent
	sInsertEvents2
	sInsertEvents4
	sInsertEvents16
	sInsertWork
	sInsertWorks4
	sInsertWorks16
	sInsertWorksLeased4
	sInsertWorksLeased16
	sNextWorkID
	sInsertWorkLeased
	sWorkExists
	sCancelActivity
	sCreateInstance
	sInstanceStatus
	sValueSet
	sValueClear
	sValuesBump
	sInsertMessage
	sDeleteTagged
	sDeleteLock

	// Abandoning and renewing turns.
	sAbandonLock
	sUntagMessages
	sSetLastError
	sRenewLock
	sRenewTagged

	// Worker queue.
	sWorkCandidatesNoSession
	sWorkCandidatesSession
	sClaimSession
	sLockWork
	sDeleteWork
	sAckWork
	sAckWorks
	sInsertMessages4
	sInsertMessages16
	sTouchSession
	sAbandonWork
	sRenewWork

	// Sessions.
	sRenewSessions
	sCleanupSessions

	// Purge.
	sPurgeTree
	sPurgeRows
	sPurgeCountExecutions
	sPurgeCountEvents
	sPurgeDeleteHistory
	sPurgeDeleteExecutions
	sPurgeDeleteOrch
	sPurgeDeleteWork
	sPurgeDeleteLocks
	sPurgeDeleteInstances
	sPurgeMarkIdemKeys
	sPurgeDeleteLockQueue
	sPurgeDeleteExecLocks
	sPurgeDeleteDedup
	sDedupInsert

	// Execution locks and idempotency keys.
	sIdemGet
	sIdemDelete
	sIdemInsert
	sIdemCleanup
	sXLockGet
	sXLockDelete
	sXLockInsert
	sXLockExtend
	sXLockReleaseInstance
	sXLockQueueInsert
	sXLockQueueHead
	sXLockQueueDelete
	sXLockQueueDeleteInstance
	sXLockQueueReleaseWaiting
	sXLockFreeable

	// Notifications.
	sDataVersion
	sInstanceHasMessages
	sInstanceHasWork
	sInstancesWithWork
	sInstanceQuiet

	// Routing and heartbeats.
	sHeartbeatWork
	sAnnounceRoutes
	sWithdrawRoutes
	sUnservedCandidates
	sLockUnserved
	sUnservedTurnCandidates

	numWriterStmts
)

// stmtKind classifies a writer statement for wtx.wrote: a query that
// only reads, a write that returns a row for each row it changes
// (RETURNING), or another write.
type stmtKind uint8

const (
	stmtWrites stmtKind = iota
	stmtReads
	stmtReturns
)

// writerStmtKinds is indexed by the writer stmtIDs.
var writerStmtKinds = func() (k [numWriterStmts]stmtKind) {
	for id, q := range writerSQL {
		q = strings.ToUpper(strings.TrimSpace(q))
		switch {
		case strings.HasPrefix(q, "SELECT "), strings.HasPrefix(q, "SELECT\n"):
			k[id] = stmtReads
		case strings.Contains(q, "RETURNING "):
			k[id] = stmtReturns
		}
	}
	return k
}()

// writerSQL is indexed by the writer stmtIDs.
var writerSQL = [numWriterStmts]string{
	// One request of a group commit (see writer.go).
	sGroupSavepoint:  `SAVEPOINT request`,
	sGroupRelease:    `RELEASE request`,
	sGroupRollbackTo: `ROLLBACK TO request`,
	sBegin:           `BEGIN IMMEDIATE`,
	sCommit:          `COMMIT`,
	sRollback:        `ROLLBACK`,

	// Instances that can be taken now, in the order they became ready (see
	// migration 0002: orchestrator_ready excludes locked instances until
	// their lock expires). An index range scan that stops at the limit,
	// whatever the backlog. ?1 now, ?2 JSON array of instance IDs to skip,
	// ?3 JSON array of the orchestration routes served (NULL: any; see
	// sqlenc.OrchestrationRoutes): an instance of another name or version
	// is skipped in the scan, on the index alone (migration 0016 copies
	// each instance's name and version into it); one without a row or a
	// name is served by every fetch.
	sOrchCandidates: `SELECT r.instance_id, r.first_id
FROM orchestrator_ready AS r INDEXED BY orchestrator_ready_order
WHERE r.ready_at <= ?1
  AND r.instance_id NOT IN (SELECT value FROM json_each(?2))
  AND (?3 IS NULL OR r.orchestration_name = '' OR r.orchestration_name IN (SELECT value FROM json_each(?3))
       OR r.orchestration_name || char(31) || r.orchestration_version IN (SELECT value FROM json_each(?3)))
ORDER BY r.ready_at, r.first_id
LIMIT ` + candidateLimit,

	// Take the locks of several instances: insert, or steal an expired lock.
	// Returns the instances actually locked. The token of each is ?1 ||
	// instance_id. ?1 token prefix, ?2 JSON array of instance IDs, ?3
	// locked_until, ?4 now.
	sLockInstances: `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at)
SELECT value, ?1 || value, ?3, ?4 FROM json_each(?2) WHERE true
ON CONFLICT (instance_id) DO UPDATE
SET lock_token = excluded.lock_token, locked_until = excluded.locked_until, locked_at = excluded.locked_at
WHERE instance_locks.locked_until <= ?4
RETURNING instance_id`,

	// Tag every visible message of the locked instances with the instance's
	// token and count the delivery. ?1 token prefix, ?2 JSON array of
	// instance IDs, ?3 locked_until, ?4 the latest visible time taken: now,
	// or later for a fetch that takes messages before they are due
	// (provider.FetchOptions.Ahead).
	// ?5 is 1, or 0 to count no delivery (FetchUnservedOrchestrationItems).
	sTagMessages: `UPDATE orchestrator_queue
SET lock_token = ?1 || instance_id, locked_until = ?3, attempt_count = attempt_count + ?5
WHERE instance_id IN (SELECT value FROM json_each(?2)) AND visible_at <= ?4
RETURNING id, instance_id, work_item, attempt_count, visible_at`,

	sDeleteMessage: `DELETE FROM orchestrator_queue WHERE id = ?1`,
	sUntagMessage:  `UPDATE orchestrator_queue SET lock_token = NULL, locked_until = NULL WHERE id = ?1`,

	sReleaseLock: `DELETE FROM instance_locks WHERE instance_id = ?1 AND lock_token = ?2`,

	// ?1 JSON array of instance IDs.
	sInstanceMetas: `SELECT instance_id, orchestration_name, orchestration_version, status,
       current_execution_id, coalesce(parent_instance_id, ''), parent_execution_id
FROM instances
WHERE instance_id IN (SELECT value FROM json_each(?1))`,

	// Current-execution histories of several instances, each from the
	// event ID the caller already holds on (that event included, so the
	// caller can check it exists; 0 for all; the caller orders each by
	// event_id). ?1 JSON array of [instance ID, from] pairs.
	sHistoriesOf: `SELECT h.instance_id, h.event_id, h.event_data
FROM json_each(?1)
JOIN instances AS i ON i.instance_id = json_each.value ->> 0
JOIN history AS h ON h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
  AND h.event_id >= json_each.value ->> 1`,

	// When the starts of instances not yet started become visible: a
	// delayed start message, or a start queued behind an execution lock
	// (at the latest when that lock expires). ?1 JSON array of instance
	// IDs, ?2 now.
	sPendingStarts: `SELECT json_each.value,
       coalesce((SELECT min(q.visible_at) FROM orchestrator_queue AS q
                 WHERE q.instance_id = json_each.value AND q.visible_at > ?2 AND q.lock_token IS NULL), 0),
       coalesce((SELECT min(l.expires_at) FROM lock_queue AS lq JOIN execution_locks AS l ON l.lock_key = lq.lock_key
                 WHERE lq.instance_id = json_each.value), 0)
FROM json_each(?1)`,

	// ?1 queue, ?2 instance, ?3 payload, ?4 error, ?5 now.
	sInsertDeadLetter: `INSERT INTO dead_letters (queue, instance_id, payload, error, dead_at) VALUES (?1, ?2, ?3, ?4, ?5)`,

	// Move the locks of a fetch forward when the clock passed them while
	// the fetch ran. ?1 JSON array of instance IDs, ?2 token prefix, ?3
	// locked_until.
	sRedateLocks: `UPDATE instance_locks SET locked_until = ?3
WHERE instance_id IN (SELECT value FROM json_each(?1)) AND lock_token = ?2 || instance_id`,
	sRedateTagged: `UPDATE orchestrator_queue SET locked_until = ?3
WHERE instance_id IN (SELECT value FROM json_each(?1)) AND lock_token = ?2 || instance_id`,

	// Whether the lock is held, and whether the instance row exists.
	// ?1 instance, ?2 token, ?3 now.
	sCheckLock: `SELECT count(*), EXISTS (SELECT 1 FROM instances WHERE instance_id = ?1), ` + holdsXLocks + `
FROM instance_locks WHERE instance_id = ?1 AND lock_token = ?2 AND locked_until > ?3`,

	// Insert the execution or update it from the turn's metadata; returns its
	// status after the turn. ?1 instance, ?2 execution, ?3 status (NULL:
	// unchanged, Running when new), ?4 input, ?5 output, ?6 error, ?7 now,
	// ?8 completed_at (NULL unless terminal).
	sUpsertExecution: `INSERT INTO executions (instance_id, execution_id, status, input, output, error, started_at, completed_at)
VALUES (?1, ?2, coalesce(?3, 'Running'), ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (instance_id, execution_id) DO UPDATE
SET status = coalesce(?3, status),
    input = coalesce(?4, input),
    output = coalesce(?5, output),
    error = coalesce(?6, error),
    completed_at = coalesce(?8, completed_at)
RETURNING status`,

	// Create the instance from the turn's metadata or update it. Fields of
	// an older execution than the current one leave the instance alone. A
	// committed turn clears the last error an abandon recorded.
	// Indexed columns (status, name) are set by sSetInstanceStatus and
	// sSetInstanceName only when they change: assigning an indexed column,
	// even to its old value, rewrites its index entry.
	// ?1 instance, ?2 name, ?3 version, ?4 instance status, ?5 execution,
	// ?6 input, ?7 output, ?8 error, ?9 custom status, ?10 1 when the custom
	// status is set, ?11 parent instance (NULL: none), ?12 parent execution,
	// ?13 now.
	sUpsertInstance: `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status,
    current_execution_id, input, output, error, custom_status, custom_status_version,
    parent_instance_id, parent_execution_id, created_at, updated_at)
VALUES (?1, coalesce(?2, ''), coalesce(?3, ''), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)
ON CONFLICT (instance_id) DO UPDATE
` + instanceTurnSet,
	// sUpsertInstance for a turn of an instance known to exist (its row
	// is updated, without the insert that the row turns into an update).
	// Same parameters.
	sUpdateInstance: `UPDATE instances
` + instanceTurnSet + `
WHERE instance_id = ?1`,

	// Set the status derived from the current execution, if it changed.
	// ?1 instance, ?2 status, ?3 execution.
	sSetInstanceStatus: `UPDATE instances SET status = ?2
WHERE instance_id = ?1 AND status <> ?2 AND current_execution_id <= ?3`,

	// Set name and version when given (NULL: unchanged), if they changed.
	// ?1 instance, ?2 name, ?3 version.
	sSetInstanceName: `UPDATE instances
SET orchestration_name = coalesce(?2, orchestration_name),
    orchestration_version = coalesce(?3, orchestration_version)
WHERE instance_id = ?1
  AND (orchestration_name <> coalesce(?2, orchestration_name)
       OR orchestration_version <> coalesce(?3, orchestration_version))`,
	// Set the version alone, when it changed and the name did not: the
	// first turn of an instance started without a version resolves it.
	// It leaves the name unassigned, so the name's index
	// (instances_orchestration) is not rewritten: one page less for the
	// commit to append to the WAL. Same parameters as sSetInstanceName.
	sSetInstanceVersion: `UPDATE instances SET orchestration_version = ?3
WHERE instance_id = ?1 AND orchestration_version <> ?3
  AND orchestration_name = coalesce(?2, orchestration_name)`,

	// ?1 instance, ?2 execution, ?3 event id, ?4 type, ?5 data, ?6 now.
	sInsertEvent: `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
	// sInsertEvent for 4 and 16 events at once (insertEvents): ?1
	// instance, ?2 execution, ?3 now, then each event's id, type and data.
	sInsertEvents2:  insertEventsSQL(2),
	sInsertEvents4:  insertEventsSQL(4),
	sInsertEvents16: insertEventsSQL(16),

	// ?1 instance, ?2 execution, ?3 activity, ?4 session (NULL: none),
	// ?5 work item, ?6 visible_at, ?7 now, ?8 and ?9 the row's activity
	// name (NULL: none) and queue, as its work item holds them (migration
	// 0010; see workRouteArgs).
	sInsertWork: `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, created_at,
    activity_name, queue)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`,

	// sInsertWork, but leased at once, as a fetch would lock it (sLockWork)
	// until ?6, with ?8 the token's prefix: the row takes the next ID
	// itself (the single writer inserts nothing in between), so that its
	// token, which ends with its ID, is known as it is inserted; ?9 and
	// ?10 are its activity name and queue, as in sInsertWork. Returns the
	// row's ID.
	sInsertWorkLeased: `INSERT INTO worker_queue (id, instance_id, execution_id, activity_id, session_id, work_item, visible_at, created_at,
    activity_name, queue, lock_token, locked_until, attempt_count)
SELECT n, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?9, ?10, ?8 || n, ?6, 1
FROM (SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'worker_queue'), 0),
                 coalesce((SELECT max(id) FROM worker_queue), 0)) + 1 AS n)
RETURNING id`,
	// sInsertWork and sInsertWorkLeased for 4 and 16 rows at once
	// (insertWorkRun, insertLeasedRun); see insertWorksSQL.
	sInsertWorks4:        insertWorksSQL(4, false),
	sInsertWorks16:       insertWorksSQL(16, false),
	sInsertWorksLeased4:  insertWorksSQL(4, true),
	sInsertWorksLeased16: insertWorksSQL(16, true),
	// The ID the next worker row takes (as sInsertWorkLeased computes it).
	sNextWorkID: `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'worker_queue'), 0),
           coalesce((SELECT max(id) FROM worker_queue), 0)) + 1`,
	// Which of the rows ?1 (JSON array of IDs) still exist.
	sWorkExists: `SELECT id FROM worker_queue WHERE id IN (SELECT value FROM json_each(?1))`,

	sCancelActivity: `DELETE FROM worker_queue WHERE instance_id = ?1 AND execution_id = ?2 AND activity_id = ?3`,

	// Create a Pending instance unless the ID is taken (0 rows then).
	// ?1 instance, ?2 name, ?3 version, ?4 input, ?5 parent (NULL: none),
	// ?6 parent execution, ?7 now.
	sCreateInstance: `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status, input,
    parent_instance_id, parent_execution_id, created_at, updated_at)
VALUES (?1, ?2, ?3, 'Pending', ?4, ?5, ?6, ?7, ?7)
ON CONFLICT (instance_id) DO NOTHING`,
	// ?1 instance.
	sInstanceStatus: `SELECT status FROM instances WHERE instance_id = ?1`,
	// ?1 instance, ?2 key, ?3 value, ?4 now.
	sValueSet: `INSERT INTO instance_values (instance_id, value_key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (instance_id, value_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
	// ?1 instance, ?2 key.
	sValueClear: `DELETE FROM instance_values WHERE instance_id = ?1 AND value_key = ?2`,
	// ?1 instance.
	sValuesBump: `UPDATE instances SET values_version = values_version + 1 WHERE instance_id = ?1`,

	// ?1 instance, ?2 work item, ?3 visible_at, ?4 now.
	sInsertMessage: `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES (?1, ?2, ?3, ?4)`,

	// ?1 instance, ?2 token. The messages of a held lock: the delete
	// trigger skips them, and sDeleteLock, which follows, recomputes the
	// instance's orchestrator_ready row once (migration 0017).
	sDeleteTagged: `DELETE FROM orchestrator_queue WHERE instance_id = ?1 AND lock_token = ?2`,

	// ?1 instance, ?2 token.
	sDeleteLock: `DELETE FROM instance_locks WHERE instance_id = ?1 AND lock_token = ?2`,

	// ?1 instance, ?2 token, ?3 now.
	sAbandonLock: `DELETE FROM instance_locks WHERE instance_id = ?1 AND lock_token = ?2 AND locked_until > ?3`,

	// ?1 instance, ?2 token, ?3 visible_at, ?4 1 to undo the attempt, ?5
	// true to make them visible no later than the instance's earliest
	// untagged message (AbandonOptions.UntilStart).
	sUntagMessages: `UPDATE orchestrator_queue
SET lock_token = NULL, locked_until = NULL,
    visible_at = CASE WHEN ?5 THEN min(?3, coalesce((SELECT min(o.visible_at) FROM orchestrator_queue AS o
                                                   WHERE o.instance_id = ?1 AND o.lock_token IS NULL), ?3))
                 ELSE ?3 END,
    attempt_count = max(attempt_count - ?4, 0)
WHERE instance_id = ?1 AND lock_token = ?2`,

	// Record why the instance is not progressing (no row: nothing).
	// ?1 instance, ?2 error details JSON, ?3 now.
	// last_error_at keeps the start of a run of such abandons.
	sSetLastError: `UPDATE instances SET last_error = ?2, last_error_at = coalesce(last_error_at, ?3), updated_at = ?3
WHERE instance_id = ?1`,

	// ?1 instance, ?2 token, ?3 now, ?4 new locked_until.
	sRenewLock: `UPDATE instance_locks SET locked_until = ?4 WHERE instance_id = ?1 AND lock_token = ?2 AND locked_until > ?3`,

	// ?1 instance, ?2 token, ?3 new locked_until.
	sRenewTagged: `UPDATE orchestrator_queue SET locked_until = ?3 WHERE instance_id = ?1 AND lock_token = ?2`,

	// Rows without a session, oldest first. ?1 now, ?2 after this id.
	sWorkCandidatesNoSession: `SELECT id, NULL FROM worker_queue
WHERE session_id IS NULL AND id > ?2 AND visible_at <= ?1
  AND (?3 IS NULL OR activity_name IS NULL OR activity_name IN (SELECT value FROM json_each(?3)))
  AND queue IN (SELECT value FROM json_each(?4))
ORDER BY id
LIMIT ` + candidateLimit,

	// Rows without a session, of sessions the owner holds, or of claimable
	// sessions, oldest first. ?1 now, ?2 after this id, ?3 owner, ?4 JSON
	// array of activity names (NULL: any), ?5 JSON array of queues.
	sWorkCandidatesSession: `SELECT q.id, q.session_id FROM worker_queue AS q
WHERE q.id > ?2 AND q.visible_at <= ?1
  AND (?4 IS NULL OR q.activity_name IS NULL OR q.activity_name IN (SELECT value FROM json_each(?4)))
  AND q.queue IN (SELECT value FROM json_each(?5))
  AND (q.session_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM sessions AS s
        WHERE s.session_id = q.session_id AND s.locked_until > ?1 AND s.owner_id <> ?3))
ORDER BY q.id
LIMIT ` + candidateLimit,

	// Claim or refresh a session lease; 0 rows if another owner holds it.
	// ?1 session, ?2 owner, ?3 locked_until, ?4 now.
	sClaimSession: `INSERT INTO sessions (session_id, owner_id, locked_until, last_activity_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (session_id) DO UPDATE
SET owner_id = excluded.owner_id, locked_until = excluded.locked_until, last_activity_at = excluded.last_activity_at
WHERE sessions.locked_until <= ?4 OR sessions.owner_id = excluded.owner_id`,

	// Lock worker rows, each with token ?1 || id. ?1 token prefix, ?2 JSON
	// array of ids, ?3 locked_until.
	sLockWork: `UPDATE worker_queue
SET lock_token = ?1 || id, locked_until = ?3, visible_at = ?3, attempt_count = attempt_count + 1
WHERE id IN (SELECT value FROM json_each(?2))
RETURNING id, lock_token, instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item, attempt_count`,

	sDeleteWork: `DELETE FROM worker_queue WHERE id = ?1`,

	// ?1 id, ?2 token, ?3 now.
	sAckWork: `DELETE FROM worker_queue WHERE id = ?1 AND lock_token = ?2 AND locked_until > ?3 RETURNING session_id`,
	// The acks of a group at once (see runAcks): ?1 JSON array of the row
	// IDs, ?2 of their tokens, ?3 now. A row's token ends with its ID
	// (sLockWork), so a row whose token is in ?2 is the row of that
	// token's ack; the caller matches each ack's token with the row's.
	sAckWorks: `DELETE FROM worker_queue
WHERE id IN (SELECT value FROM json_each(?1)) AND lock_token IN (SELECT value FROM json_each(?2)) AND locked_until > ?3
RETURNING id, lock_token, session_id`,
	// Enqueue 4 or 16 messages at once, in order: ?1 now, then each
	// message's instance, work item and visible_at.
	sInsertMessages4:  insertMessagesSQL(4),
	sInsertMessages16: insertMessagesSQL(16),

	// ?1 session, ?2 now.
	sTouchSession: `UPDATE sessions SET last_activity_at = ?2 WHERE session_id = ?1 AND locked_until > ?2`,

	// ?1 id, ?2 token, ?3 now, ?4 visible_at, ?5 1 to undo the attempt.
	sAbandonWork: `UPDATE worker_queue
SET lock_token = NULL, locked_until = NULL, visible_at = ?4, attempt_count = max(attempt_count - ?5, 0),
    last_error = ?6,
    last_error_at = CASE WHEN ?6 IS NULL THEN NULL ELSE coalesce(last_error_at, ?3) END
WHERE id = ?1 AND lock_token = ?2 AND locked_until > ?3`,

	// ?1 id, ?2 token, ?3 now, ?4 new locked_until.
	sRenewWork: `UPDATE worker_queue SET locked_until = ?4, visible_at = ?4
WHERE id = ?1 AND lock_token = ?2 AND locked_until > ?3
RETURNING session_id`,

	// ?1 JSON array of owners, ?2 now, ?3 locked_until, ?4 idle cutoff.
	sRenewSessions: `UPDATE sessions SET locked_until = ?3
WHERE owner_id IN (SELECT value FROM json_each(?1)) AND locked_until > ?2 AND last_activity_at > ?4`,

	// ?1 now.
	sCleanupSessions: `DELETE FROM sessions
WHERE locked_until <= ?1
  AND NOT EXISTS (SELECT 1 FROM worker_queue AS q WHERE q.session_id = sessions.session_id)`,

	// The named instances and all their descendants. ?1 JSON array of IDs.
	sPurgeTree: `WITH RECURSIVE tree (id) AS (
    SELECT value FROM json_each(?1)
    UNION
    SELECT i.instance_id FROM instances AS i JOIN tree ON i.parent_instance_id = tree.id
)
SELECT id FROM tree`,

	// Rows of the instances to purge. ?1 JSON array of IDs.
	sPurgeRows: `SELECT i.instance_id, i.status, coalesce(i.parent_instance_id, ''),
       EXISTS (SELECT 1 FROM instances AS p WHERE p.instance_id = i.parent_instance_id)
FROM instances AS i
WHERE i.instance_id IN (SELECT value FROM json_each(?1))`,

	sPurgeCountExecutions:  `SELECT count(*) FROM executions WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeCountEvents:      `SELECT count(*) FROM history WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteHistory:    `DELETE FROM history WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteExecutions: `DELETE FROM executions WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteOrch:       `DELETE FROM orchestrator_queue WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteWork:       `DELETE FROM worker_queue WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteLocks:      `DELETE FROM instance_locks WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteInstances:  `DELETE FROM instances WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	// Keys outlive their instance: the purge stamps them, once (?2 now).
	sPurgeMarkIdemKeys: `UPDATE idempotency_keys SET purged_at = ?2
WHERE instance_id IN (SELECT value FROM json_each(?1)) AND purged_at IS NULL`,
	sPurgeDeleteLockQueue: `DELETE FROM lock_queue WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sPurgeDeleteDedup:     `DELETE FROM message_dedup WHERE instance_id IN (SELECT value FROM json_each(?1))`,
	sDedupInsert: `INSERT INTO message_dedup (instance_id, dedup_key, created_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (instance_id, dedup_key) DO NOTHING`,
	// Returns the keys, to hand each to its queue once the purge is done.
	sPurgeDeleteExecLocks: `DELETE FROM execution_locks WHERE instance_id IN (SELECT value FROM json_each(?1)) RETURNING lock_key`,

	// ?1 key.
	sIdemGet:    `SELECT instance_id, expires_at, purged_at FROM idempotency_keys WHERE idem_key = ?1`,
	sIdemDelete: `DELETE FROM idempotency_keys WHERE idem_key = ?1`,
	// ?1 key, ?2 instance, ?3 now, ?4 expires_at.
	sIdemInsert: `INSERT INTO idempotency_keys (idem_key, instance_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)`,
	// ?1 now.
	sIdemCleanup: `DELETE FROM idempotency_keys WHERE expires_at <= ?1`,

	// The lock on a key with its holder's status ('' when gone). ?1 key.
	sXLockGet: `SELECT l.instance_id, l.locked_at, l.expires_at, coalesce(i.status, '')
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id
WHERE l.lock_key = ?1`,
	sXLockDelete: `DELETE FROM execution_locks WHERE lock_key = ?1`,
	// ?1 key, ?2 instance, ?3 now, ?4 ttl_ms.
	sXLockInsert: `INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms) VALUES (?1, ?2, ?3, ?3 + ?4, ?4)`,
	// A committed turn of the holder extends its lock. ?1 instance, ?2 now.
	sXLockExtend: `UPDATE execution_locks SET expires_at = ?2 + ttl_ms WHERE instance_id = ?1`,
	// The holder ended: its locks go (to their queues). ?1 instance.
	sXLockReleaseInstance: `DELETE FROM execution_locks WHERE instance_id = ?1 RETURNING lock_key`,
	// ?1 key, ?2 instance, ?3 work item, ?4 visible_at, ?5 ttl_ms, ?6 now.
	sXLockQueueInsert: `INSERT INTO lock_queue (lock_key, instance_id, work_item, visible_at, ttl_ms, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
	// The oldest start waiting for a key. ?1 key.
	sXLockQueueHead: `SELECT id, instance_id, work_item, visible_at, ttl_ms FROM lock_queue
WHERE lock_key = ?1 ORDER BY id LIMIT 1`,
	sXLockQueueDelete: `DELETE FROM lock_queue WHERE id = ?1`,
	// A queued start whose instance ended (canceled while waiting). ?1 instance.
	sXLockQueueDeleteInstance: `DELETE FROM lock_queue WHERE instance_id = ?1`,
	// Messages that waited for a queued start (events raised before it)
	// become visible with it. ?1 instance, ?2 the start's visibility.
	sXLockQueueReleaseWaiting: `UPDATE orchestrator_queue SET visible_at = ?2
WHERE instance_id = ?1 AND visible_at > ?2 AND lock_token IS NULL`,
	// Locks that are expired or whose holder ended or is gone. ?1 now.
	// Changes committed by other connections since this one last looked.
	sDataVersion: sqlDataVersion,
	// Whether an instance has activities in the worker queue. ?1 instance.
	// Whether a turn may not be taken with an activity's ack
	// (WorkAck.TakeTurn): another activity of the instance is queued, or
	// its orchestration is not one of ?2 (JSON array; NULL: any).
	// ?1 instance.
	sInstanceHasWork: `SELECT EXISTS (SELECT 1 FROM worker_queue WHERE instance_id = ?1)
    OR (?2 IS NOT NULL AND EXISTS (SELECT 1 FROM instances AS i WHERE i.instance_id = ?1 AND i.orchestration_name <> ''
          AND i.orchestration_name NOT IN (SELECT value FROM json_each(?2))
          AND ` + orchRoute + ` NOT IN (SELECT value FROM json_each(?2))))`,
	// Whether nothing happened to an instance since a runtime's copy of its
	// execution (WorkAck.Then): unlocked, ?2 its current execution, ?3 the
	// last event of that execution, no visible message and no worker row.
	// ?1 instance, ?4 now.
	// Renew a worker lock and record a heartbeat (NULL details keep the
	// recorded ones). ?1 id, ?2 token, ?3 now, ?4 new locked_until, ?5
	// details or NULL.
	// Which of the instances ?1 (JSON array of IDs) may not have their
	// turn taken with an activity's ack, as sInstanceHasWork asks of one:
	// another activity is queued, or the orchestration is not one of ?2
	// (JSON array; NULL: any).
	sInstancesWithWork: `SELECT value FROM json_each(?1) AS ids
WHERE EXISTS (SELECT 1 FROM worker_queue WHERE instance_id = ids.value)
   OR (?2 IS NOT NULL AND EXISTS (SELECT 1 FROM instances AS i WHERE i.instance_id = ids.value AND i.orchestration_name <> ''
          AND i.orchestration_name NOT IN (SELECT value FROM json_each(?2))
          AND ` + orchRoute + ` NOT IN (SELECT value FROM json_each(?2))))`,
	sHeartbeatWork: `UPDATE worker_queue
SET locked_until = ?4, visible_at = ?4, heartbeat_at = ?3, heartbeat_details = coalesce(?5, heartbeat_details)
WHERE id = ?1 AND lock_token = ?2 AND locked_until > ?3
RETURNING session_id`,

	// ?1 worker, ?2 JSON array of activities, ?3 JSON array of queues, ?4
	// seen_until, ?5 and ?6 JSON arrays of orchestration names and routes
	// (NULL: any).
	sAnnounceRoutes: `INSERT INTO worker_routes (worker_id, activities, queues, seen_until, orchestrations, orchestration_routes)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (worker_id) DO UPDATE SET activities = excluded.activities, queues = excluded.queues, seen_until = excluded.seen_until,
    orchestrations = excluded.orchestrations, orchestration_routes = excluded.orchestration_routes`,

	// Instances ready since ?2 or earlier whose orchestration no route
	// live at ?1 registers, in the order they became ready: the ready
	// range of the index, each instance row looked up (CROSS JOIN keeps
	// that order, so no sort). ?3 limit.
	sUnservedTurnCandidates: `SELECT o.instance_id
FROM orchestrator_ready AS o INDEXED BY orchestrator_ready_order
CROSS JOIN instances AS i ON i.instance_id = o.instance_id
WHERE o.ready_at <= ?2 AND ` + orchUnservedAt1 + `
ORDER BY o.ready_at, o.first_id
LIMIT ?3`,

	// ?1 worker.
	sWithdrawRoutes: `DELETE FROM worker_routes WHERE worker_id = ?1`,

	// Visible, unlocked rows enqueued before ?2 that no live route serves,
	// oldest first. ?1 now, ?2 enqueued before, ?3 limit.
	sUnservedCandidates: `SELECT id FROM worker_queue AS q
WHERE q.visible_at <= ?1 AND q.created_at <= ?2 AND (q.lock_token IS NULL OR q.locked_until <= ?1)
  AND ` + unservedAt1 + `
ORDER BY q.id
LIMIT ?3`,

	// sLockWork without counting a delivery. ?1 token prefix, ?2 JSON
	// array of ids, ?3 locked_until.
	sLockUnserved: `UPDATE worker_queue
SET lock_token = ?1 || id, locked_until = ?3, visible_at = ?3
WHERE id IN (SELECT value FROM json_each(?2))
RETURNING id, lock_token, instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item, attempt_count`,

	// Whether nothing happened to an instance since the execution copy a
	// fused step (WorkAck.Then) ran on (see AckWorkThen), and whether the
	// instance and that execution are Running (the step's turn then need
	// not write either status). ?1 instance, ?2 execution, ?3 the copy's
	// last event, ?4 now.
	sInstanceQuiet: `SELECT
    coalesce((SELECT current_execution_id = ?2 FROM instances WHERE instance_id = ?1), 0)
    AND NOT EXISTS (SELECT 1 FROM instance_locks WHERE instance_id = ?1 AND locked_until > ?4)
    AND coalesce((SELECT max(event_id) FROM history WHERE instance_id = ?1 AND execution_id = ?2), 0) = ?3
    AND NOT EXISTS (SELECT 1 FROM orchestrator_queue WHERE instance_id = ?1 AND visible_at <= ?4)
    AND NOT EXISTS (SELECT 1 FROM worker_queue WHERE instance_id = ?1),
  coalesce((SELECT i.status = 'Running' AND e.status = 'Running'
            FROM instances AS i JOIN executions AS e ON e.instance_id = i.instance_id AND e.execution_id = ?2
            WHERE i.instance_id = ?1), 0),
  ` + holdsXLocks,
	// Whether an instance still has queued messages. ?1 instance.
	sInstanceHasMessages: `SELECT count(*) > 0 FROM orchestrator_ready WHERE instance_id = ?1`,

	sXLockFreeable: `SELECT l.lock_key
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id
WHERE l.expires_at <= ?1 OR i.instance_id IS NULL OR i.status IN ('Completed', 'Failed', 'Canceled')
ORDER BY l.lock_key`,
}

// valuesSQL is head followed by n rows of values, row(k) each, where k is
// the row's first parameter: first for the first row, per more for each
// next one.
func valuesSQL(head string, n, first, per int, row func(k int) string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row(first + per*i))
	}
	return b.String()
}

// insertEventsSQL is an INSERT of n history events of one execution: ?1
// instance, ?2 execution, ?3 now, then the id, type and data of each.
func insertEventsSQL(n int) string {
	return valuesSQL("INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at) VALUES ", n, 4, 3,
		func(k int) string { return fmt.Sprintf("(?1, ?2, ?%d, ?%d, ?%d, ?3)", k, k+1, k+2) })
}

// insertWorksSQL is an INSERT of n worker rows. Not leased: ?1 now, then
// each row's instance, execution, activity, session, work item,
// visible_at, activity name and queue (as sInsertWork). Leased: ?1
// locked_until (and visible_at), ?2 now, ?3 the token prefix, then each
// row's ID (which its token ends with), instance, execution, activity,
// session, work item, activity name and queue (as sInsertWorkLeased).
func insertWorksSQL(n int, leased bool) string {
	if leased {
		return valuesSQL(`INSERT INTO worker_queue (id, instance_id, execution_id, activity_id, session_id, work_item, activity_name, queue,
    visible_at, created_at, lock_token, locked_until, attempt_count) VALUES `, n, 4, 8, func(k int) string {
			return fmt.Sprintf("(?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?1, ?2, ?3 || ?%d, ?1, 1)", k, k+1, k+2, k+3, k+4, k+5, k+6, k+7, k)
		})
	}
	return valuesSQL(`INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, activity_name, queue,
    created_at) VALUES `, n, 2, 8, func(k int) string {
		return fmt.Sprintf("(?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?1)", k, k+1, k+2, k+3, k+4, k+5, k+6, k+7)
	})
}

// insertMessagesSQL is an INSERT of n orchestrator messages: ?1 now, then
// the instance, work item and visible_at of each.
func insertMessagesSQL(n int) string {
	return valuesSQL("INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ", n, 2, 3,
		func(k int) string { return fmt.Sprintf("(?%d, ?%d, ?%d, ?1)", k, k+1, k+2) })
}

// instanceColumns are the columns scanned by scanInstanceInfo.
const instanceColumns = `instance_id, orchestration_name, orchestration_version, status, current_execution_id,
       input, output, error, custom_status, custom_status_version,
       coalesce(parent_instance_id, ''), parent_execution_id, created_at, updated_at, last_error, values_version`

// executionColumns are the columns scanned by scanExecutionInfo; e is the executions table.
const executionColumns = `e.execution_id, e.status, e.input, e.output, e.error, e.started_at, e.completed_at,
       (SELECT count(*) FROM history AS h WHERE h.instance_id = e.instance_id AND h.execution_id = e.execution_id)`

// readerSQL is the SQL text of the shared code's statements
// (sqlstore.Query), run on the reader pool.
var readerSQL = [sqlstore.NumQueries]string{
	sqlstore.QInstanceCurrent: `SELECT current_execution_id FROM instances WHERE instance_id = ?1`,
	sqlstore.QExecutionExists: `SELECT count(*) FROM executions WHERE instance_id = ?1 AND execution_id = ?2`,
	sqlstore.QHistory:         `SELECT event_data FROM history WHERE instance_id = ?1 AND execution_id = ?2 ORDER BY event_id`,

	sqlstore.QGetInstance:    `SELECT ` + instanceColumns + ` FROM instances WHERE instance_id = ?1`,
	sqlstore.QInstanceExists: `SELECT count(*) FROM instances WHERE instance_id = ?1`,
	sqlstore.QValues:         `SELECT value_key, value, updated_at FROM instance_values WHERE instance_id = ?1 ORDER BY value_key`,
	sqlstore.QValue:          `SELECT value, updated_at FROM instance_values WHERE instance_id = ?1 AND value_key = ?2`,
	sqlstore.QListExecutions: `SELECT ` + executionColumns + ` FROM executions AS e WHERE e.instance_id = ?1 ORDER BY e.execution_id`,
	sqlstore.QGetExecution:   `SELECT ` + executionColumns + ` FROM executions AS e WHERE e.instance_id = ?1 AND e.execution_id = ?2`,
	sqlstore.QListChildren:   `SELECT instance_id FROM instances WHERE parent_instance_id = ?1 ORDER BY seq`,

	// ?1 now.
	sqlstore.QQueueDepths: `SELECT
  (SELECT count(*) FROM orchestrator_queue AS q WHERE q.visible_at <= ?1
     AND NOT (q.lock_token IS NOT NULL AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > ?1))),
  (SELECT count(*) FROM orchestrator_queue WHERE visible_at > ?1 AND (lock_token IS NULL OR locked_until <= ?1)),
  (SELECT count(*) FROM orchestrator_queue AS q WHERE q.lock_token IS NOT NULL
     AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > ?1)),
  (SELECT count(*) FROM worker_queue WHERE visible_at <= ?1),
  (SELECT count(*) FROM worker_queue WHERE visible_at > ?1 AND (lock_token IS NULL OR locked_until <= ?1)),
  (SELECT count(*) FROM worker_queue WHERE lock_token IS NOT NULL AND locked_until > ?1),
  (SELECT count(*) FROM worker_queue AS q WHERE q.visible_at <= ?1 AND ` + unservedAt1 + `),
  (SELECT count(*) FROM orchestrator_queue AS q JOIN instances AS i ON i.instance_id = q.instance_id WHERE q.visible_at <= ?1
     AND NOT (q.lock_token IS NOT NULL AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > ?1))
     AND ` + orchUnservedAt1 + `)`,

	sqlstore.QCounts: `SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM executions), (SELECT count(*) FROM history),
       (SELECT count(*) FROM execution_locks)`,
	sqlstore.QCountsByStatus: `SELECT status, count(*) FROM instances GROUP BY status`,

	// ?1 limit.
	sqlstore.QDeadLetters: `SELECT id, queue, instance_id, payload, error, dead_at FROM dead_letters ORDER BY id DESC LIMIT ?1`,

	// The earliest time a fetch may find what it cannot now (NULL: queue
	// empty); each is one lookup at the low end of an index. Orchestrator:
	// ready_at already folds in the expiry of the instance's lock (0002).
	// Worker: a fetch moves visible_at to locked_until (0001, 0004).
	sqlstore.QNextVisibleOrch: `SELECT min(ready_at) FROM orchestrator_ready`,
	sqlstore.QNextVisibleWork: `SELECT min(visible_at) FROM worker_queue`,

	// ?1 key.
	sqlstore.QLockGet:  xlockSelect + ` WHERE l.lock_key = ?1`,
	sqlstore.QLockList: xlockSelect + ` ORDER BY l.lock_key`,

	// InstanceQueue: each an index lookup by instance ID. ?1 instance.
	// The instance row and the store time of the newest event of its
	// current execution (NULL when it has none).
	// ?1 instance, ?2 now (for the live routes).
	sqlstore.QQueueInstance: `SELECT i.current_execution_id, i.created_at, i.last_error_at,
       (SELECT h.created_at FROM history AS h
        WHERE h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
        ORDER BY h.event_id DESC LIMIT 1),
       ` + orchUnservedAt2 + `
FROM instances AS i WHERE i.instance_id = ?1`,
	sqlstore.QQueueMessages: `SELECT work_item, created_at, visible_at, attempt_count, lock_token IS NOT NULL
FROM orchestrator_queue INDEXED BY orchestrator_queue_instance WHERE instance_id = ?1 ORDER BY id`,
	// ?1 instance, ?2 now (for the live routes).
	sqlstore.QQueueWork: `SELECT execution_id, activity_id, coalesce(session_id, ''), work_item, created_at, visible_at, attempt_count,
       CASE WHEN lock_token IS NULL THEN NULL ELSE locked_until END, last_error, last_error_at,
       queue, heartbeat_at, heartbeat_details, ` + unserved + `
FROM worker_queue AS q INDEXED BY worker_queue_activity WHERE instance_id = ?1 ORDER BY id`,
	// ?1 id, ?2 token, ?3 now.
	sqlstore.QWorkHeartbeat:  `SELECT heartbeat_at, heartbeat_details FROM worker_queue WHERE id = ?1 AND lock_token = ?2 AND locked_until > ?3`,
	sqlstore.QQueueLock:      `SELECT locked_at, locked_until FROM instance_locks WHERE instance_id = ?1`,
	sqlstore.QQueueHeldLocks: `SELECT lock_key FROM execution_locks WHERE instance_id = ?1 ORDER BY lock_key`,
	// The instance's queued start, its holder and how many starts are
	// ahead of it (lock_queue_key range up to its row).
	sqlstore.QQueueStart: `SELECT q.lock_key, coalesce(l.instance_id, ''), q.created_at, q.visible_at,
       (SELECT count(*) FROM lock_queue AS a WHERE a.lock_key = q.lock_key AND a.id <= q.id)
FROM lock_queue AS q LEFT JOIN execution_locks AS l ON l.lock_key = q.lock_key
WHERE q.instance_id = ?1 ORDER BY q.id LIMIT 1`,

	// StalledInstances (provider.Admin): each rule's candidates come from
	// an index range of the rows matching it, capped at ?4 rows; the
	// candidates are then checked against the instance row and the time
	// of their newest event (a primary-key lookup). ?1 cutoff (now minus
	// the threshold), ?2 minimum deliveries, ?3 page size + 1, ?4 cap per rule.
	sqlstore.QStalled: `WITH candidates(instance_id) AS (
    SELECT instance_id FROM (SELECT instance_id FROM instances INDEXED BY instances_last_error_at
        WHERE last_error_at IS NOT NULL AND last_error_at <= ?1 LIMIT ?4)
    UNION SELECT instance_id FROM (SELECT instance_id FROM worker_queue INDEXED BY worker_queue_last_error_at
        WHERE last_error_at IS NOT NULL AND last_error_at <= ?1 LIMIT ?4)
    UNION SELECT instance_id FROM (SELECT instance_id FROM worker_queue INDEXED BY worker_queue_redelivered
        WHERE attempt_count > 1 AND attempt_count >= ?2 LIMIT ?4)
    UNION SELECT instance_id FROM (SELECT instance_id FROM orchestrator_ready INDEXED BY orchestrator_ready_order
        WHERE ready_at <= ?1 LIMIT ?4)
    UNION SELECT instance_id FROM (SELECT instance_id FROM worker_queue INDEXED BY worker_queue_visible
        WHERE visible_at <= ?1 LIMIT ?4)
)
SELECT i.instance_id
FROM candidates AS c JOIN instances AS i ON i.instance_id = c.instance_id
WHERE i.status IN ('Pending', 'Running', 'ContinuedAsNew')
  AND NOT EXISTS (SELECT 1 FROM instance_locks AS p WHERE p.instance_id = i.instance_id AND p.pause_reason IS NOT NULL)
  AND coalesce((SELECT h.created_at FROM history AS h
                WHERE h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
                ORDER BY h.event_id DESC LIMIT 1), i.created_at) <= ?1
ORDER BY i.seq DESC
LIMIT ?3`,
}

// xlockSelect reads execution locks with their holder's status (” when
// gone) and the number of queued starts.
const xlockSelect = `SELECT l.lock_key, l.instance_id, l.locked_at, l.expires_at, l.ttl_ms, coalesce(i.status, ''),
       (SELECT count(*) FROM lock_queue AS q WHERE q.lock_key = l.lock_key)
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id`

// ListInstances is assembled from these fragments by sqlstore.ListQuery
// (its filters are optional; each is followed by its placeholder). One state is an equality on the status index, read newest
// first. Several states would make SQLite sort every match, so each state
// gets its own page-sized index read (sqlListStatusPart, with the other
// filters), and only those few rows are merged (sqlListStatusesWrap).
const (
	sqlListInstancesBase    = `SELECT seq, ` + instanceColumns + ` FROM instances WHERE 1 = 1`
	sqlListFilterCursor     = ` AND seq < `
	sqlListFilterStatus     = ` AND status = `
	sqlListFilterName       = ` AND orchestration_name = `
	sqlListFilterParent     = ` AND parent_instance_id = `
	sqlListInstancesOrderBy = ` ORDER BY seq DESC LIMIT `
	// The ID prefix is a range of the instance_id index: instance_id >=
	// prefix, and below the prefix's successor when it has one
	// (prefixUpperBound); LIKE would not use the index. Reading the range
	// means sorting its matches by seq, which is cheap for a rare prefix
	// and not for a common one; so ListInstances first counts the range up
	// to commonPrefixMatches (sqlCountPrefixFrom and sqlCountPrefixBelow,
	// closed with sqlCountPrefixEnd) and, for a common prefix, writes the
	// terms with a unary + (sqlListFilterIDFromScan, ...), which keeps
	// SQLite from using the index: the rows are then read newest first
	// (by seq, or another filter's index) and the prefix filters them,
	// finding a page's matches quickly since they are common.
	sqlListFilterIDFrom      = ` AND instance_id >= `
	sqlListFilterIDBelow     = ` AND instance_id < `
	sqlListFilterIDFromScan  = ` AND +instance_id >= `
	sqlListFilterIDBelowScan = ` AND +instance_id < `
	sqlCountPrefixFrom       = `SELECT count(*) FROM (SELECT 1 FROM instances WHERE instance_id >= ?`
	sqlCountPrefixBelow      = ` AND instance_id < ?`
	sqlCountPrefixEnd        = ` LIMIT ?)`
	sqlListStatusPart        = `SELECT seq FROM (SELECT seq FROM instances WHERE status = `
	sqlListStatusesWrap      = ` AND seq IN (`
	sqlListStatusesUnion     = ` UNION ALL `
)

// Copying the store (copy.go). The export reads each table in the order its
// rows were written; a row locked in this store is exported unlocked: a
// worker row's visible_at is then its lock expiry (0001), so ?1 (the export's
// now) caps it. The import inserts rows without locks; the triggers of 0002
// keep orchestrator_ready exact.
const (
	sqlCopyCounts = `SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM executions),
       (SELECT count(*) FROM history), (SELECT count(*) FROM orchestrator_queue),
       (SELECT count(*) FROM worker_queue), (SELECT count(*) FROM execution_locks),
       (SELECT count(*) FROM lock_queue), (SELECT count(*) FROM idempotency_keys),
       (SELECT count(*) FROM dead_letters), (SELECT count(*) FROM instance_values),
       (SELECT count(*) FROM instance_locks WHERE pause_reason IS NOT NULL), (SELECT count(*) FROM schedules)`
	// ?1 now.
	sqlCopyLiveLeases = `SELECT (SELECT count(*) FROM instance_locks WHERE locked_until > ?1 AND pause_reason IS NULL),
       (SELECT count(*) FROM worker_queue WHERE lock_token IS NOT NULL AND locked_until > ?1),
       (SELECT count(*) FROM sessions WHERE locked_until > ?1)`
)

// exportSQL and importSQL are the statements of each copied table, with
// the columns sqlstore.ExportTables reads and sqlstore.ImportArgs writes.
var (
	// ?1 now.
	exportSQL = sqlstore.ExportSQL(`SELECT instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item,
       CASE WHEN lock_token IS NOT NULL AND visible_at > ?1 THEN ?1 ELSE visible_at END, attempt_count, created_at
FROM worker_queue ORDER BY id`)
	importSQL = map[provider.Table]string{
		// An instance with a LastError is dated as erring since its last
		// update (the record does not carry the start of the run of
		// errors, as migration 0007 dates existing rows), so a parked
		// instance stays visible to stall reports in the copy.
		provider.TableInstances: `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status,
    current_execution_id, input, output, error, custom_status, custom_status_version,
    parent_instance_id, parent_execution_id, created_at, updated_at, last_error, last_error_at, values_version)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, nullif(?11, ''), ?12, ?13, ?14, ?15,
    CASE WHEN ?15 IS NULL THEN NULL ELSE ?14 END, ?16)`,
		provider.TableExecutions: `INSERT INTO executions (instance_id, execution_id, status, input, output, error, started_at, completed_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, nullif(?8, 0))`,
		provider.TableHistory: `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
		provider.TableOrchestratorQ: `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, attempt_count, created_at)
VALUES (?1, ?2, ?3, ?4, ?5)`,
		provider.TableWorkerQ: `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, attempt_count, created_at,
    activity_name, queue)
VALUES (?1, ?2, ?3, nullif(?4, ''), ?5, ?6, ?7, ?8, ` + workRoute + `)`,
		provider.TableExecutionLocks: `INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms)
VALUES (?1, ?2, ?3, ?4, ?5)`,
		provider.TableQueuedStarts: `INSERT INTO lock_queue (lock_key, instance_id, work_item, visible_at, ttl_ms, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
		provider.TableIdempotencyKeys: `INSERT INTO idempotency_keys (idem_key, instance_id, created_at, expires_at, purged_at)
VALUES (?1, ?2, ?3, ?4, nullif(?5, 0))`,
		provider.TableDeadLetters: `INSERT INTO dead_letters (queue, instance_id, payload, error, dead_at) VALUES (?1, ?2, ?3, ?4, ?5)`,
		provider.TableValues:      `INSERT INTO instance_values (instance_id, value_key, value, updated_at) VALUES (?1, ?2, ?3, ?4)`,
		// A pause is the instance's lock row that never expires (0009);
		// the triggers of 0002 keep the instance out of orchestrator_ready.
		provider.TablePauses: `INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at, pause_reason, paused_by)
VALUES (?1, ?5, ?6, ?2, ?3, ?4)`,
		provider.TableSchedules: `INSERT INTO schedules (schedule_id, spec, paused, next_fire_at, last_fire_at, last_instance_id, last_outcome,
    revision, created_at, updated_at)
VALUES (?1, ?2, ?3, nullif(?4, 0), nullif(?5, 0), ?6, ?7, ?8, ?9, ?10)`,
	}
)
