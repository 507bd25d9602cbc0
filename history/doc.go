// Package history defines the durable data model of duroxide-go: the events
// that make up an orchestration's history and the work items that travel
// through its queues.
//
// Both types are a storage contract. Every event and work item ever written
// must stay readable by every later release, so the JSON encoding is
// append-only: a kind, once released, keeps its name and the meaning of its
// fields forever. A change that cannot be expressed by adding an optional
// field becomes a new kind (FooV2), and the old kind stays.
//
// # Events
//
// An orchestration instance has one history per execution (ContinueAsNew
// starts a new execution). Events are numbered from 1 within their execution
// by the runtime, never by a store. Event 1 is always OrchestrationStarted.
// Scheduling events (ActivityScheduled, TimerCreated, ExternalSubscribed,
// SubOrchestrationScheduled) are matched by position against what the
// orchestration code asks for on replay; completions point back at their
// scheduling event through SourceEventID.
//
// The JSON form is one flat object with a "type" discriminator and
// camelCase fields, for example:
//
//	{"eventId":2,"type":"ActivityScheduled","timestampMs":1732170000000,"name":"Hello","input":"Ada"}
//
// Payloads (Input, Output, Data, CustomStatus) are JSON documents carried as
// json.RawMessage, so a payload is stored once, never double-encoded.
//
// # Work items
//
// A WorkItem is a queue message: StartOrchestration, ActivityExecute,
// completions, TimerFired, ExternalRaised, CancelInstance, ContinueAsNew and
// the sub-orchestration completions that go back to a parent. InstanceID is
// always the instance the message is for; for sub-orchestration completions
// that is the parent, and ChildInstanceID names the child.
//
// # Decoding
//
// DecodeEvent and DecodeWorkItem reject unknown kinds and missing required
// fields with an error wrapping ErrInvalid, so a store can report corrupt
// rows as such instead of handing half-filled values to the replay engine.
package history
