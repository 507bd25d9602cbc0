package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lazyTx is a write transaction whose BEGIN is not sent on its own: it
// rides at the head of the transaction's first batch (or of its first
// Exec, sent as a batch of two), so a transaction costs no round trip for
// its start. A transaction that sent nothing has nothing to commit or roll
// back.
//
// It implements what the store's write transactions use of pgx.Tx
// (Exec, Query, QueryRow, SendBatch, CopyFrom, Commit, Rollback, Conn);
// the embedded pgx.Tx is nil and its other methods are not called.
type lazyTx struct {
	pgx.Tx
	conn  *pgx.Conn
	begun bool // BEGIN was sent
}

const sqlBegin = `BEGIN`

func newLazyTx(conn *pgx.Conn) *lazyTx { return &lazyTx{conn: conn} }

// begin sends BEGIN on its own, before a statement that is not a batch.
func (t *lazyTx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	t.begun = true
	_, err := t.conn.Exec(ctx, sqlBegin)
	return err
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.begun {
		t.begun = true
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: sqlBegin}}, b.QueuedQueries...)
	}
	return t.conn.SendBatch(ctx, b)
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	var tag pgconn.CommandTag
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	err := t.SendBatch(ctx, b).Close()
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

// Commit commits what the transaction sent; it fails with
// pgx.ErrTxCommitRollback when the server rolled the transaction back
// instead (a statement of it had failed).
func (t *lazyTx) Commit(ctx context.Context) error {
	if !t.begun {
		return nil
	}
	t.begun = false
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// CommitBatch sends the statements of b, COMMIT and then the statements of
// after (the notifications) in one round trip. When a statement of b
// fails, the COMMIT is skipped (a pipeline stops at its first error) and
// the transaction is rolled back: the error is then that statement's, and
// nothing was committed. An error of the COMMIT itself leaves the outcome
// unknown. The statements of after run once the transaction committed, in
// a transaction of their own; their errors are ignored (a notification
// lost only delays other nodes until their next poll).
func (t *lazyTx) CommitBatch(ctx context.Context, b, after *pgx.Batch) error {
	_, err := t.commitBatch(ctx, b, after)
	return err
}

// commitBatch is CommitBatch, also reporting whether the error (if any)
// may be the COMMIT's (committing: the outcome is unknown) rather than a
// statement's of b (nothing was committed). The statements of b keep
// their callbacks (a lone write's last batch reads results with them, see
// wtx.sendLast); an error a callback returns does not stop the batch, so
// the COMMIT's outcome is always read: it is returned once the batch
// ended, with committing set when the COMMIT ran.
func (t *lazyTx) commitBatch(ctx context.Context, b, after *pgx.Batch) (committing bool, err error) {
	if !t.begun {
		return true, nil // nothing was written: nothing to commit or notify
	}
	if b.Len() == 0 && after.Len() == 0 {
		return true, t.Commit(ctx)
	}
	var (
		tag       pgconn.CommandTag
		committed bool
		reached   bool // the COMMIT's result was read
		callErr   error
	)
	for i, q := range b.QueuedQueries {
		b.QueuedQueries[i] = wrapQuery(q, &callErr)
	}
	b.Queue("COMMIT").Fn = func(br pgx.BatchResults) error {
		// After a statement of b failed on the server, the pipeline
		// skipped the COMMIT: reading its result returns that error.
		var pe *pgconn.PgError
		reached = !errors.As(callErr, &pe)
		ct, err := br.Exec()
		if err != nil {
			return err
		}
		tag, committed = ct, true
		return nil
	}
	b.QueuedQueries = append(b.QueuedQueries, after.QueuedQueries...)
	err = t.conn.SendBatch(ctx, b).Close()
	t.begun = false
	switch {
	case committed && tag.String() == "ROLLBACK":
		return true, pgx.ErrTxCommitRollback
	case committed:
		// A notification that failed after the COMMIT: its own
		// transaction, rolled back at the pipeline's end. A callback of
		// b that failed read what the transaction committed.
		return true, callErr
	case (err != nil || callErr != nil) && !reached && !t.conn.IsClosed():
		// A statement of b failed: the pipeline skipped the COMMIT.
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
		if err == nil {
			err = callErr
		}
		return false, err
	case err != nil:
		return true, err
	}
	return true, nil
}

// Rollback rolls back what the transaction sent.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if !t.begun {
		return nil
	}
	t.begun = false
	if t.conn.IsClosed() {
		return errors.New("rolling back: the connection is closed")
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// The guards of a lone write's last batch (wtx.sendLast): a turn whose
// COMMIT rides with its statements cannot run the steps that follow them
// when the turn turns out to need them (an ended instance hands over its
// execution locks; a turn that leaves its instance ended without ending
// it releases them). A guard fails the batch with codeNotLast in those
// cases, rolling it back, and the call runs again committing separately
// (writeOn).
const (
	codeNotLast = "DX101"
	// The instance holds no execution lock. $1 instance.
	sqlGuardNoExecutionLocks = `SELECT duroxide_check(NOT EXISTS (SELECT 1 FROM execution_locks WHERE instance_id = $1), '` + codeNotLast + `', 'the turn needs more round trips')`
)
