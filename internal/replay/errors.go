package replay

import "fmt"

// NondeterminismError reports that orchestration code diverged from its
// recorded history. EventID is the history event where the divergence was
// found (0 when the code scheduled something beyond the end of history);
// Expected describes what history records there and Got what the code did.
type NondeterminismError struct {
	InstanceID  string
	ExecutionID int64
	EventID     int64
	Expected    string
	Got         string
}

func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("nondeterministic orchestration %s (execution %d): at event %d history has %s, but the code %s",
		e.InstanceID, e.ExecutionID, e.EventID, e.Expected, e.Got)
}

// ContinueAsNewError is returned by Context.ContinueAsNew; an orchestration
// that returns it (possibly wrapped) ends its execution and starts the next
// one with Input.
type ContinueAsNewError struct {
	Input   []byte
	Version string
}

func (e *ContinueAsNewError) Error() string { return "orchestration continued as new" }
