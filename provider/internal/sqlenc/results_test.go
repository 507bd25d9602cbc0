package sqlenc

import (
	"reflect"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// TestEnqueueResultsOnlyWhenAsked checks that Enqueue reports one result
// per message when a message asks for one (a DedupKey, IfAbsent or
// Lock.Replace) and allocates nothing for a call that asks for none.
func TestEnqueueResultsOnlyWhenAsked(t *testing.T) {
	plain := &provider.OrchestratorMessage{InstanceID: "a"}
	start := &provider.OrchestratorMessage{InstanceID: "b", Create: &provider.NewInstance{OrchestrationName: "o",
		Lock: &provider.LockRequest{Key: "k", TTL: time.Minute, Queue: true}}}
	enc := []*Msg{{}, {}}
	if n := testing.AllocsPerRun(100, func() {
		if res := EnqueueResults([]*provider.OrchestratorMessage{plain, start}, enc); res != nil {
			t.Fatalf("results %v for a call asking for none, want nil", res)
		}
	}); n != 0 {
		t.Errorf("EnqueueResults of a call asking for none allocates %v times, want 0", n)
	}

	for _, m := range []*provider.OrchestratorMessage{
		{InstanceID: "a", DedupKey: "d"},
		{InstanceID: "a", Create: &provider.NewInstance{IfAbsent: true}},
		{InstanceID: "a", Create: &provider.NewInstance{
			Lock: &provider.LockRequest{Key: "k", TTL: time.Minute, Queue: true, Replace: true}}},
	} {
		enc := []*Msg{{}, {Duplicate: true, Existed: true, Replaced: "h"}, {}}
		got := EnqueueResults([]*provider.OrchestratorMessage{plain, m, start}, enc)
		want := []provider.EnqueueResult{{}, {Duplicate: true, Existed: true, Replaced: "h"}, {}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("results with %+v asking: %+v, want %+v", m, got, want)
		}
	}
}
