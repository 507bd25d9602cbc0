package postgres

import (
	"context"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duroxide/duroxide-go/provider"
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
// provider.Admin and sqlstore.ListQuery. A row whose stored JSON (input,
// output, custom status, error details) cannot be decoded does not fail
// the page: it is listed with the fields that decoded and a LastError of
// kind infrastructure whose message starts "corrupt stored row: " and
// names the damaged fields. GetInstance reports such a row as
// provider.ErrCorruptData.
func (p *Provider) ListInstances(ctx context.Context, opts provider.ListInstancesOptions) (*provider.InstancePage, error) {
	const op = "listing instances"
	q, args, limit, err := sqlstore.ListQuery(opts, pgListSQL)
	if err != nil {
		return nil, p.fail(op, err)
	}
	var page *provider.InstancePage
	err = p.read(ctx, op, func() error {
		rows, err := p.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		page, err = sqlstore.ReadInstancePage(rows, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// pgListSQL is PostgreSQL's ListInstances text.
var pgListSQL = &sqlstore.ListSQL{
	Base:   sqlListInstancesBase,
	Cursor: sqlListFilterCursor, Status: sqlListFilterStatus, Name: sqlListFilterName, Parent: sqlListFilterParent,
	OrderBy:    sqlListInstancesOrderBy,
	StatesPart: sqlListStatusPart, StatesPartEnd: sqlListStatusPartEnd, StatesUnion: sqlListStatusesUnion, StatesWrap: sqlListStatusesWrap,
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	IDPrefix: func(prefix string, arg func(any) string) string {
		// Stored IDs are valid UTF-8 (PostgreSQL text), so the range is
		// taken on the longest valid leading part of the prefix; the rest,
		// if any, is compared on the bytes.
		var f string
		valid := validUTF8Prefix(prefix)
		if valid != "" {
			f += sqlListFilterIDFrom + arg(valid)
			if upper, ok := prefixUpperBound(valid); ok {
				f += sqlListFilterIDBelow + arg(upper)
			}
		}
		if valid != prefix {
			b := arg([]byte(prefix))
			f += sqlListFilterIDBytes + b + "::bytea)) = " + b + "::bytea"
		}
		return f
	},
}

// PurgeTree returns instanceIDs and their descendants with their advisory
// locks (sorted), so no fetch, ack or enqueue of them runs while they go.
// A child created meanwhile joins the tree: it looks again until the tree
// stops growing. See sqlstore.Tx.
func (w *wtx) PurgeTree(instanceIDs []string) ([]string, error) {
	locked := map[string]bool{}
	for {
		tree, err := w.queryStrings(sqlPurgeTree, instanceIDs)
		if err != nil {
			return nil, err
		}
		var fresh []string
		for _, id := range tree {
			if !locked[id] {
				fresh = append(fresh, id)
				locked[id] = true
			}
		}
		if len(fresh) == 0 {
			return tree, nil
		}
		slices.Sort(fresh)
		w.locked = true
		if _, err := w.exec(sqlAdvisoryLockMany, w.p.lockSpace, fresh); err != nil {
			return nil, err
		}
	}
}

// PurgeRows returns the purge check rows of tree; see sqlstore.Tx.
func (w *wtx) PurgeRows(tree []string) (map[string]sqlstore.PurgeRow, error) {
	rows := make(map[string]sqlstore.PurgeRow, len(tree))
	err := w.query(sqlPurgeRows, func(r pgx.Rows) error {
		id, x, err := sqlstore.ScanPurgeRow(r)
		rows[id] = x
		return err
	}, tree)
	return rows, err
}

// PurgeDelete deletes tree and settles what it held, in one round trip
// (then one per freed execution lock); see sqlstore.Tx.
func (w *wtx) PurgeDelete(tree []string) (*provider.PurgeResult, error) {
	res := &provider.PurgeResult{}
	count := func(n *int64) func(pgconn.CommandTag) error {
		return func(ct pgconn.CommandTag) error { *n += ct.RowsAffected(); return nil }
	}
	var keys []string
	b := &pgx.Batch{}
	// The advisory locks of the keys tree holds come before any row goes
	// (see sqlXLockKeysOf).
	b.Queue(sqlXLockKeysOf, w.p.lockSpace, tree)
	b.Queue(sqlPurgeCountExecutions, tree).QueryRow(func(r pgx.Row) error { return r.Scan(&res.Executions) })
	b.Queue(sqlPurgeDeleteHistory, tree).QueryRow(func(r pgx.Row) error { return r.Scan(&res.Events) })
	b.Queue(sqlPurgeDeleteExecs, tree)
	b.Queue(sqlPurgeDeleteOrch, tree).Exec(count(&res.Messages))
	b.Queue(sqlPurgeDeleteWork, tree).Exec(count(&res.Messages))
	b.Queue(sqlPurgeDeleteLocks, tree)
	b.Queue(sqlPurgeDeleteInstances, tree).Exec(count(&res.Instances))
	// Idempotency keys stay for their retention, stamped as purged, so a
	// repeat start is still a duplicate; the freed execution locks pass to
	// their queues.
	b.Queue(sqlPurgeDeleteLockQueue, tree).Exec(count(&res.Messages))
	b.Queue(sqlPurgeDeleteDedup, tree)
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
		return nil, err
	}
	if err := w.promoteAll(keys); err != nil {
		return nil, err
	}
	w.changes.addInstance(tree...)
	return res, nil
}
