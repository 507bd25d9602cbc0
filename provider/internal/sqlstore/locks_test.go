package sqlstore

import (
	"slices"
	"testing"

	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// TestDeclaredLocks checks the instance locks the grouped writes declare:
// a turn ack's own instance exclusive and its targets shared; a work ack's
// completion instance shared, or exclusive with a Then turn plus that
// turn's targets; nothing for a work ack without a completion.
func TestDeclaredLocks(t *testing.T) {
	msg := func(id string) *sqlenc.Msg { return &sqlenc.Msg{InstanceID: id} }
	start := func(id, lockKey string) *sqlenc.Msg {
		return &sqlenc.Msg{InstanceID: id, Create: &sqlenc.Create{LockKey: lockKey}}
	}
	token := NewTokenPrefix() + "a"
	cases := []struct {
		name string
		got  []Lock
		want []Lock
	}{
		{"enqueue", SharedLocks(nil, msg("x"), nil, msg("y")), []Lock{{Instance: "x"}, {Instance: "y"}}},
		{"enqueue of messages", EnqueueLocks(msg("x"), msg("y")), []Lock{{Instance: "x"}, {Instance: "y"}}},
		{"enqueue of a start", EnqueueLocks(msg("x"), start("y", "")), []Lock{{Instance: "x", Alone: true}, {Instance: "y", Alone: true}}},
		{"keyed start", SharedLocks(nil, start("y", "k")), []Lock{{Instance: "y", Alone: true}}},
		{"turn ack starting a child", TurnAckLocks(&sqlenc.Ack{Token: token, Msgs: []*sqlenc.Msg{start("child", "")}}),
			[]Lock{{Instance: "a", Exclusive: true}, {Instance: "child"}}},
		{"turn ack", TurnAckLocks(&sqlenc.Ack{Token: token, Msgs: []*sqlenc.Msg{msg("child")}}),
			[]Lock{{Instance: "a", Exclusive: true}, {Instance: "child"}}},
		{"turn ack of a malformed token", TurnAckLocks(&sqlenc.Ack{Token: "bad", Msgs: []*sqlenc.Msg{msg("child")}}),
			[]Lock{{Instance: "child"}}},
		{"work ack", WorkAckLocks(&sqlenc.WorkAck{Completion: msg("a")}), []Lock{{Instance: "a"}}},
		{"work ack with Then", WorkAckLocks(&sqlenc.WorkAck{Completion: msg("a"), Then: &sqlenc.Ack{Msgs: []*sqlenc.Msg{msg("b")}}}),
			[]Lock{{Instance: "a", Exclusive: true}, {Instance: "b"}}},
		{"work ack without completion", WorkAckLocks(&sqlenc.WorkAck{}), nil},
	}
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: locks %v, want %v", c.name, c.got, c.want)
		}
	}
}
