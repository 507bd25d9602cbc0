package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// pauseSQL is the SQL text of the pause statements (see sqlstore.PauseSQL).
var pauseSQL = sqlstore.PauseSQL{
	Status: `SELECT status, current_execution_id FROM instances WHERE instance_id = $1`,
	Paused: `SELECT locked_at, pause_reason, paused_by FROM instance_locks WHERE instance_id = $1 AND lock_token = $2`,
	Holder: `SELECT lock_token, locked_until FROM instance_locks WHERE instance_id = $1`,
	Untag: `UPDATE orchestrator_queue SET lock_token = NULL, locked_until = NULL, attempt_count = greatest(attempt_count - 1, 0)
WHERE instance_id = $1 AND lock_token = $2`,
	Lock: `INSERT INTO instance_locks AS l (instance_id, lock_token, locked_until, locked_at, pause_reason, paused_by)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (instance_id) DO UPDATE
SET lock_token = excluded.lock_token, locked_until = excluded.locked_until, locked_at = excluded.locked_at,
    pause_reason = excluded.pause_reason, paused_by = excluded.paused_by`,
	HoldWork: `UPDATE worker_queue SET visible_at = $2
WHERE instance_id = $1 AND (lock_token IS NULL OR locked_until <= $3)`,
	Unlock:      `DELETE FROM instance_locks WHERE instance_id = $1 AND lock_token = $2`,
	ReleaseWork: `UPDATE worker_queue SET visible_at = $3 WHERE instance_id = $1 AND visible_at = $2`,
}

const sqlListPauses = `SELECT instance_id, locked_at, pause_reason, paused_by FROM instance_locks
WHERE instance_id = ANY ($1::text[]) AND lock_token = $2 || instance_id`

// rewindSQL is the SQL text of the rewind statements (see sqlstore.RewindSQL).
var rewindSQL = sqlstore.RewindSQL{
	Status: pauseSQL.Status + ` FOR UPDATE`,
	Execution: `INSERT INTO executions (instance_id, execution_id, status, input, started_at)
SELECT $1, $2, 'Running', input, $4 FROM executions WHERE instance_id = $1 AND execution_id = $3`,
	Event: `INSERT INTO history (instance_id, execution_id, event_id, event_type, event_data, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`,
	Reopen: `UPDATE instances
SET status = 'Running', current_execution_id = $2, output = NULL, error = NULL,
    last_error = NULL, last_error_at = NULL, updated_at = $3
WHERE instance_id = $1`,
	Message: `INSERT INTO orchestrator_queue (instance_id, work_item, visible_at, created_at) VALUES ($1, $2, $3, $4)`,
	// The row's activity name and queue come from its work item (which
	// the store encoded: valid JSON), as in sqlInsertWork, so a rewound
	// activity keeps its routing.
	Work: `INSERT INTO worker_queue (instance_id, execution_id, activity_id, session_id, work_item, visible_at, created_at,
    activity_name, queue)
VALUES ($1, $2, $3, $4, $5::text, $6, $7, $5::jsonb ->> 'name', coalesce($5::jsonb ->> 'queue', ''))`,
	Holder:          pauseSQL.Holder,
	EndExecution:    `UPDATE executions SET status = 'Canceled', error = $3, completed_at = $4 WHERE instance_id = $1 AND execution_id = $2 AND status = 'Running'`,
	DropWork:        `DELETE FROM worker_queue WHERE instance_id = $1 AND execution_id = $2`,
	LastEvent:       `SELECT coalesce(max(event_id), 0) FROM history WHERE instance_id = $1 AND execution_id = $2`,
	CancelRequested: `SELECT 1 FROM history WHERE instance_id = $1 AND execution_id = $2 AND event_type = $3 LIMIT 1`,
	// The CASE reads as JSON only the work items with the prefix (which
	// the store encoded).
	CancelQueued: `SELECT 1 FROM orchestrator_queue
WHERE instance_id = $1 AND starts_with(work_item, $2::text)
  AND (visible_at <= $3 OR CASE WHEN starts_with(work_item, $2::text)
    THEN (work_item::jsonb #>> '{error,kind}') IS DISTINCT FROM $4::text END)
LIMIT 1`,
	DropTimeout: `DELETE FROM orchestrator_queue WHERE instance_id = $1 AND starts_with(work_item, $2::text)`,
}

// pgTx runs the shared pause and rewind bodies on a transaction.
type pgTx struct {
	tx        pgx.Tx
	lockSpace string
	// w is the write transaction tx belongs to (nil for a read).
	w *wtx
}

func (t pgTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	ct, err := t.tx.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return ct.RowsAffected(), nil
}

func (t pgTx) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return sqlstore.MapNoRows(t.tx.QueryRow(ctx, q, args...), pgx.ErrNoRows)
}

func (t pgTx) Each(ctx context.Context, q string, scan func(sqlstore.Row) error, args ...any) error {
	return queryRows(ctx, t.tx, q, func(r pgx.Rows) error { return scan(r) }, args...)
}

// LockInstance takes the instance's advisory lock exclusively, as every
// transaction that changes its lock row does.
func (t pgTx) LockInstance(ctx context.Context, instanceID string) error {
	if t.w != nil {
		return t.w.lockInstance(instanceID)
	}
	_, err := t.tx.Exec(ctx, sqlAdvisoryLock, t.lockSpace+instanceID)
	return err
}

func (w *wtx) shared() pgTx { return pgTx{tx: w.tx, lockSpace: w.p.lockSpace, w: w} }

// PauseInstance implements provider.Pauser.
func (p *Provider) PauseInstance(ctx context.Context, instanceID string, info provider.PauseInfo) error {
	return p.write(ctx, "pausing instance", func(w *wtx) error {
		if err := sqlstore.Pause(w.ctx, w.shared(), &pauseSQL, instanceID, info, w.now); err != nil {
			return err
		}
		w.changes.addInstance(instanceID)
		return nil
	})
}

// ResumeInstance implements provider.Pauser.
func (p *Provider) ResumeInstance(ctx context.Context, instanceID string) error {
	return p.write(ctx, "resuming instance", func(w *wtx) error {
		if err := sqlstore.Resume(w.ctx, w.shared(), &pauseSQL, instanceID, w.now); err != nil {
			return err
		}
		w.changes.orch, w.changes.work = true, true
		w.changes.addInstance(instanceID)
		return nil
	})
}

// GetPause implements provider.Pauser.
func (p *Provider) GetPause(ctx context.Context, instanceID string) (*provider.PauseInfo, error) {
	var out *provider.PauseInfo
	err := p.readTx(ctx, "reading pause", func(tx pgx.Tx) error {
		var err error
		out, err = sqlstore.GetPause(ctx, pgTx{tx: tx}, &pauseSQL, instanceID)
		return err
	})
	return out, err
}

// ListPauses implements provider.Pauser.
func (p *Provider) ListPauses(ctx context.Context, instanceIDs []string) (map[string]provider.PauseInfo, error) {
	var out map[string]provider.PauseInfo
	err := p.readTx(ctx, "listing pauses", func(tx pgx.Tx) error {
		var err error
		out, err = sqlstore.ListPauses(ctx, pgTx{tx: tx}, sqlListPauses, instanceIDs, instanceIDs)
		return err
	})
	return out, err
}

// RewindInstance implements provider.Rewinder.
func (p *Provider) RewindInstance(ctx context.Context, req *provider.RewindRequest) error {
	const op = "rewinding instance"
	e, err := sqlstore.EncodeRewind(req)
	if err != nil {
		return p.fail(op, err)
	}
	return p.write(ctx, op, func(w *wtx) error {
		if err := sqlstore.Rewind(w.ctx, w.shared(), &rewindSQL, e, w.now); err != nil {
			return err
		}
		w.changes.orch, w.changes.work = true, e.HasWork()
		w.changes.addInstance(req.InstanceID)
		return nil
	})
}
