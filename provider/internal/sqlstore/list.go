package sqlstore

import (
	"slices"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// ListSQL is one dialect's SQL text for ListInstances: the fragments
// ListQuery assembles. Every fragment that takes a value is followed by
// the placeholder of that value.
type ListSQL struct {
	// Base selects seq and the instance columns (as ScanInstanceRow reads
	// them) from instances, ending in a WHERE clause that filters
	// nothing, to which the filters append " AND ..." terms.
	Base string
	// Cursor (seq below a value), Status (status equal to a value), Name
	// (orchestration_name) and Parent (parent_instance_id) are such terms.
	Cursor, Status, Name, Parent string
	// OrderBy orders by seq, newest first, and limits to a value.
	OrderBy string
	// Several states are read state by state: each StatesPart (selecting
	// the seq of the rows of one state, a subquery open on a WHERE clause
	// of that state) takes the other filters and OrderBy and is closed by
	// StatesPartEnd; the parts are joined by StatesUnion and wrapped in
	// StatesWrap (" AND seq IN (") ... ")".
	StatesPart, StatesPartEnd, StatesUnion, StatesWrap string
	// Placeholder is the text of the n-th value (1-based): "?" or "$n".
	Placeholder func(n int) string
	// IDPrefix returns the terms that keep the IDs starting with prefix,
	// taking its values through arg (which returns their placeholders).
	IDPrefix func(prefix string, arg func(any) string) string
}

// PageLimit is the page size a listing call with limit asks for: the
// default for 0, at most MaxPageSize; a negative one is
// ErrInvalidArgument (named what in the message).
func PageLimit(what string, limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, sqlenc.Invalid("%s %d is negative", what, limit)
	case limit == 0:
		return DefaultPageSize, nil
	case limit > MaxPageSize:
		return MaxPageSize, nil
	}
	return limit, nil
}

// ListQuery assembles the ListInstances statement for opts in dialect d:
// its SQL, its arguments and the page size (the statement returns up to
// one row more, telling whether a next page exists). It is the one
// behaviour of every SQL store: rows newest first (by seq), the cursor is
// the seq of the last row of the previous page, and several states are
// the merge of one page-sized index read per state (the states sorted and
// each once), so the cost of a page does not grow with the matches of
// the other states.
func ListQuery(opts provider.ListInstancesOptions, d *ListSQL) (q string, args []any, limit int, err error) {
	if limit, err = PageLimit("Limit", opts.Limit); err != nil {
		return "", nil, 0, err
	}
	var cursor int64
	if opts.Cursor != "" {
		if cursor, err = DecodeCursor(opts.Cursor); err != nil {
			return "", nil, 0, err
		}
	}
	for _, s := range opts.Statuses {
		if !s.Valid() {
			return "", nil, 0, sqlenc.Invalid("unknown status %q", s)
		}
	}
	statuses := slices.Compact(slices.Sorted(slices.Values(opts.Statuses)))
	arg := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
	}
	// The filters other than the states, which each state's part repeats.
	filters := func() string {
		var f string
		if opts.Cursor != "" {
			f += d.Cursor + arg(cursor)
		}
		if opts.Orchestration != "" {
			f += d.Name + arg(opts.Orchestration)
		}
		if opts.ParentInstanceID != "" {
			f += d.Parent + arg(opts.ParentInstanceID)
		}
		if opts.IDPrefix != "" {
			f += d.IDPrefix(opts.IDPrefix, arg)
		}
		// Version, time ranges and roots: the same text in every dialect.
		f += ListFilters(opts, arg)
		return f
	}
	q = d.Base
	switch len(statuses) {
	case 0:
		q += filters()
	case 1:
		q += d.Status + arg(string(statuses[0]))
		q += filters()
	default:
		q += d.StatesWrap
		for i, s := range statuses {
			if i > 0 {
				q += d.StatesUnion
			}
			q += d.StatesPart + arg(string(s))
			q += filters()
			q += d.OrderBy + arg(limit+1)
			q += d.StatesPartEnd
		}
		q += ")"
	}
	q += d.OrderBy + arg(limit+1)
	return q, args, limit, nil
}

// Rows is a result set being read, as both drivers' rows satisfy it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// ReadInstancePage reads the rows of a ListQuery statement into a page of
// up to limit instances, with the cursor of the next page when there is
// one more row. A row whose JSON columns cannot be decoded is listed with
// what decoded and LastError naming the damage, so one bad row does not
// hide the page (GetInstance reports it as ErrCorruptData). Driver errors
// come back untranslated.
func ReadInstancePage(rows Rows, limit int) (*provider.InstancePage, error) {
	page := &provider.InstancePage{Instances: []provider.InstanceInfo{}}
	var lastSeq int64
	for rows.Next() {
		if len(page.Instances) == limit {
			page.NextCursor = EncodeCursor(lastSeq)
			break
		}
		in, err := ScanInstanceRow(rows, &lastSeq)
		switch {
		case err != nil:
			return nil, err
		case in.Corrupt != nil:
			page.Instances = append(page.Instances, in.MarkCorrupt())
		default:
			page.Instances = append(page.Instances, in.InstanceInfo)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return page, nil
}
