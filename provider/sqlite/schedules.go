package sqlite

import (
	"context"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// Schedules (migration 0008); see provider.ScheduleStore. The logic is
// sqlstore's; this file holds the SQL text and runs it.

// schedules is the embedded implementation of provider.ScheduleStore
// (an alias, so that the field stays unexported).
type schedules = sqlstore.Schedules

const schedCols = `schedule_id, spec, paused, next_fire_at, last_fire_at, last_instance_id, last_outcome, revision, created_at, updated_at`

var scheduleSQL = [sqlstore.NumSchedQueries]string{
	sqlstore.SQInsert: `INSERT INTO schedules (schedule_id, spec, paused, next_fire_at, revision, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5) ON CONFLICT (schedule_id) DO NOTHING`,
	sqlstore.SQGet:  `SELECT ` + schedCols + ` FROM schedules WHERE schedule_id = ?1`,
	sqlstore.SQList: `SELECT ` + schedCols + ` FROM schedules ORDER BY schedule_id`,
	sqlstore.SQUpdate: `UPDATE schedules SET spec = ?2, paused = ?3, next_fire_at = ?4, updated_at = ?5, revision = revision + 1
WHERE schedule_id = ?1 AND revision = ?6`,
	sqlstore.SQDelete: `DELETE FROM schedules WHERE schedule_id = ?1`,
	sqlstore.SQClaim: `UPDATE schedules SET next_fire_at = ?3, last_fire_at = ?4, last_instance_id = ?5, last_outcome = ?6,
updated_at = ?7, revision = revision + 1
WHERE schedule_id = ?1 AND next_fire_at = ?2 AND paused = 0`,
	sqlstore.SQNote: `UPDATE schedules SET last_fire_at = ?2, last_instance_id = ?3, last_outcome = ?4,
updated_at = ?5, revision = revision + 1 WHERE schedule_id = ?1`,
	sqlstore.SQSetLast:    `UPDATE schedules SET last_instance_id = ?2, last_outcome = ?3 WHERE schedule_id = ?1`,
	sqlstore.SQListPage:   `SELECT ` + schedCols + ` FROM schedules WHERE schedule_id > ?1 ORDER BY schedule_id LIMIT ?2`,
	sqlstore.SQLockQueued: `SELECT count(*) FROM lock_queue WHERE lock_key = ?1`,
}

// scheduleDB runs the schedule statements: writes through the writer,
// reads on the reader connections.
type scheduleDB struct{ p *Provider }

func (d scheduleDB) WriteTx(ctx context.Context, op string, fn func(sqlstore.ScheduleTx) error) error {
	return d.p.write(ctx, op, func(w *wtx) error { return fn(scheduleTx{w}) })
}

// scheduleTx is a write transaction running schedule statements too
// (sqlstore.ScheduleTx).
type scheduleTx struct{ *wtx }

func (t scheduleTx) ExecSchedule(q sqlstore.SchedQuery, args ...any) (int64, error) {
	w := t.wtx
	res, err := w.tx.ExecContext(w.ctx, scheduleSQL[q], args...)
	if err != nil {
		return 0, interpretError(err, nil)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, interpretError(err, nil)
	}
	if n > 0 {
		w.changes.instances = append(w.changes.instances, provider.ScheduleWatchKey)
	}
	return n, nil
}

func (t scheduleTx) CountSchedule(q sqlstore.SchedQuery, args ...any) (int64, error) {
	w := t.wtx
	var n int64
	if err := w.tx.QueryRowContext(w.ctx, scheduleSQL[q], args...).Scan(&n); err != nil {
		return 0, interpretError(err, nil)
	}
	return n, nil
}

func (d scheduleDB) Read(ctx context.Context, op string, q sqlstore.SchedQuery, scan func(sqlstore.Row) error, args ...any) error {
	return d.p.read(ctx, op, func() error {
		rows, err := d.p.readers.QueryContext(ctx, scheduleSQL[q], args...)
		if err != nil {
			return interpretError(err, nil)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return interpretError(err, nil)
			}
		}
		return interpretError(rows.Err(), nil)
	})
}
