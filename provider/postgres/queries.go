package postgres

import (
	"fmt"
	"strings"

	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// All SQL of the store lives in this file and in migrations/. Tables are
// found through the connection's search_path (the store's schema). Lists of
// values are passed as arrays and expanded with unnest or = ANY, so every
// statement has a fixed text and pgx prepares it once per connection.
//
// Times are epoch milliseconds from the provider's clock, passed in; no
// statement reads the server's clock.

// Advisory locks are keyed by a 64-bit hash of a text that starts with the
// store's schema, so stores in other schemas never contend.
const (
	sqlAdvisoryLock = `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))`
	// Enqueuers hold an instance's lock shared, in the given (sorted) order:
	// see lockInstancesShared.
	sqlAdvisoryLockShared = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1::text || s.id, 0))
FROM (SELECT c.id FROM unnest($2::text[]) WITH ORDINALITY AS c(id, ord) ORDER BY c.ord) AS s`
	sqlAdvisoryLockMany = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || s.id, 0))
FROM (SELECT c.id FROM unnest($2::text[]) WITH ORDINALITY AS c(id, ord) ORDER BY c.ord) AS s`
	// A group commit takes the locks its calls declared, in the given
	// (sorted) order, each exclusive or shared.
	sqlAdvisoryLockGroup = `SELECT CASE WHEN s.x THEN pg_advisory_xact_lock(hashtextextended($1::text || s.id, 0))
ELSE pg_advisory_xact_lock_shared(hashtextextended($1::text || s.id, 0)) END
FROM (SELECT c.id, c.x FROM unnest($2::text[], $3::bool[]) WITH ORDINALITY AS c(id, x, ord) ORDER BY c.ord) AS s`
	sqlAdvisoryTryLock = `SELECT c.id FROM unnest($2::text[]) WITH ORDINALITY AS c(id, ord)
WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || c.id, 0))
ORDER BY c.ord`
)

// sqlUnboundedTx lifts the connection's time bounds (Options.LockTimeout,
// StatementTimeout, IdleInTransactionTimeout) for the rest of one
// transaction: migrations and exports.
const sqlUnboundedTx = `SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true),
set_config('idle_in_transaction_session_timeout', '0', true)`

// Migration bookkeeping.
const (
	sqlCreateMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at BIGINT  NOT NULL
)`
	sqlInsertMigration = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`
	sqlMaxMigration    = `SELECT coalesce(max(version), 0) FROM schema_migrations`
	// A real write that changes nothing: the readiness probe.
	sqlProbeWrite = `UPDATE schema_migrations SET version = version WHERE version = $1`
)

// Fetching turns.
const (
	// Instances that can be taken now, in the order they became ready (see
	// migration 0002: orchestrator_ready excludes locked instances until
	// their lock expires), each with whether this transaction got its
	// advisory lock (tried, never waited for). An index range scan that
	// stops at the limit, whatever the backlog. $1 now, $2 instance IDs to
	// skip, $3 the advisory lock key prefix, $4 limit, $5 the orchestration
	// routes served (NULL: any; see sqlenc.OrchestrationRoutes): an
	// instance of another name or version is skipped in the scan, on the
	// scheduling row (migration 0013 copies each instance's name and
	// version onto it); one without a row or a name is served by every
	// fetch. The filters are wrapped in a CASE, whose selectivity the
	// planner takes as 1/2 (see workFilterNoSession): as plain clauses, on
	// a table never analyzed, they made it estimate a few rows and read
	// and sort every ready row instead of the index range.
	sqlOrchCandidates = `SELECT c.instance_id, pg_try_advisory_xact_lock(hashtextextended($3::text || c.instance_id, 0))
FROM (SELECT r.instance_id, r.ready_at, r.first_id
      FROM orchestrator_ready AS r
      WHERE r.ready_at <= $1
        AND CASE WHEN NOT (r.instance_id = ANY ($2::text[]))
          AND ($5::text[] IS NULL OR r.orchestration_name = '' OR r.orchestration_name = ANY ($5::text[])
               OR r.orchestration_name || chr(31) || r.orchestration_version = ANY ($5::text[])) THEN true ELSE false END
      ORDER BY r.ready_at, r.first_id
      LIMIT $4) AS c
ORDER BY c.ready_at, c.first_id`

	// sqlOrchCandidates for a fetch that runs only some orchestrations
	// ($5, not NULL): for each route, the ready instances of its name read
	// in order from orchestrator_ready_name (migration 0015), a route of
	// a version filtering its name's rows by version, and the instances
	// without a name (served by every fetch) likewise, merged in order. The
	// ready instances of other orchestrations are never read, so a node
	// that runs only some finds theirs at once behind any backlog of
	// others'. A name's range is given as bounds on the index's leading
	// columns (name, ready_at), ordered by them, not as an equality: on a
	// table never analyzed the planner takes an equality to match a two
	// hundredth of the rows, and below the limit it would sort the name's
	// whole range instead of reading it in order; a range it takes to
	// match a ninth.
	//
	// The worker fetch's ranges (workFetchSQL) are given the same way.
	sqlOrchCandidatesNamed = `SELECT c.instance_id, pg_try_advisory_xact_lock(hashtextextended($3::text || c.instance_id, 0))
FROM (SELECT DISTINCT r.instance_id, r.ready_at, r.first_id
      FROM (SELECT k.e, k.sep, CASE WHEN k.sep = 0 THEN k.e ELSE left(k.e, k.sep - 1) END AS name
            FROM (SELECT k.e, strpos(k.e, chr(31)) AS sep FROM unnest(array_append($5::text[], '')) AS k(e)) AS k) AS k
      CROSS JOIN LATERAL (
          SELECT r.instance_id, r.ready_at, r.first_id
          FROM orchestrator_ready AS r
          WHERE r.orchestration_name >= k.name AND (r.orchestration_name, r.ready_at) <= (k.name, $1)
            AND CASE WHEN NOT (r.instance_id = ANY ($2::text[]))
              AND (k.sep = 0 OR r.orchestration_version = substr(k.e, k.sep + 1)) THEN true ELSE false END
          ORDER BY r.orchestration_name, r.ready_at, r.first_id
          LIMIT $4) AS r
      ORDER BY r.ready_at, r.first_id
      LIMIT $4) AS c
ORDER BY c.ready_at, c.first_id`

	sqlDeleteMessage = `DELETE FROM orchestrator_queue WHERE id = $1`

	// Release a lock taken for nothing, and untag what it tagged.
	sqlReleaseLock = `DELETE FROM instance_locks WHERE instance_id = $1 AND lock_token = $2`

	// Re-date the locks of a fetch whose transaction outlived them. $1
	// instance IDs, $2 token prefix, $3 locked_until.
	// Returns the instances re-dated.
	sqlRedateLocks = `UPDATE instance_locks SET locked_until = $3
WHERE instance_id = ANY ($1::text[]) AND lock_token = $2 || instance_id
RETURNING instance_id`
	sqlRedateTagged = `UPDATE orchestrator_queue SET locked_until = $3
WHERE instance_id = ANY ($1::text[]) AND lock_token = $2 || instance_id`

	// $1 instance IDs.
	sqlInstanceMetas = `SELECT instance_id, orchestration_name, orchestration_version, status,
       current_execution_id, coalesce(parent_instance_id, ''), parent_execution_id
FROM instances
WHERE instance_id = ANY ($1::text[])`

	// Current-execution histories of several instances, each from the
	// event ID the caller holds on (that event included, so the caller can
	// check it exists) when the caller's execution is the current one, else
	// all of it. $1 instance IDs, $2 cached executions, $3 cached event IDs.
	// Each instance's events are one range of history's primary key, lower
	// bound included: the LATERAL subquery (kept apart by OFFSET 0) makes
	// the bound an index condition whatever the planner's statistics; as a
	// join filter, which the planner picks on a table never analyzed, it
	// would read the whole execution at every turn.
	sqlHistoriesOf = `SELECT i.instance_id, h.event_id, h.event_data
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS c(id, ex, after)
JOIN instances AS i ON i.instance_id = c.id
CROSS JOIN LATERAL (
    SELECT h.event_id, h.event_data FROM history AS h
    WHERE h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
      AND h.event_id >= CASE WHEN c.ex = i.current_execution_id THEN c.after ELSE 0 END
    OFFSET 0) AS h
ORDER BY i.instance_id, h.event_id`

	// When the starts of instances not yet started become visible: a
	// delayed start message, or a start queued behind an execution lock
	// (at the latest when that lock expires). $1 instance IDs, $2 now.
	sqlPendingStarts = `SELECT c.id,
       coalesce((SELECT min(q.visible_at) FROM orchestrator_queue AS q
                 WHERE q.instance_id = c.id AND q.visible_at > $2 AND q.lock_token IS NULL), 0),
       coalesce((SELECT min(l.expires_at) FROM lock_queue AS lq JOIN execution_locks AS l ON l.lock_key = lq.lock_key
                 WHERE lq.instance_id = c.id), 0)
FROM unnest($1::text[]) AS c(id)
JOIN instances AS i ON i.instance_id = c.id AND i.current_execution_id = 0`

	// $1 queue, $2 instance, $3 payload, $4 error, $5 now.
	sqlInsertDeadLetter = `INSERT INTO dead_letters (queue, instance_id, payload, error, dead_at) VALUES ($1, $2, $3, $4, $5)`
)

// turnEnd is the last part of the turn statements (sqlUpsertTurn,
// sqlUpdateTurn), after their CTE u, which writes the instance row and
// returns the instance's status after the turn (the instance is $1 and
// the execution $2 in both). It appends the turn's history events (the
// parameters ids, ids+1 and ids+2: their IDs, types and data, stamped
// with now), extends the execution locks of an instance the turn left
// live, and returns that status, with the guard of a turn that must not
// leave its instance ended folded in: when the parameter guard is true,
// the statement fails with codeNotLast if the status is terminal.
// Nothing the rest of the turn's batch writes changes the status, so this
// is the answer a guard statement queued after the batch's writes would
// give, in one statement fewer. The arguments are parameter numbers.
func turnEnd(now, ids, guard int) string {
	return fmt.Sprintf(`, h AS (
    INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
    SELECT $1, $2, v.id, v.kind, v.data, $%[1]d FROM unnest($%[2]d::bigint[], $%[3]d::text[], $%[4]d::text[]) AS v(id, kind, data)
), xl AS (
    UPDATE execution_locks SET expires_at = $%[1]d + ttl_ms
    WHERE instance_id = $1 AND EXISTS (SELECT 1 FROM u WHERE u.status NOT IN ('Completed', 'Failed', 'Canceled'))
)
SELECT CASE WHEN $%[5]d::bool AND status IN ('Completed', 'Failed', 'Canceled')
    THEN duroxide_check(false, '%[6]s', 'the turn needs more round trips')::text ELSE status END
FROM u`, now, ids, ids+1, ids+2, guard, codeNotLast)
}

// The turn statements (their shared end: turnEnd).
var (
	// Insert the execution or update it from the turn's metadata, then
	// create or update the instance with the status that follows from the
	// execution's. Fields of an older execution than the current one leave
	// the instance alone. A committed turn clears the last error an abandon
	// recorded. In the same statement: the turn's history events are
	// appended, and a live instance (by its status after the turn)
	// extends its execution locks; a terminal one settles them after (see
	// ApplyTurn). Returns the instance's status.
	// $1 instance, $2 execution, $3 status (NULL: unchanged, Running when
	// new), $4 input, $5 output, $6 error, $7 now, $8 completed_at (NULL
	// unless terminal), $9 name, $10 version, $11 custom status, $12 1 when
	// the custom status is set, $13 parent instance, $14 parent execution,
	// $15 event IDs, $16 event types, $17 event data, $18 true to guard
	// the turn's batch (turnGuardHead).
	sqlUpsertTurn = `WITH e AS (
    INSERT INTO executions AS x (instance_id, execution_id, status, input, output, error, started_at, completed_at)
    VALUES ($1, $2, coalesce($3, 'Running'), $4, $5, $6, $7, $8)
    ON CONFLICT (instance_id, execution_id) DO UPDATE
    SET status = coalesce($3, x.status),
        input = coalesce($4, x.input),
        output = coalesce($5, x.output),
        error = coalesce($6, x.error),
        completed_at = coalesce($8, x.completed_at)
    RETURNING CASE WHEN x.status = 'ContinuedAsNew' THEN 'Running' ELSE x.status END AS status
), u AS (
INSERT INTO instances AS i (instance_id, orchestration_name, orchestration_version, status,
    current_execution_id, input, output, error, custom_status, custom_status_version,
    parent_instance_id, parent_execution_id, created_at, updated_at)
SELECT $1, coalesce($9, ''), coalesce($10, ''), e.status, $2, $4, $5, $6, $11, $12, $13, $14, $7, $7 FROM e
ON CONFLICT (instance_id) DO UPDATE
SET orchestration_name = coalesce($9, i.orchestration_name),
    orchestration_version = coalesce($10, i.orchestration_version),
    status = CASE WHEN i.current_execution_id <= $2 THEN excluded.status ELSE i.status END,
    input = CASE WHEN $2 >= i.current_execution_id THEN coalesce($4, i.input) ELSE i.input END,
    output = CASE WHEN $2 >= i.current_execution_id THEN coalesce($5, i.output) ELSE i.output END,
    error = CASE WHEN $2 >= i.current_execution_id THEN coalesce($6, i.error) ELSE i.error END,
    custom_status = CASE WHEN $12 = 1 THEN $11 ELSE i.custom_status END,
    custom_status_version = i.custom_status_version + $12,
    current_execution_id = greatest(i.current_execution_id, $2),
    last_error = NULL,
    last_error_at = NULL,
    updated_at = $7
RETURNING i.status
)` + turnEnd(7, 15, 18)

	// sqlUpsertTurn for a turn that sets no metadata but the custom status
	// (sqlenc.Ack.KeepsMetadata): the turns of a running execution but its
	// first and its last. The execution's row, which such a turn would
	// leave as it is, is only read (inserted Running if it is missing, as
	// sqlUpsertTurn would), and the instance's row is updated in place,
	// without the speculative insertion of an upsert, the identity value
	// it draws and the row locks it writes. The instance's row exists:
	// such a turn is applied only to an instance the ack found (the core's
	// lock check, or the quiet check of a fused step), under its advisory
	// lock; were it missing, the statement would return no row and fail
	// the ack. Same result as sqlUpsertTurn. $1 instance, $2 execution,
	// $3 now, $4 custom status, $5 1 when the custom status is set, $6
	// event IDs, $7 event types, $8 event data, $9 as sqlUpsertTurn's $18.
	sqlUpdateTurn = `WITH x AS (
    SELECT CASE WHEN status = 'ContinuedAsNew' THEN 'Running' ELSE status END AS status
    FROM executions WHERE instance_id = $1 AND execution_id = $2
), e AS (
    INSERT INTO executions (instance_id, execution_id, status, started_at)
    SELECT $1, $2, 'Running', $3 WHERE NOT EXISTS (SELECT 1 FROM x)
    RETURNING status
), s AS (
    SELECT status FROM x UNION ALL SELECT status FROM e
), u AS (
    UPDATE instances AS i
    SET status = CASE WHEN i.current_execution_id <= $2 THEN s.status ELSE i.status END,
        custom_status = CASE WHEN $5 = 1 THEN $4 ELSE i.custom_status END,
        custom_status_version = i.custom_status_version + $5,
        current_execution_id = greatest(i.current_execution_id, $2),
        last_error = NULL,
        last_error_at = NULL,
        updated_at = $3
    FROM s WHERE i.instance_id = $1
    RETURNING i.status
)` + turnEnd(3, 6, 9)
)

// Acking turns.
const (
	// The instance lock row, locked, and whether the instance row exists.
	// $1 instance.
	sqlCheckLock = `SELECT l.lock_token, l.locked_until, EXISTS (SELECT 1 FROM instances WHERE instance_id = $1)
FROM instance_locks AS l WHERE l.instance_id = $1 FOR UPDATE`

	// $1 instances, $2 executions, $3 activities, $4 sessions (NULL: none),
	// $5 work items, $6 visible_at, $7 now, $8 and $9 the rows' activity
	// names (NULL: none) and queues, as their work items hold them
	// (migration 0006; sqlenc.Work.Route).
	sqlInsertWork = `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, created_at,
    activity_name, queue)
SELECT w.i, w.e, w.a, w.s, w.item, w.v, $7, w.n, w.q
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $8::text[], $9::text[])
    WITH ORDINALITY AS w(i, e, a, s, item, v, n, q, ord)
ORDER BY w.ord
RETURNING id`

	// Worker rows a turn ack leases to its caller, inserted already
	// locked: each row takes its ID from the table's sequence first, so
	// that its token (prefix || id, which names the row) is written with
	// it, and a lease costs no statement after the insert. The sequence
	// is the one migration 0001 made for the identity column, named
	// (resolved once, when the statement is prepared) rather than looked
	// up in the catalog at each call. $1 to $5 and $7 as sqlInsertWork,
	// $6 locked_until (also visible_at, as a fetch sets it), $8 token
	// prefix, $9 and $10 as sqlInsertWork's $8 and $9. Returns the IDs in
	// the order given.
	sqlInsertWorkLeased = `INSERT INTO worker_queue (id, instance_id, execution_id, activity_id, session_id, work_item, visible_at,
    created_at, activity_name, queue, lock_token, locked_until, attempt_count)
OVERRIDING SYSTEM VALUE
SELECT w.id, w.i, w.e, w.a, w.s, w.item, $6, $7, w.n, w.q, $8 || w.id, $6, 1
FROM (SELECT nextval('worker_queue_id_seq') AS id, u.*
      FROM (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $9::text[], $10::text[])
                 WITH ORDINALITY AS u(i, e, a, s, item, n, q, ord) ORDER BY u.ord) AS u) AS w
ORDER BY w.ord
RETURNING id`

	// Re-date leased worker rows (redateLeases). $1 ids, $2 token prefix,
	// $3 locked_until.
	sqlRedateWork = `UPDATE worker_queue SET locked_until = $3, visible_at = $3
WHERE id = ANY ($1::bigint[]) AND lock_token = $2 || id`

	// $1 instances, $2 executions, $3 activities.
	sqlCancelActivities = `DELETE FROM worker_queue AS q
USING unnest($1::text[], $2::bigint[], $3::bigint[]) AS c(i, e, a)
WHERE q.instance_id = c.i AND q.execution_id = c.e AND q.activity_id = c.a`

	// Create a Pending instance unless the ID is taken (0 rows then).
	// $1 instance, $2 name, $3 version, $4 input, $5 parent (NULL: none),
	// $6 parent execution, $7 now.
	sqlCreateInstance = `INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status, input,
    parent_instance_id, parent_execution_id, created_at, updated_at)
VALUES ($1, $2, $3, 'Pending', $4, $5, $6, $7, $7)
ON CONFLICT (instance_id) DO NOTHING`

	// sqlCreateInstance and, if it created the instance, the insertion of
	// its start message, in one statement; returns whether it did. $1 to
	// $7 as sqlCreateInstance, $8 work item, $9 visible_at.
	sqlCreateAndEnqueue = `WITH c AS (
    INSERT INTO instances (instance_id, orchestration_name, orchestration_version, status, input,
        parent_instance_id, parent_execution_id, created_at, updated_at)
    VALUES ($1, $2, $3, 'Pending', $4, $5, $6, $7, $7)
    ON CONFLICT (instance_id) DO NOTHING
    RETURNING instance_id
), m AS (
    INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
    SELECT instance_id, $8, $9, $7 FROM c
)
SELECT EXISTS (SELECT 1 FROM c)`

	// $1 instance, $2 work item, $3 visible_at, $4 now.
	sqlInsertMessage = `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ($1, $2, $3, $4)`

	// Several messages at once. $1 instances, $2 work items, $3 visible_at, $4 now.
	sqlInsertMessages = `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
SELECT m.i, m.item, m.v, $4
FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS m(i, item, v, ord)
ORDER BY m.ord`

	// Consume the turn's messages and release its lock; report whether
	// messages still wait for the instance. $1 instance, $2 token.
	sqlFinishTurn = `WITH d AS (
    DELETE FROM orchestrator_queue WHERE instance_id = $1 AND lock_token = $2 RETURNING id
), l AS (
    DELETE FROM instance_locks WHERE instance_id = $1 AND lock_token = $2 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = $1 AND q.id NOT IN (SELECT id FROM d))`

	// $1 instance, $2 token, $3 visible_at, $4 1 to undo the attempt, $5
	// true to make them visible no later than the instance's earliest
	// untagged message (AbandonOptions.UntilStart).
	sqlUntagMessages = `UPDATE orchestrator_queue
SET lock_token = NULL, locked_until = NULL,
    visible_at = CASE WHEN $5::bool THEN least($3, coalesce((SELECT min(o.visible_at) FROM orchestrator_queue AS o
                                                          WHERE o.instance_id = $1 AND o.lock_token IS NULL), $3))
                 ELSE $3 END,
    attempt_count = greatest(attempt_count - $4, 0)
WHERE instance_id = $1 AND lock_token = $2`

	// $1 instance, $2 token, $3 now.
	sqlAbandonLock = `DELETE FROM instance_locks WHERE instance_id = $1 AND lock_token = $2 AND locked_until > $3`

	// Record why the instance is not progressing (no row: nothing).
	// $1 instance, $2 error details JSON, $3 now.
	// last_error_at keeps the start of a run of such abandons.
	sqlSetLastError = `UPDATE instances SET last_error = $2, last_error_at = coalesce(last_error_at, $3), updated_at = $3
WHERE instance_id = $1`

	// Renew an instance lock and its tagged messages in one statement
	// (atomic alone, so it needs no transaction); returns whether the lock
	// was held. $1 instance, $2 token, $3 now, $4 new locked_until.
	sqlRenewLock = `WITH l AS (
    UPDATE instance_locks SET locked_until = $4
    WHERE instance_id = $1 AND lock_token = $2 AND locked_until > $3
    RETURNING instance_id
), t AS (
    UPDATE orchestrator_queue AS q SET locked_until = $4
    FROM l WHERE q.instance_id = l.instance_id AND q.lock_token = $2
)
SELECT count(*) > 0 FROM l`
)

// Worker queue.
const (
	// A worker fetch: the rows a fetch serves, oldest first (by id: the
	// order they were queued in; a row whose lease expired keeps its
	// place), up to $2, skipping rows another transaction holds (FOR
	// UPDATE SKIP LOCKED). Each is read as an index range in id order that
	// stops at the limit, whatever the backlog and whatever the planner's
	// statistics: for each queue and activity name served, a range of
	// worker_queue_route (and of worker_queue_route_unnamed for rows
	// without a name, which every fetch serves; migration 0015), merged by
	// id; a fetch that serves any name reads the primary key in order,
	// filtering by queue. A range steps over the rows not visible at its
	// head (leased or delayed: visible_at is checked in the index), as
	// many as the activities running and waiting to be retried, not over
	// the backlog. The other conditions are wrapped in a CASE, whose
	// selectivity the planner takes as 1/2: as plain clauses, their
	// default selectivities (a thousandth and less on a table never
	// analyzed) made it estimate one row, and sort every visible row as if
	// it were that one. Each range may lock up to $2 rows; those the merge
	// leaves out stay locked, untouched, until the fetch commits.
	//
	// $1 now, $2 limit, $3 activity names (NULL: any), $4 queues, $5
	// token prefix, $6 locked_until; with a session: $7 owner, $8 ids to
	// skip. The fragments below are put together by workFetchSQL.
	workFilterNoSession = `q.session_id IS NULL`
	// Rows without a session, of sessions the owner holds, or of claimable
	// sessions.
	workFilterSession = `NOT (q.id = ANY ($8::bigint[]))
  AND (q.session_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM sessions AS s
        WHERE s.session_id = q.session_id AND s.locked_until > $1 AND s.owner_id <> $7))`
	workRangeHead = `SELECT q.id, q.session_id FROM worker_queue AS q WHERE `
	workRangeTail = ` THEN true ELSE false END
ORDER BY q.id LIMIT $2 FOR UPDATE OF q SKIP LOCKED`
	// A range of worker_queue_route, given as bounds on its leading
	// columns and ordered by them (see sqlOrchCandidatesNamed).
	workRangeNamedTail = ` THEN true ELSE false END
ORDER BY q.queue, q.activity_name, q.id LIMIT $2 FOR UPDATE OF q SKIP LOCKED`
	// The lock of the rows found (c): token $5 || id, until $6, one
	// delivery more.
	workLockSet = `UPDATE worker_queue AS u
SET lock_token = $5 || u.id, locked_until = $6, visible_at = $6, attempt_count = u.attempt_count + 1
WHERE u.id = ANY (ARRAY(SELECT c.id FROM c`
	workLockReturning = `))
RETURNING u.id, u.lock_token, u.instance_id, u.execution_id, u.activity_id, coalesce(u.session_id, '') AS session_id,
    u.work_item, u.attempt_count`

	// Claim or refresh a session lease; 0 rows if another owner holds it.
	// $1 session, $2 owner, $3 locked_until, $4 now.
	sqlClaimSession = `INSERT INTO sessions AS s (session_id, owner_id, locked_until, last_activity_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (session_id) DO UPDATE
SET owner_id = excluded.owner_id, locked_until = excluded.locked_until, last_activity_at = excluded.last_activity_at
WHERE s.locked_until <= $4 OR s.owner_id = excluded.owner_id`

	// Lock worker rows, each with token $1 || id. $1 token prefix, $2 ids,
	// $3 locked_until.
	sqlLockWork = `UPDATE worker_queue
SET lock_token = $1 || id, locked_until = $3, visible_at = $3, attempt_count = attempt_count + 1
WHERE id = ANY ($2::bigint[])
RETURNING id, lock_token, instance_id, execution_id, activity_id, coalesce(session_id, ''), work_item, attempt_count`

	sqlDeleteWork = `DELETE FROM worker_queue WHERE id = $1`

	// Delete an activity's row, if its lock is held, and refresh its
	// session's last activity time; returns whether the row was deleted.
	// $1 id, $2 token, $3 now.
	sqlAckWork = `WITH d AS (
    DELETE FROM worker_queue WHERE id = $1 AND lock_token = $2 AND locked_until > $3 RETURNING session_id
), s AS (
    UPDATE sessions SET last_activity_at = $3
    WHERE session_id = (SELECT session_id FROM d) AND locked_until > $3
)
SELECT count(*) > 0 FROM d`

	// Unlock a worker row, recording the abandon's error (NULL clears it);
	// last_error_at keeps the start of a run of abandons with an error.
	// $1 id, $2 token, $3 now, $4 visible_at, $5 1 to undo the attempt,
	// $6 error details JSON or NULL.
	sqlAbandonWork = `UPDATE worker_queue
SET lock_token = NULL, locked_until = NULL, visible_at = $4, attempt_count = greatest(attempt_count - $5, 0),
    last_error = $6::text,
    last_error_at = CASE WHEN $6::text IS NULL THEN NULL ELSE coalesce(last_error_at, $3) END
WHERE id = $1 AND lock_token = $2 AND locked_until > $3`

	// Renew a worker lock and touch its session, in one statement (atomic
	// alone, so it needs no transaction); returns whether the lock was
	// held. $1 id, $2 token, $3 now, $4 new locked_until.
	sqlRenewWork = `WITH w AS (
    UPDATE worker_queue SET locked_until = $4, visible_at = $4
    WHERE id = $1 AND lock_token = $2 AND locked_until > $3
    RETURNING session_id
), s AS (
    UPDATE sessions SET last_activity_at = $3
    WHERE session_id = (SELECT session_id FROM w) AND locked_until > $3
)
SELECT count(*) > 0 FROM w`

	// $1 owners, $2 now, $3 locked_until, $4 idle cutoff.
	sqlRenewSessions = `UPDATE sessions SET locked_until = $3
WHERE owner_id = ANY ($1::text[]) AND locked_until > $2 AND last_activity_at > $4`

	// $1 now.
	sqlCleanupSessions = `DELETE FROM sessions AS s
WHERE s.locked_until <= $1
  AND NOT EXISTS (SELECT 1 FROM worker_queue AS q WHERE q.session_id = s.session_id)`

	// The checks of an ack sent in one batch with its writes: each fails
	// its statement (duroxide_check, migration 0011) with its own SQLSTATE
	// unless it holds, so that the writes queued after it never run.
	//
	// The token holds the instance's unexpired lock (the row locked, as
	// sqlCheckLock does). $1 instance, $2 token, $3 now.
	sqlCheckTurnLock = `SELECT duroxide_check(EXISTS (SELECT 1 FROM instance_locks
    WHERE instance_id = $1 AND lock_token = $2 AND locked_until > $3 FOR UPDATE), '` + codeLockLost + `', 'turn lock lost')`
	// sqlAckWork, failing unless the row was deleted. $1 id, $2 token, $3 now.
	sqlAckWorkChecked = `WITH d AS (
    DELETE FROM worker_queue WHERE id = $1 AND lock_token = $2 AND locked_until > $3 RETURNING session_id
), s AS (
    UPDATE sessions SET last_activity_at = $3
    WHERE session_id = (SELECT session_id FROM d) AND locked_until > $3
)
SELECT duroxide_check(count(*) > 0, '` + codeLockLost + `', 'work lock lost') FROM d`
	// The check and the row's deletion of an activity ack that carries
	// its result's turn (AckWorkThen), in one statement: sqlAckWork,
	// failing as sqlAckWorkChecked does unless the row was deleted, and
	// first, with codeNotQuiet, unless the instance is quiet
	// (sqlInstanceQuiet). Every term of the quiet check reads the rows as
	// they were before the deletion, as when it ran alone ahead of it; a
	// failure undoes the deletion with the rest of the ack. $1 to $5 as
	// sqlInstanceQuiet ($5 the row's ID), $6 the row's token.
	sqlAckWorkIfQuiet = `WITH d AS (
    DELETE FROM worker_queue WHERE id = $5 AND lock_token = $6 AND locked_until > $4 RETURNING session_id
), s AS (
    UPDATE sessions SET last_activity_at = $4
    WHERE session_id = (SELECT session_id FROM d) AND locked_until > $4
)` + ackIfQuietTail
	// sqlAckWorkIfQuiet for a turn that leases exactly one activity to
	// the acking caller (TurnAck.LeaseFor) and cancels none: the acked
	// row is not deleted but becomes that activity's row, leased, in
	// place (its ID kept, a new token: $12 || id), so the step writes one
	// row version instead of a deletion and an insertion, in one
	// statement fewer. What it writes is what sqlInsertWorkLeased would
	// insert, but the row's ID, which only orders the queue. The session
	// refreshed is the acked row's, read as it was before the update (the
	// statement's snapshot). $1 to $6 as sqlAckWorkIfQuiet; the new
	// activity's $7 execution, $8 activity ID, $9 session (NULL: none),
	// $10 work item, $11 locked_until (also visible_at), $12 token
	// prefix, $13 and $14 its name (NULL: none) and queue.
	sqlAckWorkIfQuietReuse = `WITH d AS (
    UPDATE worker_queue
    SET instance_id = $1, execution_id = $7, activity_id = $8, session_id = $9, work_item = $10, visible_at = $11,
        created_at = $4, activity_name = $13, queue = $14, lock_token = $12 || id, locked_until = $11, attempt_count = 1,
        last_error = NULL, last_error_at = NULL, heartbeat_at = NULL, heartbeat_details = NULL
    WHERE id = $5 AND lock_token = $6 AND locked_until > $4 RETURNING id
), s AS (
    UPDATE sessions SET last_activity_at = $4
    WHERE session_id = (SELECT o.session_id FROM worker_queue AS o WHERE o.id = $5) AND locked_until > $4
      AND EXISTS (SELECT 1 FROM d)
)` + ackIfQuietTail
	// The end of sqlAckWorkIfQuiet and sqlAckWorkIfQuietReuse: the quiet
	// check, then whether d wrote the acked row.
	ackIfQuietTail = `
SELECT CASE WHEN (` + sqlInstanceQuiet + `)
    THEN duroxide_check((SELECT count(*) > 0 FROM d), '` + codeLockLost + `', 'work lock lost')
    ELSE duroxide_check(false, '` + codeNotQuiet + `', 'instance not quiet') END`

	// Whether a turn may not be taken with an activity's ack
	// (WorkAck.TakeTurn): another activity of the instance is queued, or
	// its orchestration is not one of $2 (NULL: any). $1 instance.
	sqlInstanceHasWork = `SELECT EXISTS (SELECT 1 FROM worker_queue WHERE instance_id = $1)
    OR ($2::text[] IS NOT NULL AND EXISTS (SELECT 1 FROM instances AS i WHERE i.instance_id = $1 AND i.orchestration_name <> ''
          AND NOT (i.orchestration_name = ANY ($2::text[]))
          AND NOT (` + orchRoute + ` = ANY ($2::text[]))))`
	// For each instance of $2 whose turn activity acks may take
	// (WorkAck.TakeTurn): whether it is busy, as sqlInstanceHasWork asks
	// ($3 the routes served, NULL: any), and, only when it is not,
	// whether this transaction got its advisory lock (tried, never
	// waited for; $1 the lock key prefix). A busy instance's lock is not
	// tried: held until the commit, it would only keep the instance's
	// other acks waiting. In the order of $2. The busy question is asked
	// once per instance: OFFSET 0 keeps the planner from pulling it up
	// into the two places that use its answer, each then a scan of its
	// own.
	sqlInstancesTakeable = `SELECT c.id, b.busy,
    CASE WHEN b.busy THEN false ELSE pg_try_advisory_xact_lock(hashtextextended($1::text || c.id, 0)) END
FROM unnest($2::text[]) WITH ORDINALITY AS c(id, ord)
CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM worker_queue AS q WHERE q.instance_id = c.id)
    OR ($3::text[] IS NOT NULL AND EXISTS (SELECT 1 FROM instances AS i WHERE i.instance_id = c.id AND i.orchestration_name <> ''
          AND NOT (i.orchestration_name = ANY ($3::text[]))
          AND NOT (` + orchRoute + ` = ANY ($3::text[])))) OFFSET 0) AS b(busy)
ORDER BY c.ord`
	// The plain activity acks of a group, set-based (groupAcks): delete
	// each acked row its token holds unexpired, refresh the sessions of
	// the rows deleted, and enqueue the completions of the acks whose rows
	// were deleted, in the acks' order, in one statement (the completions'
	// insert fires the scheduling trigger once, which updates the
	// instances' rows in instance order). Returns the rows deleted and
	// the tokens that held them. $1 row
	// IDs, $2 tokens, $3 completion instances (NULL: no completion), $4
	// completion work items, $5 completion visibilities, $6 now.
	sqlAckWorks = `WITH a AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[]) WITH ORDINALITY AS a(id, token, inst, item, vis, ord)
), d AS (
    DELETE FROM worker_queue AS q USING a
    WHERE q.id = a.id AND q.lock_token = a.token AND q.locked_until > $6
    RETURNING q.id, q.lock_token, q.session_id
), s AS (
    UPDATE sessions SET last_activity_at = $6
    WHERE session_id IN (SELECT d.session_id FROM d) AND locked_until > $6
), m AS (
    INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
    SELECT a.inst, a.item, a.vis, $6 FROM a JOIN d ON d.id = a.id AND d.lock_token = a.token
    WHERE a.inst IS NOT NULL
    ORDER BY a.ord
)
SELECT d.id, d.lock_token FROM d`
	// Whether nothing happened to an instance since a runtime's copy of its
	// execution (WorkAck.Then): unlocked, $2 its current execution, $3 the
	// last event of that execution, no visible message and no worker row
	// but $5 (the acked activity's, which sqlAckWorkIfQuiet deletes).
	// Each term is an index lookup by instance ID. The last event is read
	// as the first row of a backward scan of history's primary key, not
	// as max(event_id): without planner statistics (a table never
	// analyzed) the planner aggregates over every event of the execution
	// instead, a cost that grows with the history. $1 instance, $4 now.
	sqlInstanceQuiet = `SELECT
    coalesce((SELECT current_execution_id = $2 FROM instances WHERE instance_id = $1), false)
    AND NOT EXISTS (SELECT 1 FROM instance_locks WHERE instance_id = $1 AND locked_until > $4)
    AND coalesce((SELECT event_id FROM history WHERE instance_id = $1 AND execution_id = $2
                  ORDER BY event_id DESC LIMIT 1), 0) = $3
    AND NOT EXISTS (SELECT 1 FROM orchestrator_queue WHERE instance_id = $1 AND visible_at <= $4)
    AND NOT EXISTS (SELECT 1 FROM worker_queue WHERE instance_id = $1 AND id <> $5)`
)

// The SQLSTATEs of the checks above (class DX is not PostgreSQL's).
const (
	codeLockLost = "DX001"
	codeNotQuiet = "DX002"
)

// Purge.
const (
	// The named instances and all their descendants. $1 IDs.
	sqlPurgeTree = `WITH RECURSIVE tree (id) AS (
    SELECT unnest($1::text[])
    UNION
    SELECT i.instance_id FROM instances AS i JOIN tree ON i.parent_instance_id = tree.id
)
SELECT id FROM tree`

	// Rows of the instances to purge, locked. $1 IDs.
	sqlPurgeRows = `SELECT i.instance_id, i.status, coalesce(i.parent_instance_id, ''),
       EXISTS (SELECT 1 FROM instances AS p WHERE p.instance_id = i.parent_instance_id)
FROM instances AS i
WHERE i.instance_id = ANY ($1::text[])
ORDER BY i.instance_id
FOR UPDATE`

	sqlPurgeCountExecutions = `SELECT count(*) FROM executions WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteHistory   = `WITH d AS (DELETE FROM history WHERE instance_id = ANY ($1::text[]) RETURNING 1) SELECT count(*) FROM d`
	sqlPurgeDeleteExecs     = `DELETE FROM executions WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteOrch      = `DELETE FROM orchestrator_queue WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteWork      = `DELETE FROM worker_queue WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteLocks     = `DELETE FROM instance_locks WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteInstances = `DELETE FROM instances WHERE instance_id = ANY ($1::text[])`
	// Keys outlive their instance: the purge stamps them, once ($2 now).
	sqlPurgeMarkIdemKeys = `UPDATE idempotency_keys SET purged_at = $2
WHERE instance_id = ANY ($1::text[]) AND purged_at IS NULL`
	sqlPurgeDeleteLockQueue = `DELETE FROM lock_queue WHERE instance_id = ANY ($1::text[])`
	sqlPurgeDeleteDedup     = `DELETE FROM message_dedup WHERE instance_id = ANY ($1::text[])`
	sqlDedupInsert          = `INSERT INTO message_dedup (instance_id, dedup_key, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (instance_id, dedup_key) DO NOTHING`
	// Returns the keys, to hand each to its queue once the purge is done.
	sqlPurgeDeleteExecLocks = `DELETE FROM execution_locks WHERE instance_id = ANY ($1::text[]) RETURNING lock_key`
)

// Execution locks and idempotency keys.
const (
	// $1 key.
	sqlIdemGet    = `SELECT instance_id, expires_at, purged_at FROM idempotency_keys WHERE idem_key = $1 FOR UPDATE`
	sqlIdemDelete = `DELETE FROM idempotency_keys WHERE idem_key = $1`
	// $1 key, $2 instance, $3 now, $4 expires_at.
	sqlIdemInsert = `INSERT INTO idempotency_keys (idem_key, instance_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`
	// $1 now.
	sqlIdemCleanup = `DELETE FROM idempotency_keys WHERE expires_at <= $1`

	// The lock on a key with its holder's status ('' when gone). $1 key.
	sqlXLockGet = `SELECT l.instance_id, l.locked_at, l.expires_at, coalesce(i.status, '')
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id
WHERE l.lock_key = $1
FOR UPDATE OF l`
	sqlXLockDelete = `DELETE FROM execution_locks WHERE lock_key = $1`
	// $1 key, $2 instance, $3 now, $4 ttl_ms.
	sqlXLockInsert = `INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms) VALUES ($1, $2, $3::bigint, $3::bigint + $4::bigint, $4::bigint)`
	// The notification of turn acks, sent after their COMMIT: the
	// orchestrator queue has news if messages still wait for one of the
	// acked instances. $1 channel, $2 node, $3 work, $4 the acked
	// instances, $5 the instances changed, $6 all (too many to name).
	// Each instance's first message is looked up in
	// orchestrator_queue_instance, in that index's order: the statement's
	// generic plan, made once per connection and often while the queue is
	// empty, would otherwise read the whole queue whenever none of the
	// instances has a message left (the common case), as a filtered
	// sequential scan of a table it expected to be small.
	sqlAckNotify = `SELECT pg_notify($1::text, json_build_object('n', $2::text,
    'o', EXISTS (SELECT 1 FROM unnest($4::text[]) AS a(id)
        CROSS JOIN LATERAL (SELECT 1 FROM orchestrator_queue AS q WHERE q.instance_id = a.id
                            ORDER BY q.instance_id, q.visible_at LIMIT 1) AS q),
    'w', $3::bool, 'i', $5::text[], 'a', $6::bool)::text)`
	// The advisory locks of the keys whose execution locks instances $2
	// hold, in key order ($1 the lock space). A transaction that deletes
	// execution_locks rows takes them first, as a start takes the key's
	// advisory lock before it reads (FOR UPDATE) the key's row: deleting
	// first and taking the key after would wait for a start that waits
	// for the deleted row (a deadlock, 40P01).
	sqlXLockKeysOf = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || 'xlock:' || l.lock_key, 0))
FROM (SELECT lock_key FROM execution_locks WHERE instance_id = ANY ($2::text[]) ORDER BY lock_key) AS l`
	// The same, for sqlXLockReleaseEnded: only if instance $2 did end.
	sqlXLockKeysOfEnded = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || 'xlock:' || l.lock_key, 0))
FROM (SELECT lock_key FROM execution_locks WHERE instance_id = $2
    AND EXISTS (SELECT 1 FROM instances WHERE instance_id = $2 AND status IN ('Completed', 'Failed', 'Canceled'))
    ORDER BY lock_key) AS l`
	// The holder ended: its locks go (to their queues); it leaves any queue
	// it waited in. $1 instance.
	sqlXLockReleaseInstance = `WITH q AS (DELETE FROM lock_queue WHERE instance_id = $1)
DELETE FROM execution_locks WHERE instance_id = $1 RETURNING lock_key`
	// The same, in a terminal turn's batch, if the instance did end (a turn
	// of an older execution leaves its status alone). $1 instance.
	sqlXLockReleaseEnded = `WITH ended AS (
    SELECT 1 FROM instances WHERE instance_id = $1 AND status IN ('Completed', 'Failed', 'Canceled')
), q AS (DELETE FROM lock_queue WHERE instance_id = $1 AND EXISTS (SELECT 1 FROM ended))
DELETE FROM execution_locks WHERE instance_id = $1 AND EXISTS (SELECT 1 FROM ended) RETURNING lock_key`
	// $1 key, $2 instance, $3 work item, $4 visible_at, $5 ttl_ms, $6 now.
	sqlXLockQueueInsert = `INSERT INTO lock_queue (lock_key, instance_id, work_item, visible_at, ttl_ms, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`
	// Hand a free key to its oldest queued start: the lock names it, its
	// start message is enqueued, and messages that waited for the start
	// become visible with it. Returns the instance, or no row when nobody
	// waits. $1 key, $2 now.
	sqlXLockPromote = `WITH head AS (
    DELETE FROM lock_queue WHERE id = (SELECT id FROM lock_queue WHERE lock_key = $1 ORDER BY id LIMIT 1 FOR UPDATE)
    RETURNING instance_id, work_item, greatest(visible_at, $2) AS visible_at, ttl_ms
), lock AS (
    INSERT INTO execution_locks (lock_key, instance_id, locked_at, expires_at, ttl_ms)
    SELECT $1, instance_id, $2, $2 + ttl_ms, ttl_ms FROM head
), msg AS (
    INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at)
    SELECT instance_id, work_item, visible_at, $2 FROM head
), waiting AS (
    UPDATE orchestrator_queue AS q SET visible_at = head.visible_at
    FROM head
    WHERE q.instance_id = head.instance_id AND q.visible_at > head.visible_at AND q.lock_token IS NULL
)
SELECT instance_id FROM head`
	// Locks that are expired or whose holder ended or is gone. $1 now.
	sqlXLockFreeable = `SELECT l.lock_key
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id
WHERE l.expires_at <= $1 OR i.instance_id IS NULL OR i.status IN ('Completed', 'Failed', 'Canceled')
ORDER BY l.lock_key`
)

// Reads.
const (
	sqlInstanceStatus = `SELECT status FROM instances WHERE instance_id = $1`
	// $1 instance, $2 keys, $3 values (set), $4 keys (cleared), $5 now: an
	// ack's value changes, each key once.
	sqlValuesApply = `WITH s AS (
    INSERT INTO instance_values (instance_id, value_key, value, updated_at)
    SELECT $1, k, v, $5 FROM unnest($2::text[], $3::text[]) AS u (k, v)
    ON CONFLICT (instance_id, value_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
), d AS (
    DELETE FROM instance_values WHERE instance_id = $1 AND value_key = ANY ($4::text[])
)
UPDATE instances SET values_version = values_version + 1 WHERE instance_id = $1`
)

// InstanceQueue (provider.Admin): each an index lookup by instance ID,
// read in one snapshot. $1 instance.
const ()

// instanceColumns are the columns scanned by scanInstanceRow.
const instanceColumns = `instance_id, orchestration_name, orchestration_version, status, current_execution_id,
       input, output, error, custom_status, custom_status_version,
       coalesce(parent_instance_id, ''), parent_execution_id, created_at, updated_at, last_error, values_version`

// executionColumns are the columns scanned by scanExecutionInfo; e is the executions table.
const executionColumns = `e.execution_id, e.status, e.input, e.output, e.error, e.started_at, e.completed_at,
       (SELECT count(*) FROM history AS h WHERE h.instance_id = e.instance_id AND h.execution_id = e.execution_id)`

// xlockSelect reads execution locks with their holder's status (” when
// gone) and the number of queued starts.
const xlockSelect = `SELECT l.lock_key, l.instance_id, l.locked_at, l.expires_at, l.ttl_ms, coalesce(i.status, ''),
       (SELECT count(*) FROM lock_queue AS q WHERE q.lock_key = l.lock_key)
FROM execution_locks AS l LEFT JOIN instances AS i ON i.instance_id = l.instance_id`

// ListInstances is assembled from these fragments by sqlstore.ListQuery
// (its filters are optional; each is followed by its placeholder). One
// state reads the instances_status index (status, seq) newest first;
// several states read one page of it per state and merge those rows.
const (
	sqlListInstancesBase    = `SELECT seq, ` + instanceColumns + ` FROM instances WHERE true`
	sqlListFilterCursor     = ` AND seq < `
	sqlListFilterStatus     = ` AND status = `
	sqlListFilterName       = ` AND orchestration_name = `
	sqlListFilterParent     = ` AND parent_instance_id = `
	sqlListInstancesOrderBy = ` ORDER BY seq DESC LIMIT `
	sqlListStatusPart       = `SELECT seq FROM (SELECT seq FROM instances WHERE status = `
	sqlListStatusPartEnd    = `) AS s`
	sqlListStatusesWrap     = ` AND seq IN (`
	sqlListStatusesUnion    = ` UNION ALL `
	// The ID prefix is a range of the instances_id_bytes index (migration
	// 0003): instance_id >= prefix and below the prefix's successor, both
	// compared byte by byte; LIKE would need escaping and, with a bound
	// parameter, could not use the index.
	sqlListFilterIDFrom  = ` AND instance_id COLLATE "C" >= `
	sqlListFilterIDBelow = ` AND instance_id COLLATE "C" < `
	// A prefix that is not valid UTF-8 (it ends inside a character) is
	// also compared on the IDs' bytes.
	sqlListFilterIDBytes = ` AND substr(convert_to(instance_id, 'UTF8'), 1, octet_length(`
)

// Routing and heartbeats.
const (
	// Renew a worker lock, record a heartbeat (NULL details keep the
	// recorded ones) and touch its session; returns whether the lock was
	// held. $1 id, $2 token, $3 now, $4 new locked_until, $5 details.
	sqlHeartbeatWork = `WITH w AS (
    UPDATE worker_queue
    SET locked_until = $4, visible_at = $4, heartbeat_at = $3, heartbeat_details = coalesce($5::text, heartbeat_details)
    WHERE id = $1 AND lock_token = $2 AND locked_until > $3
    RETURNING session_id
), s AS (
    UPDATE sessions SET last_activity_at = $3
    WHERE session_id = (SELECT session_id FROM w) AND locked_until > $3
)
SELECT count(*) > 0 FROM w`

	// $1 worker, $2 activities, $3 queues, $4 seen_until, $5 and $6
	// orchestration names and routes (NULL: any).
	sqlAnnounceRoutes = `INSERT INTO worker_routes (worker_id, activities, queues, seen_until, orchestrations, orchestration_routes)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (worker_id) DO UPDATE SET activities = excluded.activities, queues = excluded.queues, seen_until = excluded.seen_until,
    orchestrations = excluded.orchestrations, orchestration_routes = excluded.orchestration_routes`

	// Instances ready since $2 or earlier whose orchestration no route
	// live at $1 registers, in the order they became ready. $3 limit.
	sqlUnservedTurnCandidates = `SELECT o.instance_id
FROM orchestrator_ready AS o JOIN instances AS i ON i.instance_id = o.instance_id
WHERE o.ready_at <= $2 AND ` + orchUnservedAt1 + `
ORDER BY o.ready_at, o.first_id
LIMIT $3`

	// $1 worker.
	sqlWithdrawRoutes = `DELETE FROM worker_routes WHERE worker_id = $1`

	// Lock, without counting a delivery, visible and unlocked rows
	// enqueued before $2 that no live route serves, oldest first, skipping
	// rows another transaction holds. $1 now, $2 enqueued before, $3
	// limit, $4 token prefix, $5 locked_until.
	sqlLockUnserved = `WITH c AS (
    SELECT id FROM worker_queue AS q
    WHERE q.visible_at <= $1 AND q.created_at <= $2 AND (q.lock_token IS NULL OR q.locked_until <= $1)
      AND ` + unservedAt1 + `
    ORDER BY q.id
    LIMIT $3
    FOR UPDATE OF q SKIP LOCKED
)
UPDATE worker_queue AS u
SET lock_token = $4 || u.id, locked_until = $5, visible_at = $5
FROM c WHERE u.id = c.id
RETURNING u.lock_token, u.instance_id, u.execution_id, u.activity_id, coalesce(u.session_id, ''), u.work_item, u.attempt_count`
)

// orchUnservedAt1 and orchUnservedAt2 report that no route live at the
// time $1 (or $2) registers the orchestration of instance row i, in the
// version it is pinned to, while some route is live. A route without an
// orchestration list (NULL) registers every name; one without
// orchestration_routes (an earlier release) every version of its names
// (see migration 0012); an instance without a name is never unserved.
const (
	orchUnservedAt1 = `(i.orchestration_name <> '' AND EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > $1)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > $1 AND ` + orchServedByR + `))`
	orchUnservedAt2 = `(i.orchestration_name <> '' AND EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > $2)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > $2 AND ` + orchServedByR + `))`
	orchServedByR = `(r.orchestrations IS NULL
      OR i.orchestration_name = ANY (coalesce(r.orchestration_routes, r.orchestrations))
      OR ` + orchRoute + ` = ANY (coalesce(r.orchestration_routes, r.orchestrations)))`
	// orchRoute is the route of instance row i: its name and version
	// (sqlenc.OrchestrationRoutes).
	orchRoute = `i.orchestration_name || chr(31) || i.orchestration_version`
)

// unservedAt1 and unservedAt2 report that no route live at the time $1
// (or $2) serves worker row q, while some route is live (with none,
// nothing is known of what is served: runtimes of earlier releases
// announce none).
const (
	unservedAt1 = `EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > $1)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > $1
    AND q.queue = ANY (r.queues) AND (q.activity_name IS NULL OR q.activity_name = ANY (r.activities)))`
	unservedAt2 = `EXISTS (SELECT 1 FROM worker_routes WHERE seen_until > $2)
  AND NOT EXISTS (SELECT 1 FROM worker_routes AS r WHERE r.seen_until > $2
    AND q.queue = ANY (r.queues) AND (q.activity_name IS NULL OR q.activity_name = ANY (r.activities)))`
)

// sharedSQL is the SQL text of the shared code's statements (sqlstore.Query).
var sharedSQL = [sqlstore.NumQueries]string{
	sqlstore.QInstanceCurrent: `SELECT current_execution_id FROM instances WHERE instance_id = $1`,
	sqlstore.QExecutionExists: `SELECT EXISTS (SELECT 1 FROM executions WHERE instance_id = $1 AND execution_id = $2)`,
	sqlstore.QHistory:         `SELECT event_data FROM history WHERE instance_id = $1 AND execution_id = $2 ORDER BY event_id`,
	// The instance row and the store time of the newest event of its
	// current execution (NULL when it has none).
	sqlstore.QQueueInstance: `SELECT i.current_execution_id, i.created_at, i.last_error_at,
       (SELECT h.created_at FROM history AS h
        WHERE h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
        ORDER BY h.event_id DESC LIMIT 1),
       ` + orchUnservedAt2 + `
FROM instances AS i WHERE i.instance_id = $1`,
	sqlstore.QQueueMessages: `SELECT work_item, created_at, visible_at, attempt_count, lock_token IS NOT NULL
FROM orchestrator_queue WHERE instance_id = $1 ORDER BY id`,
	// $1 instance, $2 now (for the live routes).
	sqlstore.QQueueWork: `SELECT execution_id, activity_id, coalesce(session_id, ''), work_item, created_at, visible_at, attempt_count,
       CASE WHEN lock_token IS NULL THEN NULL ELSE locked_until END, last_error, last_error_at,
       queue, heartbeat_at, heartbeat_details, ` + unservedAt2 + `
FROM worker_queue AS q WHERE instance_id = $1 ORDER BY id`,
	sqlstore.QQueueLock:      `SELECT locked_at, locked_until FROM instance_locks WHERE instance_id = $1`,
	sqlstore.QQueueHeldLocks: `SELECT lock_key FROM execution_locks WHERE instance_id = $1 ORDER BY lock_key`,
	// The instance's queued start, its holder and how many starts are
	// ahead of it (a lock_queue_key range up to its row).
	sqlstore.QQueueStart: `SELECT q.lock_key, coalesce(l.instance_id, ''), q.created_at, q.visible_at,
       (SELECT count(*) FROM lock_queue AS a WHERE a.lock_key = q.lock_key AND a.id <= q.id)
FROM lock_queue AS q LEFT JOIN execution_locks AS l ON l.lock_key = q.lock_key
WHERE q.instance_id = $1 ORDER BY q.id LIMIT 1`,
	// $1 key.
	sqlstore.QLockGet:        xlockSelect + ` WHERE l.lock_key = $1`,
	sqlstore.QLockList:       xlockSelect + ` ORDER BY l.lock_key`,
	sqlstore.QGetInstance:    `SELECT ` + instanceColumns + ` FROM instances WHERE instance_id = $1`,
	sqlstore.QInstanceExists: `SELECT EXISTS (SELECT 1 FROM instances WHERE instance_id = $1)`,
	sqlstore.QValues:         `SELECT value_key, value, updated_at FROM instance_values WHERE instance_id = $1 ORDER BY value_key`,
	sqlstore.QValue:          `SELECT value, updated_at FROM instance_values WHERE instance_id = $1 AND value_key = $2`,
	sqlstore.QListExecutions: `SELECT ` + executionColumns + ` FROM executions AS e WHERE e.instance_id = $1 ORDER BY e.execution_id`,
	sqlstore.QGetExecution:   `SELECT ` + executionColumns + ` FROM executions AS e WHERE e.instance_id = $1 AND e.execution_id = $2`,
	sqlstore.QListChildren:   `SELECT instance_id FROM instances WHERE parent_instance_id = $1 ORDER BY seq`,
	// The earliest time a fetch may find what it cannot now (NULL: queue
	// empty); each is one lookup at the low end of an index. Orchestrator:
	// ready_at already folds in the expiry of the instance's lock (0002).
	// Worker: a fetch moves visible_at to locked_until.
	sqlstore.QNextVisibleOrch: `SELECT min(ready_at) FROM orchestrator_ready`,
	sqlstore.QNextVisibleWork: `SELECT min(visible_at) FROM worker_queue`,
	// StalledInstances (provider.Admin): each rule's candidates come from
	// an index range of the rows matching it (partial indexes of migration
	// 0003, orchestrator_ready_order, worker_queue_visible), capped at $4
	// rows; the candidates are then checked against the instance row and
	// the time of their newest event (a primary-key lookup). $1 cutoff
	// (now minus the threshold), $2 minimum deliveries, $3 page size + 1,
	// $4 cap per rule.
	sqlstore.QStalled: `WITH candidates(instance_id) AS (
    (SELECT instance_id FROM instances
     WHERE last_error_at IS NOT NULL AND last_error_at <= $1 ORDER BY last_error_at LIMIT $4)
    UNION (SELECT instance_id FROM worker_queue
     WHERE last_error_at IS NOT NULL AND last_error_at <= $1 ORDER BY last_error_at LIMIT $4)
    UNION (SELECT instance_id FROM worker_queue
     WHERE attempt_count > 1 AND attempt_count >= $2 ORDER BY attempt_count DESC LIMIT $4)
    UNION (SELECT instance_id FROM orchestrator_ready
     WHERE ready_at <= $1 ORDER BY ready_at LIMIT $4)
    UNION (SELECT instance_id FROM worker_queue
     WHERE visible_at <= $1 ORDER BY visible_at LIMIT $4)
)
SELECT i.instance_id
FROM candidates AS c JOIN instances AS i ON i.instance_id = c.instance_id
WHERE i.status IN ('Pending', 'Running', 'ContinuedAsNew')
  AND NOT EXISTS (SELECT 1 FROM instance_locks AS p WHERE p.instance_id = i.instance_id AND p.pause_reason IS NOT NULL)
  AND coalesce((SELECT h.created_at FROM history AS h
                WHERE h.instance_id = i.instance_id AND h.execution_id = i.current_execution_id
                ORDER BY h.event_id DESC LIMIT 1), i.created_at) <= $1
ORDER BY i.seq DESC
LIMIT $3`,
	// $1 now.
	sqlstore.QQueueDepths: `SELECT
  (SELECT count(*) FROM orchestrator_queue AS q WHERE q.visible_at <= $1
     AND NOT (q.lock_token IS NOT NULL AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > $1))),
  (SELECT count(*) FROM orchestrator_queue WHERE visible_at > $1 AND (lock_token IS NULL OR locked_until <= $1)),
  (SELECT count(*) FROM orchestrator_queue AS q WHERE q.lock_token IS NOT NULL
     AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > $1)),
  (SELECT count(*) FROM worker_queue WHERE visible_at <= $1),
  (SELECT count(*) FROM worker_queue WHERE visible_at > $1 AND (lock_token IS NULL OR locked_until <= $1)),
  (SELECT count(*) FROM worker_queue WHERE lock_token IS NOT NULL AND locked_until > $1),
  (SELECT count(*) FROM worker_queue AS q WHERE q.visible_at <= $1 AND ` + unservedAt1 + `),
  (SELECT count(*) FROM orchestrator_queue AS q JOIN instances AS i ON i.instance_id = q.instance_id WHERE q.visible_at <= $1
     AND NOT (q.lock_token IS NOT NULL AND EXISTS (SELECT 1 FROM instance_locks AS l
                 WHERE l.instance_id = q.instance_id AND l.lock_token = q.lock_token AND l.locked_until > $1))
     AND ` + orchUnservedAt1 + `)`,
	sqlstore.QCounts: `SELECT (SELECT count(*) FROM instances), (SELECT count(*) FROM executions), (SELECT count(*) FROM history),
       (SELECT count(*) FROM execution_locks)`,
	sqlstore.QCountsByStatus: `SELECT status, count(*) FROM instances GROUP BY status`,
	// $1 id, $2 token, $3 now.
	sqlstore.QWorkHeartbeat: `SELECT heartbeat_at, heartbeat_details FROM worker_queue WHERE id = $1 AND lock_token = $2 AND locked_until > $3`,
	// $1 limit.
	sqlstore.QDeadLetters: `SELECT id, queue, instance_id, payload, error, dead_at FROM dead_letters ORDER BY id DESC LIMIT $1`,
}

// sqlFetchWork holds the worker fetch's statements (see
// workFilterNoSession), by whether the fetch serves some activity names
// only (else any) and whether it claims sessions. Each locks the rows it
// finds that belong to no session, in the same statement, and returns
// them (id, NULL, then the columns of sqlLockWork after the id); with a
// session, the rows it finds of sessions follow, locked FOR UPDATE but
// not yet leased (id, session, a NULL token and placeholders): their
// sessions are claimed first.
var sqlFetchWork = [2][2]string{
	{workFetchSQL(false, false, false), workFetchSQL(false, true, false)},
	{workFetchSQL(true, false, false), workFetchSQL(true, true, false)},
}

// sqlFetchWorkLast holds the statements of a worker fetch with a session
// option whose COMMIT rides with it, by whether it serves some names only:
// sqlFetchWork's, failing with codeNotLast (rolling back) when it finds a
// row of a session, whose claim must follow.
var sqlFetchWorkLast = [2]string{workFetchSQL(false, true, true), workFetchSQL(true, true, true)}

func workFetchSQL(named, session, last bool) string {
	filter := workFilterNoSession
	if session {
		filter = workFilterSession
	}
	scan := workRangeHead + `q.visible_at <= $1 AND $3::text[] IS NULL
  AND CASE WHEN q.queue = ANY ($4::text[]) AND ` + filter + workRangeTail
	if named {
		scan = `SELECT c.id, c.session_id FROM (
    SELECT c.* FROM unnest($4::text[]) AS r(queue) CROSS JOIN unnest($3::text[]) AS n(name)
    CROSS JOIN LATERAL (` + workRangeHead + `(q.queue, q.activity_name) >= (r.queue, n.name)
      AND (q.queue, q.activity_name) <= (r.queue, n.name) AND q.visible_at <= $1
      AND CASE WHEN ` + filter + workRangeNamedTail + `) AS c
    UNION ALL
    SELECT c.* FROM unnest($4::text[]) AS r(queue)
    CROSS JOIN LATERAL (` + workRangeHead + `q.queue = r.queue AND q.activity_name IS NULL AND q.visible_at <= $1
      AND CASE WHEN ` + filter + workRangeTail + `) AS c
) AS c
ORDER BY c.id
LIMIT $2`
	}
	lock := workLockSet
	if session {
		lock += ` WHERE c.session_id IS NULL`
	}
	q := `WITH c AS (
` + scan + `
), l AS (
` + lock + workLockReturning + `
)
SELECT l.id, NULL::text, l.lock_token, l.instance_id, l.execution_id, l.activity_id, l.session_id, l.work_item, l.attempt_count
FROM l`
	if session {
		q += `
UNION ALL
SELECT c.id, c.session_id, NULL, '', 0, 0, '', NULL, 0 FROM c WHERE c.session_id IS NOT NULL`
		if last {
			q += `
  AND duroxide_check(c.session_id IS NULL, '` + codeNotLast + `', 'the fetch must claim a session')`
		}
	}
	return q
}

// Take the locks of several instances (whose advisory locks the
// transaction holds): insert, or steal an expired lock; then tag every
// visible message of the instances locked with the instance's token and
// count the delivery (the instances' messages read by
// orchestrator_queue_instance, an index range each, whatever the
// planner's statistics). Returns the tagged messages; an instance locked
// without messages returns one row with a NULL id. $1 token prefix, $2
// instance IDs, $3 locked_until, $4 now, $5 1 (or 0 to count no
// delivery: FetchUnservedOrchestrationItems), $6 the latest visible
// time taken: now, or later for a fetch that takes messages before
// they are due (provider.FetchOptions.Ahead).
var sqlLockAndTag = `WITH ` + lockAndTagCTEs(`SELECT c.id FROM unnest($2::text[]) AS c(id)`, "$1", "$3", "$4", "$5", "$6") + `
SELECT locked.instance_id, t.id, t.work_item, t.attempt_count, t.visible_at
FROM locked LEFT JOIN tagged AS t ON t.instance_id = locked.instance_id`

// lockAndTagCTEs are the two common table expressions that lock
// instances and tag their messages, shared by sqlLockAndTag and
// sqlFetchAndLock: locked (the IDs of the instances it locked: the rows
// of ids, one column, whose lock is free or expired by now) and tagged
// (their messages visible by seen, tagged with prefix || instance ID
// until until, count added to their deliveries: the ID, instance, item,
// deliveries and visible time of each). The other arguments are SQL
// expressions (parameter references).
func lockAndTagCTEs(ids, prefix, until, now, count, seen string) string {
	return `locked AS (
    INSERT INTO instance_locks (instance_id, lock_token, locked_until, locked_at)
    SELECT s.id, ` + prefix + ` || s.id, ` + until + `, ` + now + ` FROM (` + ids + `) AS s(id)
    ON CONFLICT (instance_id) DO UPDATE
    SET lock_token = excluded.lock_token, locked_until = excluded.locked_until, locked_at = excluded.locked_at
    WHERE instance_locks.locked_until <= ` + now + `
    RETURNING instance_id
), tagged AS (
    UPDATE orchestrator_queue AS q
    SET lock_token = ` + prefix + ` || q.instance_id, locked_until = ` + until + `, attempt_count = q.attempt_count + ` + count + `
    WHERE q.instance_id = ANY (ARRAY(SELECT locked.instance_id FROM locked)) AND q.visible_at <= ` + seen + `
    RETURNING q.id, q.instance_id, q.work_item, q.attempt_count, q.visible_at
)`
}

// The first round of a turn fetch, in one statement (fetchRound): the
// candidates of sqlOrchCandidates (or sqlOrchCandidatesNamed: their
// parameters $1 to $5: $1 is the latest ready time taken), with whether
// the transaction got their advisory locks, are locked and their messages
// visible by $1 tagged as sqlLockAndTag does ($6 token prefix, $7
// locked_until, $8 now, a delivery counted). It keeps
// the IDs of the instances it locked in the transaction's setting
// duroxide.fetched (a text array), from which the statements that follow
// it in its batch read those instances' rows (sqlFetchedMetas,
// sqlFetchedStarts), each with a snapshot taken after the locks, as
// before. One row per candidate and tagged message, in no order (the
// caller orders them: a sort in the plan would sit above the queue's
// update): the setting's value, the candidate's rank in the order the
// instances became ready, the candidate, whether its advisory lock was
// got, whether it was locked, and the message's ID, item, deliveries and visible time
// (NULL without); a single row of NULLs but the first when there is no
// candidate.
var (
	sqlFetchAndLock      = fetchAndLockSQL(sqlOrchCandidates)
	sqlFetchAndLockNamed = fetchAndLockSQL(sqlOrchCandidatesNamed)
)

func fetchAndLockSQL(candidates string) string {
	return `WITH c AS MATERIALIZED (
    SELECT row_number() OVER () AS ord, x.instance_id, x.got
    FROM (` + candidates + `) AS x(instance_id, got)
), ` + lockAndTagCTEs(`SELECT c.instance_id FROM c WHERE c.got`, "$6", "$7", "$8", "1", "$1") + `
SELECT k.fetched, c.ord, c.instance_id, c.got, l.instance_id IS NOT NULL, t.id, t.work_item, t.attempt_count, t.visible_at
FROM (SELECT set_config('duroxide.fetched', coalesce((SELECT array_agg(locked.instance_id) FROM locked), '{}')::text, true) AS fetched) AS k
LEFT JOIN c ON true
LEFT JOIN locked AS l ON l.instance_id = c.instance_id
LEFT JOIN tagged AS t ON t.instance_id = l.instance_id`
}

// fetchedIDs are the instances the transaction's last sqlFetchAndLock
// locked.
const fetchedIDs = `current_setting('duroxide.fetched', true)::text[]`

// sqlFetchedMetas is sqlInstanceMetas of the instances fetchedIDs names;
// sqlFetchedStarts is sqlPendingStarts of them, $1 now.
var (
	sqlFetchedMetas  = strings.Replace(sqlInstanceMetas, "$1::text[]", fetchedIDs, 1)
	sqlFetchedStarts = strings.NewReplacer("$1::text[]", fetchedIDs, "$2", "$1").Replace(sqlPendingStarts)
)
