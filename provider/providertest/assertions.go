package providertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// noErr fails the case on a non-nil error.
func (e *env) noErr(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails the case unless errors.Is(err, target).
func (e *env) wantErr(err, target error, what string) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantPermanent fails the case if err is marked retryable.
func (e *env) wantPermanent(err error, what string) {
	e.t.Helper()
	if provider.IsRetryable(err) {
		e.t.Fatalf("%s: error %v is retryable, want permanent", what, err)
	}
}

// lockLost fails the case unless err is ErrLockLost and not retryable.
func (e *env) lockLost(err error, what string) {
	e.t.Helper()
	e.wantErr(err, provider.ErrLockLost, what)
	e.wantPermanent(err, what)
}

// equal compares two values by their JSON form; good enough for the
// plain data types of the suite.
func equal(a, b any) bool { return string(js(a)) == string(js(b)) }

// mustEqual fails the case unless got and want have the same JSON form.
func mustEqual(t testing.TB, what string, got, want any) {
	t.Helper()
	if !equal(got, want) {
		t.Fatalf("%s = %s, want %s", what, js(got), js(want))
	}
}

// wantCount fails unless got == want.
func (e *env) wantCount(what string, got, want int) {
	e.t.Helper()
	if got != want {
		e.t.Fatalf("%s = %d, want %d", what, got, want)
	}
}

// sameTime fails unless got and want are the same instant.
func (e *env) sameTime(what string, got, want time.Time) {
	e.t.Helper()
	if !got.Equal(want) {
		e.t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// eventIDs returns the IDs of evs.
func eventIDs(evs []history.Event) []int64 {
	ids := make([]int64, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}

// kinds returns the kinds of msgs.
func kinds(msgs []history.WorkItem) []history.WorkItemKind {
	ks := make([]history.WorkItemKind, len(msgs))
	for i, m := range msgs {
		ks[i] = m.Kind
	}
	return ks
}

// itemNames returns the Name of each message (the event names of ExternalRaised messages).
func itemNames(msgs []history.WorkItem) []string {
	names := make([]string, len(msgs))
	for i, m := range msgs {
		names[i] = m.Name
	}
	return names
}

// activityIDs returns the activity IDs of leases.
func activityIDs(ls []*provider.WorkItemLease) []int64 {
	ids := make([]int64, len(ls))
	for i, l := range ls {
		ids[i] = l.ActivityID
	}
	return ids
}

// sorted returns a sorted, non-nil copy of ids.
func sorted(ids []string) []string {
	s := append([]string{}, ids...)
	slices.Sort(s)
	return s
}
