package duroxidetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// registerTrial registers the code under test: a free trial that charges
// the user after 14 days unless the event "cancel" arrives first.
func registerTrial(reg *duroxide.Registry) {
	duroxide.RegisterActivity(reg, "Charge", func(_ context.Context, user string) (string, error) {
		return "charged " + user, nil
	})
	duroxide.RegisterOrchestration(reg, "Trial", func(ctx *duroxide.OrchestrationContext, user string) (string, error) {
		cancel := ctx.WaitForEvent("cancel")
		if ctx.Select(cancel, ctx.ScheduleTimer(14*24*time.Hour)) == 0 {
			return "canceled " + user, nil
		}
		var receipt string
		err := ctx.ScheduleActivity("Charge", user).Await(&receipt)
		return receipt, err
	})
}

// testTrial is the body of a test: in a _test.go file it is
// func TestTrial(t *testing.T).
func testTrial(t duroxidetest.TB) {
	reg := duroxide.NewRegistry()
	registerTrial(reg)
	h := duroxidetest.New(t, reg, nil)

	// Nobody cancels: two weeks pass in a few milliseconds.
	h.Start("Trial", "ada", "ada")
	h.Advance(14 * 24 * time.Hour)
	var out string
	if err := h.Status("ada").Decode(&out); err != nil {
		t.Fatalf("ada: %v", err)
	}
	fmt.Println(out)

	// Canceled on day 3. Advance returns once the instance waits again,
	// so the event is not racing the orchestration.
	h.Start("Trial", "bob", "bob")
	h.Advance(3 * 24 * time.Hour)
	h.RaiseEvent("bob", "cancel", nil)
	if err := h.Wait("bob").Decode(&out); err != nil {
		t.Fatalf("bob: %v", err)
	}
	fmt.Println(out)
}

func ExampleHarness() {
	t := &exampleT{} // stands in for the test's *testing.T
	defer t.finish()
	testTrial(t)
	// Output:
	// charged ada
	// canceled bob
}

// exampleT is a minimal duroxidetest.TB for running a test body as an example.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                   {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Logf(string, ...any)       {}
func (t *exampleT) Errorf(f string, a ...any) { fmt.Printf(f+"\n", a...) }
func (t *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
