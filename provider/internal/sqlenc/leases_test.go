package sqlenc

import (
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

func TestUnexpiredLeasesDropsLapsedLeases(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := func(tok string, d time.Duration) *provider.WorkItemLease {
		return &provider.WorkItemLease{LockToken: tok, LockedUntil: now.Add(d)}
	}
	in := []*provider.WorkItemLease{lease("a", time.Second), lease("b", 0), lease("c", -time.Second), lease("d", time.Minute)}
	got := UnexpiredLeases(in, now)
	if len(got) != 2 || got[0].LockToken != "a" || got[1].LockToken != "d" {
		t.Fatalf("UnexpiredLeases kept %v, want a and d", got)
	}
	if in[0].LockToken != "a" || in[1].LockToken != "b" {
		t.Fatal("UnexpiredLeases changed its input")
	}
	if got := UnexpiredLeases(in[1:3], now); got != nil {
		t.Fatalf("all lapsed: got %v, want nil", got)
	}
}
