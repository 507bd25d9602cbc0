package duroxide

// Patched reports whether this execution takes the new branch of the code
// change id, so a change can ship while instances started by the old code
// are still running:
//
//	if ctx.Patched("charge-before-ship") {
//		// new code
//	} else {
//		// old code, kept until no instance started before the change runs
//	}
//
// It is true for an execution that reaches the call beyond what its
// history records (every new execution, and an older one running past
// the point it had reached), and then records the patch in history
// (a PatchRecorded event); it is true on replay of a history that recorded
// the patch; it is false when the call falls inside a history recorded
// before the change, so that history replays unchanged. The first answer
// for an id holds for the rest of the execution. IDs are free text; keep
// each one for one change.
func (c *OrchestrationContext) Patched(id string) bool { return c.c.Patched(id) }

// Deprecated is the second step of retiring a patch, once no instance that
// needs the old branch runs: replace `if ctx.Patched(id) { new } else { old }`
// with `ctx.Deprecated(id); new`. It still records the patch for new
// executions, so a runtime still running the Patched release during a
// rolling deploy replays them on the new branch, and the histories that
// took the new branch replay too. Histories that took the old branch do
// not: deprecate only once none of them is still running. Once no runtime
// runs the Patched release, the call can go too: recorded patches never
// need matching code.
func (c *OrchestrationContext) Deprecated(id string) { c.c.Deprecated(id) }
