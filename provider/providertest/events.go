package providertest

import (
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// startedEvent is event 1 of an execution with the given input.
func (e *env) startedEvent(input any) history.Event {
	return history.Event{
		EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: ms(e.clock.Now()),
		Name: testOrch, Version: testVersion, Input: js(input),
	}
}

// scheduledEvent is an ActivityScheduled event with the given id.
func (e *env) scheduledEvent(id int64) history.Event {
	return history.Event{
		EventID: id, Kind: history.ActivityScheduled, TimestampMs: ms(e.clock.Now()),
		Name: "Act", Input: js(id),
	}
}

// completedEvent is an OrchestrationCompleted event with the given id.
func (e *env) completedEvent(id int64, output any) history.Event {
	return history.Event{EventID: id, Kind: history.OrchestrationCompleted, TimestampMs: ms(e.clock.Now()), Output: js(output)}
}

// externalEvent is an ExternalEvent history event.
func (e *env) externalEvent(id int64, name string) history.Event {
	return history.Event{EventID: id, Kind: history.ExternalEvent, TimestampMs: ms(e.clock.Now()), Name: name, Data: js(name)}
}

// timerCreatedEvent is a TimerCreated history event.
func (e *env) timerCreatedEvent(id int64, fireAt time.Time) history.Event {
	return history.Event{EventID: id, Kind: history.TimerCreated, TimestampMs: ms(e.clock.Now()), FireAtMs: ms(fireAt)}
}

// subOrchScheduledEvent is a SubOrchestrationScheduled history event.
func (e *env) subOrchScheduledEvent(id int64, child string) history.Event {
	return history.Event{
		EventID: id, Kind: history.SubOrchestrationScheduled, TimestampMs: ms(e.clock.Now()),
		Name: testOrch, Version: testVersion, ChildInstanceID: child, Input: js("child-in"),
	}
}

// invalidEvent is an ActivityScheduled event without a name: Validate fails.
func (e *env) invalidEvent(id int64) history.Event {
	ev := e.scheduledEvent(id)
	ev.Name = ""
	return ev
}

// errDetails is an ErrorDetails of kind with message.
func errDetails(kind history.ErrorKind, message string) *history.ErrorDetails {
	return &history.ErrorDetails{Kind: kind, Message: message}
}

// runningMeta is the metadata of a turn that leaves the execution running.
func runningMeta() provider.ExecutionMetadata {
	return provider.ExecutionMetadata{
		OrchestrationName: testOrch, OrchestrationVersion: testVersion, Status: provider.StatusRunning, Input: js("in"),
	}
}
