package duroxide

import (
	"fmt"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/replay"
)

// ReplayHistory checks that the code registered in reg still reproduces a
// recorded history of one execution (for example one saved with
// Client.GetHistory before a deploy): the same schedules in the same order,
// and the same ending. It returns nil when it does and a
// *NondeterminismError naming the first divergence when it does not. Use it
// in tests to catch a change that would park running instances.
//
// The orchestration and version come from the history's first event
// (OrchestrationStarted); a version the registry lacks is an error. No
// activity runs: their results come from the history.
func ReplayHistory(reg *Registry, instanceID string, events []history.Event) error {
	return replayHistory(reg, instanceID, 1, events)
}

// replayHistory is ReplayHistory for execution executionID of instanceID.
func replayHistory(reg *Registry, instanceID string, executionID int64, events []history.Event) error {
	if len(events) == 0 || events[0].Kind != history.OrchestrationStarted {
		return fmt.Errorf("%w: a history begins with OrchestrationStarted", ErrInvalidArgument)
	}
	for i := range events {
		if err := events[i].Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
	}
	start := events[0]
	fn, _, ok := registryAdapter{r: reg}.Orchestration(start.Name, start.Version)
	if !ok {
		return fmt.Errorf("%w: orchestration %s version %s is not registered", ErrInvalidArgument, start.Name, start.Version)
	}
	return replay.Verify(replay.Config{InstanceID: instanceID, ExecutionID: executionID, Func: fn}, events)
}
