package postgres

import (
	"context"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// validUTF8Prefix returns the longest leading part of s that is valid
// UTF-8.
func validUTF8Prefix(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return s[:i]
			}
		}
	}
	return s
}

// prefixUpperBound returns the smallest valid UTF-8 string above every
// string that starts with prefix (valid UTF-8), in byte order (which for
// UTF-8 is code point order): the prefix with its last character below
// U+10FFFF replaced by the next one (skipping surrogates) and what follows
// it dropped. A prefix of U+10FFFF only has no bound (ok false).
func prefixUpperBound(prefix string) (string, bool) {
	for end := len(prefix); end > 0; {
		r, size := utf8.DecodeLastRuneInString(prefix[:end])
		start := end - size
		if r < utf8.MaxRune {
			next := r + 1
			if next >= 0xD800 && next <= 0xDFFF {
				next = 0xE000
			}
			return prefix[:start] + string(next), true
		}
		end = start
	}
	return "", false
}

// ListInstances returns one page of instances, newest first; see
// provider.Admin. A row whose stored JSON (input, output, custom status,
// error details) cannot be decoded does not fail the page: it is listed
// with the fields that decoded and a LastError of kind infrastructure
// whose message starts "corrupt stored row: " and names the damaged
// fields. GetInstance reports such a row as provider.ErrCorruptData.
func (p *Provider) ListInstances(ctx context.Context, opts provider.ListInstancesOptions) (*provider.InstancePage, error) {
	const op = "listing instances"
	limit := opts.Limit
	switch {
	case limit < 0:
		return nil, p.fail(op, sqlenc.Invalid("Limit %d is negative", limit))
	case limit == 0:
		limit = sqlstore.DefaultPageSize
	case limit > sqlstore.MaxPageSize:
		limit = sqlstore.MaxPageSize
	}
	q := sqlListInstancesBase
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if opts.Cursor != "" {
		seq, err := sqlstore.DecodeCursor(opts.Cursor)
		if err != nil {
			return nil, p.fail(op, err)
		}
		q += sqlListFilterCursor + arg(seq)
	}
	if len(opts.Statuses) > 0 {
		ss := make([]string, len(opts.Statuses))
		for i, s := range opts.Statuses {
			if !s.Valid() {
				return nil, p.fail(op, sqlenc.Invalid("unknown status %q", s))
			}
			ss[i] = string(s)
		}
		q += sqlListFilterStatuses + arg(ss) + "::text[])"
	}
	if opts.Orchestration != "" {
		q += sqlListFilterName + arg(opts.Orchestration)
	}
	if opts.ParentInstanceID != "" {
		q += sqlListFilterParent + arg(opts.ParentInstanceID)
	}
	if opts.IDPrefix != "" {
		// Stored IDs are valid UTF-8 (PostgreSQL text), so the range is
		// taken on the longest valid leading part of the prefix; the rest,
		// if any, is compared on the bytes.
		valid := validUTF8Prefix(opts.IDPrefix)
		if valid != "" {
			q += sqlListFilterIDFrom + arg(valid)
			if upper, ok := prefixUpperBound(valid); ok {
				q += sqlListFilterIDBelow + arg(upper)
			}
		}
		if valid != opts.IDPrefix {
			b := arg([]byte(opts.IDPrefix))
			q += sqlListFilterIDBytes + b + "::bytea)) = " + b + "::bytea"
		}
	}
	q += sqlListInstancesOrderBy + arg(limit+1)

	page := &provider.InstancePage{Instances: []provider.InstanceInfo{}}
	var lastSeq int64
	err := p.read(ctx, op, func() error {
		rows, err := p.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if len(page.Instances) == limit {
				page.NextCursor = sqlstore.EncodeCursor(lastSeq)
				break
			}
			// A row whose JSON columns cannot be decoded is listed with
			// what decoded and LastError naming the damage, so one bad
			// row does not hide the page.
			in, err := sqlstore.ScanInstanceRow(rows, &lastSeq)
			switch {
			case err != nil:
				return err
			case in.Corrupt != nil:
				page.Instances = append(page.Instances, in.MarkCorrupt())
			default:
				page.Instances = append(page.Instances, in.InstanceInfo)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// GetInstance returns one instance; see provider.Admin.
func (p *Provider) GetInstance(ctx context.Context, instanceID string) (*provider.InstanceInfo, error) {
	const op = "getting instance"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var in *provider.InstanceInfo
	err := p.read(ctx, op, func() error {
		var err error
		in, err = sqlstore.GetInstance(ctx, sharedQuerier{p.pool}, instanceID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// ListExecutions returns an instance's executions in order; see provider.Admin.
func (p *Provider) ListExecutions(ctx context.Context, instanceID string) ([]provider.ExecutionInfo, error) {
	const op = "listing executions"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var out []provider.ExecutionInfo
	err := p.readTx(ctx, op, func(tx pgx.Tx) error {
		var err error
		out, err = sqlstore.ListExecutions(ctx, sharedQuerier{tx}, instanceID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetExecution returns one execution; see provider.Admin.
func (p *Provider) GetExecution(ctx context.Context, instanceID string, executionID int64) (*provider.ExecutionInfo, error) {
	const op = "getting execution"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var e *provider.ExecutionInfo
	err := p.read(ctx, op, func() error {
		var err error
		e, err = sqlstore.GetExecution(ctx, sharedQuerier{p.pool}, instanceID, executionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ListChildren returns the IDs of an instance's direct sub-orchestrations;
// see provider.Admin.
func (p *Provider) ListChildren(ctx context.Context, instanceID string) ([]string, error) {
	const op = "listing children"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var ids []string
	err := p.readTx(ctx, op, func(tx pgx.Tx) error {
		var err error
		ids, err = sqlstore.ListChildren(ctx, sharedQuerier{tx}, instanceID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// PurgeInstances deletes instances and all their descendants in one
// transaction; see provider.Admin.
func (p *Provider) PurgeInstances(ctx context.Context, instanceIDs []string, opts provider.PurgeOptions) (*provider.PurgeResult, error) {
	const op = "purging instances"
	if err := sqlstore.CheckPurgeArgs(instanceIDs); err != nil {
		return nil, p.fail(op, err)
	}
	res := &provider.PurgeResult{}
	if len(instanceIDs) == 0 {
		if p.closed.Load() {
			return nil, p.fail(op, provider.ErrClosed)
		}
		return res, nil
	}
	err := p.write(ctx, op, func(w *wtx) error {
		*res = provider.PurgeResult{}
		// The named instances and, recursively, their children, with their
		// advisory locks (sorted), so no fetch, ack or enqueue of them runs
		// while they go. A child created meanwhile joins the tree: look
		// again until it stops growing.
		var tree []string
		locked := map[string]bool{}
		for {
			var err error
			if tree, err = w.queryStrings(sqlPurgeTree, instanceIDs); err != nil {
				return err
			}
			var fresh []string
			for _, id := range tree {
				if !locked[id] {
					fresh = append(fresh, id)
					locked[id] = true
				}
			}
			if len(fresh) == 0 {
				break
			}
			slices.Sort(fresh)
			if _, err := w.exec(sqlAdvisoryLockMany, w.p.lockSpace, fresh); err != nil {
				return err
			}
		}
		rows := make(map[string]sqlstore.PurgeRow, len(tree))
		err := w.query(sqlPurgeRows, func(r pgx.Rows) error {
			id, x, err := sqlstore.ScanPurgeRow(r)
			if err != nil {
				return err
			}
			rows[id] = x
			return nil
		}, tree)
		if err != nil {
			return err
		}
		if err := sqlstore.CheckPurge(instanceIDs, tree, rows, opts.Force); err != nil {
			return err
		}
		var keys []string
		b := &pgx.Batch{}
		b.Queue(sqlPurgeCountExecutions, tree).QueryRow(func(r pgx.Row) error { return r.Scan(&res.Executions) })
		b.Queue(sqlPurgeDeleteHistory, tree).QueryRow(func(r pgx.Row) error { return r.Scan(&res.Events) })
		b.Queue(sqlPurgeDeleteExecs, tree)
		b.Queue(sqlPurgeDeleteOrch, tree).Exec(func(ct pgconn.CommandTag) error { res.Messages += ct.RowsAffected(); return nil })
		b.Queue(sqlPurgeDeleteWork, tree).Exec(func(ct pgconn.CommandTag) error { res.Messages += ct.RowsAffected(); return nil })
		b.Queue(sqlPurgeDeleteLocks, tree)
		b.Queue(sqlPurgeDeleteInstances, tree).Exec(func(ct pgconn.CommandTag) error { res.Instances = ct.RowsAffected(); return nil })
		// Execution locks: the purged instances leave every queue and the
		// locks they held pass to the oldest queued start of each key.
		// Their idempotency keys stay for their retention, stamped as
		// purged, so a repeat start is still a duplicate.
		b.Queue(sqlPurgeDeleteLockQueue, tree).Exec(func(ct pgconn.CommandTag) error { res.Messages += ct.RowsAffected(); return nil })
		b.Queue(sqlPurgeMarkIdemKeys, tree, w.now)
		b.Queue(sqlPurgeDeleteExecLocks, tree).Query(func(r pgx.Rows) error {
			return forEach(r, func() error {
				var k string
				if err := r.Scan(&k); err != nil {
					return err
				}
				keys = append(keys, k)
				return nil
			})
		})
		if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
			return err
		}
		if err := w.promoteAll(keys); err != nil {
			return err
		}
		w.changes.addInstance(tree...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// QueueDepths counts the messages of both queues; see provider.Admin.
func (p *Provider) QueueDepths(ctx context.Context) (*provider.QueueDepths, error) {
	d := &provider.QueueDepths{}
	err := p.read(ctx, "reading queue depths", func() error {
		return p.pool.QueryRow(ctx, sqlQueueDepths, p.now()).Scan(
			&d.OrchestratorReady, &d.OrchestratorDelayed, &d.OrchestratorLocked,
			&d.WorkerReady, &d.WorkerDelayed, &d.WorkerLocked)
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Counts returns store-wide totals; see provider.Admin.
func (p *Provider) Counts(ctx context.Context) (*provider.Counts, error) {
	var c *provider.Counts
	err := p.readTx(ctx, "counting", func(tx pgx.Tx) error {
		c = &provider.Counts{ByStatus: map[provider.Status]int64{}}
		if err := tx.QueryRow(ctx, sqlCounts).Scan(&c.Instances, &c.Executions, &c.HistoryEvents, &c.ExecutionLocks); err != nil {
			return err
		}
		return queryRows(ctx, tx, sqlCountsByStatus, func(r pgx.Rows) error {
			var s string
			var n int64
			if err := r.Scan(&s, &n); err != nil {
				return err
			}
			c.ByStatus[provider.Status(s)] = n
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ListDeadLetters returns dead-lettered messages, newest first; see provider.Admin.
func (p *Provider) ListDeadLetters(ctx context.Context, limit int) ([]provider.DeadLetter, error) {
	const op = "listing dead letters"
	switch {
	case limit < 0:
		return nil, p.fail(op, sqlenc.Invalid("limit %d is negative", limit))
	case limit == 0:
		limit = sqlstore.DefaultPageSize
	case limit > sqlstore.MaxPageSize:
		limit = sqlstore.MaxPageSize
	}
	out := []provider.DeadLetter{}
	err := p.read(ctx, op, func() error {
		return queryRows(ctx, p.pool, sqlDeadLetters, func(r pgx.Rows) error {
			var d provider.DeadLetter
			var at int64
			if err := r.Scan(&d.ID, &d.Queue, &d.InstanceID, &d.Payload, &d.Error, &at); err != nil {
				return err
			}
			d.DeadAt = msTime(at)
			out = append(out, d)
			return nil
		}, limit)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
