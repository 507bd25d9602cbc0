package sqlstore

import (
	"errors"
	"strconv"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

var testListSQL = &ListSQL{
	Base: "B", Cursor: " C", Status: " S", Name: " N", Parent: " P", OrderBy: " O",
	StatesPart: "[", StatesPartEnd: "]", StatesUnion: "+", StatesWrap: " W(",
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	IDPrefix:    func(prefix string, arg func(any) string) string { return " I" + arg(prefix) },
}

// TestListQueryMergesStatesOnce checks the shape of the several-states
// statement: the states sorted and each once, every part with the other
// filters and its own limit, and the arguments numbered in text order.
func TestListQueryMergesStatesOnce(t *testing.T) {
	opts := provider.ListInstancesOptions{
		Statuses: []provider.Status{provider.StatusRunning, provider.StatusFailed, provider.StatusRunning},
		Cursor:   EncodeCursor(7), Orchestration: "o", IDPrefix: "x", Limit: 2,
	}
	q, args, limit, err := ListQuery(opts, testListSQL)
	if err != nil {
		t.Fatal(err)
	}
	want := "B W([$1 C$2 N$3 I$4 O$5]+[$6 C$7 N$8 I$9 O$10]) O$11"
	if q != want || limit != 2 {
		t.Fatalf("ListQuery = %q, limit %d; want %q, 2", q, limit, want)
	}
	wantArgs := []any{"Failed", int64(7), "o", "x", 3, "Running", int64(7), "o", "x", 3, 3}
	if len(args) != len(wantArgs) {
		t.Fatalf("args = %v, want %v", args, wantArgs)
	}
	for i := range args {
		if args[i] != wantArgs[i] {
			t.Fatalf("args = %v, want %v", args, wantArgs)
		}
	}
	q, _, _, err = ListQuery(provider.ListInstancesOptions{Statuses: []provider.Status{provider.StatusFailed}}, testListSQL)
	if err != nil || q != "B S$1 O$2" {
		t.Fatalf("one state: %q, %v", q, err)
	}
}

func TestListQueryRejectsBadOptions(t *testing.T) {
	for _, o := range []provider.ListInstancesOptions{
		{Limit: -1}, {Cursor: "not a cursor"}, {Statuses: []provider.Status{"Sleeping"}},
	} {
		if _, _, _, err := ListQuery(o, testListSQL); !errors.Is(err, provider.ErrInvalidArgument) {
			t.Errorf("ListQuery(%+v) = %v, want ErrInvalidArgument", o, err)
		}
	}
	_, _, limit, _ := ListQuery(provider.ListInstancesOptions{Limit: MaxPageSize + 1}, testListSQL)
	if limit != MaxPageSize {
		t.Fatalf("limit %d, want %d", limit, MaxPageSize)
	}
}
