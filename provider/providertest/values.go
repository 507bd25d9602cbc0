package providertest

import (
	"encoding/json"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// valueEvent is the ValueSet event that records a value change.
func (e *env) valueEvent(id int64, key string, v json.RawMessage) history.Event {
	return history.Event{EventID: id, Kind: history.ValueSet, TimestampMs: ms(e.clock.Now()), Name: key, Data: v}
}

// setValues runs a turn of id that records the value changes vs.
func (e *env) setValues(id string, vs ...provider.ValueUpdate) {
	e.t.Helper()
	e.runTurn(id, func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
		a := &provider.TurnAck{Metadata: runningMeta(), Values: vs}
		for i, v := range vs {
			a.History = append(a.History, e.valueEvent(next+int64(i), v.Key, v.Value))
		}
		return a
	})
}

// values returns id's values as key → JSON text.
func (e *env) values(id string) map[string]string {
	e.t.Helper()
	vs, err := e.admin().ListValues(e.ctx, id)
	e.noErr(err, "ListValues("+id+")")
	out := map[string]string{}
	for _, v := range vs {
		out[v.Key] = string(v.Value)
	}
	return out
}

// fetchForEvent queues an event for id and fetches its turn.
func (e *env) fetchForEvent(id string) *provider.OrchestrationItem {
	e.t.Helper()
	e.enqueue(eventMsg(id, "go", nil))
	return e.fetchFor(id)
}

// valueCases check the instance values a turn ack materialises
// (TurnAck.Values): set, replaced, cleared, kept across executions,
// purged with the instance, read without history.
var valueCases = []testCase{
	{name: "AckSetsAndClearsValues", run: func(e *env) {
		e.createInstance("a")
		e.setValues("a", provider.ValueUpdate{Key: "stage", Value: js("packing")}, provider.ValueUpdate{Key: "n", Value: js(1)})
		mustEqual(e.t, "values", e.values("a"), map[string]string{"stage": `"packing"`, "n": "1"})
		info, err := e.admin().GetInstance(e.ctx, "a")
		e.noErr(err, "GetInstance")
		mustEqual(e.t, "values version", info.ValuesVersion, int64(1))
		e.clock.Advance(time.Second)
		e.setValues("a", provider.ValueUpdate{Key: "stage", Value: js("shipped")}, provider.ValueUpdate{Key: "n"})
		mustEqual(e.t, "values", e.values("a"), map[string]string{"stage": `"shipped"`})
		v, err := e.admin().GetValue(e.ctx, "a", "stage")
		e.noErr(err, "GetValue")
		mustEqual(e.t, "value", string(v.Value), `"shipped"`)
		e.sameTime("value updated at", v.UpdatedAt, e.clock.Now())
		_, err = e.admin().GetValue(e.ctx, "a", "n")
		e.wantErr(err, provider.ErrNotFound, "GetValue of a cleared key")
		info, _ = e.admin().GetInstance(e.ctx, "a")
		mustEqual(e.t, "values version", info.ValuesVersion, int64(2))
	}},
	{name: "LastChangeOfAKeyInOneAckWins", run: func(e *env) {
		e.createInstance("a")
		e.setValues("a", provider.ValueUpdate{Key: "k", Value: js(1)}, provider.ValueUpdate{Key: "k"},
			provider.ValueUpdate{Key: "k", Value: js(3)}, provider.ValueUpdate{Key: "gone", Value: js(1)}, provider.ValueUpdate{Key: "gone"})
		mustEqual(e.t, "values", e.values("a"), map[string]string{"k": "3"})
	}},
	{name: "AckWithoutValuesKeepsThem", run: func(e *env) {
		e.createInstance("a")
		e.setValues("a", provider.ValueUpdate{Key: "k", Value: js(1)})
		e.runningTurn("a")
		mustEqual(e.t, "values", e.values("a"), map[string]string{"k": "1"})
		info, _ := e.admin().GetInstance(e.ctx, "a")
		mustEqual(e.t, "values version", info.ValuesVersion, int64(1))
	}},
	{name: "UnknownInstanceAndBadKey", run: func(e *env) {
		_, err := e.admin().ListValues(e.ctx, "nobody")
		e.wantErr(err, provider.ErrNotFound, "ListValues of an unknown instance")
		_, err = e.admin().GetValue(e.ctx, "nobody", "k")
		e.wantErr(err, provider.ErrNotFound, "GetValue of an unknown instance")
		e.createInstance("a")
		mustEqual(e.t, "values of a new instance", e.values("a"), map[string]string{})
		it := e.fetchForEvent("a")
		bad := turnAck(it, 1)
		bad.Values = []provider.ValueUpdate{{Key: "", Value: js(1)}}
		e.wantErr(e.ackErr(bad), provider.ErrInvalidArgument, "ack with an empty value key")
		bad.Values = []provider.ValueUpdate{{Key: "k", Value: json.RawMessage("{")}}
		e.wantErr(e.ackErr(bad), provider.ErrInvalidArgument, "ack with an invalid value")
		mustEqual(e.t, "values after refused acks", e.values("a"), map[string]string{})
	}},
	{name: "FailedAckWritesNoValues", run: func(e *env) {
		e.createInstance("a")
		it := e.fetchForEvent("a")
		a := turnAck(it, 1, e.startedEvent("dup")) // event 1 exists: ErrDuplicateEvent
		a.Values = []provider.ValueUpdate{{Key: "k", Value: js(1)}}
		e.wantErr(e.ackErr(a), provider.ErrDuplicateEvent, "ack re-appending event 1")
		mustEqual(e.t, "values", e.values("a"), map[string]string{})
	}},
	{name: "ValuesOutliveContinueAsNewAndGoWithPurge", run: func(e *env) {
		e.createInstance("a")
		e.setValues("a", provider.ValueUpdate{Key: "k", Value: js(1)})
		e.runTurn("a", func(it *provider.OrchestrationItem, next int64) *provider.TurnAck {
			return &provider.TurnAck{ExecutionID: 2, History: []history.Event{e.startedEvent("next")}, Metadata: runningMeta()}
		})
		mustEqual(e.t, "values in execution 2", e.values("a"), map[string]string{"k": "1"})
		e.finish("a", provider.StatusCompleted)
		_, err := e.purge(false, "a")
		e.noErr(err, "purge")
		e.createInstance("a")
		mustEqual(e.t, "values of a reused ID", e.values("a"), map[string]string{})
	}},
}
