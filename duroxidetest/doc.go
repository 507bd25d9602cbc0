// Package duroxidetest runs orchestrations in tests: a real in-memory SQLite
// store, a runtime and a client, all on one fake clock, so a test exercises
// the same engine as production while durable timers fire without waiting.
//
//	func TestApproval(t *testing.T) {
//		reg := duroxide.NewRegistry()
//		registerApproval(reg) // the code under test
//		h := duroxidetest.New(t, reg, nil)
//
//		h.Start("Approval", "req-1", 24*time.Hour)
//		h.WaitIdle() // the instance now waits for the event or the deadline
//		h.RaiseEvent("req-1", "decision", true)
//		st := h.Wait("req-1") // Completed, in milliseconds
//		// ...
//
//		h.Start("Approval", "req-2", 24*time.Hour)
//		st = h.AdvanceUntilDone("req-2") // a day passes: timed out
//		// ...
//	}
//
// # Time
//
// The fake clock starts at Options.Start and moves only when the test moves
// it. Harness.Advance(d) behaves as if d passed: it steps the clock from one
// due timer to the next and lets the orchestrations react to each before
// moving on, so a timer scheduled in response to another timer fires too if
// it is due within d. Harness.AdvanceUntilDone jumps from timer to timer
// until an instance finishes. Due times come from the store's queues, so
// delayed starts (StartOptions.StartAt) and retry backoffs are stepped
// through like timers.
//
// # Idleness
//
// Harness.WaitIdle is what makes timer tests deterministic: it returns once
// nothing in the store can run without the clock moving or a new message
// from outside (no ready or locked orchestration message, no queued or
// running activity). Every orchestration has then reached a durable wait
// (a timer, an event, a sub-orchestration blocked in turn), so raising an
// event or advancing the clock after WaitIdle is never racing the code under
// test. Advance and AdvanceUntilDone wait for idleness before and after each
// step; tests rarely need to call WaitIdle except before RaiseEvent when the
// order of an event and a timer matters.
//
// Every wait is bounded by Options.Timeout of real time (default 30s); on
// timeout the test fails with the instance's status and history.
//
// A harness is meant for one test: it holds its own store, which is closed,
// with the runtime shut down, when the test ends.
package duroxidetest
