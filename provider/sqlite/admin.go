package sqlite

import (
	"context"
	"database/sql"

	"github.com/duroxide/duroxide-go/provider"
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
// provider.Admin and sqlstore.ListQuery. A row whose stored JSON (input,
// output, custom status, error details) cannot be decoded does not fail
// the page: it is listed with the fields that decoded and a LastError of
// kind infrastructure whose message starts "corrupt stored row: " and
// names the damaged fields. GetInstance reports such a row as
// provider.ErrCorruptData.
func (p *Provider) ListInstances(ctx context.Context, opts provider.ListInstancesOptions) (*provider.InstancePage, error) {
	const op = "listing instances"
	if _, _, _, err := sqlstore.ListQuery(opts, listSQL(false)); err != nil {
		return nil, p.fail(op, err)
	}
	var page *provider.InstancePage
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
		q, args, limit, err := sqlstore.ListQuery(opts, listSQL(common))
		if err != nil {
			return err
		}
		rows, err := p.readers.QueryContext(ctx, q, args...)
		if err != nil {
			return interpretError(err, nil)
		}
		defer rows.Close()
		page, err = sqlstore.ReadInstancePage(rows, limit)
		return interpretError(err, nil)
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

// listSQL is SQLite's ListInstances text; commonPrefix says whether
// opts.IDPrefix matches at least commonPrefixMatches instances.
func listSQL(commonPrefix bool) *sqlstore.ListSQL {
	from, below := sqlListFilterIDFrom, sqlListFilterIDBelow
	if commonPrefix {
		from, below = sqlListFilterIDFromScan, sqlListFilterIDBelowScan
	}
	return &sqlstore.ListSQL{
		Base:   sqlListInstancesBase,
		Cursor: sqlListFilterCursor, Status: sqlListFilterStatus, Name: sqlListFilterName, Parent: sqlListFilterParent,
		OrderBy:    sqlListInstancesOrderBy,
		StatesPart: sqlListStatusPart, StatesPartEnd: ")", StatesUnion: sqlListStatusesUnion, StatesWrap: sqlListStatusesWrap,
		Placeholder: func(int) string { return "?" },
		IDPrefix: func(prefix string, arg func(any) string) string {
			f := from + arg(prefix)
			if upper, ok := prefixUpperBound(prefix); ok {
				f += below + arg(upper)
			}
			return f
		},
	}
}

// PurgeTree returns instanceIDs and their descendants; the single writer
// needs no locks. See sqlstore.Tx.
func (w *wtx) PurgeTree(instanceIDs []string) ([]string, error) {
	return w.queryStrings(sPurgeTree, jsonStrings(instanceIDs))
}

// PurgeRows returns the purge check rows of tree; see sqlstore.Tx.
func (w *wtx) PurgeRows(tree []string) (map[string]sqlstore.PurgeRow, error) {
	rows := make(map[string]sqlstore.PurgeRow, len(tree))
	err := w.query(sPurgeRows, func(r *sql.Rows) error {
		id, x, err := sqlstore.ScanPurgeRow(r)
		rows[id] = x
		return err
	}, jsonStrings(tree))
	return rows, err
}

// PurgeDelete deletes tree and settles what it held; see sqlstore.Tx.
func (w *wtx) PurgeDelete(tree []string) (*provider.PurgeResult, error) {
	res := &provider.PurgeResult{}
	treeJSON := jsonStrings(tree)
	if err := w.query(sPurgeCountExecutions, func(r *sql.Rows) error { return r.Scan(&res.Executions) }, treeJSON); err != nil {
		return nil, err
	}
	if err := w.query(sPurgeCountEvents, func(r *sql.Rows) error { return r.Scan(&res.Events) }, treeJSON); err != nil {
		return nil, err
	}
	for _, s := range []stmtID{sPurgeDeleteHistory, sPurgeDeleteExecutions, sPurgeDeleteOrch, sPurgeDeleteWork, sPurgeDeleteLocks, sPurgeDeleteInstances, sPurgeDeleteLockQueue, sPurgeDeleteDedup} {
		n, err := w.exec(s, nil, treeJSON)
		if err != nil {
			return nil, err
		}
		switch s {
		case sPurgeDeleteOrch, sPurgeDeleteWork, sPurgeDeleteLockQueue:
			res.Messages += n
		case sPurgeDeleteInstances:
			res.Instances = n
		}
	}
	// Idempotency keys stay for their retention, stamped as purged, so a
	// repeat start is still a duplicate; the freed execution locks pass to
	// their queues.
	if _, err := w.exec(sPurgeMarkIdemKeys, nil, treeJSON, w.now); err != nil {
		return nil, err
	}
	keys, err := w.queryStrings(sPurgeDeleteExecLocks, treeJSON)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if _, err := w.promoteQueuedStart(k); err != nil {
			return nil, err
		}
	}
	w.changes.instances = append(w.changes.instances, tree...)
	return res, nil
}
