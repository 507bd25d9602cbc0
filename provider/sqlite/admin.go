package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// prefixUpperBound returns the smallest string above every string that
// starts with prefix, in SQLite's byte order (BINARY collation): the prefix
// with its last byte below 0xff incremented and what follows it dropped. A
// prefix of 0xff bytes only has no bound (ok false).
func prefixUpperBound(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
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
	if _, _, _, err := listInstancesQuery(opts, false); err != nil {
		return nil, p.fail(op, err)
	}
	page := &provider.InstancePage{Instances: []provider.InstanceInfo{}}
	var lastSeq int64
	err := p.read(ctx, op, func() error {
		common := false
		if opts.IDPrefix != "" {
			q, args := sqlCountPrefixFrom, []any{opts.IDPrefix}
			if upper, ok := prefixUpperBound(opts.IDPrefix); ok {
				q += sqlCountPrefixBelow
				args = append(args, upper)
			}
			var n int
			if err := p.readers.QueryRowContext(ctx, q+sqlCountPrefixEnd, append(args, commonPrefixMatches)...).Scan(&n); err != nil {
				return interpretError(err, nil)
			}
			common = n >= commonPrefixMatches
		}
		q, args, limit, err := listInstancesQuery(opts, common)
		if err != nil {
			return err
		}
		rows, err := p.readers.QueryContext(ctx, q, args...)
		if err != nil {
			return interpretError(err, nil)
		}
		defer rows.Close()
		for rows.Next() {
			if len(page.Instances) == limit {
				page.NextCursor = sqlstore.EncodeCursor(lastSeq)
				break
			}
			// A row whose JSON columns cannot be decoded is listed with
			// what decoded and LastError naming the damage, so one bad
			// row does not hide the page (GetInstance reports it as
			// ErrCorruptData).
			in, err := sqlstore.ScanInstanceRow(rows, &lastSeq)
			switch {
			case err != nil:
				return interpretError(err, nil)
			case in.Corrupt != nil:
				page.Instances = append(page.Instances, in.MarkCorrupt())
			default:
				page.Instances = append(page.Instances, in.InstanceInfo)
			}
		}
		return interpretError(rows.Err(), nil)
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// commonPrefixMatches is the number of instances from which an ID prefix
// counts as common: ListInstances then filters rows read newest first by
// it instead of sorting the matches of the instance_id index.
const commonPrefixMatches = 10_000

// listInstancesQuery assembles the ListInstances statement for opts: the
// SQL, its arguments (the last one the row limit, one above the page size,
// to tell whether a next page exists) and the page size. commonPrefix
// says whether opts.IDPrefix matches at least commonPrefixMatches
// instances.
func listInstancesQuery(opts provider.ListInstancesOptions, commonPrefix bool) (string, []any, int, error) {
	limit := opts.Limit
	switch {
	case limit < 0:
		return "", nil, 0, sqlenc.Invalid("Limit %d is negative", limit)
	case limit == 0:
		limit = sqlstore.DefaultPageSize
	case limit > sqlstore.MaxPageSize:
		limit = sqlstore.MaxPageSize
	}
	// The filters other than the states, which every part of a
	// several-state query repeats.
	var filters string
	var fargs []any
	if opts.Cursor != "" {
		seq, err := sqlstore.DecodeCursor(opts.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		filters += sqlListFilterCursor
		fargs = append(fargs, seq)
	}
	if opts.Orchestration != "" {
		filters += sqlListFilterName
		fargs = append(fargs, opts.Orchestration)
	}
	if opts.ParentInstanceID != "" {
		filters += sqlListFilterParent
		fargs = append(fargs, opts.ParentInstanceID)
	}
	if opts.IDPrefix != "" {
		from, below := sqlListFilterIDFrom, sqlListFilterIDBelow
		if commonPrefix {
			from, below = sqlListFilterIDFromScan, sqlListFilterIDBelowScan
		}
		filters += from
		fargs = append(fargs, opts.IDPrefix)
		if upper, ok := prefixUpperBound(opts.IDPrefix); ok {
			filters += below
			fargs = append(fargs, upper)
		}
	}
	for _, s := range opts.Statuses {
		if !s.Valid() {
			return "", nil, 0, sqlenc.Invalid("unknown status %q", s)
		}
	}
	statuses := slices.Compact(slices.Sorted(slices.Values(opts.Statuses)))
	q := sqlListInstancesBase
	var args []any
	switch len(statuses) {
	case 0:
		q += filters
		args = append(args, fargs...)
	case 1:
		q += sqlListFilterStatus + filters
		args = append(append(args, string(statuses[0])), fargs...)
	default:
		q += sqlListStatusesWrap
		for i, s := range statuses {
			if i > 0 {
				q += sqlListStatusesUnion
			}
			q += sqlListStatusPart + filters + sqlListInstancesOrderBy + ")"
			args = append(append(append(args, string(s)), fargs...), limit+1)
		}
		q += ")"
	}
	q += sqlListInstancesOrderBy
	args = append(args, limit+1)
	return q, args, limit, nil
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
		in, err = sqlstore.GetInstance(ctx, p.readQuerier(nil), instanceID)
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
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		out, err = sqlstore.ListExecutions(ctx, p.readQuerier(tx), instanceID)
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
		e, err = sqlstore.GetExecution(ctx, p.readQuerier(nil), instanceID, executionID)
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
	err := p.readTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		ids, err = sqlstore.ListChildren(ctx, p.readQuerier(tx), instanceID)
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
		*res = provider.PurgeResult{} // this may be a re-run (see writer.go)
		// The named instances and, recursively, their children.
		var tree []string
		err := w.query(sPurgeTree, func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			tree = append(tree, id)
			return nil
		}, jsonStrings(instanceIDs))
		if err != nil {
			return err
		}
		rows := make(map[string]sqlstore.PurgeRow, len(tree))
		treeJSON := jsonStrings(tree)
		err = w.query(sPurgeRows, func(r *sql.Rows) error {
			id, x, err := sqlstore.ScanPurgeRow(r)
			if err != nil {
				return err
			}
			rows[id] = x
			return nil
		}, treeJSON)
		if err != nil {
			return err
		}
		if err := sqlstore.CheckPurge(instanceIDs, tree, rows, opts.Force); err != nil {
			return err
		}
		if err := w.query(sPurgeCountExecutions, func(r *sql.Rows) error { return r.Scan(&res.Executions) }, treeJSON); err != nil {
			return err
		}
		if err := w.query(sPurgeCountEvents, func(r *sql.Rows) error { return r.Scan(&res.Events) }, treeJSON); err != nil {
			return err
		}
		for _, s := range []stmtID{sPurgeDeleteHistory, sPurgeDeleteExecutions, sPurgeDeleteOrch, sPurgeDeleteWork, sPurgeDeleteLocks, sPurgeDeleteInstances} {
			n, err := w.exec(s, nil, treeJSON)
			if err != nil {
				return err
			}
			switch s {
			case sPurgeDeleteOrch, sPurgeDeleteWork:
				res.Messages += n
			case sPurgeDeleteInstances:
				res.Instances = n
			}
		}
		// Execution locks: the purged instances leave every queue and the
		// locks they held pass to the oldest queued start of each key.
		// Their idempotency keys stay for their retention, stamped as
		// purged, so a repeat start is still a duplicate.
		n, err := w.exec(sPurgeDeleteLockQueue, nil, treeJSON)
		if err != nil {
			return err
		}
		res.Messages += n
		if _, err := w.exec(sPurgeMarkIdemKeys, nil, treeJSON, w.now); err != nil {
			return err
		}
		keys, err := w.queryStrings(sPurgeDeleteExecLocks, treeJSON)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := w.promoteQueuedStart(k); err != nil {
				return err
			}
		}
		w.changes.instances = append(w.changes.instances, tree...)
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
		return interpretError(p.rstmts[rQueueDepths].QueryRowContext(ctx, p.now()).Scan(
			&d.OrchestratorReady, &d.OrchestratorDelayed, &d.OrchestratorLocked,
			&d.WorkerReady, &d.WorkerDelayed, &d.WorkerLocked), nil)
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Counts returns store-wide totals; see provider.Admin.
func (p *Provider) Counts(ctx context.Context) (*provider.Counts, error) {
	c := &provider.Counts{ByStatus: map[provider.Status]int64{}}
	err := p.readTx(ctx, "counting", func(tx *sql.Tx) error {
		if err := tx.StmtContext(ctx, p.rstmts[rCounts]).QueryRowContext(ctx).Scan(&c.Instances, &c.Executions, &c.HistoryEvents, &c.ExecutionLocks); err != nil {
			return interpretError(err, nil)
		}
		return queryRows(ctx, tx.StmtContext(ctx, p.rstmts[rCountsByStatus]), func(r *sql.Rows) error {
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
		return queryRows(ctx, p.rstmts[rDeadLetters], func(r *sql.Rows) error {
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
