package sqlstore

import (
	"encoding/json"
	"errors"
	"iter"
	"time"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// Copying a store (provider.Exporter, provider.Importer): the record
// mapping of every table, written once. Each store keeps the SQL text of
// each table's export and import statements, in the column order these
// functions read and write, and its transactions.

// ExportTable is one table of an export: its rows, in the order they were
// written, become records through Scan. Args are the arguments of the
// store's export statement of Table.
type ExportTable struct {
	Table provider.Table
	Args  []any
	Scan  func(r Row) (provider.Record, error)
}

// ExportTables lists the tables of an export in the order they are
// streamed (parents before the rows that refer to them). now is the
// export's time: a worker row locked at the export is exported unlocked,
// visible at its lock expiry capped by now (the worker-queue statement's
// argument).
//
// The columns of each table's export statement, in order:
//   - instances: instance_id, orchestration_name, orchestration_version,
//     status, current_execution_id, input, output, error, custom_status,
//     custom_status_version, parent_instance_id (” for none),
//     parent_execution_id, created_at, updated_at, last_error,
//     values_version;
//   - executions: instance_id, execution_id, status, input, output, error,
//     started_at, completed_at (0 for none);
//   - history: instance_id, execution_id, event_id, event_type,
//     event_data, created_at;
//   - orchestrator queue: instance_id, work_item, visible_at,
//     attempt_count, created_at;
//   - worker queue: instance_id, execution_id, activity_id, session_id
//     (” for none), work_item, visible_at, attempt_count, created_at;
//   - execution locks: lock_key, instance_id, locked_at, expires_at,
//     ttl_ms;
//   - queued starts: lock_key, instance_id, work_item, visible_at, ttl_ms,
//     created_at;
//   - idempotency keys: idem_key, instance_id, created_at, expires_at,
//     purged_at (0 for none);
//   - dead letters: queue, instance_id, payload, error, dead_at;
//   - instance values: instance_id, value_key, value, updated_at;
//   - pauses (the instance locks that hold instances paused): instance_id,
//     locked_at, pause_reason, paused_by (” for none);
//   - schedules: schedule_id, spec, paused, next_fire_at (0 for none),
//     last_fire_at (0 for none), last_instance_id, last_outcome, revision,
//     created_at, updated_at.
func ExportTables(now int64) []ExportTable {
	return []ExportTable{
		{provider.TableInstances, nil, scanInstanceRecord},
		{provider.TableExecutions, nil, func(r Row) (provider.Record, error) {
			var (
				e                    provider.ExecutionRecord
				status               string
				input, output, errJ  *string
				started, completedAt int64
			)
			if err := r.Scan(&e.InstanceID, &e.ExecutionID, &status, &input, &output, &errJ, &started, &completedAt); err != nil {
				return nil, err
			}
			e.Status = provider.Status(status)
			e.Input, e.Output, e.Error = NullJSON(input), NullJSON(output), NullJSON(errJ)
			e.StartedAt, e.CompletedAt = MsTime(started), optTime(completedAt)
			return &e, nil
		}},
		{provider.TableHistory, nil, func(r Row) (provider.Record, error) {
			var (
				e       provider.EventRecord
				data    []byte
				created int64
			)
			if err := r.Scan(&e.InstanceID, &e.ExecutionID, &e.EventID, &e.EventType, &data, &created); err != nil {
				return nil, err
			}
			e.Data, e.CreatedAt = json.RawMessage(data), MsTime(created)
			return &e, nil
		}},
		{provider.TableValues, nil, func(r Row) (provider.Record, error) {
			var (
				rec     provider.ValueRecord
				value   string
				updated int64
			)
			if err := r.Scan(&rec.InstanceID, &rec.Key, &value, &updated); err != nil {
				return nil, err
			}
			rec.Value, rec.UpdatedAt = json.RawMessage(value), MsTime(updated)
			return &rec, nil
		}},
		{provider.TableOrchestratorQ, nil, func(r Row) (provider.Record, error) {
			var (
				rec              provider.OrchestratorMessageRecord
				item             []byte
				visible, created int64
			)
			if err := r.Scan(&rec.InstanceID, &item, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), MsTime(visible), MsTime(created)
			return &rec, nil
		}},
		{provider.TableWorkerQ, []any{now}, func(r Row) (provider.Record, error) {
			var (
				rec              provider.WorkerMessageRecord
				item             []byte
				visible, created int64
			)
			if err := r.Scan(&rec.InstanceID, &rec.ExecutionID, &rec.ActivityID, &rec.SessionID, &item, &visible, &rec.AttemptCount, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), MsTime(visible), MsTime(created)
			return &rec, nil
		}},
		{provider.TableExecutionLocks, nil, func(r Row) (provider.Record, error) {
			var (
				rec                    provider.ExecutionLockRecord
				locked, expires, ttlMs int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &locked, &expires, &ttlMs); err != nil {
				return nil, err
			}
			rec.LockedAt, rec.ExpiresAt, rec.TTL = MsTime(locked), MsTime(expires), time.Duration(ttlMs)*time.Millisecond
			return &rec, nil
		}},
		{provider.TableQueuedStarts, nil, func(r Row) (provider.Record, error) {
			var (
				rec                     provider.QueuedStartRecord
				item                    []byte
				visible, ttlMs, created int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &item, &visible, &ttlMs, &created); err != nil {
				return nil, err
			}
			rec.Item, rec.VisibleAt, rec.CreatedAt = json.RawMessage(item), MsTime(visible), MsTime(created)
			rec.TTL = time.Duration(ttlMs) * time.Millisecond
			return &rec, nil
		}},
		{provider.TableIdempotencyKeys, nil, func(r Row) (provider.Record, error) {
			var (
				rec                      provider.IdempotencyKeyRecord
				created, expires, purged int64
			)
			if err := r.Scan(&rec.Key, &rec.InstanceID, &created, &expires, &purged); err != nil {
				return nil, err
			}
			rec.CreatedAt, rec.ExpiresAt, rec.PurgedAt = MsTime(created), MsTime(expires), optTime(purged)
			return &rec, nil
		}},
		{provider.TableDeadLetters, nil, func(r Row) (provider.Record, error) {
			var (
				rec provider.DeadLetterRecord
				at  int64
			)
			if err := r.Scan(&rec.Queue, &rec.InstanceID, &rec.Payload, &rec.Error, &at); err != nil {
				return nil, err
			}
			rec.DeadAt = MsTime(at)
			return &rec, nil
		}},
		{provider.TablePauses, nil, func(r Row) (provider.Record, error) {
			var (
				rec provider.PauseRecord
				at  int64
			)
			if err := r.Scan(&rec.InstanceID, &at, &rec.Reason, &rec.By); err != nil {
				return nil, err
			}
			rec.At = MsTime(at)
			return &rec, nil
		}},
		{provider.TableSchedules, nil, func(r Row) (provider.Record, error) {
			var (
				rec                          provider.ScheduleRecord
				spec                         string
				next, last, created, updated int64
			)
			s := &rec.Schedule
			if err := r.Scan(&s.ID, &spec, &s.Paused, &next, &last, &s.LastInstanceID, &s.LastOutcome, &s.Revision,
				&created, &updated); err != nil {
				return nil, err
			}
			s.Spec, s.NextFireAt, s.LastFireAt = []byte(spec), optTime(next), optTime(last)
			s.CreatedAt, s.UpdatedAt = MsTime(created), MsTime(updated)
			return &rec, nil
		}},
	}
}

func scanInstanceRecord(r Row) (provider.Record, error) {
	var (
		in                                   provider.InstanceRecord
		status                               string
		input, output, errJ, custom, lastErr *string
		created, updated                     int64
	)
	if err := r.Scan(&in.InstanceID, &in.OrchestrationName, &in.OrchestrationVersion, &status,
		&in.CurrentExecutionID, &input, &output, &errJ, &custom, &in.CustomStatusVersion,
		&in.ParentInstanceID, &in.ParentExecutionID, &created, &updated, &lastErr, &in.ValuesVersion); err != nil {
		return nil, err
	}
	in.Status = provider.Status(status)
	in.Input, in.Output, in.Error, in.CustomStatus, in.LastError = NullJSON(input), NullJSON(output), NullJSON(errJ), NullJSON(custom), NullJSON(lastErr)
	in.CreatedAt, in.UpdatedAt = MsTime(created), MsTime(updated)
	return &in, nil
}

// errStopped: the consumer of Records stopped the iteration.
var errStopped = errors.New("iteration stopped")

// ImportRow is how one record is imported: the table it goes to, the
// arguments of the store's import statement of that table, and the
// sentinel a unique violation of it means (nil: none expected). The
// arguments are, in order, the columns ExportTables reads for the table,
// with JSON documents as nullable text and optional times as 0; a pause
// adds, after them, the token and expiry of the lock that holds it.
type ImportRow struct {
	Table    provider.Table
	Args     []any
	Conflict error
}

// ImportArgs returns how rec is imported; a nil or unknown record is
// ErrInvalidArgument.
func ImportArgs(rec provider.Record) (ImportRow, error) {
	switch r := rec.(type) {
	case *provider.InstanceRecord:
		return ImportRow{provider.TableInstances, []any{r.InstanceID, r.OrchestrationName, r.OrchestrationVersion,
			string(r.Status), r.CurrentExecutionID, nullText(r.Input), nullText(r.Output), nullText(r.Error),
			nullText(r.CustomStatus), r.CustomStatusVersion, r.ParentInstanceID, r.ParentExecutionID,
			r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli(), nullText(r.LastError), r.ValuesVersion}, provider.ErrInstanceExists}, nil
	case *provider.ExecutionRecord:
		return ImportRow{provider.TableExecutions, []any{r.InstanceID, r.ExecutionID, string(r.Status),
			nullText(r.Input), nullText(r.Output), nullText(r.Error), r.StartedAt.UnixMilli(), optMs(r.CompletedAt)}, provider.ErrInstanceExists}, nil
	case *provider.EventRecord:
		return ImportRow{provider.TableHistory, []any{r.InstanceID, r.ExecutionID, r.EventID, r.EventType,
			string(r.Data), r.CreatedAt.UnixMilli()}, provider.ErrDuplicateEvent}, nil
	case *provider.OrchestratorMessageRecord:
		return ImportRow{provider.TableOrchestratorQ, []any{r.InstanceID, string(r.Item), r.VisibleAt.UnixMilli(), r.AttemptCount, r.CreatedAt.UnixMilli()}, nil}, nil
	case *provider.WorkerMessageRecord:
		return ImportRow{provider.TableWorkerQ, []any{r.InstanceID, r.ExecutionID, r.ActivityID, r.SessionID, string(r.Item),
			r.VisibleAt.UnixMilli(), r.AttemptCount, r.CreatedAt.UnixMilli()}, nil}, nil
	case *provider.ExecutionLockRecord:
		return ImportRow{provider.TableExecutionLocks, []any{r.Key, r.InstanceID, r.LockedAt.UnixMilli(), r.ExpiresAt.UnixMilli(), sqlenc.DurMs(r.TTL)}, nil}, nil
	case *provider.QueuedStartRecord:
		return ImportRow{provider.TableQueuedStarts, []any{r.Key, r.InstanceID, string(r.Item), r.VisibleAt.UnixMilli(), sqlenc.DurMs(r.TTL), r.CreatedAt.UnixMilli()}, nil}, nil
	case *provider.IdempotencyKeyRecord:
		return ImportRow{provider.TableIdempotencyKeys, []any{r.Key, r.InstanceID, r.CreatedAt.UnixMilli(), r.ExpiresAt.UnixMilli(), optMs(r.PurgedAt)}, nil}, nil
	case *provider.DeadLetterRecord:
		return ImportRow{provider.TableDeadLetters, []any{r.Queue, r.InstanceID, r.Payload, r.Error, r.DeadAt.UnixMilli()}, nil}, nil
	case *provider.ValueRecord:
		return ImportRow{provider.TableValues, []any{r.InstanceID, r.Key, string(r.Value), r.UpdatedAt.UnixMilli()}, nil}, nil
	case *provider.PauseRecord:
		return ImportRow{provider.TablePauses, []any{r.InstanceID, r.At.UnixMilli(), r.Reason, r.By,
			PauseToken(r.InstanceID), HeldUntil}, nil}, nil
	case *provider.ScheduleRecord:
		s := &r.Schedule
		return ImportRow{provider.TableSchedules, []any{s.ID, string(s.Spec), s.Paused, optMs(s.NextFireAt), optMs(s.LastFireAt),
			s.LastInstanceID, s.LastOutcome, s.Revision, s.CreatedAt.UnixMilli(), s.UpdatedAt.UnixMilli()}, provider.ErrScheduleExists}, nil
	case nil:
		return ImportRow{}, sqlenc.Invalid("a nil record")
	default:
		return ImportRow{}, sqlenc.Invalid("unknown record type %T", rec)
	}
}

// optTime converts a stored optional time (0: none) to the zero time or a time.
func optTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return MsTime(ms)
}

// optMs converts an optional time to stored milliseconds (0: none).
func optMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// nullText is a JSON document as a nullable text argument.
func nullText(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// Records streams the tables of an export (ExportTables(now)) as records:
// query runs a table's export statement in the export's transaction and
// returns its rows and how to close them. A failure ends the stream with
// one error, wrapped by fail for the table's operation.
func Records(now int64, query func(t ExportTable) (Rows, func(), error),
	fail func(op string, err error) error) iter.Seq2[provider.Record, error] {
	return func(yield func(provider.Record, error) bool) {
		for _, t := range ExportTables(now) {
			err := streamTable(t, query, yield)
			if errors.Is(err, errStopped) {
				return
			}
			if err != nil {
				yield(nil, fail("exporting "+string(t.Table), err))
				return
			}
		}
	}
}

func streamTable(t ExportTable, query func(t ExportTable) (Rows, func(), error), yield func(provider.Record, error) bool) error {
	rows, closeRows, err := query(t)
	if err != nil {
		return err
	}
	defer closeRows()
	for rows.Next() {
		rec, err := t.Scan(rows)
		if err != nil {
			return err
		}
		if !yield(rec, nil) {
			return errStopped
		}
	}
	return rows.Err()
}

// ExportSQL returns the export statement of each copied table, with the
// columns ExportTables reads: the same text in every SQL dialect, but the
// worker queue's (workerQ), whose argument (now) is written with the
// store's placeholder.
func ExportSQL(workerQ string) map[provider.Table]string {
	return map[provider.Table]string{
		provider.TableInstances: `SELECT instance_id, orchestration_name, orchestration_version, status, current_execution_id,
       input, output, error, custom_status, custom_status_version,
       coalesce(parent_instance_id, ''), parent_execution_id, created_at, updated_at, last_error, values_version
FROM instances ORDER BY seq`,
		provider.TableExecutions: `SELECT instance_id, execution_id, status, input, output, error, started_at, coalesce(completed_at, 0)
FROM executions ORDER BY instance_id, execution_id`,
		provider.TableHistory: `SELECT instance_id, execution_id, event_id, event_type, event_data, created_at
FROM history ORDER BY instance_id, execution_id, event_id`,
		provider.TableOrchestratorQ: `SELECT instance_id, work_item, visible_at, attempt_count, created_at
FROM orchestrator_queue ORDER BY id`,
		provider.TableExecutionLocks:  `SELECT lock_key, instance_id, locked_at, expires_at, ttl_ms FROM execution_locks ORDER BY lock_key`,
		provider.TableQueuedStarts:    `SELECT lock_key, instance_id, work_item, visible_at, ttl_ms, created_at FROM lock_queue ORDER BY id`,
		provider.TableIdempotencyKeys: `SELECT idem_key, instance_id, created_at, expires_at, coalesce(purged_at, 0) FROM idempotency_keys ORDER BY idem_key`,
		provider.TableDeadLetters:     `SELECT queue, instance_id, payload, error, dead_at FROM dead_letters ORDER BY id`,
		provider.TableWorkerQ:         workerQ,
		provider.TableValues:          `SELECT instance_id, value_key, value, updated_at FROM instance_values ORDER BY instance_id, value_key`,
		provider.TablePauses: `SELECT instance_id, locked_at, pause_reason, coalesce(paused_by, '')
FROM instance_locks WHERE pause_reason IS NOT NULL ORDER BY instance_id`,
		provider.TableSchedules: `SELECT schedule_id, spec, paused, coalesce(next_fire_at, 0), coalesce(last_fire_at, 0),
       last_instance_id, last_outcome, revision, created_at, updated_at
FROM schedules ORDER BY schedule_id`,
	}
}
