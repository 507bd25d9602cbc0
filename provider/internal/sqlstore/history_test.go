package sqlstore

import (
	"context"
	"errors"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

// fakeQuerier answers the history statements from maps.
type fakeQuerier struct {
	current map[string]int64   // instance -> current execution
	events  map[int64][][]byte // execution -> stored events
	fail    map[Query]error    // statement -> driver error
	queried map[Query][]any    // statement -> last arguments
}

type fakeRow struct {
	vals []any
	err  error
}

func (r fakeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *int64:
			*d = r.vals[i].(int64)
		case *bool:
			*d = r.vals[i].(bool)
		case *[]byte:
			*d = r.vals[i].([]byte)
		}
	}
	return nil
}

func (f *fakeQuerier) note(q Query, args []any) error {
	if f.queried == nil {
		f.queried = map[Query][]any{}
	}
	f.queried[q] = args
	return f.fail[q]
}

func (f *fakeQuerier) QueryRow(_ context.Context, q Query, args ...any) Row {
	if err := f.note(q, args); err != nil {
		return fakeRow{err: err}
	}
	switch q {
	case QInstanceCurrent:
		c, ok := f.current[args[0].(string)]
		if !ok {
			return fakeRow{err: ErrNoRows}
		}
		return fakeRow{vals: []any{c}}
	case QExecutionExists:
		_, ok := f.events[args[1].(int64)]
		return fakeRow{vals: []any{ok}}
	}
	return fakeRow{err: errors.New("unexpected statement")}
}

func (f *fakeQuerier) Each(_ context.Context, q Query, scan func(Row) error, args ...any) error {
	if err := f.note(q, args); err != nil {
		return err
	}
	for _, e := range f.events[args[1].(int64)] {
		if err := scan(fakeRow{vals: []any{e}}); err != nil {
			return err
		}
	}
	return nil
}

func TestReadHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ev := []byte(`{"eventId":1,"kind":"OrchestratorStarted"}`)
	t.Run("current execution", func(t *testing.T) {
		q := &fakeQuerier{current: map[string]int64{"a": 2}, events: map[int64][][]byte{1: nil, 2: {ev}}}
		_, err := ReadHistory(ctx, q, "a", 0)
		if err != nil && !errors.Is(err, provider.ErrCorruptData) {
			t.Fatal(err)
		}
		if got := q.queried[QHistory]; got == nil || got[1] != int64(2) {
			t.Fatalf("history read with %v, want execution 2", got)
		}
	})
	t.Run("not started", func(t *testing.T) {
		q := &fakeQuerier{current: map[string]int64{"a": 0}}
		evs, err := ReadHistory(ctx, q, "a", 0)
		if err != nil || evs == nil || len(evs) != 0 {
			t.Fatalf("got %v, %v; want an empty, non-nil slice", evs, err)
		}
	})
	t.Run("missing instance", func(t *testing.T) {
		_, err := ReadHistory(ctx, &fakeQuerier{}, "a", 0)
		if !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("missing execution", func(t *testing.T) {
		q := &fakeQuerier{current: map[string]int64{"a": 1}, events: map[int64][][]byte{1: nil}}
		_, err := ReadHistory(ctx, q, "a", 3)
		if !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("corrupt event", func(t *testing.T) {
		q := &fakeQuerier{current: map[string]int64{"a": 1}, events: map[int64][][]byte{1: {[]byte("{not json")}}}
		_, err := ReadHistory(ctx, q, "a", 1)
		if !errors.Is(err, provider.ErrCorruptData) {
			t.Fatalf("got %v, want ErrCorruptData", err)
		}
	})
	// A driver error comes back as it is, in every statement: the store
	// translates it once, in its Fail wrapping.
	for _, st := range []Query{QInstanceCurrent, QExecutionExists, QHistory} {
		driverErr := errors.New("driver says no")
		q := &fakeQuerier{current: map[string]int64{"a": 1}, events: map[int64][][]byte{1: nil}, fail: map[Query]error{st: driverErr}}
		_, err := ReadHistory(ctx, q, "a", 1)
		if err != driverErr {
			t.Fatalf("statement %d: got %v, want the driver's error unchanged", st, err)
		}
	}
	for _, bad := range []struct {
		id   string
		exec int64
	}{{"", 0}, {"a", -1}} {
		if err := CheckHistoryArgs(bad.id, bad.exec); !errors.Is(err, provider.ErrInvalidArgument) {
			t.Fatalf("CheckHistoryArgs(%q, %d) = %v, want ErrInvalidArgument", bad.id, bad.exec, err)
		}
	}
}

func (f *fakeQuerier) Batch(ctx context.Context, stmts []Stmt) error {
	for _, s := range stmts {
		if err := f.Each(ctx, s.Query, s.Scan, s.Args...); err != nil {
			return err
		}
	}
	return nil
}
